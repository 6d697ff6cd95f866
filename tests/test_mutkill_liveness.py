"""What the liveness checkers' mutants (benchmarks/mutation.py) showed test_liveness leaves unstated: the
starvation scope's exact states and steps, each property's exact lasso (prefix and cycle states), the property
and fairness named, and the SCC / fair-cycle / trap searches on small hand-made graphs where a weakened
fairness condition or component test changes the verdict.
"""

from __future__ import annotations

from invariants import manager_starvation as MS


def test_starvation_scope_starts_with_one_holder_and_a_2_byte_device() -> None:
    m = MS.starvation_model().initial.m
    assert MS.starvation_model().initial.watched is None
    assert m.aging_bound == 2 and len(m.ledger.holders) == 1 and not m.tickets
