"""invariants/manager_features.py pinned (its mutation run, benchmarks/mutation.py): how many accepted steps reach
each named situation, pinned whole, on seven small scopes (complete, or cut at a depth) that together reach every
situation, so a predicate reading more or less changes a count; cheapest scope first (about a second each at most).
The quick scopes' own run
(tests/test_explore_scopes.py, 35 s) is left out of the mutation run."""

from __future__ import annotations

import attrs
import pytest

from invariants.explore import explore
from invariants.manager_features import FEATURES, counting_features, features
from invariants.manager_scope import ARBITRATION_SCOPE, PARTS_SCOPE, QUOTA_SCOPE, VIEW_SCOPE, manager_model
from spec.guards import ALL_ON

SCOPES = {
    # two leases through the alias and nothing else: the second is taken where only the first acts (not shared)
    "alias": (attrs.evolve(PARTS_SCOPE, tickets=0, pressures=0, txs=0, alias_leases=2, limits=False, losses=False,
                           shrinks=False, grows=False), 10**6),
    "aging": (attrs.evolve(ARBITRATION_SCOPE, priorities=(0,), aging_bound=1, tickets=3, allowances=0), 10**6),
    "views": (VIEW_SCOPE, 10**6),
    "overtaking": (attrs.evolve(ARBITRATION_SCOPE, priorities=(0,), tickets=4, allowances=0), 10**6),
    "parts": (PARTS_SCOPE, 4),
    "priorities": (attrs.evolve(ARBITRATION_SCOPE, aging_bound=2, tickets=3, capacities=(2,), nbytes=(1, 2)), 6),
    "quota": (QUOTA_SCOPE, 6),
}

#: scope -> (states, the counts of the situations reached; every other situation counts 0).
EXPECTED: dict[str, tuple[int, dict[str, int]]] = {
    'alias': (17, {}),
    'aging': (120, {
        'aging bound reached': 36,
        'aging bound passed': 27,
        'matured misfit granted after capacity returns': 57,
        'ticket claimed on a shared authority': 22,
    }),
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
    'parts': (1802, {
        'aging bound reached': 32,
        'matured misfit granted after capacity returns': 4,
        'transaction committed on a shared authority': 20,
        'ticket claimed on a shared authority': 88,
        'pressure answered on a shared authority': 64,
        'limit lowered on a shared authority': 40,
        'device lost under a part': 456,
        'alias lease on a shared authority': 96,
        'lease shrink grants a waiter': 32,
    }),
    'priorities': (1365, {
        'two priorities arbitrated': 180,
        'aging bound reached': 876,
        'matured misfit granted after capacity returns': 574,
        'ticket claimed on a shared authority': 68,
        'allowance mapped on a shared authority': 110,
    }),
    'quota': (1723, {
        'aging bound reached': 158,
        'aging bound passed': 11,
        'matured misfit granted after capacity returns': 39,
        'transaction committed on a shared authority': 117,
        'ticket claimed on a shared authority': 105,
        'process quota holds a waiter its ledger has room for': 494,
        'quota raised or removed grants a waiter': 122,
        'quota room credited on another ledger grants a waiter': 88,
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
