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

The process quota per tier (I1, `spec.quota`; `set_process_quota`) is the second bound over the same bytes:
`_room` is every grant path's "does it fit" (min of the ledger's free bytes and what the tier's quota leaves),
and bytes credited in a tier (or a quota raised or removed) owe a round, in ascending id, to every other waiting
ledger of the tier whose room rose (`_quota_rounds`, after the operation's own rounds: `spec.manager`).
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec.errors import (CapacityDenied, HolderCallbackFailed, InvalidArgument, InvalidBytes, InvalidTransition,
                         TraceSinkFailed)
from spec.tickets import PressureState
from spec.types import AllocState, Tier
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
        _nbytes(limit, "limit", zero_ok=True)  # the argument first, before any state is looked at
        a = self._auth(authority)
        if a.alias_of is not None:
            raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; its limit is its ledger's")
        self._require_active(a)
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

    # --- the process quota per tier (I1; spec.quota) ---------------------------------------------------

    def set_process_quota(self, tier: Tier, nbytes: int | None) -> None:
        """Bound the bytes every canonical ledger of `tier` charges together to `nbytes` (None: no quota).
        Refused below what the tier already charges (CapacityDenied, C8); a raised or removed quota is room for
        the tier's waiters (I13)."""
        self._run(M.SetProcessQuota, self._ms_tier, self._set_quota, tier, nbytes)

    def _ms_tier(self, tier: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        return frozenset(a.id for a in self._auths.values() if a.alias_of is None and a.tier is tier), ()

    def _set_quota(self, tier: Tier, nbytes: int | None) -> None:
        if not isinstance(tier, Tier):
            raise InvalidArgument(f"tier must be a Tier, got {tier!r}")
        left0 = self._left(tier)
        if nbytes is None:
            self._quotas.pop(tier, None)
        else:
            _nbytes(nbytes, "nbytes", zero_ok=True)
            if nbytes < (charged := self._charged(tier)):
                raise CapacityDenied(f"tier {tier.value}: a {nbytes} B process quota is below the {charged} B it "
                                     "charges")
            self._quotas[tier] = nbytes
        if left0 is not None:
            self._quota_rounds(tier, left0, ())

    def _charged(self, tier: Tier) -> int:
        return sum(a.used for a in self._auths.values() if a.alias_of is None and a.tier is tier)

    def _left(self, tier: Tier) -> int | None:
        """What `tier`'s process quota leaves for new charges (negative past it), or None: no quota."""
        q = self._quotas.get(tier)
        return None if q is None else q - self._charged(tier)

    def _room(self, a: Any) -> int:
        """The room for a new charge on canonical ledger `a`: min(its free bytes, its tier's quota left)."""
        left = self._left(a.tier)
        return a.limit - a.used if left is None else min(a.limit - a.used, left)

    def _within_quota(self, a: Any, nbytes: int) -> None:
        """CapacityDenied when `nbytes` more on ledger `a` would carry its tier past its process quota (I1)."""
        left = self._left(a.tier)
        if left is not None and nbytes > left:
            raise CapacityDenied(f"tier {a.tier.value}: {nbytes} B asked, {max(0, left)} B left of its "
                                 f"{self._quotas[a.tier]} B process quota (I1)")

    def _can_fit_quota(self, a: Any, nbytes: int) -> None:
        """CapacityDenied when `nbytes` is more than `a`'s tier quota: the request could never fit (I13)."""
        q = self._quotas.get(a.tier)
        if q is not None and nbytes > q:
            raise CapacityDenied(f"tier {a.tier.value}: {nbytes} B can never fit its {q} B process quota (I1)")

    def _quota_rounds(self, tier: Tier, left0: int, done: Any) -> None:
        """After bytes were credited in `tier` or its quota changed (`left0`: what the quota left before the
        operation; every caller had a quota then), a round in ascending id on every other waiting ledger of the
        tier whose room rose (`spec.manager._quota_rounds`): room now > min(free now, left0) reads room now > left0,
        as room <= free always."""
        for a in sorted((a for a in self._auths.values() if a.pending and a.alias_of is None and a.tier is tier
                         and a.id not in done), key=lambda a: a.id):
            if self._room(a) > left0:
                self._round(a)
