"""The pool front end of `ProcessMemoryManager`: one ledger as `spec.pressure`'s pool (to be deleted, issue #21).

Every concept here has its composed verb now, checked against `spec.manager`
and traced as `ortmem-manager/1`: `try_reserve` and `reconfigure`
(`refimpl.manager.arbitration`), `set_use`, `press(priority, deadline)`,
`answer(now)` and `expire_pressure` (`refimpl.manager.pressure`). What stays
here is the focused pressure checker's entry points, which name a lease by
its ticket id (`_Alloc.ticket`, indexed by `Ledger._leases`) and follow
`spec.pressure`'s validation order; they go with that checker once it drives
the composed verbs:

    pool_try_reserve      the allocator path: a claimed lease now, or CapacityDenied now (I7)
    pool_set_use          pinned / in-flight flags of a lease: never a victim (I6)
    pool_reconfigure      a ledger's generation + 1: its older pending tickets fail
    pool_press       a pressure ticket with priority and deadline, delivered with no lock held (C5, I7)
    pool_answer      victims named by ticket id, refused when stale, closed or past the deadline (C5, I6)
    pool_expire_pressure  an open pressure ticket past its deadline expires
    wait             park on a ticket's own event until it is granted or retired (I7)
    abstract_pool    the refinement mapping of one ledger to `spec.pressure.Pool`

`pool_claim` / `pool_release` / `pool_cancel` / `pool_timeout` / `pool_submit`
are the arbitration part's operations with `spec.pressure`'s validation order
(a claimed ticket is still its holder's: a foreign holder is told so). The
bytes are the ledger's: a grant is a reservation, a claim its commit, a
release or an answer its retirement. No bytes, no second table here.

Contracts: each operation here runs through `_run_pool`
(`refimpl.manager.pool_view`), checked on the pool view of the ledger it
touched; a refusal must leave that view unchanged (G4).
Tracing: with a recorder attached, each operation emits one `ortmem-pool/1`
event (`invariants.focused_trace`), replayed against `spec.pressure`
(`invariants.focused_replay`); a cancel posted by `drop` emits a
`drained_cancel` event when it is applied. `drop` itself takes no lock and
changes nothing a spec describes, so it has no event of its own; the next operation of any front end
applies the posts first (`drain`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from invariants.contracts import SWITCH as _SWITCH
from refimpl.manager.arbitration import _new_ticket
from refimpl.manager.ledger import _Alloc, _Auth, _nbytes
from refimpl.pressure_args import check_timeout
from spec import manager_actions as M
from spec import pressure_state as P
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    GovernorError,
    InvalidArgument,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    TraceSinkFailed,
    UnknownTicket,
)
from spec.tickets import PressureState, TicketState
from spec.types import MAX_BYTES, Origin, Role

__all__ = ["Leases"]

T = TypeVar("T")
_PENDING, _GRANTED, _CLAIMED = TicketState.PENDING, TicketState.GRANTED, TicketState.CLAIMED
_OPEN = PressureState.OPEN


class Leases:
    """Requester leases and the single-pool protocol; needs the ledger, arbitration and pressure parts."""

    def _init_leases(self) -> None:
        self._mailbox: dict[tuple[int, int], None] = {}  # posted cancels of dropped tickets, in post order

    def _of_ticket(self, tid: object) -> Callable[[], _Auth | None]:
        def where() -> _Auth | None:
            t = self._tickets.get(tid) if type(tid) is int else None
            if t is not None:
                return t.auth
            rec = self._leases.get(tid) if type(tid) is int else None
            return rec.auth if rec is not None else self._only_ledger()
        return where

    def _of_pressure(self, pid: object) -> Callable[[], _Auth | None]:
        def where() -> _Auth | None:
            r = self._pressure_log.get(pid) if type(pid) is int else None
            return r.auth if r is not None else self._only_ledger()
        return where

    def _of_auth(self, aid: object) -> Callable[[], _Auth | None]:
        def where() -> _Auth | None:
            a = self._auths.get(aid) if type(aid) is int else None
            return a if a is not None and a.alias_of is None else None
        return where

    def _only_ledger(self) -> _Auth | None:
        """The one canonical ledger when there is exactly one (a refused lookup is then viewed on it)."""
        canon = [a for a in self._auths.values() if a.alias_of is None]
        return canon[0] if len(canon) == 1 else None

    # --- requester tickets, in spec.pressure's validation order -----------------------

    def pool_submit(self, holder: int, authority: int, nbytes: int, priority: int = 0) -> int:
        """`submit` (a pending ticket; the round may grant it at once), checked as `spec.pressure.Submit`."""
        return self._run_pool(lambda: P.Submit(holder, nbytes, priority), self._of_auth(authority), self._submit,
                              holder, authority, nbytes, priority, Role.STAGING)

    def pool_try_reserve(self, holder: int, authority: int, nbytes: int, priority: int = 0,
                    role: Role = Role.STAGING) -> int:
        """The allocator path: a claimed lease now (its ticket id), or CapacityDenied now; never waits (I7)."""
        return self._run_pool(lambda: P.TryReserve(holder, nbytes, priority), self._of_auth(authority),
                              self._try_reserve, holder, authority, nbytes, priority, role)

    def _try_reserve(self, holder: int, authority: int, nbytes: int, priority: int, role: Role) -> int:
        if type(nbytes) is not int or not 0 < nbytes <= MAX_BYTES:
            _nbytes(nbytes, "nbytes")
        if type(priority) is not int:
            raise InvalidArgument(f"priority must be an int, got {priority!r}")
        if not isinstance(role, Role):
            raise InvalidArgument(f"role must be a Role, got {role!r}")
        self._holder(holder)
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; tickets name the canonical ledger")
        self._require_active(a)
        if nbytes > a.limit:
            raise CapacityDenied(f"authority {a.id}: {nbytes} B can never fit its {a.limit} B limit")
        if not self._guards.on("try_only"):  # negative control: the allocator is handed "pending"
            return self._submit(holder, authority, nbytes, priority, role)
        if a.pending or nbytes > a.limit - a.used:  # I7 try-only; I13 never ahead of a waiter
            raise CapacityDenied(f"try-only: {nbytes} B asked, {a.limit - a.used} B free, {len(a.pending)} waiting")
        t = _new_ticket(self._next_ticket, holder, a, nbytes, priority, role, 0, _CLAIMED)
        self._next_ticket += 1
        rec = self._enter(holder, a, a.tier, role, nbytes, Origin.GRANTED)  # the grant: a ledger reservation
        rec.ticket = t
        self._leases[t.id] = rec
        self._commit_rec(rec, nbytes)  # and its claim, at once
        return t.id

    def _pool_ticket(self, holder: object, tid: object) -> tuple[Any, _Alloc | None]:
        """(live ticket or a lease's ticket, the lease or None): holder, issued, retired, then ownership."""
        self._holder(holder)
        if type(tid) is not int or not 1 <= tid < self._next_ticket:
            raise UnknownTicket(f"ticket {tid!r} was never issued")
        t = self._tickets.get(tid)
        rec = None
        if t is None:
            rec = self._leases.get(tid)
            if rec is None:
                return None, None
            t = rec.ticket
        if t.holder != holder:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {holder}'s")
        return t, rec

    def pool_claim(self, holder: int, ticket: int) -> int:
        """Granted -> claimed (a LIVE lease), once; returns its grant (the allocation id)."""
        return self._run_pool(lambda: P.Claim(holder, ticket), self._of_ticket(ticket), self._pool_claim,
                              holder, ticket)

    def _pool_claim(self, holder: int, ticket: int) -> int:
        t, rec = self._pool_ticket(holder, ticket)
        if t is None or rec is not None or t.state is not _GRANTED:
            if t is None:
                raise InvalidTransition(f"ticket {ticket} was already completed, cancelled or failed")
            state = "claimed" if rec is not None else t.state.value
            raise InvalidTransition(f"ticket {ticket} is {state}; only a granted ticket is claimed")
        return self._claim(holder, ticket)

    def pool_release(self, holder: int, ticket: int) -> None:
        """The owner gives back the lease its ticket's claim made: exact credit, then a round."""
        self._run_pool(lambda: P.Release(holder, ticket), self._of_ticket(ticket), self._pool_release,
                       holder, ticket)

    def _pool_release(self, holder: int, ticket: int) -> None:
        t, rec = self._pool_ticket(holder, ticket)
        if rec is None:
            if t is None:
                raise InvalidTransition(f"ticket {ticket} was already completed, cancelled or failed")
            raise InvalidTransition(f"ticket {ticket} is {t.state.value}; only a claimed lease is released")
        self._step(rec, "release")
        self._retire(rec)
        if rec.auth.pending:
            self._round(rec.auth)  # I13

    def pool_cancel(self, holder: int, ticket: int) -> int:
        """Pending -> gone; granted -> its reservation cancelled (its bytes, once); else a no-op (0)."""
        return self._run_pool(lambda: P.Cancel(holder, ticket), self._of_ticket(ticket), self._pool_abandon,
                              holder, ticket)

    def pool_timeout(self, holder: int, ticket: int) -> int:
        """The caller's deadline passed: as `pool_cancel`."""
        return self._run_pool(lambda: P.Timeout(holder, ticket), self._of_ticket(ticket), self._pool_abandon,
                              holder, ticket)

    def _pool_abandon(self, holder: int, ticket: int) -> int:
        t, rec = self._pool_ticket(holder, ticket)
        if t is None or rec is not None:
            return 0  # retired, or claimed: the claim disarmed cancel and timeout; never a second credit
        return self._drop_ticket(t)

    def pool_set_use(self, holder: int, ticket: int, pinned: bool, in_flight: bool) -> None:
        """Flag the lease of `ticket` pinned and/or in flight: such bytes are never reclaimed (I6)."""
        self._run_pool(lambda: P.SetUse(holder, ticket, pinned, in_flight), self._of_ticket(ticket), self._set_use,
                       holder, ticket, pinned, in_flight)

    def _set_use(self, holder: int, ticket: int, pinned: bool, in_flight: bool) -> None:
        if type(pinned) is not bool or type(in_flight) is not bool:
            raise InvalidArgument(f"pinned and in_flight must be bools, got {pinned!r}, {in_flight!r}")
        t, rec = self._pool_ticket(holder, ticket)
        if rec is None:
            if t is None:
                raise InvalidTransition(f"ticket {ticket} was already completed, cancelled or failed")
            raise InvalidTransition(f"ticket {ticket} is {t.state.value}; only a claimed lease has use flags")
        rec.pinned, rec.in_flight = pinned, in_flight

    def pool_reconfigure(self, authority: int) -> None:
        """The ledger's generation + 1; every older pending ticket on it fails (its waiter wakes to find it gone)."""
        self._run_pool(P.Reconfigure, self._of_auth(authority), self._reconfigure, authority)

    def _reconfigure(self, authority: int) -> None:
        a = self._canonical(authority)
        a.generation += 1
        for t in list(a.pending.values()):
            del self._tickets[t.id]
            if t.event is not None:
                self._wake.append(t.event)
        a.pending.clear()

    def wait(self, ticket: int, timeout: float | None) -> bool:
        """Park on the ticket's own event (never on the lock) until granted or retired; False on timeout."""
        timeout = check_timeout(timeout)
        with self._lock:
            if type(ticket) is not int or not 1 <= ticket < self._next_ticket:
                raise UnknownTicket(f"ticket {ticket!r} was never issued")
            t = self._tickets.get(ticket)
            if t is None or t.state is not _PENDING:
                return True  # resolved already
            if t.event is None:
                t.event = threading.Event()
            ev = t.event
        self._outside_lock("waiting on a ticket")
        return ev.wait(timeout)

    def drop(self, holder: int, ticket: int) -> None:
        """Post a cancel of a live ticket without taking the lock (a dropped handle, a finaliser).

        Applied under the lock by `drain`, which every operation of every front end (composed, pool_*, tx_*)
        calls first when a post waits, before its own effect: a dropped pending ticket is never granted by
        a later round, and a dropped granted ticket's bytes are credited (once) before anything else runs
        (issue #21). Each applied post is its own checked step (the composed CancelTicket) with its own
        `drained_cancel` event; the operation that follows is then checked, or refused, on its own. At most
        `mailbox` distinct posts: beyond that MailboxFull. A post naming an unknown holder or ticket, or another holder's
        ticket, is refused with a typed error, so bogus posts cannot fill the slots a real drop needs;
        a repeat, or a drop of a claimed or retired ticket, is a no-op."""
        self._holder(holder)  # one dict read
        t = self._tickets.get(ticket) if type(ticket) is int else None  # one atomic dict read, no lock
        if t is None:
            if type(ticket) is int and 0 < ticket < self._next_ticket:
                return  # retired or claimed already: nothing to cancel
            raise UnknownTicket(f"ticket {ticket!r} was never issued")
        if t.holder != holder:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {holder}'s")
        key = (holder, t.id)
        if key in self._mailbox:
            return
        if len(self._mailbox) >= self._slots:
            raise MailboxFull(f"cancellation mailbox full ({self._slots} posts); call drain() or retry")
        self._mailbox[key] = None

    def drain(self) -> None:
        """Apply the posted cancels now."""
        rec = self._recorder
        try:
            with self._lock:
                seq = self._drain()
        finally:
            with self._lock:
                wake, self._wake = self._wake, []
            self._wake_up(wake)
        if rec is not None and seq:
            from refimpl.tracing import finish

            finish(rec, seq, "drain", None, None)  # a sink failure on a drained cancel is TraceSinkFailed

    def _drain(self) -> int:
        """Apply the posted cancels; the number of the last event recorded for them (0: none)."""
        rec, seq = self._recorder, 0
        while self._mailbox:
            try:
                key = next(iter(self._mailbox))  # oldest post first
            except RuntimeError:
                continue  # a lock-free drop() inserted meanwhile: look again
            self._mailbox.pop(key, None)
            holder, ticket = key
            a = self._of_ticket(ticket)() if _SWITCH.on or rec is not None else None
            # Checked as the composed CancelTicket on every record of its ledger: any front end may have put
            # records there (a composed lease is outside what the focused pool view describes).
            scope = self._closed((a.id,)) if a is not None and _SWITCH.on else None
            before = self._manager_view(scope, ()) if scope is not None else None
            pool = self._pool_view(a) if before is not None and self._described(a) else None
            self._books.forget()  # this path keeps no contract books: a checked operation counts them again
            try:
                credited = self._pool_abandon(holder, ticket)
            except GovernorError:
                continue  # it names no live ticket of that holder any more
            if rec is not None:  # trace hook: the applied post is spec.pressure's Cancel
                seq = self._record_pool(rec, P.Cancel(holder, ticket), a, (), credited, None, "drained_cancel")
            if pool is not None:  # a ledger the focused pool describes: its predicates too, first
                from invariants.pressure import check_all, check_step

                after = self._pool_view(a)
                check_step(pool, P.Cancel(holder, ticket), after)
                check_all(after)
            if before is not None:
                self._check_manager(before, M.CancelTicket(holder, ticket), self._manager_view(scope, ()), credited)
        return seq

    # --- holder pressure with priority and deadline (C5, I6, I7) ----------------------

    def pool_press(self, holder: int, authority: int, target: int, priority: int = 0, deadline: int = 0) -> int:
        """Open a pressure ticket on `holder` (due at `deadline`) and deliver it; the manager takes nothing (C5)."""
        under_lock = not self._guards.on("unlock_before_callback")  # negative control: deliver under the lock
        opened: list[int] = []  # noted under the lock: a trace sink raising after the open leaves no ticket behind
        try:
            pid = self._run_pool(lambda: P.Press(holder, target, priority, deadline), self._of_auth(authority),
                                 lambda *a: opened.append(self._pool_press(*a)) or opened[0],
                                 holder, authority, target, priority, deadline, under_lock)
        except (TraceSinkFailed, KeyboardInterrupt, SystemExit) as e:  # from the sink: the open stands
            if opened and not under_lock:  # applied, never delivered: nobody would answer it (issue #14)
                try:
                    self.pool_cancel_pressure(opened[0])
                except (InvalidTransition, TraceSinkFailed):
                    pass  # answered or cancelled meanwhile; or cancelled with its event lost
                e.add_note(f"ortmem: pool_press cancelled its undelivered pressure ticket {opened[0]}")
            raise
        if not under_lock:
            self._deliver(pid)  # I7: the callback runs with the ledger lock released
        return pid

    def _pool_press(self, holder: int, authority: int, target: int, priority: int, deadline: int,
                    under_lock: bool) -> int:
        _nbytes(target, "target")
        if type(priority) is not int:
            raise InvalidArgument(f"priority must be an int, got {priority!r}")
        if type(deadline) is not int or deadline < 0:
            raise InvalidArgument(f"deadline must be an int >= 0, got {deadline!r}")
        self._holder(holder)
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; pressure names the canonical ledger")
        self._require_active(a)
        pid = self._open(holder, a, target, False, priority, deadline)
        if under_lock:
            self._deliver(pid)
        return pid

    def pool_answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int) -> int:
        """The holder gives back its own unpinned, idle leases, named by ticket id; zero is legal."""
        return self._run_pool(lambda: P.Answer(holder, pressure, victims, now), self._of_pressure(pressure),
                              self._pool_answer, holder, pressure, victims, now)

    def _pool_answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int) -> int:
        if type(now) is not int or now < 0:
            raise InvalidArgument(f"now must be an int >= 0, got {now!r}")
        if type(victims) is not tuple or any(type(v) is not int for v in victims) or len(set(victims)) != len(victims):
            raise InvalidArgument(f"victims must be a tuple of distinct ticket ids, got {victims!r:.80}")
        self._holder(holder)
        r = self._pressure_log.get(pressure) if type(pressure) is int else None
        if r is None:
            if type(pressure) is int and 1 <= pressure < self._next_pressure:
                raise StaleAnswer(f"pressure ticket {pressure} is closed; the answer credits nothing")
            raise UnknownTicket(f"pressure ticket {pressure!r} was never issued")
        if r.holder != holder:
            raise ForeignHolder(f"pressure ticket {r.id} went to holder {r.holder}, not {holder}")
        a = r.auth
        if self._guards.on("answer_open_only"):  # C5: stale, closed or late answers credit nothing
            if r.generation != a.generation:
                raise StaleGeneration(f"pressure ticket {r.id}: generation {r.generation}, ledger at {a.generation}")
            if r.state is not _OPEN:
                raise StaleAnswer(f"pressure ticket {r.id} is {r.state.value}; the answer credits nothing")
            if r.deadline is not None and now > r.deadline:
                raise StaleAnswer(f"pressure ticket {r.id} was due at {r.deadline}; answered at {now}")
        picked: list[_Alloc] = []
        for v in victims:
            rec = self._leases.get(v)
            if rec is None or rec.holder != holder or rec.auth is not a or rec.part is not None:
                raise PinnedVictim(f"victim {v} is not a claimed lease of holder {holder} on authority {a.id}")
            if (rec.pinned or rec.in_flight) and self._guards.on("victims_unpinned_idle"):  # I6
                raise PinnedVictim(f"victim {v} is {'pinned' if rec.pinned else 'in flight'}; never reclaimed")
            picked.append(rec)
        released = 0
        for rec in picked:
            self._step(rec, "release")
            released += rec.charge
            self._retire(rec)
        r.released += released
        if r.state is _OPEN:
            self._shut_pressure(r, PressureState.ANSWERED)
        if r.change:
            a.change.completed.append((r.id, released))
        if a.pending:
            self._round(a)  # I13
        return released

    def pool_expire_pressure(self, pressure: int, now: int) -> None:
        """`expire_pressure`, checked as `spec.pressure.ExpirePressure` (its answer would be stale)."""
        self._run_pool(lambda: P.ExpirePressure(pressure, now), self._of_pressure(pressure), self._expire_pressure,
                       pressure, now)

    def _expire_pressure(self, pressure: int, now: int) -> None:
        if type(now) is not int or now < 0:
            raise InvalidArgument(f"now must be an int >= 0, got {now!r}")
        r = self._pressure_log.get(pressure) if type(pressure) is int else None
        if r is None:
            if type(pressure) is int and 1 <= pressure < self._next_pressure:
                raise InvalidTransition(f"pressure ticket {pressure} is already closed")
            raise UnknownTicket(f"pressure ticket {pressure!r} was never issued")
        if r.state is not _OPEN:
            raise InvalidTransition(f"pressure ticket {r.id} is already {r.state.value}")
        if r.deadline is None or now <= r.deadline:
            raise InvalidTransition(f"pressure ticket {r.id} is due at {r.deadline}; not expired at {now}")
        self._shut_pressure(r, PressureState.EXPIRED)

    def pool_cancel_pressure(self, pressure: int) -> None:
        """Retire an open pressure ticket (`cancel_pressure`), checked as `spec.pressure.CancelPressure`."""
        self._run_pool(lambda: P.CancelPressure(pressure), self._of_pressure(pressure), self._cancel_pressure,
                       pressure)

    # --- refinement mapping --------------------------------------------------------
