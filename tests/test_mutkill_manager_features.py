"""invariants/manager_features.py pinned (its mutation run, benchmarks/mutation.py): how many accepted steps reach
each named situation, pinned whole, on small complete scopes (and the parts scope cut at depth 5) that together
reach every situation; a predicate reading more or less changes a count. Cheapest scope first (each well under
3 s). The quick scopes' own run (tests/test_explore_scopes.py, 35 s) is left out of the mutation run."""

from __future__ import annotations

import attrs
import pytest

from invariants.explore import explore
from invariants.manager_features import FEATURES, counting_features, features
from invariants.manager_scope import ARBITRATION_SCOPE, PARTS_SCOPE, QUOTA_SCOPE, VIEW_SCOPE, manager_model
from spec.guards import ALL_ON

SCOPES = {
    "views": (VIEW_SCOPE, 10**6),
    "overtaking": (attrs.evolve(ARBITRATION_SCOPE, priorities=(0,), tickets=4, allowances=0), 10**6),
    "parts": (PARTS_SCOPE, 5),
    "priorities": (attrs.evolve(ARBITRATION_SCOPE, aging_bound=2, tickets=3, capacities=(2,), nbytes=(1, 2)),
                   10**6),
    "quota": (QUOTA_SCOPE, 10**6),
}

#: scope -> (states, the counts of the situations reached; every other situation counts 0).
EXPECTED: dict[str, tuple[int, dict[str, int]]] = {
    'views': (871, {
        'transaction committed on a shared authority': 192,
        'device lost under a part': 540,
        "committed transaction's view remapped": 93,
        "committed transaction's view bound by a later one": 64,
        'bound view invalidated by a device loss': 64,
    }),
    'overtaking': (805, {
        'aging bound reached': 146,
        'aging bound passed': 36,
        'matured misfit granted after capacity returns': 59,
        'overtaken twice': 2,
        'ticket claimed on a shared authority': 246,
    }),
    'parts': (4496, {
        'aging bound reached': 132,
        'matured misfit granted after capacity returns': 40,
        'transaction committed on a shared authority': 124,
        'ticket claimed on a shared authority': 344,
        'pressure answered on a shared authority': 292,
        'limit lowered on a shared authority': 176,
        'device lost under a part': 1572,
        'alias lease on a shared authority': 160,
        'lease shrink grants a waiter': 108,
    }),
    'priorities': (1849, {
        'two priorities arbitrated': 250,
        'aging bound reached': 1160,
        'matured misfit granted after capacity returns': 990,
        'ticket claimed on a shared authority': 200,
        'allowance mapped on a shared authority': 360,
    }),
    'quota': (3572, {
        'aging bound reached': 574,
        'aging bound passed': 152,
        'matured misfit granted after capacity returns': 296,
        'transaction committed on a shared authority': 320,
        'ticket claimed on a shared authority': 380,
        'process quota holds a waiter its ledger has room for': 2305,
        'quota raised or removed grants a waiter': 746,
        'quota room credited on another ledger grants a waiter': 445,
    }),
}


def _counts(name: str) -> tuple[int, dict[str, int]]:
    scope, depth = SCOPES[name]
    model, counts = counting_features(manager_model(ALL_ON, scope, symmetry=True, name=name))
    r = explore(model, max_depth=depth, max_states=1_000_000)
    assert not r.found
    return r.states, counts


@pytest.mark.parametrize("name", list(SCOPES))
def test_each_situation_counted_exactly(name):
    states, counts = _counts(name)
    assert list(counts) == list(FEATURES)
    assert (states, {k: v for k, v in counts.items() if v}) == EXPECTED[name]


def test_together_the_scopes_reach_every_situation():
    reached = {k for _, c in EXPECTED.values() for k in c}
    assert reached == set(FEATURES)


def test_features_names_every_situation_a_step_reaches():
    calls = []
    model = manager_model(ALL_ON, SCOPES["views"][0], symmetry=True, name="views")
    counted, counts = counting_features(attrs.evolve(model, check_step=lambda b, a, t: calls.append((b, a, t))))
    explore(counted, max_depth=4, max_states=1_000_000)
    assert calls and sum(counts.values()) == sum(len(features(*c)) for c in calls)
    assert [n for n in FEATURES if n in features(*calls[-1])] == features(*calls[-1])
