"""The local (debug-build) contract of the manager's hot operations: the harms, on the records touched.

Contracts level "local" (`invariants.contracts`, the default) checks the
ledger operations reserve / record_committed / commit / cancel / release and
the ticket operations submit / claim / cancel_ticket / timeout_ticket here,
on the concrete records, without building any frozen spec view: each kind's
runner takes the ledger lock, reads a few figures before the body runs, and
checks the harms the invariants state after it or, on a refusal, that
nothing touched moved (lease rule G4). The ledger kinds are fused into one
frame each (`_reserving`, `_settling`: the debug build's hot path); the
ticket kinds read (`_b_*`) and check (`_a_*`) in functions of their own
(`_generic`). Per operation:

- I1 conservation: `used` moved by exactly the named record's charge change
  plus the bytes the operation's round granted, and equals the contract's own
  books of the ledger (`refimpl.manager.contract_books`: the rows' charges as
  the contract saw them, moved by the touched rows only, so the cost never
  depends on how many rows the ledger holds); the named record was, before the
  operation, as the books last saw it (a row changed by an operation that did
  not name it is reported here, at its next touch, or at once by
  `checkpoint`); an alias carries no charge; a retired record is gone from
  both tables; a cancel / timeout reports exactly the charge it retired.
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

from collections.abc import Callable
from typing import Any

from invariants._violation import InvariantViolation
from refimpl.manager.contract_books import book, moved_unnamed, recount
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.tickets import TicketState
from spec.types import AllocState

__all__ = ["RESERVE", "RECORD", "COMMIT", "CANCEL", "RELEASE", "SUBMIT", "CLAIM", "CANCEL_TICKET", "TIMEOUT_TICKET",
           "COMPOSED", "refused",
           "check_snapshot"]

_PROV, _LIVE, _REL = AllocState.PROVISIONAL, AllocState.LIVE, AllocState.RELEASED
_PENDING, _GRANTED = TicketState.PENDING, TicketState.GRANTED


def _fail(id: str, clause: str, msg: str) -> None:
    raise InvariantViolation(id, msg, clause=f"local.{clause}")


# --- reading before the body: (named authority, ledger, record, its row, ticket, its row, figures, pending, book)
# figures: (used, limit, len(allocs), len(pending)) of the ledger, then the manager's counters and table sizes;
# book: the ledger's `contract_books` book (counted here if it has none).

def _figures(m: Any, a: Any) -> tuple[Any, ...]:
    if a is None:
        return None, None, None, None, m._next_alloc, m._next_ticket, len(m._allocs), len(m._tickets)
    return a.used, a.limit, len(a.allocs), len(a.pending), m._next_alloc, m._next_ticket, len(m._allocs), len(m._tickets)


def _b_auth(m: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    aid = args[1]
    named = m._auths.get(aid) if type(aid) is int else None
    a = named if named is None or named.alias_of is None else m._auths.get(named.alias_of)
    if a is None:
        return named, None, None, None, None, None, _figures(m, None), (), None
    return (named, a, None, None, None, None, _figures(m, a), list(a.pending.values()) if a.pending else (),
            m._books.of.get(a.id) or book(m, a))


def _b_ticket(m: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    tid = args[1]
    t = m._tickets.get(tid) if type(tid) is int else None
    if t is None:
        return None, None, None, None, None, None, _figures(m, None), (), None
    a, r = t.auth, t.alloc
    return (a, a, r, None if r is None else (r.state, r.charge, r.nbytes, r.reserved, r.holder, r.auth),
            t, (t.state, t.age, t.alloc, t.holder), _figures(m, a), list(a.pending.values()) if a.pending else (),
            m._books.of.get(a.id) or book(m, a))


def refused(m: Any, b: tuple[Any, ...], what: str) -> None:
    """G4: a refused operation left every touched record and counter as it was."""
    _, a, r, row, t, trow, fig, _, _ = b
    now = (None if r is None else (r.state, r.charge, r.nbytes, r.reserved, r.holder, r.auth),
           None if t is None else (t.state, t.age, t.alloc, t.holder), _figures(m, a))
    if now != (row, trow, fig):
        _fail("G4", "refusal_changes_nothing", f"{what} was refused but changed the ledger")


# --- the ledger kinds, fused: one frame takes the lock, reads, runs the body, then checks the harms -----------
# The debug build's hot path: what is read before the body stays in local variables (a tuple is compared only if
# the body refuses), and no frame is entered but the body's. The figures and harms are those of the ticket kinds'
# `_b_*` readers and after-functions below.

def _reserving(state: Any, name: str) -> Callable[..., Any]:
    """A reservation (`state` PROVISIONAL) or a recording (LIVE), checked: G4 if refused, else the harms."""

    def run(m: Any, body: Callable[..., int], args: tuple[Any, ...], extra: tuple[Any, ...]) -> int:
        with m._lock:
            aid = args[1]
            named = m._auths.get(aid) if type(aid) is int else None
            a = named if named is None or named.alias_of is None else m._auths.get(named.alias_of)
            if a is None:
                fig = _figures(m, None)
            else:
                used0 = a.used
                fig = (used0, a.limit, len(a.allocs), len(a.pending), m._next_alloc, m._next_ticket, len(m._allocs),
                       len(m._tickets))
                pend = list(a.pending.values()) if a.pending else ()
                bk = m._books.of.get(a.id) or book(m, a)
            try:
                result = body(*args, *extra)
            except GovernorError:
                if _figures(m, a) != fig:
                    _fail("G4", "refusal_changes_nothing", f"{name} was refused but changed the ledger")
                raise
            if a is None:
                _fail("G4", "unknown_accepted", f"a reservation on unknown authority {args[1]!r} was accepted")
            r = m._allocs.get(result) if type(result) is int else None
            if r is None:
                _fail("I1", "booked", f"reservation {result!r} is not in the allocation table")
            if not fig[4] <= result < m._next_alloc:
                _fail("I4a", "fresh_id", f"allocation id {result} is not fresh (counter was {fig[4]}, now "
                                         f"{m._next_alloc})")
            if r.auth is not a or a.allocs.get(result) is not r:
                _fail("I1", "canonical", f"allocation {result} is charged to authority {r.auth.id}, not the "
                                         f"canonical ledger {a.id}")
            if r.tier is not a.tier:
                _fail("C2", "tier", f"allocation {result} is {r.tier.value} on a {a.tier.value} ledger")
            if r.holder != args[0]:
                _fail("I4a", "owner", f"allocation {result} belongs to {r.holder}, reserved by {args[0]}")
            n = args[3]
            if r.charge != n or r.nbytes != n or r.reserved != n:
                _fail("C2" if state is _PROV else "I2", "charged_in_full",
                      f"allocation {result} of {n} B: reserved {r.reserved}, nbytes {r.nbytes}, charge {r.charge}")
            if r.state is not state:
                _fail("I4a", "lifecycle", f"new allocation {result} is {r.state.value}")
            bk.rows[result] = n  # a fresh id (checked above): the books have no row of it yet
            used, total = a.used, bk.total + n
            if (pend or a.pending or named is not a or used != used0 + n or used != total
                    or used > a.limit and state is _PROV):
                _tail(m, a, named, fig, bk, total, n, pend, state is _LIVE)  # a round, an alias, or a harm it names
            else:
                bk.total = total  # `_tail` without a round, inline
            return result

    return run


def _settling(source: Any, name: str) -> Callable[..., Any]:
    """A commit (`source` PROVISIONAL, to LIVE), a cancel (PROVISIONAL) or a release (LIVE, both retired),
    checked: G4 if refused, else the harms."""
    retiring = name != "Commit"
    event = name.lower()

    def run(m: Any, body: Callable[..., None], args: tuple[Any, ...], extra: tuple[Any, ...]) -> None:
        with m._lock:
            rid = args[1]
            r = m._allocs.get(rid) if type(rid) is int else None
            if r is None:
                fig = _figures(m, None)
                try:
                    body(*args, *extra)
                except GovernorError:
                    if _figures(m, None) != fig:
                        _fail("G4", "refusal_changes_nothing", f"{name} was refused but changed the ledger")
                    raise
                _fail("G4", "unknown_accepted", f"{event} of unknown allocation {args[1]!r} was accepted")
            a = r.auth
            state, old, nbytes, reserved, holder = r.state, r.charge, r.nbytes, r.reserved, r.holder
            used0 = a.used
            fig = (used0, a.limit, len(a.allocs), len(a.pending), m._next_alloc, m._next_ticket, len(m._allocs),
                   len(m._tickets))
            pend = list(a.pending.values()) if a.pending else ()
            bk = m._books.of.get(a.id) or book(m, a)
            try:
                body(*args, *extra) if extra else body(*args)
            except GovernorError:
                if ((r.state, r.charge, r.nbytes, r.reserved, r.holder, r.auth) != (state, old, nbytes, reserved,
                                                                                      holder, a)
                        or _figures(m, a) != fig):
                    _fail("G4", "refusal_changes_nothing", f"{name} was refused but changed the ledger")
                raise
            if retiring:
                if args[0] != holder:
                    _fail("I6", "own_action", f"holder {args[0]} settled allocation {rid} of holder {holder}")
                if state is not source:
                    _fail("I4a", "lifecycle", f"allocation {rid} left state {state.value} by {event}")
                if r.holder != holder:
                    _fail("I4a", "owner", f"allocation {rid} changed holder {holder} -> {r.holder}")
                if m._allocs.get(rid) is not None or rid in a.allocs or r.charge != 0 or r.state is not _REL:
                    _fail("I1", "credit_exactly_once", f"retired allocation {rid} is still charged "
                                                       f"({r.state.value}, {r.charge} B, listed: {rid in a.allocs})")
                n, seen = 0, bk.rows.pop(rid, None)
            else:
                if r.holder != holder:  # before I6, as the full check's order names it (I4a precedes I6)
                    _fail("I4a", "owner", f"allocation {rid} changed holder {holder} -> {r.holder}")
                if args[0] != holder:
                    _fail("I6", "own_action", f"holder {args[0]} settled allocation {rid} of holder {holder}")
                if state is not _PROV:
                    _fail("I4a", "lifecycle", f"allocation {rid} left state {state.value} by commit")
                n = args[2]
                if r.state is not _LIVE or r.nbytes != n or r.charge != n:
                    _fail("C2", "committed", f"allocation {rid} committed {n} B: {r.state.value}, nbytes "
                                             f"{r.nbytes}, charge {r.charge}")
                if r.reserved != reserved or n > reserved:
                    _fail("C2", "within_reservation", f"allocation {rid}: {n} B committed, reserved {reserved} B "
                                                      f"(now {r.reserved} B)")
                if m._allocs.get(rid) is not r or a.allocs.get(rid) is not r:
                    _fail("I1", "booked", f"committed allocation {rid} left the tables")
                if r.auth is not a:
                    _fail("I1", "one_ledger", f"allocation {rid} is listed on {a.id} but charged to {r.auth.id}")
                seen = bk.rows.get(rid)
                bk.rows[rid] = n
            if seen != old:  # before the operation, the row was not as the books last saw it
                moved_unnamed(rid, old, seen)
            delta = n - old
            used, total = a.used, bk.total + delta
            if pend or a.pending or used != used0 + delta or used != total or used > a.limit and used > used0:
                _tail(m, a, a, fig, bk, total, delta, pend, False)  # a round, or a harm: `_tail` names it
            else:
                bk.total = total  # `_tail` without a round, inline

    return run


def _generic(before: Callable[..., Any], after: Callable[..., None], name: str) -> Callable[..., Any]:
    """A checked operation from a reading `before` and the harms `after` (the ticket kinds)."""

    def run(m: Any, body: Callable[..., Any], args: tuple[Any, ...], extra: tuple[Any, ...]) -> Any:
        with m._lock:
            b = before(m, args)
            try:
                result = body(*args, *extra) if extra else body(*args)  # no tuple built for tickets
            except GovernorError:
                refused(m, b, name)
                raise
            after(m, b, args, result)
            return result

    return run


# --- the ticket kinds' harms after an accepted body -------------------------------------------------------

def _a_submit(m: Any, b: tuple[Any, ...], args: tuple[Any, ...], result: Any) -> None:
    _, a, _, _, _, _, fig, pend, bk = b
    if a is None:
        _fail("G4", "unknown_accepted", f"a ticket on unknown authority {args[1]!r} was accepted")
    t = m._tickets.get(result) if type(result) is int else None
    if t is None or not fig[5] <= result < m._next_ticket:
        _fail("I1", "ticket_issued", f"submit returned ticket {result!r}, not a fresh live ticket")
    if t.holder != args[0] or t.nbytes != args[2] or t.auth is not a:
        _fail("I1", "ticket_fields", f"ticket {result} is ({t.holder}, {t.auth.id}, {t.nbytes} B); submitted "
                                     f"({args[0]}, {a.id}, {args[2]} B)")
    _moved(m, a, a, fig, bk, None, None, None, 0, [*pend, t], False)


def _a_claim(m: Any, b: tuple[Any, ...], args: tuple[Any, ...], result: Any) -> None:
    _, a, r, row, t, trow, fig, pend, bk = b
    if t is None:
        _fail("G4", "unknown_accepted", f"a claim of unknown ticket {args[1]!r} was accepted")
    if r is None:
        _fail("I1", "grant_reserved", f"ticket {t.id} was claimed without a reservation booked at its grant")
    if m._tickets.get(t.id) is t:
        _fail("I1", "claimed_once", f"claimed ticket {t.id} is still live")
    if trow[0] is not _GRANTED or row[0] is not _PROV or result != r.id:
        _fail("I4a", "lifecycle", f"claim of ticket {t.id} ({trow[0].value}) returned {result!r} for "
                                  f"{r.id} ({row[0].value})")
    if r.state is not _LIVE or r.charge != t.nbytes or r.nbytes != t.nbytes or r.part is not None:
        _fail("I1", "claimed_lease", f"ticket {t.id} of {t.nbytes} B claimed as {r.state.value}, nbytes "
                                     f"{r.nbytes}, charge {r.charge}, owned by {r.part!r}")
    if r.holder != args[0] or m._allocs.get(r.id) is not r or a.allocs.get(r.id) is not r or r.auth is not a:
        _fail("I1", "claimed_lease", f"lease {r.id} of ticket {t.id} left the tables, its ledger or its holder")
    _moved(m, a, a, fig, bk, r.id, row[1], r.charge, r.charge - row[1], pend, False)


def _a_drop(m: Any, b: tuple[Any, ...], args: tuple[Any, ...], result: Any) -> None:
    _, a, r, row, t, trow, fig, pend, bk = b
    if t is None:  # a ticket retired already: 0 B, nothing moved
        if result != 0:
            _fail("I1", "credit_exactly_once", f"a retired ticket was credited {result!r} B again")
        refused(m, b, "dropping a retired ticket")
        return
    if t.holder != args[0]:
        _fail("I6", "own_action", f"holder {args[0]} dropped ticket {t.id} of holder {t.holder}")
    if m._tickets.get(t.id) is t or t.id in a.pending:
        _fail("I1", "credit_exactly_once", f"dropped ticket {t.id} is still live")
    credit, gone = 0, None
    if trow[0] is _GRANTED and r is not None:
        _retired(m, a, r)
        credit, gone = row[1], r.id
    if result != credit:
        _fail("I1", "credit_exactly_once", f"dropping ticket {t.id} reported {result!r} B credited; it retired "
                                           f"{credit} B")
    _moved(m, a, a, fig, bk, gone, credit if gone is not None else None, None, -credit, pend, False)


def _moved(m: Any, a: Any, named: Any, fig: tuple[Any, ...], bk: Any, rid: int | None, old: int | None,
           new: int | None, delta: int, pend: Any, recorded: bool) -> None:
    """The named row `rid` (charged `old` before, `new` after; None: not on the ledger) as the books last saw it,
    moved in the books, then `_tail`. (The ledger kinds inline the same few lines: their hot path.)"""
    rows, total = bk.rows, bk.total
    if rid is not None:
        if rows.get(rid) != old:  # before the operation, the row was not as the books last saw it
            moved_unnamed(rid, old, rows.get(rid))
        if new is None:
            del rows[rid]
            total -= old
        else:
            rows[rid] = new
            total += new if old is None else new - old
    _tail(m, a, named, fig, bk, total, delta, pend, recorded)


def _tail(m: Any, a: Any, named: Any, fig: tuple[Any, ...], bk: Any, total: int, delta: int, pend: Any,
          recorded: bool) -> None:
    """Ledger `a` after the operation, its named row booked (`total`): the round's tickets, `used` against the
    records' moves (the step) and against the books (I1), an alias's charge, the limit.

    O(rows touched + tickets waiting on `a`): no row the operation did not name is read (issue #24)."""
    granted = 0
    if pend or a.pending:
        granted = _round(m, a, pend, fig[4], bk.rows)
        total += granted
    used = a.used
    if used != fig[0] + delta + granted:
        _fail("I1", "conserved_step", f"authority {a.id}: used {fig[0]} -> {used} B, but the records moved "
                                      f"{delta} B and the round granted {granted} B")
    bk.total = total
    if total != used:
        _fail("I1", "conserved", f"authority {a.id}: used {used} B, its allocations charge {total} B (the rows as "
                                 "the contract booked them)")
    if named is not a:
        recount(named)  # an alias: no rows, no charge (O(its rows): none on a sound ledger)
    if used > a.limit and used > fig[0] and not recorded:
        _fail("I2", "granted_within_limit", f"authority {a.id}: a grant left used {used} B over the limit {a.limit} B")


# The hot operations' kinds: (checked runner, action class, scope method for the frozen-view check, composed:
# a `spec.manager_actions` action, traced by `_run_checked`). A ledger kind's scope key is args[1]. The runner
# `run(manager, body, args, extra)` takes the ledger lock; `views._contract` wakes waiters after it.
RESERVE = (_reserving(_PROV, "Reserve"), A.Reserve, "_scope_auth", False)
RECORD = (_reserving(_LIVE, "RecordCommitted"), A.RecordCommitted, "_scope_auth", False)
COMMIT = (_settling(_PROV, "Commit"), A.Commit, "_scope_alloc", False)
CANCEL = (_settling(_PROV, "Cancel"), A.Cancel, "_scope_alloc", False)
RELEASE = (_settling(_LIVE, "Release"), A.Release, "_scope_alloc", False)
SUBMIT = (_generic(_b_auth, _a_submit, "Submit"), M.Submit, "_ms_auth1", True)
CLAIM = (_generic(_b_ticket, _a_claim, "Claim"), M.Claim, "_ms_ticket", True)
CANCEL_TICKET = (_generic(_b_ticket, _a_drop, "CancelTicket"), M.CancelTicket, "_ms_ticket", True)
TIMEOUT_TICKET = (_generic(_b_ticket, _a_drop, "TimeoutTicket"), M.TimeoutTicket, "_ms_ticket", True)
COMPOSED = {k[1]: k for k in (SUBMIT, CLAIM, CANCEL_TICKET, TIMEOUT_TICKET)}


def _retired(m: Any, a: Any, r: Any) -> None:
    if m._allocs.get(r.id) is not None or r.id in a.allocs or r.charge != 0 or r.state is not _REL:
        _fail("I1", "credit_exactly_once", f"retired allocation {r.id} is still charged ({r.state.value}, "
                                           f"{r.charge} B, listed: {r.id in a.allocs})")


def _round(m: Any, a: Any, pend: list[Any], n0: int, rows: dict[int, int]) -> int:
    """Tickets that were (or became) pending on `a`: each granted one holds exactly its reservation (booked in
    `rows`), each pending one none, and the first pending one in grant order does not fit. Returns the bytes
    granted."""
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
        rows[r.id] = r.charge
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
    """A snapshot's figures are a reading of its ledger: used, growth, available, oversubscribed, promised
    allowance limits (I2, C8, I4b).

    Recomputed here with plain arithmetic (not `spec.arith`); conservation of `used` itself is the operations'
    contract, not a read's."""
    used, limit = a.used, a.limit
    growth = promised = 0
    for w in a.allowances.values():
        growth += w.reserved
        promised += w.limit
    if snap.allowance_limits != promised:
        _fail("I4b", "snapshot_promised", f"snapshot of {a.id}: allowance limits {snap.allowance_limits} B; its "
                                          f"allowances' limits sum to {promised} B")
    if snap.oversubscribed != (used - limit if used > limit else 0):
        _fail("I2", "snapshot_oversubscribed", f"snapshot of {a.id}: oversubscribed {snap.oversubscribed} B with "
                                               f"used {used} B, limit {limit} B")
    free = limit - used - growth
    if snap.used != used or snap.growth_reserved != growth or snap.available != (free if free > 0 else 0):
        _fail("C8", "snapshot_available", f"snapshot of {a.id}: used {snap.used}, growth {snap.growth_reserved}, "
                                          f"available {snap.available} B; the ledger gives {used}, {growth}, "
                                          f"{max(0, free)} B")
