"""Symmetry reduction (`invariants.explore_symmetry`): one state per orbit, the same verdicts as without it.

The soundness argument is in that module's docstring; these tests check its consequences on whole scopes:
the reduced exploration keeps exactly one state per orbit of the unreduced reachable set, every guard's
control is found with symmetry on at the unreduced counterexample's length and ID, and every guard on
stays "no violation". I13, I6, C3 ...: see each control's guard in `spec.guards`.
"""

from __future__ import annotations

import attrs
import pytest

from invariants.explore import explore
from invariants.explore_parallel import explore_parallel
from invariants.explore_symmetry import manager_symmetry
from invariants.ledger_scope import CONTROL_SCOPE as LEDGER_CONTROL
from invariants.ledger_scope import ledger_model
from invariants.liveness import build_graph
from invariants.manager_scope import CONTROLS, PARTS_SCOPE, ManagerScope, manager_model
from spec.guards import ALL_ON, GUARDS, GuardSet

_SMALL = attrs.evolve(PARTS_SCOPE, pressures=0, limits=False)  # two holders; small enough to enumerate twice
_TWIN = ManagerScope(capacities=(2, 2), holders=2, tickets=1, pressures=0, txs=1, needs=(((1, 1),), ((2, 1),)),
                     bundles=0, losses=False, limits=False)  # two interchangeable authorities too
_PARTS = attrs.evolve(PARTS_SCOPE, limits=False)  # pressure, a transaction, device loss, an alias lease


def _unmatched(full, key) -> tuple | None:
    """Two states with one key whose successors' keys or depths differ (None: the key is a bisimulation)."""
    by_key: dict = {}
    level = [0]
    for link in full.parent[1:]:
        level.append(level[link[0]] + 1)
    for i, s in enumerate(full.states):
        seen = (frozenset(key(full.states[j]) for _, j in full.edges[i]), level[i])
        first = by_key.setdefault(key(s), (i, seen))
        if first[1] != seen:
            return full.states[first[0]], s
    return None


@pytest.mark.parametrize("scope", [_SMALL, _TWIN, _PARTS], ids=["holders", "holders+authorities", "parts"])
def test_reduced_exploration_keeps_exactly_one_state_per_orbit(scope: ManagerScope) -> None:
    full = build_graph(manager_model(ALL_ON, scope))
    reduced = explore(manager_model(ALL_ON, scope, symmetry=True), max_depth=10**6)
    plain = explore(manager_model(ALL_ON, scope), max_depth=10**6)
    key = manager_symmetry(scope.holders, scope.capacities, scope.needs, scope.limits).key
    orbits = {key(s) for s in full.states}
    assert full.complete and plain.complete and reduced.complete and not reduced.found and not plain.found
    assert plain.states == len(full.states)
    assert reduced.states == len(orbits) < plain.states  # the reduction merges, and only permutations
    assert reduced.diameter == plain.diameter  # a permutation keeps a state's breadth-first depth
    # The key merges only equivalent states (a bisimulation): states with one key have successors with the
    # same keys, and the same depth. A key that forgot a field (a ticket's age) would merge states that differ.
    assert _unmatched(full, key) is None


def test_holders_are_not_interchangeable_where_limits_change() -> None:
    # `PrepareLimit` numbers the pressures it opens in holder id order: permuting holders there merges states
    # whose successors differ. The bisimulation check finds it (so `manager_symmetry` leaves holders alone).
    full = build_graph(manager_model(ALL_ON, attrs.evolve(_PARTS, limits=True)))
    assert _unmatched(full, manager_symmetry(2, _PARTS.capacities, _PARTS.needs, limits=False).key) is not None
    assert manager_symmetry(2, _PARTS.capacities, _PARTS.needs, limits=True).name == "none"


def test_equal_authorities_merge_more_than_holders_alone() -> None:
    full = build_graph(manager_model(ALL_ON, _TWIN))
    both = manager_symmetry(2, (2, 2), _TWIN.needs).key
    holders = manager_symmetry(2, (2, 3), _TWIN.needs).key  # the same holders, no authority group
    assert len({both(s) for s in full.states}) < len({holders(s) for s in full.states}) < len(full.states)


def test_two_equal_authorities_are_permuted_only_where_no_transaction_spans_both() -> None:
    assert manager_symmetry(2, (2, 2), (((1, 1),), ((2, 1),))).name == "2 holders x authorities [1, 2]"
    # The scope offers 1 B on authority 1 and 2 B on authority 2: a swap is no symmetry of the offered actions.
    assert manager_symmetry(2, (2, 2), (((1, 1),), ((2, 2),))).name == "2 holders"
    # A transaction reserves its needs in ascending authority id: a swap is no symmetry then (rule 3).
    assert manager_symmetry(2, (2, 2), (((1, 1), (2, 2)),)).name == "2 holders"
    assert manager_symmetry(2, (2, 3), ()).name == "2 holders"  # unequal capacities differ


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_each_manager_guard_off_is_found_alike_with_symmetry(name: str) -> None:
    off = GuardSet.without(name)
    plain = explore(manager_model(off, CONTROLS[name]), max_depth=6)
    reduced = explore(manager_model(off, CONTROLS[name], symmetry=True), max_depth=6)
    assert plain.found and reduced.found
    assert (reduced.violated, len(reduced.counterexample)) == (plain.violated, len(plain.counterexample))
    assert reduced.states <= plain.states


@pytest.mark.parametrize("g", [g for g in GUARDS if g.model == "ledger"], ids=lambda g: g.name)
def test_each_ledger_guard_off_is_found_alike_with_symmetry(g) -> None:
    off = GuardSet.without(g.name)
    plain = explore(ledger_model(LEDGER_CONTROL, off), max_depth=8)
    reduced = explore(ledger_model(LEDGER_CONTROL, off, symmetry=True), max_depth=8)
    assert plain.found and reduced.found
    assert (reduced.violated, len(reduced.counterexample)) == (plain.violated, len(plain.counterexample))


def test_ledger_every_guard_on_agrees_and_reduces() -> None:
    plain = explore(ledger_model(LEDGER_CONTROL), max_depth=6)
    reduced = explore(ledger_model(LEDGER_CONTROL, symmetry=True), max_depth=6)
    assert not plain.found and not reduced.found and reduced.states < plain.states


def test_parallel_explorer_reduces_as_the_serial_one() -> None:
    serial = explore(manager_model(ALL_ON, _SMALL, symmetry=True), max_depth=10**6)
    par = explore_parallel(manager_model(ALL_ON, _SMALL, symmetry=True), max_depth=10**6, workers=2)
    assert par.complete and (par.states, par.transitions, par.diameter) == (
        serial.states, serial.transitions, serial.diameter)


def test_symmetric_counterexample_replays_to_its_states() -> None:
    r = explore(manager_model(GuardSet.without("grant_charges_ledger"), CONTROLS["grant_charges_ledger"],
                              symmetry=True), max_depth=6)
    assert r.found and len(r.trace) == len(r.counterexample) + 1  # real states, not orbit keys


def test_ledger_holder_key_is_a_bisimulation() -> None:
    from invariants.explore_symmetry import ledger_symmetry
    from invariants.ledger_scope import LedgerScope
    scope = LedgerScope(allocations=1, allowances=1)  # holders registered as it explores; allowances, loss
    full = build_graph(ledger_model(scope))
    reduced = explore(ledger_model(scope, symmetry=True), max_depth=10**6)
    key = ledger_symmetry(scope.holders).key
    assert full.complete and reduced.complete and not reduced.found
    assert reduced.states == len({key(s) for s in full.states}) < len(full.states)
    assert _unmatched(full, key) is None
