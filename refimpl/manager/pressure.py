"""The pressure part of `ProcessMemoryManager`: holder pressure tickets on a holder's own leases (C5, I6).

`shrink_lease` is the holder's other way to give bytes back: part of one idle
lease, which stays live (the design's "shrinks its lease"); `grow_lease` is
its opposite, a charge admitted as `try_reserve` would be (KV growth).

A pressure ticket asks one holder to give back `target` bytes of its leases
on one canonical authority. The manager takes nothing (I6): the holder
answers with the victims it chooses (zero is a legal answer), and each
victim is released in the ledger by that answer, the holder's own action.
A pressure opened by a limit change (`refimpl.manager.limits`) records its
answer in the change's `completed` list.

Callbacks (I7): `register_callback(holder, fn)`; `press` opens the ticket
under the lock, releases it, and only then calls `fn(manager, pressure,
target)`, so the callback may re-enter the manager (to `answer`). A raising
callback answered nothing: its ticket is cancelled (unless it answered
before raising) and `HolderCallbackFailed` is raised; the ledger is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invariants._violation import InvariantViolation
from invariants.contracts import SWITCH as _SWITCH
from spec import manager_actions as M
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    HolderCallbackFailed,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    TraceSinkFailed,
    UnknownTicket,
)
from spec.tickets import PressureState
from spec.types import AllocState
from refimpl.manager.ledger import _Alloc, _Auth, _nbytes
from refimpl.manager.views import _NO_SCOPE
from refimpl.pressure_args import check_callback, check_priority, check_time

__all__ = ["Pressures", "Callback"]

#: A holder's pressure callback: (manager, pressure id, target bytes) -> None.
Callback = Callable[[Any, int, int], None]


class _Prs:
    __slots__ = ("id", "holder", "auth", "target", "change", "priority", "deadline", "generation", "state",
                 "released")

    def __init__(self, id: int, holder: int, auth: _Auth, target: int, change: bool, priority: int = 0,
                 deadline: int | None = None) -> None:
        self.id, self.holder, self.auth, self.target, self.change = id, holder, auth, target, change
        self.priority, self.deadline = priority, deadline  # deadline None: answerable until closed
        self.generation = auth.generation  # an answer to an older generation is stale (C5)
        self.state = PressureState.OPEN
        self.released = 0  # bytes its answers gave back


class Pressures:
    """Holder pressure; needs the ledger part's tables, lookups and `_retire`."""

    def _init_pressure(self) -> None:
        self._pressures: dict[int, _Prs] = {}  # open only
        # Every pressure ticket with a deadline (the single-pool protocol's) and every open one; a closed one
        # keeps its state and released bytes here. A closed ticket without a deadline (the composed `press`,
        # a limit change) is forgotten: a long-running process opens one per arena run boundary.
        self._pressure_log: dict[int, _Prs] = {}
        self._callbacks: dict[int, Callback] = {}
        self._next_pressure = 1

    def register_callback(self, holder: int, fn: Callback) -> None:
        """`fn(manager, pressure, target)` is called, with no lock held, when `holder` is pressed."""
        check_callback(fn)
        with self._lock:
            self._holder(holder)
            self._callbacks[holder] = fn

    # --- operations ------------------------------------------------------------

    def press(self, holder: int, authority: int, target: int, priority: int = 0, deadline: int | None = None) -> int:
        """Open a pressure ticket on `holder`'s leases on `authority` (due at `deadline`, None: no deadline) and
        deliver it to its callback (C5); the callback runs with the ledger lock released (I7)."""
        under_lock = not self._guards.on("unlock_before_callback")  # negative control: deliver under the lock
        opened: list[int] = []  # noted under the lock: a trace sink raising after the open leaves no ticket behind

        def open_(*args: Any) -> int:
            opened.append(self._press(*args))
            if under_lock:
                self._deliver(opened[0])
            return opened[0]

        try:
            pid = self._run(M.Press, self._ms_auth1, open_, holder, authority, target, priority, deadline)
        except BaseException as e:
            if opened and not under_lock:  # applied, but never delivered: nobody would answer it (issue #14)
                try:
                    self.cancel_pressure(opened[0])
                except (InvalidTransition, TraceSinkFailed):
                    pass  # another thread answered or cancelled it meanwhile; or cancelled, its event lost
                e.add_note(f"ortmem: press cancelled its undelivered pressure ticket {opened[0]}")
            raise
        if not under_lock:
            self._deliver(pid)
        return pid

    def open_pressure(self, holder: int, authority: int, target: int, priority: int = 0,
                      deadline: int | None = None) -> int:
        """Open a pressure ticket without calling anyone (the `Press` action): for a holder that answers at a
        boundary of its own (the ORT env arena, at its next Run boundary); `press` delivers it now."""
        return self._run(M.Press, self._ms_auth1, self._press, holder, authority, target, priority, deadline)

    def _press(self, holder: int, authority: int, target: int, priority: int, deadline: int | None) -> int:
        _nbytes(target, "target")  # the arguments first, before any state is looked at
        check_priority(priority)
        check_time(deadline, "deadline", optional=True)
        self._holder(holder)
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; pressure names the canonical ledger")
        self._require_active(a)
        return self._open(holder, a, target, False, priority, deadline)

    def _open(self, holder: int, a: _Auth, target: int, change: bool, priority: int = 0,
              deadline: int | None = None) -> int:
        r = _Prs(self._next_pressure, holder, a, target, change, priority, deadline)
        self._next_pressure += 1
        self._pressures[r.id] = self._pressure_log[r.id] = r
        return r.id

    def _shut_pressure(self, r: _Prs, state: PressureState) -> None:
        """Retire an open pressure ticket from the open index; its record keeps the closing state."""
        del self._pressures[r.id]
        r.state = state
        if r.deadline is None:
            del self._pressure_log[r.id]

    def answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int | None = None) -> int:
        """The holder gives back its own idle LIVE leases on the pressed authority at time `now` (required when
        the pressure has a deadline); returns bytes released. A late or closed pressure's answer is refused
        with StaleAnswer and credits nothing (C5)."""
        return self._run(M.Answer, self._ms_answer, self._answer, holder, pressure, victims, now)

    def _answer(self, holder: int, pressure: int, victims: tuple[int, ...], now: int | None) -> int:
        if type(victims) is not tuple or any(type(v) is not int for v in victims) or len(set(victims)) != len(victims):
            raise InvalidArgument(f"victims must be a tuple of distinct allocation ids, got {victims!r:.80}")
        check_time(now, "now", optional=True)  # the arguments first, before any state is looked at
        self._holder(holder)
        if type(pressure) is not int or not 1 <= pressure < self._next_pressure:
            raise UnknownTicket(f"pressure ticket {pressure!r} was never issued")
        r = self._pressures.get(pressure)
        if r is None:  # C5: answered, cancelled or expired: its answer credits nothing
            raise StaleAnswer(f"pressure ticket {pressure} is closed; the answer credits nothing")
        if r.holder != holder:
            raise ForeignHolder(f"pressure ticket {r.id} went to holder {r.holder}, not {holder}")
        if r.deadline is not None and now is None:
            raise InvalidArgument(f"pressure ticket {r.id} is due at {r.deadline}: the answer must say its time")
        if r.generation != r.auth.generation and self._guards.on("answer_open_only"):  # C5: the topology changed
            raise StaleGeneration(f"pressure ticket {r.id}: generation {r.generation}, ledger at {r.auth.generation}")
        if r.deadline is not None and now > r.deadline and self._guards.on("answer_open_only"):  # C5: late
            raise StaleAnswer(f"pressure ticket {r.id} was due at {r.deadline}; answered at {now}")
        picked: list[_Alloc] = []
        for v in victims:
            rec = self._alloc(v)
            if rec.holder != holder:
                raise ForeignHolder(f"allocation {v} is held by holder {rec.holder}, not {holder}")
            if rec.auth is not r.auth:
                raise InvalidArgument(f"allocation {v} is on authority {rec.auth.id}, not the pressed {r.auth.id}")
            if rec.state is not AllocState.LIVE or rec.part is not None:
                raise InvalidTransition(f"allocation {v} is {rec.state.value}"
                                        f"{'' if rec.part is None else ' and owned by ' + repr(rec.part)}; "
                                        "only an idle live lease is given back")
            if (rec.pinned or rec.in_flight) and self._guards.on("victims_unpinned_idle"):  # I6
                raise PinnedVictim(f"allocation {v} is {'pinned' if rec.pinned else 'in flight'}; never reclaimed")
            picked.append(rec)
        released = 0
        for rec in picked:
            released += rec.charge
            self._retire(rec)
        r.released += released
        self._shut_pressure(r, PressureState.ANSWERED)
        if r.change:
            r.auth.change.completed.append((r.id, released))
        self._rounds()  # I13
        return released

    def set_use(self, holder: int, allocation: int, pinned: bool, in_flight: bool) -> None:
        """Flag the holder's lease pinned and/or in flight: such bytes are never a pressure victim (I6)."""
        self._run(M.SetUse, self._ms_alloc, self._flag_use, holder, allocation, pinned, in_flight)

    def _flag_use(self, holder: int, allocation: int, pinned: bool, in_flight: bool) -> None:
        if type(pinned) is not bool or type(in_flight) is not bool:
            raise InvalidArgument(f"pinned and in_flight must be bools, got {pinned!r:.40}, {in_flight!r:.40}")
        self._holder(holder)
        rec = self._alloc(allocation)
        if rec.holder != holder:
            raise ForeignHolder(f"allocation {rec.id} is held by holder {rec.holder}, not {holder}")
        if rec.state is not AllocState.LIVE or rec.part is not None:
            raise InvalidTransition(f"allocation {rec.id} is {rec.state.value}"
                                    f"{'' if rec.part is None else ' and owned by ' + repr(rec.part)}; "
                                    "only a lease has use flags")
        rec.pinned, rec.in_flight = pinned, in_flight

    def shrink_lease(self, holder: int, allocation: int, nbytes: int) -> None:
        """The holder gives back `nbytes` of its own idle LIVE lease, which keeps at least one byte (giving back
        all of it is `release`); the credit goes to waiters first (I13)."""
        self._run(M.ShrinkLease, self._ms_alloc, self._shrink, holder, allocation, nbytes)

    def _shrink(self, holder: int, allocation: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        rec = self._owned_alloc(holder, allocation)
        if rec.part is not None:
            raise InvalidTransition(f"allocation {rec.id} is {rec.part!r}'s; that part settles it")
        self._step(rec, "shrink")
        if rec.pinned or rec.in_flight:  # I6: bytes in use stay leased
            raise PinnedVictim(f"allocation {rec.id} is {'pinned' if rec.pinned else 'in flight'}; never shrunk")
        if nbytes >= rec.nbytes:
            raise InvalidBytes(f"allocation {rec.id}: giving back {nbytes} B of {rec.nbytes} B leaves no lease; "
                               "release it")
        rec.nbytes -= nbytes
        self._credit(rec, nbytes)
        self._rounds()  # I13: returned capacity goes to the waiters first

    def grow_lease(self, holder: int, allocation: int, nbytes: int) -> None:
        """The holder's LIVE lease takes `nbytes` more, now or CapacityDenied now, exactly as `try_reserve` of
        its holder, authority and `nbytes` would (I2, I13); no id is issued and no round runs."""
        self._run(M.GrowLease, self._ms_alloc, self._grow_by, holder, allocation, nbytes)

    def _grow_by(self, holder: int, allocation: int, nbytes: int) -> None:  # allowances has `_grow`
        self._grants()  # I5
        _nbytes(nbytes, "nbytes")
        rec = self._owned_alloc(holder, allocation)
        if rec.part is not None:
            raise InvalidTransition(f"allocation {rec.id} is {rec.part!r}'s; that part settles it")
        self._step(rec, "grow")
        a = rec.auth
        self._require_active(a)
        if (a.pending or nbytes > self._room(a)) and self._guards.on("try_only"):  # I2; I1 quota; I13
            raise CapacityDenied(f"try-only: {nbytes} B more asked, {max(0, self._room(a))} B free, "
                                 f"{len(a.pending)} waiting")
        rec.nbytes += nbytes
        rec.reserved = max(rec.reserved, rec.nbytes)  # C2: covered, never more than the lease needs
        rec.charge += nbytes
        a.used += nbytes

    def cancel_pressure(self, pressure: int) -> None:
        """Retire an open pressure ticket; it records nothing."""
        self._run(M.CancelPressure, self._ms_pressure, self._cancel_pressure, pressure)

    def _cancel_pressure(self, pressure: int) -> None:
        r = self._open_pressure(pressure)
        self._shut_pressure(r, PressureState.CANCELLED)

    def expire_pressure(self, pressure: int, now: int) -> None:
        """An open pressure ticket past its deadline expires: retired, recording nothing (C5)."""
        self._run(M.ExpirePressure, self._ms_pressure, self._expire_pressure, pressure, now)

    def _expire_pressure(self, pressure: int, now: int) -> None:
        check_time(now, "now")
        r = self._open_pressure(pressure)
        if r.deadline is None or now <= r.deadline:
            raise InvalidTransition(f"pressure ticket {r.id} is due at {r.deadline}; not expired at {now}")
        self._shut_pressure(r, PressureState.EXPIRED)

    # --- delivery (outside the lock, I7) ----------------------------------------

    def _deliver(self, pid: int) -> None:
        with self._lock:
            r = self._pressures.get(pid)
            fn = self._callbacks.get(r.holder) if r is not None else None
            target = r.target if r is not None else 0
            holder = r.holder if r is not None else 0
        if fn is None:
            return
        self._outside_lock(f"calling holder {holder}'s pressure callback")
        try:
            fn(self, pid, target)
        except BaseException as e:
            # A raising holder answered nothing: close its ticket so nothing waits on it (C5).
            try:
                self.cancel_pressure(pid)
            except InvalidTransition:
                pass  # it answered (or the ticket was retired) before raising: that stands
            if not isinstance(e, Exception) or isinstance(e, InvariantViolation):
                raise  # KeyboardInterrupt, SystemExit, a detected bug: propagate as they are
            raise HolderCallbackFailed(f"holder {holder}'s pressure callback raised {type(e).__name__}: {e}; "
                                       f"pressure ticket {pid} cancelled") from e

    def _outside_lock(self, site: str) -> None:
        """Verify the calling thread holds no ledger lock at a wait or call-out site (I7)."""
        if _SWITCH.on and self._lock.held_by_me():
            raise InvariantViolation("I7", f"{site} with the ledger lock held")

    # --- scopes of the composed runner (`Views._run`): (canonical authority ids, allocation ids) -------------

    def _ms_pressure(self, pressure: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        r = self._pressures.get(pressure) if type(pressure) is int else None
        return (frozenset({r.auth.id}), ()) if r is not None else _NO_SCOPE

    def _ms_answer(self, holder: object, pressure: object, victims: object,
                   *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        auths, _ = self._ms_pressure(pressure)
        ids = tuple(v for v in victims if type(v) is int) if type(victims) is tuple else ()
        return auths | {self._allocs[v].auth.id for v in ids if v in self._allocs}, ids

    def _ms_alloc(self, holder: object, allocation: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        rec = self._allocs.get(allocation) if type(allocation) is int else None
        return (frozenset({rec.auth.id}), (rec.id,)) if rec is not None else _NO_SCOPE

    # --- lookups ---------------------------------------------------------------

    def _open_pressure(self, pid: object) -> _Prs:
        if type(pid) is not int or not 1 <= pid < self._next_pressure:
            raise UnknownTicket(f"pressure ticket {pid!r} was never issued")
        r = self._pressures.get(pid)
        if r is None:
            raise InvalidTransition(f"pressure ticket {pid} was already answered or cancelled")
        return r
