"""The arbitration part of `ProcessMemoryManager`: requester tickets on a ledger authority (I7, I13).

A requester ticket asks one canonical authority for `nbytes`. It waits
PENDING, holding no bytes; a *round* grants it by booking a ledger
reservation (`Ledger._enter`, role of the ticket) under the lock, so its
bytes are charged before any waiter can see the grant; the waiter's own
`threading.Event` is set only after the lock is released. `claim` commits
that reservation into a lease with its full bytes; `cancel_ticket` /
`timeout_ticket` cancel it, crediting it exactly once. The part keeps no
bytes of its own: only queue order (`_Auth.pending`, in submit order), age
and the link to the ledger record.

Rounds (as `spec.manager_actions` says): after every accepted operation,
for each canonical authority in ascending id that has pending tickets and
whose `limit - used` rose (or that a submit named, or on which a cancel or
timeout retired a granted ticket), every pending ticket ages
by one (capped at the aging bound), they are taken in
grant order (`_grant_order`, this module's own: never the spec's), each granted if it fits, and a matured
ticket that does not fit ends the round. A cancel or timeout of a pending ticket is not a round (D10): it
runs the grant pass alone (`_grant_pass`), ageing nobody.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from spec.errors import (CapacityDenied, ForeignHolder, InvalidArgument, InvalidTransition, MailboxFull,
                         TraceSinkFailed, UnknownTicket)
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import MAX_BYTES, AllocState, ContextState, Origin, Role
from invariants.contracts import SWITCH as _SWITCH
from refimpl.manager import local_contract as _L
from refimpl.manager.ledger import _Alloc, _Auth, _alignment, _nbytes
from refimpl.pressure_args import check_priority, check_timeout

__all__ = ["Arbitration"]

_PENDING, _GRANTED = TicketState.PENDING, TicketState.GRANTED
_LIVE = AllocState.LIVE
_O_GRANTED = Origin.GRANTED
_ACTIVE = ContextState.ACTIVE

#: A parked waiter looks at its ticket this often (seconds) even if nobody sets its event: if the thread
#: that granted or retired it was interrupted part-way through waking (`Ledger._wake_up`), that wake-up is
#: lost, and the waiter must not sleep on a granted ticket. A lost wake-up costs it at most this long.
RECHECK_S = 0.5


class _Tkt:
    """A requester ticket. No `__init__`: `Arbitration._submit`, where every ticket is made, fills every slot (a
    class call that runs an `__init__` costs a second interpreter frame, ~0.1 us per record on the hot path)."""

    __slots__ = ("id", "holder", "auth", "nbytes", "priority", "role", "generation", "age", "state", "alloc", "event",
                 "rec")

    def __repr__(self) -> str:
        return f"ticket {self.id}"


def _grant_order(pending: dict[int, _Tkt], bound: int) -> list[_Tkt]:
    """Pending tickets in the order a round considers them (section 6), from the pending index alone.

    Matured tickets first, in submit order (the index keeps it); then the rest bucketed by
    priority, highest bucket first, each bucket in submit order."""
    matured: list[_Tkt] = []
    by_priority: dict[int, list[_Tkt]] = {}
    for t in pending.values():  # submit order
        if t.age >= bound:
            matured.append(t)
        else:
            by_priority.setdefault(t.priority, []).append(t)
    for priority in sorted(by_priority, reverse=True):
        matured.extend(by_priority[priority])
    return matured


class Arbitration:
    """Requester tickets; needs the ledger part's tables, lookups and `_enter`."""

    def _init_arbitration(self, aging_bound: int, mailbox: int) -> None:
        self._bound = aging_bound
        self._slots = mailbox  # live (pending or granted) tickets at most: back-pressure on submit
        # I7: a grant books its ledger reservation (charges its bytes) before any waiter can be woken.
        self._charge_at_grant = self._guards.on("grant_charges_ledger")
        self._aging = self._guards.on("aging")  # I13: a matured misfit ends the round
        self._tickets: dict[int, _Tkt] = {}  # live (pending or granted) only
        # With a trace recorder: the grants the current operation made, (ticket, allocation, ledger, used after
        # it, bytes charged), each traced as its own `grant` event after the operation's (`refimpl.tracing`).
        self._granted: list[tuple[int, int | None, int, int, int]] = []
        self._next_ticket = 1

    # --- operations ------------------------------------------------------------

    def submit(self, holder: int, authority: int, nbytes: int, priority: int = 0, role: Role = Role.STAGING,
               alignment: int | None = None) -> int:
        """A pending ticket on `authority`; the round this submit runs may grant it at once. Never waits.
        `alignment`: None or a power of two, validated and never charged (D13)."""
        if _SWITCH.on or self._recorder is not None or self._mailbox:
            return self._contract(_L.SUBMIT, self._submit, (holder, authority, nbytes, priority, role, alignment))
        with self._lock:  # the hot path of `_run`, inline. No wake: a submit's round grants no ticket but the one it
            # opens, which nobody waits on yet (pending ages never increase in submit order, so a round that only
            # ages, at unchanged headroom, grants nothing the last round refused: tests/test_mutkill_arbitration.py)
            return self._submit(holder, authority, nbytes, priority, role, alignment)

    def _submit(self, holder: int, authority: int, nbytes: int, priority: int, role: Role,
                alignment: int | None = None) -> int:
        # Hot path: each lookup inline; the full check (with its typed error) runs only on a miss.
        if self._poisoned:
            self._grants()  # I5: a poisoned manager opens no ticket
        if type(nbytes) is not int or not 0 < nbytes <= MAX_BYTES:
            _nbytes(nbytes, "nbytes")
        check_priority(priority)
        if type(role) is not Role:  # as isinstance: an enum with members has no subclasses
            raise InvalidArgument(f"role must be a Role, got {role!r}")
        if type(holder) is not int or holder not in self._holders:
            self._holder(holder)
        a = self._auths.get(authority) if type(authority) is int else None
        if a is None:
            a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; tickets name the canonical ledger")
        if a.context is not _ACTIVE:
            self._require_active(a)
        if alignment is not None:
            _alignment(alignment)
        if nbytes > a.limit:
            raise CapacityDenied(f"authority {a.id}: {nbytes} B can never fit its {a.limit} B limit")
        room = a.limit - a.used  # `_room` without a process quota (no frame on the hot path)
        if self._quotas:
            self._can_fit_quota(a, nbytes)
            room = self._room(a)
        if len(self._tickets) >= self._slots:
            raise MailboxFull(f"all {self._slots} cancellation-mailbox slots are held by live tickets; retry later")
        tid = self._next_ticket
        self._next_ticket = tid + 1
        t = self._tickets[tid] = _Tkt()  # the new ticket (every ticket is made here)
        t.id = tid  # one store per line: cheaper than a tuple assignment (a record per ticket)
        t.holder = holder
        t.auth = a
        t.nbytes = nbytes
        t.priority = priority
        t.role = role
        t.generation = a.generation  # a new ticket is of its ledger's current generation
        t.event = t.rec = None  # the first waiter's event (made under the lock); the last frozen record (views)
        if not a.pending and nbytes <= room and self._charge_at_grant:
            # Hot path: the round of a lone ticket that fits (ages to 1, granted: a ledger reservation, I1, I2).
            t.age = 1
            t.state = _GRANTED
            rec = t.alloc = self._enter(holder, a, a.tier, role, nbytes, _O_GRANTED)
            rec.part = t
            if self._recorder is not None:
                self._granted.append((tid, rec.id, a.id, a.used, rec.charge))
            return tid
        t.age = 0
        t.state = _PENDING
        t.alloc = None  # the ledger reservation once granted
        a.pending[tid] = t
        self._round(a)
        return tid

    def try_reserve(self, holder: int, authority: int, nbytes: int, priority: int = 0,
                    role: Role = Role.STAGING, alignment: int | None = None) -> int:
        """The allocator path: a LIVE lease now (its allocation id), or CapacityDenied now; never pending (I7).

        Refused too while a ticket waits on the ledger: the allocator never overtakes a waiter (I13)."""
        return self._run(M.TryReserve, self._ms_auth1, self._try_lease, holder, authority, nbytes, priority, role,
                         alignment)

    def _try_lease(self, holder: int, authority: int, nbytes: int, priority: int, role: Role,
                   alignment: int | None = None) -> int:
        self._grants()  # I5
        if type(nbytes) is not int or not 0 < nbytes <= MAX_BYTES:
            _nbytes(nbytes, "nbytes")
        check_priority(priority)
        if type(role) is not Role:
            raise InvalidArgument(f"role must be a Role, got {role!r}")
        self._holder(holder)
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; tickets name the canonical ledger")
        self._require_active(a)
        if alignment is not None:
            _alignment(alignment)
        if nbytes > a.limit:
            raise CapacityDenied(f"authority {a.id}: {nbytes} B can never fit its {a.limit} B limit")
        if self._quotas:
            self._can_fit_quota(a, nbytes)
        if (a.pending or nbytes > self._room(a)) and self._guards.on("try_only"):  # I7 try-only; I13
            raise CapacityDenied(f"try-only: {nbytes} B asked, {max(0, self._room(a))} B free, "
                                 f"{len(a.pending)} waiting")
        rec = self._enter(holder, a, a.tier, role, nbytes, _O_GRANTED)  # the grant: a ledger reservation
        self._commit_rec(rec, nbytes)  # and its commit, at once: a LIVE lease
        return rec.id

    def reconfigure(self, authority: int) -> None:
        """The ledger's generation + 1: every pending ticket on it fails (its waiter wakes to find it gone);
        an open pressure of the older generation is answered with StaleGeneration (C5)."""
        self._run(M.Reconfigure, self._ms_auth0, self._regenerate, authority)

    def _regenerate(self, authority: int) -> None:
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; reconfigure names the canonical ledger")
        self._require_active(a)
        a.generation += 1
        for t in list(a.pending.values()):  # an older pending ticket fails: it held nothing
            del self._tickets[t.id]
            if t.event is not None:
                self._wake.append(t.event)
        a.pending.clear()

    def claim(self, holder: int, ticket: int) -> int:
        """Granted -> a LIVE lease of the full bytes, once; returns its allocation id."""
        if _SWITCH.on or self._recorder is not None or self._mailbox:
            return self._contract(_L.CLAIM, self._claim, (holder, ticket))
        with self._lock:  # the hot path of `_run`, inline (a claim grants nothing: no wake)
            return self._claim(holder, ticket)

    def _claim(self, holder: int, ticket: int) -> int:
        t = self._tickets.get(ticket) if type(ticket) is int else None
        # Hot path: a live ticket of this holder (holders are never unregistered: t.holder is registered).
        if t is None or t.holder != holder or type(holder) is not int:
            t = self._my_ticket(holder, ticket)
            if t is None:
                raise InvalidTransition(f"ticket {ticket} was already claimed, cancelled, timed out or dropped")
            if t.holder != holder:
                raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {holder}'s")
        if t.state is _PENDING:
            raise InvalidTransition(f"ticket {t.id} is pending; only a granted ticket is claimed")
        del self._tickets[t.id]
        rec = t.alloc
        if rec is None:  # grant_charges_ledger off: nothing was booked at the grant
            a = t.auth
            rec = self._enter(t.holder, a, a.tier, t.role, t.nbytes, Origin.GRANTED)  # no limit check
        rec.part = None
        rec.ticket = t  # the ticket id goes on naming its lease (`acquire`)
        self._leases[t.id] = rec
        n = t.nbytes  # the reservation's commit in full (`Ledger._commit_rec`, inline)
        rec.auth.used += n - rec.charge
        rec.nbytes = rec.charge = n
        rec.state = _LIVE
        return rec.id

    def cancel_ticket(self, holder: int, ticket: int) -> int:
        """Pending -> gone (0 B); granted -> its reservation cancelled (its bytes, once); retired -> 0 B."""
        return self._run(M.CancelTicket, self._ms_ticket, self._abandon, holder, ticket)

    def timeout_ticket(self, holder: int, ticket: int) -> int:
        """The caller's deadline passed: as `cancel_ticket`."""
        return self._run(M.TimeoutTicket, self._ms_ticket, self._abandon, holder, ticket)

    def _abandon(self, holder: int, ticket: int) -> int:
        t = self._my_ticket(holder, ticket)
        if t is None:
            return 0  # retired already: never a second credit
        if t.holder != holder:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {holder}'s")
        return self._drop_ticket(t)

    def acquire(self, holder: int, authority: int, nbytes: int, priority: int = 0, role: Role = Role.STAGING,
                timeout: float | None = None, alignment: int | None = None) -> int | None:
        """Submit, park on the ticket's own event (lock released), claim: the lease's allocation id.

        None if the deadline passed or the ticket was retired meanwhile (cancelled, dropped by device
        loss); any grant is then credited once. Any exception while parked or claiming, BaseException
        included, times the ticket out (and releases a lease claimed but not yet handed over)."""
        if self._mailbox:
            self.drain()  # posted cancels first, as every verb (`Views._run`), even one its timeout refuses
        timeout = check_timeout(timeout)  # before submit: a bad timeout opens no ticket
        opened: list[int] = []  # the ticket id, noted under the lock: a trace sink raising after the submit
        # was applied (TraceSinkFailed, KeyboardInterrupt) must not leave a ticket nobody knows of (issue #14)
        claimed: list[int] = []  # as `opened`: a lease claimed but never handed over is released below

        def submit(*args: Any) -> int:
            opened.append(self._submit(*args))
            return opened[0]

        def claim(*args: Any) -> int:
            claimed.append(self._claim(*args))
            return claimed[0]

        try:
            tid = self._run(M.Submit, self._ms_auth1, submit, holder, authority, nbytes, priority, role, alignment)
        except BaseException as e:
            if opened:
                try:
                    self.timeout_ticket(holder, opened[0])
                except TraceSinkFailed:
                    pass  # timed out; only its event was lost
                e.add_note(f"ortmem: acquire timed out its ticket {opened[0]} (credited once)")
            raise
        try:
            with self._lock:
                t = self._tickets.get(tid)
                if t is not None and t.state is _PENDING:
                    ev = t.event = threading.Event()
                else:
                    ev = None
            if ev is not None:
                self._outside_lock("waiting on a ticket")
                self._park(ev, t, timeout)
            try:
                lease = self._run(M.Claim, self._ms_ticket, claim, holder, tid)
            except TraceSinkFailed:
                raise  # the claim stands and the caller gets the lease in `.result`
            except InvalidTransition:
                self.timeout_ticket(holder, tid)  # still pending (deadline) or already retired: 0 B or exact credit
                return None
            return lease
        except TraceSinkFailed:
            raise  # from the claim (the lease is the caller's, in `.result`) or from a timeout applied in full
        except BaseException:
            if not claimed:  # an interrupt may land after the claim took effect, before it was noted
                with self._lock:
                    rec = self._leases.get(tid)
                    if rec is not None and rec.holder == holder:
                        claimed.append(rec.id)
            if claimed:
                self.release(holder, claimed[0])  # claimed, but the caller never received it
            else:
                self.timeout_ticket(holder, tid)
            raise

    def _park(self, ev: Any, t: _Tkt, timeout: float | None) -> None:
        """Wait (no lock held) until `ev` is set, `timeout` passes, or `t` is no longer a pending live ticket.

        The last test reads two words without the lock (the ticket's state and its table entry): a stale
        read only costs one more slice of `RECHECK_S`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = RECHECK_S if deadline is None else min(RECHECK_S, deadline - time.monotonic())
            if left <= 0 or ev.wait(left):
                return
            if t.state is not _PENDING or self._tickets.get(t.id) is not t:
                return  # granted or retired while its wake-up was lost

    # --- arbitration (I13) -------------------------------------------------------

    def _round(self, a: _Auth) -> None:
        """One round on ledger `a` (caller holds the lock)."""
        pend = a.pending
        if not pend:
            return
        bound = self._bound
        if len(pend) == 1:  # hot path: one waiter, nothing to order
            (t,) = pend.values()
            if t.age < bound:
                t.age += 1
            if t.nbytes <= self._room(a):
                self._grant(a, t)
            return
        for t in pend.values():
            if t.age < bound:
                t.age += 1
        self._grant_pass(a)

    def _grant_pass(self, a: _Auth) -> None:
        """The grants of a round, ageing nobody: alone, after a pending ticket retired (D10: not a round)."""
        pend, bound = a.pending, self._bound
        for t in _grant_order(pend, bound):
            if t.nbytes <= self._room(a):
                self._grant(a, t)
            elif t.age >= bound and self._aging:
                break  # a matured misfit ends the round: returned capacity accumulates for it

    def _grant(self, a: _Auth, t: _Tkt) -> None:
        del a.pending[t.id]
        t.state = _GRANTED
        if self._charge_at_grant:  # I1, I2, I7: a ledger reservation, booked before any wake
            t.alloc = self._enter(t.holder, a, a.tier, t.role, t.nbytes, _O_GRANTED)
            t.alloc.part = t
        if self._recorder is not None:
            r = t.alloc
            self._granted.append((t.id, None if r is None else r.id, a.id, a.used, 0 if r is None else r.charge))
        if t.event is not None:
            self._wake.append(t.event)  # set once the lock is released (I7)

    def _rounds(self) -> None:
        """The end of every operation that credits bytes: a round on every ledger it credited (`Ledger._credit`
        noted each one's headroom before) whose headroom rose; then the rounds the process quotas owe for the
        bytes credited in their tiers (`Limits._quota_rounds`)."""
        before = self._credited
        if not before:
            return
        self._credited = {}
        # What each quota left before the operation: now, less the bytes the operation credited in its tier.
        left0 = self._quotas and {tier: self._left(tier) - sum(a.limit - a.used - before[a.id]
                                                               for a in map(self._auths.get, before) if a.tier is tier)
                                  for tier in self._quotas}
        done = []
        for aid in sorted(before):
            a = self._auths[aid]
            if a.pending and a.limit - a.used > before[aid]:
                self._round(a)
                done.append(aid)
        for tier, left in left0.items():
            self._quota_rounds(tier, left, done)

    def _take_grants(self) -> list[tuple[int, int | None, int, int, int]]:
        """The grants made since the last call, oldest first: (ticket, allocation, ledger, used after, charged).

        For the trace recorder (caller holds the ledger lock): each grant is its own event (`ortmem-manager/2`)."""
        grants, self._granted = self._granted, []
        return grants

    # --- helpers -----------------------------------------------------------------

    def _my_ticket(self, holder: object, ticket: object) -> _Tkt | None:
        """Holder known, ticket issued; None if retired (ownership is the caller's next check)."""
        self._holder(holder)
        if type(ticket) is not int or not 1 <= ticket < self._next_ticket:
            raise UnknownTicket(f"ticket {ticket!r} was never issued")
        return self._tickets.get(ticket)

    def _drop_ticket(self, t: _Tkt) -> int:
        """Retire a live ticket: a granted one's reservation is cancelled (its bytes, once). Returns the credit.

        A granted one's bytes are headroom: a round follows on its authority (I13). A pending one's retirement
        is not a round (D10: it ages nobody), but it may have been the matured misfit that ended the last round:
        a grant pass follows."""
        del self._tickets[t.id]
        if t.event is not None:
            self._wake.append(t.event)  # a retired ticket's waiter must not sleep on
        a = t.auth
        rec = t.alloc
        if t.state is _PENDING:
            del a.pending[t.id]
            if a.pending:
                self._grant_pass(a)
            return 0
        if rec is None:  # grant_charges_ledger off: nothing was charged; the ticket's bytes are reported
            if a.pending:
                self._round(a)
            return t.nbytes
        credit = rec.charge
        self._retire(rec)
        self._rounds()  # its charge (> 0) rose the headroom: the round on `a`, then the quota's
        return credit
