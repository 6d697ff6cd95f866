"""`ReclaimChannel`: reclaim from one holder through the pressure protocol of `refimpl.pressure` (C5, I6).

Why an adapter. `PressureGovernor` governs one pool of tickets; the
`ProcessMemoryManager` governs the leases. The smallest bridge is a
PressureGovernor that mirrors ONE holder's leases as claimed tickets (the
holder calls `lease` / `unlease` next to each PMM reserve / release; pinned
or in-flight leases are flagged with `set_use`). A requester that needs room
calls `reclaim(target)`: a pressure ticket (target, priority, deadline on a
logical clock, the pool's generation) is opened and delivered to the holder's
callback with no lock held; the callback picks its own unpinned, idle victims,
`answer`s them (the governor validates: open, current generation, not past
the deadline, no pinned or in-flight victim) and only then frees their PMM
leases. The requester is credited exactly the answer's released bytes: an
unanswered ticket is cancelled and credits zero, and the requester fails or
defers; the governor never takes bytes itself.

Owns: the mirror pool and the logical clock. Must not touch: the PMM (the
holder frees its own leases), admission policy (the caller decides what a
shortfall means). No ORT, no numpy.
"""

from __future__ import annotations

from collections.abc import Callable

from refimpl.pressure import PressureGovernor
from spec.guards import ALL_ON, GuardSet
from spec.tickets import PressureState

__all__ = ["ReclaimChannel", "Pick"]

HOLDER = 1  # the mirror pool has exactly one holder
#: The holder's choice: (target bytes) -> ticket ids of its own unpinned, idle leases to give back.
Pick = Callable[[int], tuple[int, ...]]


class ReclaimChannel:
    """Pressure tickets to one holder; `reclaim(target) -> credited` is the requester's side."""

    def __init__(self, capacity: int, guards: GuardSet = ALL_ON) -> None:
        self.pg = PressureGovernor(max(1, capacity), holders=1, mailbox=1, guards=guards)
        self.now = 0  # logical clock: one tick per pressure ticket
        self.opened = self.answered = self.credited = 0

    # --- the holder's side ---------------------------------------------------

    def lease(self, nbytes: int, pinned: bool = False) -> int:
        """Mirror one claimed lease of the holder; returns its ticket id."""
        tid = self.pg.try_reserve(HOLDER, nbytes)
        if pinned:
            self.pg.set_use(HOLDER, tid, True, False)
        return tid

    def unlease(self, tid: int) -> None:
        self.pg.release(HOLDER, tid)

    def set_use(self, tid: int, pinned: bool, in_flight: bool) -> None:
        self.pg.set_use(HOLDER, tid, pinned, in_flight)

    def serve(self, pick: Pick, freed: Callable[[tuple[int, ...]], None]) -> None:
        """Register the holder: `pick(target)` chooses victims, `freed(victims)` releases their PMM leases."""
        def callback(pg: PressureGovernor, pid: int, target: int, deadline: int) -> None:
            victims = pick(target)
            pg.answer(HOLDER, pid, victims, self.now)  # validated: open, current, in time, unpinned + idle
            freed(victims)

        self.pg.register_callback(HOLDER, callback)

    def defer(self, note: Callable[[int], None]) -> None:
        """Register a holder that answers later (at its next Run boundary): `note(pressure id)` records it."""
        self.pg.register_callback(HOLDER, lambda pg, pid, target, deadline: note(pid))

    # --- the requester's side ------------------------------------------------

    def press(self, target: int, priority: int = 0, window: int = 0) -> int:
        """Open and deliver a pressure ticket due `window` ticks from now; returns its id (it may stay open)."""
        self.now += 1
        pid = self.pg.press(HOLDER, target, priority, self.now + window)
        self.opened += 1
        return pid

    def answer(self, pid: int, victims: tuple[int, ...]) -> int:
        """A deferred answer from the holder (e.g. at its next Run boundary), at the current tick."""
        released = self.pg.answer(HOLDER, pid, victims, self.now)
        self.answered += 1
        self.credited += released
        return released

    def state(self, pid: int) -> tuple[PressureState, int]:
        p = self.pg.abstract().pressures[pid]
        return p.state, p.released

    def reclaim(self, target: int, priority: int = 0) -> int:
        """Open a pressure ticket for `target` bytes; return the bytes the holder's answer credited (>= 0)."""
        if target <= 0:
            return 0
        pid = self.press(target, priority)  # due this tick: the boundary the requester is at
        state, released = self.state(pid)
        if state is PressureState.OPEN:  # no answer now: credit nothing, force nothing
            self.pg.cancel_pressure(pid)
            return 0
        self.answered += 1
        self.credited += released
        return released
