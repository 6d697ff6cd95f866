"""Explorer scopes of the pressure and the transactions restrictions of the composed spec (rule R4).

Every guard on: the scope is exhausted to the quick depth with no violation.
Each guard off: breadth-first search finds a shortest counterexample whose
violating step breaks a clause of one of that guard's IDs (the first
violation, or another clause the same step breaks: a partial abort breaks
I1's credit clause before I5's), and replaying it in the spec reaches the
same violation.
"""

from __future__ import annotations

import pytest

from invariants.clauses import CLAUSES
from invariants.explore import explore
from invariants.manager_scope import PRESSURE_SCOPE, TX_SCOPE, manager_model
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.pressure_scripts import SPEC_CANNOT_EXPRESS
from refimpl.verify import PROFILES
from spec.guards import ALL_ON, GUARDS, GuardSet

_QUICK = PROFILES["quick"]
_PRESSURE = [g for g in GUARDS if g.model == "pressure" and g.name not in SPEC_CANNOT_EXPRESS]
_TX = [g for g in GUARDS if g.model == "transactions"]


@pytest.mark.parametrize(("scope", "depth"), [(PRESSURE_SCOPE, _QUICK.explore_depth), (TX_SCOPE, 10**6)],
                         ids=["pressure", "transactions"])
def test_scope_every_guard_on_is_clean_to_its_depth(scope, depth) -> None:
    r = explore(manager_model(ALL_ON, scope), max_depth=depth, max_states=_QUICK.explore_states)
    assert r.exhausted and not r.found and r.states > 1_000, r.message
    assert r.complete or scope is PRESSURE_SCOPE  # the transactions scope: to its fixpoint (3,220 states)


@pytest.mark.parametrize("g", _PRESSURE + _TX, ids=lambda g: g.name)
def test_scope_guard_off_finds_a_clause_of_its_ids(g) -> None:
    r = CHECKERS[g.model].explore(g, _QUICK)
    assert r.found and r.counterexample, r.message
    assert r.clause in r.clauses and all(k in CLAUSES or ":crashed:" in k for k in r.clauses)
    assert any(CLAUSES[k].id in g.ids for k in r.clauses if k in CLAUSES), r.message
    # Shortest: one step shorter, the same search with the guard off finds nothing.
    scope = PRESSURE_SCOPE if g.model == "pressure" else TX_SCOPE
    r = explore(manager_model(GuardSet.without(g.name), scope), max_depth=len(r.counterexample) - 1)
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
