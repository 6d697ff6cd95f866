"""Abstract governor state: immutable records in persistent maps.

This is the refinement target: refimpl's ledger mapping
(`refimpl.verify.manager_hooks.abstract_ledger(pmm)`) must produce exactly
this value. Records are frozen attrs classes; maps are `immutables.Map`
(hashable, cheap persistent updates), so states compare by value and can be
deduplicated by an explorer. Terminal allocations and closed allowances are
dropped; the `next_*` counters are the issued-id sets (ids 1 .. next-1).
"""

from __future__ import annotations

import attrs
import immutables

from spec.arith import available, oversubscribed
from spec.errors import UnknownAuthority
from spec.types import AllocState, ContextState, Origin, Role, Tier

__all__ = ["Authority", "Holder", "Allocation", "Allowance", "State", "EMPTY", "Snapshot", "snapshot"]


@attrs.frozen
class Authority:
    """One pool's ledger; an alias (`alias_of` set) owns no ledger and resolves to it."""

    id: int
    pool: str
    tier: Tier
    capacity: int
    limit: int
    alias_of: int | None  # canonical authority this view resolves to; None = canonical
    view: str | None  # name of the unified-memory view (aliases only)
    context: ContextState  # meaningful on canonical authorities only
    # Invariant (I1): used == sum of charges of allocations on this authority; 0 for aliases.
    used: int
    #: The physical device the pool is on, apart from the pool's name (None: not declared). Invariant (C1): at
    #: most one canonical authority per (device, tier), whatever each pool is called.
    device: str | None = attrs.field(default=None, repr=False)  # not in the repr: explored states never declare one


@attrs.frozen
class Holder:
    id: int
    name: str


@attrs.frozen
class Allocation:
    id: int
    authority: int
    holder: int
    tier: Tier
    role: Role
    reserved: int  # bytes the reservation granted (C2: nbytes <= reserved)
    nbytes: int  # bytes of the lease (== reserved while provisional)
    charge: int  # bytes currently charged to the authority
    state: AllocState
    origin: Origin


@attrs.frozen
class Allowance:
    # Invariant (I4b): reserved + mapped <= limit; adds no charge to `used`.
    id: int
    authority: int
    holder: int
    limit: int
    reserved: int
    mapped: int


@attrs.frozen(cache_hash=True)  # hashed again and again by explorers' seen-sets and memo keys; immutable, so safe
class State:
    authorities: immutables.Map = immutables.Map()
    holders: immutables.Map = immutables.Map()
    allocations: immutables.Map = immutables.Map()
    allowances: immutables.Map = immutables.Map()
    next_authority: int = 1
    next_holder: int = 1
    next_allocation: int = 1
    next_allowance: int = 1


EMPTY = State()


@attrs.frozen
class Snapshot:
    """Observability figures for one authority, all as charge (C8, I2)."""

    authority: int
    pool: str
    limit: int
    used: int
    growth_reserved: int  # allowance bytes reserved for growth
    available: int  # max(0, limit - used - growth_reserved)
    oversubscribed: int  # max(0, used - limit)
    allowance_limits: int
    tier: Tier  # the pool's tier: what a holder's reserve on it must name (C2)


def snapshot(state: State, authority: int) -> Snapshot:
    """Figures for one authority's ledger (an alias reports its canonical one), per C8's reading."""
    a = state.authorities.get(authority) if type(authority) is int else None
    if a is None:
        raise UnknownAuthority(f"authority {authority!r} is not registered")
    if a.alias_of is not None:
        a = state.authorities[a.alias_of]
    mine = [w for w in state.allowances.values() if w.authority == a.id]
    growth = sum(w.reserved for w in mine)
    return Snapshot(
        authority=a.id,
        pool=a.pool,
        limit=a.limit,
        used=a.used,
        growth_reserved=growth,
        available=available(a.limit, a.used, growth),
        oversubscribed=oversubscribed(a.used, a.limit),
        allowance_limits=sum(w.limit for w in mine),
        tier=a.tier,
    )
