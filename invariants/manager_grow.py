"""Harm clause of the composed manager's lease grow (I1): a grow charges exactly the bytes its lease gains.

The bytes a grow charges, read from `used`, against the bytes its lease gained, read from the lease's records (not
the handler's `+ nbytes`). A grow is a charge like a TryReserve: that it never passes the limit is
`step_I2_manager.grant_within_limit`, that it never takes headroom from a waiter is
`step_I13_manager.allocator_never_overtakes_a_waiter`, and that a poisoned manager grows nothing is
`step_I5_poisoned.poisoned_grants_nothing`; this clause judges the bytes only. Reads spec values only; never
imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.changed import changes
from invariants.clauses import clause
from spec import manager_actions as M
from spec.types import AllocState

__all__ = ["step_I1_grow"]

_I1_GROW = clause("I1", "step_I1_manager", "grow_charges_what_the_lease_gains",
                  "a lease grow charges its authority exactly the bytes the lease gains, which are the bytes its "
                  "holder asked for, keeps the lease live within its reservation and moves no other charge: a byte "
                  "charged but not leased is lost, one leased but not charged is granted twice")


def step_I1_grow(before: M.Manager, act: Any, after: M.Manager) -> None:
    """Called by `invariants.manager.step_I1_manager` on every accepted step."""
    if not _I1_GROW.case(isinstance(act, M.GrowLease)):
        return
    was, now = before.ledger.allocations, after.ledger.allocations
    p, n = was.get(act.allocation), now.get(act.allocation)
    if p is None or n is None or n.state is not AllocState.LIVE or n.nbytes > n.reserved:
        _I1_GROW.fail(f"{act!r} left no live lease within its reservation: {p!r} -> {n!r}")
        return
    gained = n.nbytes - p.nbytes
    if gained != act.nbytes or n.charge - p.charge != gained:
        _I1_GROW.fail(f"{act!r}: the lease gained {gained} B and {n.charge - p.charge} B of charge for the "
                      f"{act.nbytes} B its holder asked")
    for i, q, r in changes(was, now):
        if i != act.allocation:
            _I1_GROW.fail(f"{act!r} also moved allocation {i}: {q!r} -> {r!r}")
    for aid, a in after.ledger.authorities.items():
        if (charged := a.used - before.ledger.authorities[aid].used) != (gained if aid == p.authority else 0):
            _I1_GROW.fail(f"{act!r}: authority {aid} was charged {charged} B; the lease on authority {p.authority} "
                          f"gained {gained} B")
