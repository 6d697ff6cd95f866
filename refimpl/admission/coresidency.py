"""Models sharing one device (I12): retire before evict, pinned models stay resident.

The device is an authority of the `ProcessMemoryManager`: a resident model
is a weights lease of the scheduler's holder (pinned ones from the start),
a load reserves it, an eviction releases it, and the free room is the
authority's snapshot. The scheduler keeps each model's size, pin, serve
flag, pending work and lease id; residency is read from the ledger.
"""

from __future__ import annotations

from typing import Any

import immutables

from refimpl.admission.seat import LedgerSeat, positive, resolve_authority
from refimpl.manager import ProcessMemoryManager
from spec import admission as S
from spec.errors import BudgetBelowFloor, CapacityDenied, InvalidArgument, InvalidTransition
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import Allocation
from spec.types import Role, Tier

__all__ = ["CoResidencyScheduler"]

# A model's row: [size, pinned, lease id (None: not resident), served since loaded, pending requests]
_SIZE, _PIN, _LEASE, _SERVED, _WORK = range(5)


class CoResidencyScheduler:
    """Models sharing one device authority: retire before evict, pinned stay resident (I12)."""

    def __init__(self, capacity: int | None, models: dict[str, tuple[int, bool]], guards: GuardSet = ALL_ON, *,
                 pmm: ProcessMemoryManager | None = None, auth: int | None = None) -> None:
        if capacity is not None:
            positive(capacity, "capacity")
        for size, _ in models.values():
            positive(size, "size")
        pmm, auth, limit = resolve_authority(pmm, auth, capacity, "coresidency", Tier.DEVICE)
        # Verify the configuration: pinned models plus the largest unpinned one fit (I12).
        pinned = sum(size for size, p in models.values() if p)
        largest = max((size for size, p in models.values() if not p), default=0)
        if pinned + largest > limit:
            raise BudgetBelowFloor(f"pinned {pinned} + largest unpinned {largest} > capacity {limit}")
        self.seat, self.guards = LedgerSeat(pmm, auth, "coresidency"), guards
        self._rows: dict[str, list[Any]] = {n: [size, p, None, False, 0] for n, (size, p) in models.items()}
        for row in self._rows.values():
            if row[_PIN]:
                row[_LEASE] = self.seat.lease(row[_SIZE], Role.WEIGHTS)

    @property
    def capacity(self) -> int:
        return self.seat.limit()

    def execute(self, a: Any) -> Any:
        if not isinstance(a, (S.Want, S.Load, S.Evict, S.Serve)):
            raise InvalidArgument(f"not a co-residency action: {a!r}")
        if type(a.model) is not str or a.model not in self._rows:
            raise InvalidArgument(f"no model {a.model!r}")
        row = self._rows[a.model]
        size, pinned, lease, served, work = row
        resident = lease is not None
        if isinstance(a, S.Want):
            row[_WORK] += 1
        elif isinstance(a, S.Load):
            if resident or not work:
                raise InvalidTransition(f"{a.model}: load needs a non-resident model with work")
            free = self.seat.free()
            if size > free:
                raise CapacityDenied(f"{a.model}: {size} B asked, {free} B free")
            row[_LEASE], row[_SERVED] = self.seat.lease(size, Role.WEIGHTS), False
        elif isinstance(a, S.Serve):
            if not resident or not work:
                raise InvalidTransition(f"{a.model}: serve needs a resident model with work")
            row[_WORK] -= 1
            row[_SERVED] = True
        else:
            if not resident or pinned:
                raise InvalidTransition(f"{a.model}: only a resident, unpinned model can be evicted")
            if self.guards.on("retire_before_evict"):  # I12
                free = self.seat.free()
                if not served:
                    raise InvalidTransition(f"{a.model} has not served since it was loaded")
                if not any(r[_LEASE] is None and r[_WORK] and r[_SIZE] > free for r in self._rows.values()):
                    raise InvalidTransition(f"no pending model needs {a.model}'s room")
            self.seat.release(lease)
            row[_LEASE], row[_SERVED] = None, False
        return None

    def abstract(self) -> S.CoState:
        return self._abstract(self.seat.ledger())

    def _abstract(self, ledger: tuple[Allocation, ...]) -> S.CoState:
        live = self.seat.charges(ledger, Role.WEIGHTS)
        return S.CoState(self.seat.limit(), immutables.Map(
            {n: S.ResidentModel(r[_SIZE], r[_PIN], r[_LEASE] in live, r[_SERVED], r[_WORK])
             for n, r in self._rows.items()}))

    def reading(self) -> tuple[S.CoState, int]:
        """The abstraction and what the ledger charges this scheduler's holder, from one reading of the ledger."""
        ledger = self.seat.ledger()
        return self._abstract(ledger), self.seat.charged(ledger)
