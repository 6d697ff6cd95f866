"""Explorer scopes of the pressure restriction and of the parts of the composed spec (rule R4).

Every guard on: the scope is exhausted to the quick depth with no violation.
Each guard off: breadth-first search finds a shortest counterexample that
breaks a clause of one of that guard's IDs, and replaying it in the spec
reaches the same violation.
"""

from __future__ import annotations

import pytest

from invariants.clauses import CLAUSES
from invariants.explore import explore
from invariants.manager_scope import PARTS_SCOPE, PRESSURE_SCOPE, manager_model
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.pressure_checker import SPEC_CANNOT_EXPRESS
from refimpl.verify import PROFILES
from spec.guards import ALL_ON, GUARDS, GuardSet

_QUICK = PROFILES["quick"]
_PRESSURE = [g for g in GUARDS if g.model == "pressure" and g.name not in SPEC_CANNOT_EXPRESS]
#: Transaction guards whose harm the composed spec's views scope does not reach yet (their scope is h-txguards').
_TX_PENDING = {"ordered_reservation", "retry_keeps_identity", "full_abort", "poisoned_manager_refuses", "atomic_bundle"}
_TX = [g for g in GUARDS if g.model == "transactions" and g.name not in _TX_PENDING]


@pytest.mark.parametrize("scope", [PRESSURE_SCOPE, PARTS_SCOPE], ids=["pressure", "parts"])
def test_scope_every_guard_on_is_clean_to_its_depth(scope) -> None:
    r = explore(manager_model(ALL_ON, scope), max_depth=_QUICK.explore_depth, max_states=_QUICK.explore_states)
    assert r.exhausted and not r.found and r.states > 1_000, r.message


@pytest.mark.parametrize("g", _PRESSURE + _TX, ids=lambda g: g.name)
def test_scope_guard_off_finds_a_clause_of_its_ids(g) -> None:
    r = CHECKERS[g.model].explore(g, _QUICK)
    assert r.found and r.violated in g.ids and r.counterexample, r.message
    assert r.clause in r.clauses and all(k in CLAUSES or ":crashed:" in k for k in r.clauses)
    assert CLAUSES[r.clause].id in g.ids


@pytest.mark.parametrize("g", _PRESSURE, ids=lambda g: g.name)
def test_pressure_guard_off_counterexample_is_shortest(g) -> None:
    """One step shorter, the same search with the guard off finds nothing."""
    n = len(CHECKERS["pressure"].explore(g, _QUICK).counterexample)
    r = explore(manager_model(GuardSet.without(g.name), PRESSURE_SCOPE), max_depth=n - 1)
    assert not r.found and r.exhausted


def test_unlock_before_callback_has_no_explorer_control() -> None:
    # No spec state to exhaust (the spec has no lock): its deterministic control is a fixed refimpl script.
    g = next(g for g in GUARDS if g.name == "unlock_before_callback")
    r = CHECKERS["pressure"].explore(g, _QUICK)
    assert r.model == "pressure-script" and r.states == 4 and r.found and r.violated == "I7"


def test_checkers_explore_every_guard_on_without_violation() -> None:
    for name in ("pressure", "transactions"):
        r = CHECKERS[name].explore(None, _QUICK)
        assert r.exhausted and not r.found, (name, r.message)
