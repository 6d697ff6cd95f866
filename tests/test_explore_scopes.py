"""The composed spec's complete scopes: every reachable state, and every situation issue #26 names reached.

`invariants.manager_scope.COMPLETE_SCOPES["quick"]` is what `ortmem verify --quick` exhausts; a complete run
says nothing about a situation it never reaches, so each named one (`invariants.manager_features`) must be
counted at least once, with the count printed. I13 (priorities, aging, overtaking), I1, I6, C3, C4, I4b.
"""

from __future__ import annotations

import attrs

from invariants.explore import explore
from invariants.manager_features import FEATURES, counting_features
from invariants.manager_scope import ARBITRATION_SCOPE, COMPLETE_SCOPES, manager_model
from spec.guards import ALL_ON


def _exhaust(scope, name: str):
    model, counts = counting_features(manager_model(ALL_ON, scope, symmetry=True, name=name))
    return explore(model, max_depth=10**6, max_states=1_000_000), counts


def test_quick_scopes_are_complete_and_reach_every_named_situation() -> None:
    total = dict.fromkeys(FEATURES, 0)
    for name, scope in COMPLETE_SCOPES["quick"].items():
        r, counts = _exhaust(scope, name)
        print(f"{name}: {r.states} states, {r.transitions} transitions, {r.coverage}, {r.seconds:.1f} s")
        assert r.complete and not r.found and not r.bound_hit, (name, r.coverage, r.message)
        total = {k: total[k] + counts[k] for k in total}
    print("situations reached (accepted steps):", total)
    assert [k for k, v in total.items() if v == 0] == []


def test_a_scope_without_the_situation_counts_zero() -> None:
    # Negative control of the counter: one priority and an aging bound no ticket reaches (four tickets, so at
    # most a few rounds) leave the arbitration situations at 0 while the others are still counted.
    scope = attrs.evolve(ARBITRATION_SCOPE, priorities=(0,), aging_bound=9, tickets=3, allowances=0)
    r, counts = _exhaust(scope, "no aging")
    assert r.complete
    assert counts["two priorities arbitrated"] == counts["aging bound reached"] == 0
    assert counts["aging bound passed"] == counts["matured misfit granted after capacity returns"] == 0
    assert counts["lease shrink grants a waiter"] == 0  # the arbitration scope offers no ShrinkLease
    assert counts["ticket claimed on a shared authority"] > 0


def test_a_view_scope_without_remaps_counts_no_remap() -> None:
    # Negative control of the view situations: a cap of generation 1 offers no RemapView, so no remap is counted
    # while views are still bound after a commit and invalidated by a loss.
    from invariants.manager_scope import VIEW_SCOPE
    r, counts = _exhaust(attrs.evolve(VIEW_SCOPE, views=1), "views, no remap")
    assert r.complete and counts["committed transaction's view remapped"] == 0
    assert counts["committed transaction's view bound by a later one"] > 0
    assert counts["bound view invalidated by a device loss"] > 0
