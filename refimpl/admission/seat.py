"""A holder's seat on one authority of the `ProcessMemoryManager`: where an admission model's bytes live.

The admission models keep no capacity figure and no byte books of their own
(issue #10): every byte they admit is a reservation -> lease of their holder
on one authority, every "fits" decision reads that authority's snapshot
(limit - used), and their refinement mappings read the manager's allocations
by holder and role. A model keeps only which of its leases serves which of
its requests (allocation ids), never what they weigh.
"""

from __future__ import annotations

from spec.errors import InvalidArgument, InvalidBytes
from spec.ledger_state import Allocation
from spec.types import Role, Tier

from refimpl.manager import ProcessMemoryManager

__all__ = ["LedgerSeat", "positive", "resolve_authority"]


def positive(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be a {'non-negative' if zero_ok else 'positive'} int, got {n!r}")
    return n


def resolve_authority(pmm: ProcessMemoryManager | None, auth: int | None, capacity: int | None, pool: str,
                      tier: Tier) -> tuple[ProcessMemoryManager, int, int]:
    """(manager, authority, its limit): the given authority, or one of `capacity` on a fresh manager."""
    if auth is None:
        positive(capacity, "capacity")
        pmm = pmm if pmm is not None else ProcessMemoryManager()
        return pmm, pmm.register_authority(pool, tier, capacity), capacity  # type: ignore[arg-type]
    if pmm is None:
        raise InvalidArgument(f"authority {auth!r} was given without its manager")
    limit = pmm.snapshot(auth).limit  # an unknown authority raises UnknownAuthority here
    if capacity is not None and capacity != limit:
        raise InvalidArgument(f"capacity {capacity!r} differs from authority {auth}'s limit {limit}")
    return pmm, auth, limit


class LedgerSeat:
    """One registered holder on one authority: leases taken and released here, figures read from the ledger."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int, name: str) -> None:
        self.pmm, self.auth = pmm, auth
        snap = pmm.snapshot(auth)
        self.ledger_id = snap.authority  # the canonical ledger (an alias reports it)
        self.tier: Tier = snap.tier
        self.holder = pmm.register_holder(name)

    def limit(self) -> int:
        return self.pmm.snapshot(self.auth).limit

    def free(self) -> int:
        """What the ledger can still grant on this authority: its snapshot's available (limit - used - growth)."""
        return self.pmm.snapshot(self.auth).available

    def lease(self, nbytes: int, role: Role) -> int:
        """Reserve (try-only: refused with CapacityDenied if it does not fit) and commit `nbytes` as a lease."""
        aid = self.pmm.reserve(self.holder, self.auth, self.tier, nbytes, role)
        self.pmm.commit(self.holder, aid, nbytes)
        return aid

    def release(self, aid: int) -> None:
        self.pmm.release(self.holder, aid)

    def ledger(self) -> tuple[Allocation, ...]:
        """This holder's leases (`ProcessMemoryManager.leases`), read once for a whole mapping."""
        return self.pmm.leases(self.holder)

    def charges(self, ledger: tuple[Allocation, ...], role: Role | None = None) -> dict[int, int]:
        """Allocation id -> charge of this holder's allocations on this authority (of `role`, if given)."""
        return {a.id: a.charge for a in ledger if a.authority == self.ledger_id and (role is None or a.role is role)}

    def charged(self, ledger: tuple[Allocation, ...]) -> int:
        """Everything the ledger charges this holder on this authority."""
        return sum(self.charges(ledger).values())
