"""The topology-and-limits part of `ProcessMemoryManager`: changing an authority's limit (C8, I2).

A limit change is one verb, `lower_limit` (C8: prepare -> reclaim -> commit),
made of the spec's two steps. `PrepareLimit` records the target and, when the
ledger's `used` is above it, opens one pressure ticket per holder with a LIVE
lease there (target `used - limit`); `lower_limit` then delivers each ticket
to its holder's callback with no lock held (I7), and each answer is listed in
the change. `CommitLimit` retires the change's open tickets and sets the new
limit only if `used` now fits under it; otherwise the old limit stays (C8: a
lowered limit never leaves `used` above it with the old limit gone). Either
way the outcome lists the completed answers. The steps are no public verbs: a
change left pending between them blocks every other change of that authority
and holds its tickets open; the checkers interleave them through
`refimpl.verify.manager_adapter` (`prepare_limit`, `commit_limit`).
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec.errors import HolderCallbackFailed, InvalidArgument, InvalidBytes, InvalidTransition, TraceSinkFailed
from spec.tickets import PressureState
from spec.types import AllocState
from refimpl.manager.ledger import _nbytes

__all__ = ["Limits"]


class _Change:
    __slots__ = ("target", "completed", "pressures")

    def __init__(self, target: int, pressures: list[int]) -> None:
        self.target = target
        self.completed: list[tuple[int, int]] = []  # (pressure id, bytes released), in answer order
        self.pressures = pressures  # the pressure tickets this change opened


class Limits:
    """Limit changes; needs the ledger part's lookups and the pressure part's `_open`."""

    # The `PrepareLimit` step: returns the pressure tickets it opened (none if used fits).
    def _prepare(self, authority: int, limit: int) -> tuple[int, ...]:
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; its limit is its ledger's")
        self._require_active(a)
        _nbytes(limit, "limit", zero_ok=True)
        if limit > a.capacity:
            raise InvalidBytes(f"authority {a.id}: a {limit} B limit exceeds its {a.capacity} B capacity")
        if a.change is not None:
            raise InvalidTransition(f"authority {a.id} already has a limit change pending")
        opened: list[int] = []
        if a.used > limit:
            holders = sorted({r.holder for r in a.allocs.values() if r.state is AllocState.LIVE})
            opened = [self._open(h, a, a.used - limit, True) for h in holders]
        a.change = _Change(limit, opened)
        return tuple(opened)

    def _commit_step(self, authority: int) -> M.LimitOutcome:
        """The traced `CommitLimit` step (`lower_limit`'s last; the checkers': `manager_adapter.commit_limit`)."""
        return self._run(M.CommitLimit, self._ms_auth0, self._commit_limit, authority)

    def _commit_limit(self, authority: int) -> M.LimitOutcome:
        a = self._auth(authority)
        ch = a.change
        if ch is None:
            raise InvalidTransition(f"authority {a.id} has no limit change pending")
        for pid in ch.pressures:
            r = self._pressures.get(pid)
            if r is not None:
                self._shut_pressure(r, PressureState.CANCELLED)
        a.change = None
        before = a.limit - a.used
        committed = a.used <= ch.target or not self._guards.on("limit_after_reclaim")  # I2: never below used
        if committed:
            a.limit = ch.target
        if a.pending and a.limit - a.used > before:
            self._round(a)  # a raised limit is headroom for the waiters (I13)
        return M.LimitOutcome(committed, a.limit, tuple(ch.completed))

    def lower_limit(self, authority: int, limit: int) -> M.LimitOutcome:
        """Set `authority`'s limit (lower or higher, at most its capacity): prepare, deliver the pressure tickets to
        the holders' callbacks (no lock held, I7), commit. The new limit if `used` then fits, else the old one
        stays (C8); the outcome lists the completed answers either way."""
        prepared: list[tuple[int, ...]] = []  # noted under the lock: the change is ours to commit from here on

        def prepare(*args: Any) -> tuple[int, ...]:
            prepared.append(self._prepare(*args))
            return prepared[0]

        try:
            for pid in self._run(M.PrepareLimit, self._ms_auth0, prepare, authority, limit):
                try:
                    self._deliver(pid)
                except HolderCallbackFailed:
                    pass  # a failing holder answered nothing; its ticket is cancelled and the commit decides
        except BaseException:
            # A KeyboardInterrupt / SystemExit from a callback, or a trace sink raising after the prepare was
            # applied: commit now, so no change stays pending and no pressure ticket open (issue #14).
            if prepared:
                try:
                    self._commit_step(authority)
                except (InvalidTransition, TraceSinkFailed):
                    pass  # the device was lost meanwhile (the loss dropped the change); or committed, its event lost
            raise
        return self._commit_step(authority)
