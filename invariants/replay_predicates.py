"""Step predicates that only an observed trace can break (registered for the drift check).

The spec's own transitions satisfy them by construction, so the explorer and
the campaign gain nothing from them; a replayed trace substitutes what the
governor *observed* (ledger `used`, allocation charges) into the spec's next
state, and these predicates say which ID a wrong observation breaks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec import ledger_actions as A
from spec.ledger_state import State

from invariants.clauses import clause, conjunction

__all__ = ["STEP_PREDICATES", "step_I2_grant_charges", "check_observed_step"]


_I2_CHARGES = clause("I2", "step_I2_grant_charges", "grant_charged",
                     "no byte is granted without being charged: a reservation holds its bytes of charge and its "
                     "ledger rose by exactly that")


def step_I2_grant_charges(prev: State, act: Any, nxt: State) -> None:
    """A grant charges what it grants: the new reservation holds nbytes of charge, and used rose by nbytes."""
    if not _I2_CHARGES.case(isinstance(act, A.Reserve)):
        return
    new = [r for i, r in nxt.allocations.items() if i not in prev.allocations]
    for r in new:
        before = prev.authorities[r.authority].used if r.authority in prev.authorities else 0
        after = nxt.authorities[r.authority].used
        if r.charge != act.nbytes or after - before != act.nbytes:
            _I2_CHARGES.fail(f"{act!r} was granted but charged {r.charge} B (ledger moved {after - before} B): "
                             "bytes granted without being charged")


STEP_PREDICATES: dict[str, tuple[Callable[[State, Any, State], None], ...]] = {
    "I2": (step_I2_grant_charges,),
}


def check_observed_step(prev: State, act: Any, nxt: State) -> None:
    conjunction(STEP_PREDICATES, prev, act, nxt)
