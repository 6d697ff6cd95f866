"""Negative controls of the transaction guards (C4 C6 I5 I9 I10), on the composed model (issue #21).

Each guard registered with `model="transactions"`, switched off, must yield a
counterexample on the transactions restriction of the composed machine
(`invariants.manager_tx_machine`): in the spec a harm clause of an ID it
protects fails; in the composed `ProcessMemoryManager` refinement against the
intact spec (or an invariant) fails. The explorer finds each on the
restriction's scope (`invariants.manager_scope.TX_SCOPE`, tests/test_pressure_tx_scopes.py).
"""

from __future__ import annotations

import pytest

from invariants.clauses import CLAUSES
from invariants.explore import explore
from invariants.manager_scope import TX_SCOPE, manager_model
from invariants.mutation import applied
from refimpl.verify import PROFILES
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.mutants import MUTANTS
from spec.guards import GUARDS, GuardSet, Layer

TX_GUARDS = [g for g in GUARDS if g.model == "transactions"]

#: The harm clause(s) each guard's spec-layer control must violate (issue 9: a control counts only on a harm).
HARM: dict[str, tuple[str, ...]] = {
    "ordered_reservation": ("state_C4_holds.no_circular_holding",),
    "publish_after_all_held": ("state_C4_views.view_over_reserved_bytes",),
    "retry_keeps_identity": ("step_C4_intents.retry_keeps_place",),
    "full_abort": ("step_I5_abort.abort_leaves_no_charge",),
    "poisoned_manager_refuses": ("step_I5_poisoned.poisoned_grants_nothing",),
    "current_generation": ("state_C6_views.no_stale_view_read",),
    "remap_when_idle": ("step_I9_views.remap_fences_users",),
    "atomic_bundle": ("step_I10_manager.bundle_moves_with_its_leases",),
}


def test_every_tx_guard_names_its_harm() -> None:
    assert set(HARM) == {g.name for g in TX_GUARDS}
    assert all(CLAUSES[k].id in next(g for g in TX_GUARDS if g.name == name).ids
               for name, ks in HARM.items() for k in ks)


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", TX_GUARDS, ids=lambda g: g.name)
def test_tx_negative_control_finds_counterexample(guard, layer) -> None:
    r = CHECKERS["transactions"].control(guard, layer, PROFILES["quick"])  # 200 examples of 30 steps, no shrink
    assert r.found, r.message
    if layer is Layer.SPEC:
        assert set(HARM[guard.name]) & {r.clause, *r.clauses}, r.message  # the harm, not the guard restated
    else:
        assert r.violated != "refinement:error-type", r.message
    assert r.steps and r.steps == len(r.counterexample)


def test_tx_checker_control_runs_on_the_composed_restriction() -> None:
    g = next(g for g in TX_GUARDS if g.name == "atomic_bundle")
    r = CHECKERS["transactions"].control(g, Layer.SPEC, PROFILES["quick"])
    assert r.found and r.violated == "I10" and r.clause == "step_I10_manager.bundle_moves_with_its_leases"
    assert any(a.startswith("CommitTx(") for a in r.counterexample), r.counterexample


def test_tx_checker_control_finds_a_commit_that_keeps_its_execution() -> None:
    # In a verify run this mutant is the only control that makes C6's users_are_running fail; the steered rule
    # `own_view` (a transaction runs on its own view, then commits) builds its situation in every few examples.
    m = MUTANTS["commit_keeps_users"]
    with applied(m):
        r = CHECKERS["transactions"].control(m, m.layer, PROFILES["quick"])
    assert r.found and "state_C6_views.users_are_running" in {r.clause, *r.clauses}, r.message
    assert any(a.startswith("CommitTx(") for a in r.counterexample), r.counterexample


@pytest.mark.parametrize("guard", TX_GUARDS, ids=lambda g: g.name)
def test_tx_scope_guard_off_reaches_its_harm_clause(guard) -> None:
    r = explore(manager_model(GuardSet.without(guard.name), TX_SCOPE), max_depth=12)
    assert r.found and set(HARM[guard.name]) & set(r.clauses), r.message

