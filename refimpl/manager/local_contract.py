"""The local (debug-build) contract of the manager's hot operations: the harms, on the records touched.

Contracts level "local" (`invariants.contracts`, the default) checks the
ledger operations reserve / record_committed / commit / cancel / release and
the ticket operations submit / claim / cancel_ticket / timeout_ticket here,
on the concrete records, without building any frozen spec view: a few
figures are read before the body runs (`before`) and the harms the
invariants state are checked after it (`after`) or, on a refusal, that
nothing touched moved (`refused`, lease rule G4). Per operation:

- I1 conservation: each touched ledger's `used` equals the sum of its
  allocation rows' charges (recomputed), an alias carries no charge, and
  `used` moved by exactly the named record's charge change plus the bytes
  the operation's round granted; a retired record is gone from both tables;
  a cancel / timeout reports exactly the charge it retired (credit once).
- C2 / I2: the touched allocation's tier is its ledger's, nbytes == charge
  <= reserved, the reservation never changes; a grant never leaves its ledger
  over the limit (only recorded bytes may oversubscribe).
- I4a: new allocation ids are fresh (at or above the counter read before,
  below the one after); a record moves only along the lifecycle table; its
  holder never changes. I6: only the owner lowers a charge.
- Tickets (I1, I13): a granted ticket holds exactly one PROVISIONAL
  reservation of its bytes, owned by it; a pending one holds none; the first
  pending ticket in grant order of a touched ledger does not fit its headroom.

The expectations come from the action's own arguments and the figures read
before, never from the guard set, a record's origin flag or any other value
a guard writes. Other operations (allowances, registration, quarantine,
device loss, limits, pressure, transactions), a manager with open
transactions or pressure tickets, a trace recorder, or contracts level "full"
use the frozen-view checks of `refimpl.manager.views`.
"""

from __future__ import annotations

from typing import Any

from invariants._violation import InvariantViolation
from spec.tickets import TicketState
from spec.types import AllocState

__all__ = ["before", "after", "refused", "check_snapshot"]

_PROV, _LIVE, _REL = AllocState.PROVISIONAL, AllocState.LIVE, AllocState.RELEASED
_PENDING, _GRANTED = TicketState.PENDING, TicketState.GRANTED

# kinds: how an action's arguments name what it touches
RESERVE, RECORD, COMMIT, CANCEL, RELEASE, SUBMIT, CLAIM, DROP = range(8)


def _fail(id: str, clause: str, msg: str) -> None:
    raise InvariantViolation(id, msg, clause=f"local.{clause}")


