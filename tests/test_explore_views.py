"""The composed spec's model views explored to a fixpoint (`invariants.manager_scope.VIEW_SCOPE`). (C4 C6 I9)

Every guard on, the scope is complete with no violation and meets each view guard's refusal (a publish before
every need is held, an execution at a stale generation, a remap under an execution); each view guard switched
off is found as a shortest counterexample that breaks its own ID's harm clause, with and without symmetry; and
the explorer's incremental checks flag exactly what the full registries flag over the whole scope.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

import pytest
from clause_harness import verdict

from invariants import manager as IM
from invariants.explore import explore
from invariants.explore_checks import IncrementalChecks
from invariants.manager_scope import COMPLETE_SCOPES, VIEW_SCOPE, manager_actions, manager_model, manager_start
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GUARDS, GuardSet

#: guard -> (its ID, the harm clause its control breaks first, the shortest counterexample's length)
_CONTROLS = {
    "publish_after_all_held": ("C4", "state_C4_views.view_over_reserved_bytes", 2),  # PlanTx, PublishView
    "current_generation": ("C6", "state_C6_views.no_stale_view_read", 5),  # ... RemapView, ExecuteView(gen 1)
    "remap_when_idle": ("I9", "step_I9_views.remap_fences_users", 5),  # ... ExecuteView, RemapView
}
_VIEW_KINDS = (M.PublishView, M.ExecuteView, M.RemapView, M.DropView)


def _walk(guards: GuardSet) -> Iterator[tuple[M.Manager, Any, Any, Any]]:
    """Every (state, action, next state or None, result or error) of the whole view scope, breadth-first."""
    start = manager_start(VIEW_SCOPE)
    seen, frontier = {start}, deque([start])
    while frontier:
        m = frontier.popleft()
        for act in manager_actions(VIEW_SCOPE, m):
            try:
                nxt, result = MG.step(m, act, guards)
            except GovernorError as e:
                yield m, act, None, e
                continue
            yield m, act, nxt, result
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)


def test_the_view_guards_are_the_transaction_guards_with_a_composed_control() -> None:
    assert set(_CONTROLS) == {g.name for g in GUARDS if g.name in _CONTROLS}
    for g in GUARDS:
        if g.name in _CONTROLS:
            assert _CONTROLS[g.name][0] in g.ids


def test_the_view_scope_is_complete_and_meets_each_view_guard() -> None:
    r = explore(manager_model(ALL_ON, VIEW_SCOPE, symmetry=True), max_depth=10**6)
    assert r.complete and not r.found and not r.bound_hit
    assert (r.states, r.transitions, r.diameter) == (871, 3299, 13)  # aborts leave retry intents (C4)
    assert COMPLETE_SCOPES["quick"]["manager_views"] == COMPLETE_SCOPES["thorough"]["manager_views"] == VIEW_SCOPE
    accepted: Counter = Counter()
    refused: Counter = Counter()
    for _, act, nxt, out in _walk(ALL_ON):
        if nxt is None:
            refused[type(act).__name__, type(out).__name__] += 1
        else:
            accepted[type(act).__name__] += 1
    assert all(accepted[k.__name__] > 0 for k in _VIEW_KINDS), accepted
    # Each view guard refuses somewhere in the scope (so its control below switches off a refusal that happens).
    assert refused["PublishView", "InvalidTransition"] > 0  # C4: before every need is held (or published twice)
    assert refused["ExecuteView", "StaleGeneration"] > 0  # C6
    assert refused["RemapView", "ViewInUse"] > 0  # I9
    assert refused["RemapView", "DeviceLost"] > 0 and refused["RemoveAuthority", "ProviderPinned"] > 0  # C3
    assert refused["DropView", "ViewInUse"] > 0  # I9: an execution still binds it


@pytest.mark.parametrize("symmetry", [False, True], ids=["plain", "symmetry"])
@pytest.mark.parametrize("guard", sorted(_CONTROLS))
def test_each_view_guard_off_is_found_on_the_view_scope(guard: str, symmetry: bool) -> None:
    ident, clause, length = _CONTROLS[guard]
    r = explore(manager_model(GuardSet.without(guard), VIEW_SCOPE, symmetry=symmetry), max_depth=8)
    assert r.found and r.violated == ident and r.clause == clause, (r.violated, r.clause, r.message)
    assert len(r.counterexample) == length and isinstance(r.counterexample[-1], _VIEW_KINDS)
    assert len(r.trace) == length + 1  # real states, replayable


@pytest.mark.parametrize("guards", [ALL_ON, *(GuardSet.without(g) for g in sorted(_CONTROLS))],
                         ids=["all_on", *sorted(_CONTROLS)])
def test_incremental_checks_flag_exactly_what_the_full_checks_flag_over_the_view_scope(guards: GuardSet) -> None:
    inc, flagged, n = IncrementalChecks(), 0, 0
    for m, act, nxt, result in _walk(guards):
        if nxt is None:
            continue
        n += 1
        full = (verdict(IM.check_step, m, act, nxt, result), verdict(IM.check_all, nxt))
        assert (verdict(inc.check_step, m, act, nxt, result), verdict(inc.check_state, nxt)) == full, act
        flagged += full != (None, None)
    assert n > 1000 and inc.skipped > 0
    assert (flagged > 0) == (guards != ALL_ON)  # a guard off: its harm occurs in the scope
