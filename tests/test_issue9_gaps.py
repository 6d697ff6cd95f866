"""Issue 9, remaining gaps: clauses no control made fail, and bugs no check caught.

Each test runs what `ortmem verify --quick` runs for one mutation control
(`refimpl.verify._job`, the quick budget) and names the clause that must
fail, so a clause shown able to fail stays shown; plus the harness fix a
spec-layer mutant of an action handler needs.
"""

from __future__ import annotations

import pytest

from invariants.mutation import applied
from refimpl.mutants import MUTANTS
from refimpl.verify import _job
from spec import transactions as ST
from spec import tx_actions as T


def test_applied_repoints_a_handler_table_entry_and_restores_it() -> None:
    original = ST._HANDLERS[T.Release]
    with applied(MUTANTS["release_under_reader"]):
        assert ST._HANDLERS[T.Release] is ST._release is not original  # the table runs the mutated handler
    assert ST._HANDLERS[T.Release] is ST._release is original


#: mutant -> the clause its quick-profile control must make fail (rule R3).
KILLS = {
    "release_under_reader": "state_C6.bound_view_live",
    "execute_on_provisional_view": "state_C6.provisional_view_private",
    "timeout_requeues_grant": "trace_I7.credit_exactly_once",
}


@pytest.mark.parametrize("name", sorted(KILLS))
def test_quick_mutation_control_breaks_its_clause(name: str) -> None:
    r = _job("mutant", name, MUTANTS[name].layer.value, "quick")
    assert r.found, r.message
    assert KILLS[name] in (r.clause, *r.clauses), r.message