def before(m: Any, kind: int, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the operation may touch and its figures, read under the lock before the body runs."""
    named = rec = t = None
    if kind <= RECORD or kind == SUBMIT:
        aid = args[1]
        named = m._auths.get(aid) if type(aid) is int else None
        a = named if named is None or named.alias_of is None else m._auths.get(named.alias_of)
    elif kind == CLAIM or kind == DROP:
        tid = args[1]
        t = m._tickets.get(tid) if type(tid) is int else None
        a = None if t is None else t.auth
        rec = None if t is None else t.alloc
    else:
        rid = args[1]
        rec = m._allocs.get(rid) if type(rid) is int else None
        a = None if rec is None else rec.auth
    row = None if rec is None else (rec.state, rec.charge, rec.nbytes, rec.reserved, rec.holder, rec.auth)
    trow = None if t is None else (t.state, t.age, t.alloc, t.holder)
    fig = None if a is None else (a.used, a.limit, len(a.allocs), len(a.pending))
    return (kind, named, a, rec, row, t, trow, fig, list(a.pending.values()) if a is not None and a.pending else (),
            m._next_alloc, m._next_ticket, len(m._allocs), len(m._tickets))


def refused(m: Any, b: tuple[Any, ...], what: str) -> None:
    """G4: a refused operation left every touched record and counter as it was."""
    kind, named, a, rec, row, t, trow, fig, pend, n0, nt0, na0, nt_live0 = b
    now = (None if rec is None else (rec.state, rec.charge, rec.nbytes, rec.reserved, rec.holder, rec.auth),
           None if t is None else (t.state, t.age, t.alloc, t.holder),
           None if a is None else (a.used, a.limit, len(a.allocs), len(a.pending)),
           m._next_alloc, m._next_ticket, len(m._allocs), len(m._tickets))
    if now != (row, trow, fig, n0, nt0, na0, nt_live0):
        _fail("G4", "refusal_changes_nothing", f"{what} was refused but changed the ledger")


def after(m: Any, b: tuple[Any, ...], args: tuple[Any, ...], result: Any) -> None:
    """The harms, on what an accepted operation touched (caller holds the lock)."""
    kind, named, a, rec, row, t, trow, fig, pend, n0, nt0, _, _ = b
    holder = args[0]
    if a is None:  # only dropping a ticket retired already is accepted on nothing: 0 B, nothing moved
        if kind != DROP:
            _fail("G4", "unknown_accepted", f"an operation on unknown records was accepted (args {args!r})")
        if result != 0:
            _fail("I1", "credit_exactly_once", f"a retired ticket was credited {result!r} B again")
        refused(m, b, "dropping a retired ticket")
        return
    used0 = fig[0]
    delta = 0  # the named record's charge change
    if kind <= RECORD:
        r = m._allocs.get(result) if type(result) is int else None
        if r is None:
            _fail("I1", "booked", f"reservation {result!r} is not in the allocation table")
        if not n0 <= result < m._next_alloc:
            _fail("I4a", "fresh_id", f"allocation id {result} is not fresh (counter was {n0}, now {m._next_alloc})")
        nbytes = args[3]
        if r.auth is not a or a.allocs.get(result) is not r:
            _fail("I1", "canonical", f"allocation {result} is charged to authority {r.auth.id}, not the canonical "
                                     f"ledger {a.id}")
        if r.tier is not a.tier:
            _fail("C2", "tier", f"allocation {result} is {r.tier.value} on a {a.tier.value} ledger")
        if r.holder != holder:
            _fail("I4a", "owner", f"allocation {result} belongs to {r.holder}, reserved by {holder}")
        if not r.charge == r.nbytes == r.reserved == nbytes:
            _fail("C2" if kind == RESERVE else "I2", "charged_in_full",
                  f"allocation {result} of {nbytes} B: reserved {r.reserved}, nbytes {r.nbytes}, charge {r.charge}")
        if r.state is not (_PROV if kind == RESERVE else _LIVE):
            _fail("I4a", "lifecycle", f"new allocation {result} is {r.state.value}")
        delta = nbytes
    elif kind <= RELEASE:
        r = rec
        s0, charge0, _, reserved0, holder0, _ = row
        if holder != holder0:
            _fail("I6", "own_action", f"holder {holder} settled allocation {r.id} of holder {holder0}")
        if r.holder != holder0:
            _fail("I4a", "owner", f"allocation {r.id} changed holder {holder0} -> {r.holder}")
        if s0 is not (_PROV if kind != RELEASE else _LIVE):
            _fail("I4a", "lifecycle", f"allocation {r.id} left state {s0.value} by {('commit', 'cancel', 'release')[kind - COMMIT]}")
        if kind == COMMIT:
            nbytes = args[2]
            if r.state is not _LIVE or r.nbytes != nbytes or r.charge != nbytes:
                _fail("C2", "committed", f"allocation {r.id} committed {nbytes} B: {r.state.value}, nbytes {r.nbytes}, "
                                         f"charge {r.charge}")
            if r.reserved != reserved0 or nbytes > reserved0:
                _fail("C2", "within_reservation", f"allocation {r.id}: {nbytes} B committed, reserved {reserved0} B "
                                                  f"(now {r.reserved} B)")
            if m._allocs.get(r.id) is not r or a.allocs.get(r.id) is not r:
                _fail("I1", "booked", f"committed allocation {r.id} left the tables")
            delta = nbytes - charge0
        else:
            _retired(m, a, r)
            delta = -charge0
    elif kind == SUBMIT:
        t = m._tickets.get(result) if type(result) is int else None
        if t is None or not nt0 <= result < m._next_ticket:
            _fail("I1", "ticket_issued", f"submit returned ticket {result!r}, not a fresh live ticket")
        if t.holder != holder or t.nbytes != args[2] or t.auth is not a:
            _fail("I1", "ticket_fields", f"ticket {result} is ({t.holder}, {t.auth.id}, {t.nbytes} B); submitted "
                                         f"({holder}, {a.id}, {args[2]} B)")
        pend = [*pend, t]
    elif kind == CLAIM:
        s0, charge0 = row[0], row[1]
        if m._tickets.get(t.id) is t:
            _fail("I1", "claimed_once", f"claimed ticket {t.id} is still live")
        if trow[0] is not _GRANTED or s0 is not _PROV or result != rec.id:
            _fail("I4a", "lifecycle", f"claim of ticket {t.id} ({trow[0].value}) returned {result!r} for "
                                      f"{rec.id} ({s0.value})")
        if rec.state is not _LIVE or not rec.charge == rec.nbytes == t.nbytes or rec.part is not None:
            _fail("I1", "claimed_lease", f"ticket {t.id} of {t.nbytes} B claimed as {rec.state.value}, nbytes "
                                         f"{rec.nbytes}, charge {rec.charge}, owned by {rec.part!r}")
        if rec.holder != holder or m._allocs.get(rec.id) is not rec or a.allocs.get(rec.id) is not rec:
            _fail("I1", "claimed_lease", f"lease {rec.id} of ticket {t.id} left the tables or changed holder")
        delta = rec.charge - charge0
    else:  # DROP: cancel_ticket / timeout_ticket
        if True:
            if t.holder != holder:
                _fail("I6", "own_action", f"holder {holder} dropped ticket {t.id} of holder {t.holder}")
            if m._tickets.get(t.id) is t or t.id in a.pending:
                _fail("I1", "credit_exactly_once", f"dropped ticket {t.id} is still live")
            credit = 0
            if trow[0] is _GRANTED and rec is not None:
                _retired(m, a, rec)
                credit = row[1]
            if result != credit:
                _fail("I1", "credit_exactly_once", f"dropping ticket {t.id} reported {result!r} B credited; it retired "
                                                   f"{credit} B")
            delta = -credit
    granted = _round(m, a, pend, n0) if pend or a.pending else 0
    _conserved(a)
    if named is not None and named is not a:
        _conserved(named)
    if a.used != used0 + delta + granted:
        _fail("I1", "conserved_step", f"authority {a.id}: used {used0} -> {a.used} B, but the records moved "
                                      f"{delta} B and the round granted {granted} B")
    if a.used > a.limit and a.used > used0 and kind != RECORD:
        _fail("I2", "granted_within_limit", f"authority {a.id}: a grant left used {a.used} B over the limit {a.limit} B")


def _retired(m: Any, a: Any, r: Any) -> None:
    if m._allocs.get(r.id) is not None or r.id in a.allocs or r.charge != 0 or r.state is not _REL:
        _fail("I1", "credit_exactly_once", f"retired allocation {r.id} is still charged ({r.state.value}, "
                                           f"{r.charge} B, listed: {r.id in a.allocs})")


def _conserved(a: Any) -> None:
    """I1 on one ledger: used is the sum of its rows' charges; an alias has none."""
    total = 0
    for r in a.allocs.values():
        if r.auth is not a:
            _fail("I1", "one_ledger", f"allocation {r.id} is listed on {a.id} but charged to {r.auth.id}")
        total += r.charge
    if total != a.used:
        _fail("I1", "conserved", f"authority {a.id}: used {a.used} B, its allocations charge {total} B")
    if a.alias_of is not None and (a.used or a.allocs):
        _fail("I1", "alias_no_charge", f"alias {a.id} of {a.alias_of} carries {a.used} B")


def _round(m: Any, a: Any, pend: list[Any], n0: int) -> int:
    """Tickets that were (or became) pending on `a`: each granted one holds exactly its reservation, each pending
    one none, and the first pending one in grant order does not fit. Returns the bytes granted."""
    granted = 0
    for t in pend:
        if m._tickets.get(t.id) is not t or t.state is not _GRANTED:
            continue
        r = t.alloc
        if r is None or m._allocs.get(r.id) is not r or a.allocs.get(r.id) is not r:
            _fail("I1", "grant_reserved", f"granted ticket {t.id} holds no ledger reservation ({r!r})")
        if r.state is not _PROV or not r.charge == r.nbytes == r.reserved == t.nbytes or r.holder != t.holder \
                or r.part is not t:
            _fail("I1", "grant_reserved", f"granted ticket {t.id} ({t.nbytes} B, holder {t.holder}) holds allocation "
                                          f"{r.id}: {r.state.value}, charge {r.charge}, holder {r.holder}, part {r.part!r}")
        if r.id < n0:
            _fail("I4a", "fresh_id", f"grant of ticket {t.id} reused allocation id {r.id}")
        granted += r.charge
    bound, head, key = m._bound, None, None
    for t in a.pending.values():
        if t.alloc is not None:
            _fail("I13", "pending_holds_nothing", f"pending ticket {t.id} holds allocation {t.alloc.id}")
        k = (0, 0, t.id) if t.age >= bound else (1, -t.priority, t.id)
        if key is None or k < key:
            head, key = t, k
    if head is not None and head.nbytes <= a.limit - a.used:
        _fail("I13", "no_idle_fitting_waiter", f"authority {a.id}: ticket {head.id} ({head.nbytes} B) is first in "
                                               f"grant order and fits in {a.limit - a.used} B, but waits")
    return granted


def check_snapshot(a: Any, snap: Any) -> None:
    """A snapshot's figures, recomputed from the ledger's rows (I1, I2, C8)."""
    used = sum(r.charge for r in a.allocs.values())
    growth = sum(w.reserved for w in a.allowances.values())
    if snap.used != used:
        _fail("I1", "snapshot_used", f"snapshot of {a.id} says used {snap.used} B; its rows charge {used} B")
    if snap.oversubscribed != (used - a.limit if used > a.limit else 0):
        _fail("I2", "snapshot_oversubscribed", f"snapshot of {a.id}: oversubscribed {snap.oversubscribed} B with "
                                               f"used {used} B, limit {a.limit} B")
    free = a.limit - used - growth
    if snap.available != (free if free > 0 else 0) or snap.growth_reserved != growth:
        _fail("C8", "snapshot_available", f"snapshot of {a.id}: available {snap.available} B, growth "
                                          f"{snap.growth_reserved} B; the rows give {max(0, free)} B, {growth} B")
