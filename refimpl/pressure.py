"""`PressureGovernor`: the concrete ticket and pressure protocol of one governed pool.

A second, independent implementation of `spec.pressure` (shared vocabulary
only: enums, errors): mutable ticket records, a pending index in submit
order, its own grant order (`_grant_order`) and its own guards. `abstract()`
is the refinement mapping to `spec.pressure.Pool`.

Concurrency (I7). One ledger lock (`OwnedLock`, which knows its owner
thread), held only for the bookkeeping of one operation. Waiters park on
their own ticket's `threading.Event`, never on the ledger lock; a grant is
charged under the lock and the waiter is woken after the lock is released.
Holder callbacks are invoked with no lock held, so a callback may re-enter
the governor (for instance to answer and release); every call-out and wait
site checks that the current thread does not hold the ledger lock, and
re-entering the lock from its owner thread raises `InvariantViolation("I7")`
instead of deadlocking. Whether a callback really ran with the lock free is
not reported by the governor itself: a checker probes `ledger_lock` from
another thread while the callback runs (`refimpl.pressure_adapter`). The allocator path (`try_reserve`) is try-only.
Dropping a ticket posts a cancel to a bounded mailbox (one slot reserved per
live ticket at submit), drained under the lock by the next operation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import immutables

from invariants._violation import InvariantViolation
from invariants.contracts import SWITCH as _SWITCH
from invariants.pressure import check_all, check_step
from spec import pressure as P
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    GovernorError,
    HolderCallbackFailed,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    UnknownHolder,
    UnknownTicket,
)
from refimpl.pressure_args import check_callback, check_params
from refimpl.manager.lock import OwnedLock
from refimpl.pressure_waiting import WaitingMixin
from spec.guards import ALL_ON, GuardSet
from spec.tickets import PressureState, TicketState
from spec.types import MAX_BYTES

__all__ = ["OwnedLock", "PressureGovernor", "Callback"]

#: How many leading body arguments make up each action (the rest are private to the body).
_ARITY = {P.Submit: 3, P.TryReserve: 3, P.Claim: 2, P.Release: 2, P.Cancel: 2, P.Timeout: 2, P.Reconfigure: 0,
          P.SetUse: 4, P.Press: 4, P.Answer: 4, P.CancelPressure: 1, P.ExpirePressure: 2}

_T = TicketState
#: A holder's pressure callback: (governor, pressure id, target bytes, deadline) -> None.
Callback = Callable[["PressureGovernor", int, int, int], None]


class _Tk:
    __slots__ = ("id", "holder", "nbytes", "priority", "generation", "state", "age", "grant", "pinned",
                 "in_flight", "event")

    def __init__(self, id: int, holder: int, nbytes: int, priority: int, generation: int) -> None:
        self.id, self.holder, self.nbytes, self.priority, self.generation = id, holder, nbytes, priority, generation
        self.state, self.age, self.grant = _T.PENDING, 0, None
        self.pinned = self.in_flight = False
        self.event: threading.Event | None = None  # made by the first waiter, under the lock


class _Pr:
    __slots__ = ("id", "holder", "target", "priority", "deadline", "generation", "state", "released")

    def __init__(self, id: int, holder: int, target: int, priority: int, deadline: int, generation: int) -> None:
        self.id, self.holder, self.target, self.priority = id, holder, target, priority
        self.deadline, self.generation = deadline, generation
        self.state, self.released = PressureState.OPEN, 0


def _bytes(n: object, what: str) -> int:
    if type(n) is not int or n < 1 or n > MAX_BYTES:
        raise InvalidBytes(f"{what} must be an int in [1, 2**63-1], got {n!r}")
    return n


class PressureGovernor(WaitingMixin):
    """Requester tickets with bounded-aging arbitration and holder pressure for one pool."""

    def __init__(self, capacity: int, fixed: int = 0, holders: int = 1, aging_bound: int = 8,
                 mailbox: int = 64, guards: GuardSet = ALL_ON) -> None:
        check_params(capacity, fixed, holders, aging_bound, mailbox, guards)  # typed, before any state
        self._capacity, self._fixed, self._free = capacity, fixed, capacity - fixed
        self._holders, self._bound, self._slots = holders, aging_bound, mailbox
        self._guards = guards
        self._lock = OwnedLock()
        self._generation = 0
        self._tickets: dict[int, _Tk] = {}
        self._pending: dict[int, _Tk] = {}  # insertion order == submit order
        self._live = 0  # pending + granted: each holds one mailbox slot
        self._pressures: dict[int, _Pr] = {}
        self._callbacks: dict[int, Callback] = {}
        self._mailbox: dict[tuple[int, int], None] = {}  # distinct posts, in post order
        self._wake: list[threading.Event] = []
        self._next_ticket = self._next_grant = self._next_pressure = 1

    # --- the checked, locked operation ----------------------------------------

    def _run(self, kind: Any, body: Callable[..., Any], *args: Any) -> Any:
        """Run `body(*args)` under the lock; with contracts on, check it as the action `kind(*args)`."""
        with self._lock:
            if self._mailbox:
                self._precheck(kind, args)  # bad input is refused before the posted cancels are drained
                self._drain()
            on = _SWITCH.on
            if on:
                action = kind(*args[:_ARITY[kind]]) if kind is not None else None
                before = self._view()
            try:
                result = body(*args)
            except GovernorError:
                if on and self._view() != before:  # G4: a refusal changes nothing
                    raise InvariantViolation("G4", f"{action!r} was refused but changed the pool") from None
                raise
            if on:
                after = self._view()
                check_step(before, action, after)
                check_all(after)
            wake, self._wake = self._wake, []
        for ev in wake:  # charged above, woken here: outside the lock (I7)
            ev.set()
        return result

    def _precheck(self, kind: Any, args: tuple[Any, ...]) -> None:
        """The argument checks of `kind` that no drained cancel can change (raise before anything moves)."""
        if kind in (P.Submit, P.TryReserve):
            self._request(*args[:3])
        elif kind in (P.Claim, P.Release, P.Cancel, P.Timeout, P.SetUse):
            self._holder(args[0])
            self._ticket(args[1])
            if kind is P.SetUse and (type(args[2]) is not bool or type(args[3]) is not bool):
                raise InvalidArgument(f"pinned and in_flight must be bools, got {args[2]!r}, {args[3]!r}")
        elif kind is P.Press:
            self._press_args(*args[:4])
        elif kind is P.Answer:
            self._answer_args(*args[:4])
        elif kind in (P.CancelPressure, P.ExpirePressure):
            self._close_args(*args[:2])

    def _outside_lock(self, site: str) -> None:
        """Verify the calling thread holds no ledger lock at a wait or call-out site (I7)."""
        if self._lock.held_by_me() and _SWITCH.on:
            raise InvariantViolation("I7", f"{site} with the ledger lock held")

    # --- lookups (validation order as in spec.pressure) ------------------------

    def _holder(self, h: object) -> int:
        if type(h) is not int or not 1 <= h <= self._holders:
            raise UnknownHolder(f"holder {h!r} is not registered")
        return h

    def _ticket(self, tid: object) -> _Tk | None:
        t = self._tickets.get(tid) if type(tid) is int else None
        if t is None and not (type(tid) is int and 0 < tid < self._next_ticket):
            raise UnknownTicket(f"ticket {tid!r} was never issued")
        return t

    def _mine(self, holder: object, tid: object, retired_ok: bool = False) -> _Tk | None:
        h = self._holder(holder)
        t = self._ticket(tid)
        if t is None:
            if retired_ok:
                return None
            raise InvalidTransition(f"ticket {tid} was already completed, cancelled or failed")
        if t.holder != h:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {h}'s")
        return t

    # --- arbitration (I13) ------------------------------------------------------

    def _grant_order(self) -> list[_Tk]:
        """Pending tickets in the order a round considers them (section 6).

        Matured tickets first, in submit order (the pending index keeps it); then the rest
        bucketed by priority, highest bucket first, each bucket in submit order."""
        matured: list[_Tk] = []
        by_priority: dict[int, list[_Tk]] = {}
        for t in self._pending.values():  # submit order
            if t.age >= self._bound:
                matured.append(t)
            else:
                by_priority.setdefault(t.priority, []).append(t)
        for priority in sorted(by_priority, reverse=True):
            matured.extend(by_priority[priority])
        return matured

    def _arbitrate(self) -> None:
        if not self._pending:
            return
        bound, g = self._bound, self._guards
        for t in self._pending.values():
            if t.age < bound:
                t.age += 1
        for t in self._grant_order():
            if t.nbytes <= self._free:
                del self._pending[t.id]
                t.state, t.grant = _T.GRANTED, self._next_grant
                self._next_grant += 1
                if g.on("charge_before_wake"):  # I7: charge first, wake after the lock is released
                    self._free -= t.nbytes
                    if t.event is not None:
                        self._wake.append(t.event)
                elif t.event is not None:
                    t.event.set()  # negative control: woken now, charged only at claim
            elif t.age >= bound and g.on("aging"):  # I13: a matured misfit stops the round
                break

    def _retire(self, t: _Tk) -> int:
        credit = t.nbytes if t.state in (_T.GRANTED, _T.CLAIMED) else 0
        if t.state is _T.GRANTED and not self._guards.on("charge_before_wake"):
            credit = 0  # never charged under that ordering
        if t.state in (_T.PENDING, _T.GRANTED):
            self._live -= 1
        self._pending.pop(t.id, None)
        del self._tickets[t.id]
        self._free += credit
        if t.event is not None:
            self._wake.append(t.event)  # a retired ticket's waiter must not sleep on
        self._arbitrate()
        return credit

    # --- requester tickets ------------------------------------------------------

    def _request(self, holder: object, nbytes: object, priority: object) -> tuple[int, int, int]:
        _bytes(nbytes, "nbytes")
        if type(priority) is not int:
            raise InvalidArgument(f"priority must be an int, got {priority!r}")
        h = self._holder(holder)
        if nbytes > self._capacity - self._fixed:  # type: ignore[operator]
            raise CapacityDenied(f"quota denied: {nbytes} B asked, the pool governs {self._capacity - self._fixed} B")
        return h, nbytes, priority  # type: ignore[return-value]

    def submit(self, holder: int, nbytes: int, priority: int = 0) -> int:
        """A pending ticket; arbitration may grant it at once. Never waits."""
        return self._run(P.Submit, self._submit, holder, nbytes, priority)

    def _submit(self, holder: int, nbytes: int, priority: int) -> int:
        h, n, pr = self._request(holder, nbytes, priority)
        if self._live >= self._slots:  # back-pressure: every mailbox slot is reserved
            raise MailboxFull(f"{self._slots} cancellation-mailbox slots all reserved; retry later")
        t = _Tk(self._next_ticket, h, n, pr, self._generation)
        self._next_ticket += 1
        self._tickets[t.id] = self._pending[t.id] = t
        self._live += 1
        self._arbitrate()
        return t.id

    def try_reserve(self, holder: int, nbytes: int, priority: int = 0) -> int:
        """The allocator path: a claimed lease now, or CapacityDenied now (I7)."""
        return self._run(P.TryReserve, self._try_reserve, holder, nbytes, priority)

    def _try_reserve(self, holder: int, nbytes: int, priority: int) -> int:
        h, n, pr = self._request(holder, nbytes, priority)
        if not self._guards.on("try_only"):  # negative control: the allocator is handed "pending"
            return self._submit(h, n, pr)
        if self._pending or n > self._free:  # I7 try-only, I13 never ahead of a waiter
            raise CapacityDenied(f"try-only: {n} B asked, {self._free} B free, {len(self._pending)} waiting")
        t = _Tk(self._next_ticket, h, n, pr, self._generation)
        self._next_ticket += 1
        t.state, t.grant = _T.CLAIMED, self._next_grant
        self._next_grant += 1
        self._free -= n
        self._tickets[t.id] = t
        return t.id

    def claim(self, holder: int, ticket: int) -> int:
        """Granted -> claimed, once; disarms cancel and timeout. Returns the grant id."""
        return self._run(P.Claim, self._claim, holder, ticket)

    def _claim(self, holder: int, ticket: int) -> int:
        t = self._mine(holder, ticket)
        if t.state is not _T.GRANTED:
            raise InvalidTransition(f"ticket {t.id} is {t.state.value}; only a granted ticket is claimed")
        if not self._guards.on("charge_before_wake"):
            self._free -= t.nbytes
        t.state = _T.CLAIMED
        self._live -= 1
        return t.grant  # type: ignore[return-value]

    def release(self, holder: int, ticket: int) -> None:
        """The owner gives back its claimed lease: exact credit, then arbitration."""
        self._run(P.Release, self._release, holder, ticket)

    def _release(self, holder: int, ticket: int) -> None:
        t = self._mine(holder, ticket)
        if t.state is not _T.CLAIMED:
            raise InvalidTransition(f"ticket {t.id} is {t.state.value}; only a claimed lease is released")
        self._retire(t)

    def cancel(self, holder: int, ticket: int) -> int:
        """Pending -> cancelled; granted -> cancelled with exact credit; else a no-op. Returns bytes credited."""
        return self._run(P.Cancel, self._abandon, holder, ticket)

    def timeout(self, holder: int, ticket: int) -> int:
        """The caller's deadline passed: pending or granted -> failed (granted bytes credited)."""
        return self._run(P.Timeout, self._abandon, holder, ticket)

    def _abandon(self, holder: int, ticket: int) -> int:
        t = self._mine(holder, ticket, retired_ok=True)
        if t is None or t.state is _T.CLAIMED:
            return 0  # retired or claimed: never a second credit
        return self._retire(t)

    def reconfigure(self) -> None:
        """Generation + 1; every older pending ticket fails (its waiter wakes to find it gone)."""
        self._run(P.Reconfigure, self._reconfigure)

    def _reconfigure(self) -> None:
        self._generation += 1
        for t in list(self._pending.values()):
            del self._tickets[t.id]
            self._live -= 1
            if t.event is not None:
                self._wake.append(t.event)
        self._pending.clear()

    def set_use(self, holder: int, ticket: int, pinned: bool, in_flight: bool) -> None:
        """Flag a claimed lease pinned and/or in flight; such bytes are never reclaimed (I6)."""
        self._run(P.SetUse, self._set_use, holder, ticket, pinned, in_flight)

    def _set_use(self, holder: int, ticket: int, pinned: bool, in_flight: bool) -> None:
        if type(pinned) is not bool or type(in_flight) is not bool:
            raise InvalidArgument(f"pinned and in_flight must be bools, got {pinned!r}, {in_flight!r}")
        t = self._mine(holder, ticket)
        if t.state is not _T.CLAIMED:
            raise InvalidTransition(f"ticket {t.id} is {t.state.value}; only a claimed lease has use flags")
        t.pinned, t.in_flight = pinned, in_flight

    # --- holder pressure (C5, I6) --------------------------------------------------

    def register_callback(self, holder: int, fn: Callback) -> None:
        """`fn(governor, pressure, target, deadline)` is called, with no lock held, when `holder` is pressed."""
        check_callback(fn)
        with self._lock:
            self._callbacks[self._holder(holder)] = fn

    def press(self, holder: int, target: int, priority: int = 0, deadline: int = 0) -> int:
        """Open a pressure ticket for `holder` and deliver it; the governor takes nothing (C5)."""
        if self._guards.on("unlock_before_callback"):  # I7: deliver after the lock is released
            pid = self._run(P.Press, self._press, holder, target, priority,
                            deadline, False)
            self._deliver(pid)
            return pid
        return self._run(P.Press, self._press, holder, target, priority,
                         deadline, True)

    def _press_args(self, holder: object, target: object, priority: object, deadline: object) -> int:
        _bytes(target, "target")
        if type(priority) is not int:
            raise InvalidArgument(f"priority must be an int, got {priority!r}")
        if type(deadline) is not int or deadline < 0:
            raise InvalidArgument(f"deadline must be an int >= 0, got {deadline!r}")
        return self._holder(holder)

    def _press(self, holder: int, target: int, priority: int, deadline: int, deliver_now: bool) -> int:
        h = self._press_args(holder, target, priority, deadline)
        r = _Pr(self._next_pressure, h, target, priority, deadline, self._generation)
        self._next_pressure += 1
        self._pressures[r.id] = r
        if deliver_now:
            self._deliver(r.id)
        return r.id

    def _deliver(self, pid: int) -> None:
        r = self._pressures[pid]
        fn = self._callbacks.get(r.holder)
        if fn is not None:
            self._outside_lock(f"calling holder {r.holder}'s pressure callback")
            try:
                fn(self, pid, r.target, r.deadline)
            except BaseException as e:
                # A raising holder answered nothing: close its ticket so nothing waits on it (C5).
                if not self._lock.held_by_me():
                    try:
                        self.cancel_pressure(pid)
                    except InvalidTransition:
                        pass  # it answered before raising: the answer stands
                if not isinstance(e, Exception) or isinstance(e, InvariantViolation):
                    raise  # KeyboardInterrupt, SystemExit, a detected bug: propagate as they are
                raise HolderCallbackFailed(f"holder {r.holder}'s pressure callback raised "
                                           f"{type(e).__name__}: {e}; pressure ticket {pid} cancelled") from e

    def answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int) -> int:
        """The holder gives back its own unpinned, idle claimed leases; zero is legal. Returns bytes released."""
        return self._run(P.Answer, self._answer, holder, pressure, victims, now)

    def _answer_args(self, holder: object, pressure: object, victims: object, now: object) -> tuple[int, _Pr]:
        if type(now) is not int or now < 0:
            raise InvalidArgument(f"now must be an int >= 0, got {now!r}")
        if type(victims) is not tuple or any(type(v) is not int for v in victims) or len(set(victims)) != len(victims):
            raise InvalidArgument(f"victims must be a tuple of distinct ticket ids, got {victims!r}")
        h = self._holder(holder)
        r = self._pressures.get(pressure) if type(pressure) is int else None
        if r is None:
            raise UnknownTicket(f"pressure ticket {pressure!r} was never issued")
        return h, r

    def _answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int) -> int:
        h, r = self._answer_args(holder, pressure, victims, now)
        if r.holder != h:
            raise ForeignHolder(f"pressure ticket {r.id} went to holder {r.holder}, not {h}")
        if self._guards.on("answer_open_only"):  # C5: stale, cancelled or expired answers credit nothing
            if r.generation != self._generation:
                raise StaleGeneration(f"pressure ticket {r.id}: generation {r.generation}, pool at {self._generation}")
            if r.state is not PressureState.OPEN:
                raise StaleAnswer(f"pressure ticket {r.id} is {r.state.value}; the answer credits nothing")
            if now > r.deadline:
                raise StaleAnswer(f"pressure ticket {r.id} was due at {r.deadline}; answered at {now}")
        picked = []
        for v in victims:
            t = self._tickets.get(v)
            if t is None or t.holder != h or t.state is not _T.CLAIMED:
                raise PinnedVictim(f"victim {v} is not a claimed lease of holder {h}")
            if (t.pinned or t.in_flight) and self._guards.on("victims_unpinned_idle"):  # I6
                raise PinnedVictim(f"victim {v} is {'pinned' if t.pinned else 'in flight'}; never reclaimed")
            picked.append(t)
        released = 0
        for t in picked:
            del self._tickets[t.id]
            released += t.nbytes
        self._free += released
        if r.state is PressureState.OPEN:
            r.state = PressureState.ANSWERED
        r.released += released
        self._arbitrate()
        return released

    def cancel_pressure(self, pressure: int) -> None:
        self._run(P.CancelPressure, self._close_pressure, pressure, None)

    def expire_pressure(self, pressure: int, now: int) -> None:
        self._run(P.ExpirePressure, self._close_pressure, pressure, now)

    def _close_args(self, pressure: object, now: object) -> _Pr:
        if now is not None and (type(now) is not int or now < 0):
            raise InvalidArgument(f"now must be an int >= 0, got {now!r}")
        r = self._pressures.get(pressure) if type(pressure) is int else None
        if r is None:
            raise UnknownTicket(f"pressure ticket {pressure!r} was never issued")
        return r

    def _close_pressure(self, pressure: int, now: int | None) -> None:
        r = self._close_args(pressure, now)
        if r.state is not PressureState.OPEN:
            raise InvalidTransition(f"pressure ticket {r.id} is already {r.state.value}")
        if now is not None and now <= r.deadline:
            raise InvalidTransition(f"pressure ticket {r.id} is due at {r.deadline}; not expired at {now}")
        r.state = PressureState.CANCELLED if now is None else PressureState.EXPIRED

    # --- observability ------------------------------------------------------------

    def lock_held_by_me(self) -> bool:
        return self._lock.held_by_me()

    @property
    def ledger_lock(self) -> OwnedLock:
        """The one ledger lock, for outside probes (`OwnedLock.probe` from another thread, I7)."""
        return self._lock

    def free(self) -> int:
        with self._lock:
            return self._free

    def abstract(self) -> P.Pool:
        """The refinement mapping: this governor's state as a `spec.pressure.Pool`."""
        with self._lock:
            return self._view()

    def _view(self) -> P.Pool:
        return P.Pool(
            capacity=self._capacity, fixed=self._fixed, free=self._free, holders=self._holders,
            aging_bound=self._bound, mailbox=self._slots, generation=self._generation,
            tickets=immutables.Map({i: P.Ticket(t.id, t.holder, t.nbytes, t.priority, t.generation, t.state, t.age,
                                                t.grant, t.pinned, t.in_flight) for i, t in self._tickets.items()}),
            pressures=immutables.Map({i: P.Pressure(r.id, r.holder, r.target, r.priority, r.deadline, r.generation,
                                                    r.state, r.released)
                                      for i, r in self._pressures.items()}),
            next_ticket=self._next_ticket, next_grant=self._next_grant, next_pressure=self._next_pressure)
