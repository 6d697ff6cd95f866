"""The process-wide per-tier quota (design I1 "process quota used = live leases + delegation slices"; section 3:
the manager "enforces the worker's quota"): a second bound over the same bytes as the authorities' limits.

`Manager.quotas` maps a tier to its quota in bytes (absent: no quota). The bytes charged in a tier are the `used`
of its canonical authorities (an alias charges its canonical ledger). The room for a new charge on an authority is
`headroom`: the smaller of its own free bytes and what the tier's quota leaves; every grant path that asks "does
it fit" asks this (Reserve, a ticket's grant and the rounds, TryReserve, GrowLease, ReserveTx). RecordCommitted
(bytes committed outside) is recorded, not admitted: it may carry a tier past its quota, as past a limit.

No I/O, no clock, no threads, no numpy.
"""

from __future__ import annotations

from typing import Any

from spec.errors import CapacityDenied
from spec.guards import GuardSet
from spec.ledger_state import Authority
from spec.types import Tier

__all__ = ["tier_charged", "quota_left", "headroom", "check_quota"]


def tier_charged(ledger: Any, tier: Tier) -> int:
    """The bytes charged in `tier`: the `used` of its canonical authorities."""
    return sum(a.used for a in ledger.authorities.values() if a.alias_of is None and a.tier is tier)


def quota_left(quotas: Any, ledger: Any, tier: Tier) -> int | None:
    """What `tier`'s quota leaves for new charges (negative past it), or None when the tier has no quota.
    `quotas` is a `Manager.quotas` map (every caller passes one)."""
    q = quotas.get(tier)
    return None if q is None else q - tier_charged(ledger, tier)


def headroom(quotas: Any, ledger: Any, a: Authority) -> int:
    """The room for a new charge on canonical authority `a`: min(its free bytes, its tier's quota left)."""
    left = quota_left(quotas, ledger, a.tier)
    return a.limit - a.used if left is None else min(a.limit - a.used, left)


def check_quota(quotas: Any, ledger: Any, a: Authority, nbytes: int, guards: GuardSet) -> None:
    """CapacityDenied (site "quota") when `nbytes` more on canonical `a` would carry its tier past its quota."""
    left = quota_left(quotas, ledger, a.tier)
    # Verify no grant carries a tier's charge past the process quota (I1: process quota used = live leases).
    if left is not None and nbytes > left:
        guards.refuse("quota", CapacityDenied(f"tier {a.tier.value}: {nbytes} B asked, {max(0, left)} B left of "
                                              f"its {quotas[a.tier]} B process quota (I1)"))
