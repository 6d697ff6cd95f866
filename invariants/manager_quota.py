"""Harm clause of the composed manager's process quota per tier (I1: "process quota used = live leases +
delegation slices"; section 3: the manager "enforces the worker's quota"), and the quota-aware room the I13
clauses read.

The bytes a tier charges are read here from its canonical authorities' `used` (never from `spec.quota`, the
guard's own reading): after a step that charged a tier (its `used` rose; RecordCommitted excepted, which records
bytes taken outside, as it may pass a limit) or that set its quota, the tier's charge is within its quota. Reads
spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.clauses import clause
from spec import ledger_actions as A
from spec import manager_actions as M

__all__ = ["step_I1_quota", "room"]

_I1_QUOTA = clause("I1", "step_I1_quota", "tier_charge_within_quota",
                   "after a step that charged a tier or set its process quota, the bytes its authorities charge "
                   "together are within that quota: a grant past it takes memory the process was not given (the "
                   "worker's quota is the manager's to enforce)")


def _charged(m: M.Manager) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for a in m.ledger.authorities.values():
        if a.alias_of is None:
            out[a.tier] = out.get(a.tier, 0) + a.used
    return out


def room(m: M.Manager, a: Any) -> int:
    """What a new charge on canonical authority `a` may take: its free bytes, and its tier's quota left."""
    q = m.quotas.get(a.tier)
    return a.limit - a.used if q is None else min(a.limit - a.used, q - _charged(m).get(a.tier, 0))


def step_I1_quota(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    if not _I1_QUOTA.case(bool(after.quotas)):
        return
    was, now = _charged(before), _charged(after)
    for tier, q in after.quotas.items():
        charged = now.get(tier, 0)
        judged = (charged > was.get(tier, 0) and not isinstance(act, A.RecordCommitted)
                  or before.quotas.get(tier) != q)
        if judged and charged > q:
            _I1_QUOTA.fail(f"{act!r}: tier {tier.value} charges {charged} B against its {q} B process quota")
