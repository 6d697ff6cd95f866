"""Symmetry reduction (`invariants.explore_symmetry`): one state per orbit, the same verdicts as without it.

The soundness argument is in that module's docstring; these tests check its consequences on whole scopes:
the reduced exploration keeps exactly one state per orbit of the unreduced reachable set, every guard's
control is found with symmetry on at the unreduced counterexample's length and ID, and every guard on
stays "no violation". I13, I6, C3 ...: see each control's guard in `spec.guards`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator

import attrs
import immutables
import pytest

from invariants.explore import explore
from invariants.explore_parallel import explore_parallel
from invariants.explore_symmetry import manager_symmetry
from invariants.ledger_scope import CONTROL_SCOPE as LEDGER_CONTROL
from invariants.ledger_scope import ledger_model
from invariants.liveness import build_graph
from invariants.manager_scope import CONTROLS, PARTS_SCOPE, VIEW_SCOPE, ManagerScope, manager_model, manager_start
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.guards import ALL_ON, GUARDS, GuardSet

_SMALL = attrs.evolve(PARTS_SCOPE, pressures=0, limits=False)  # two holders; small enough to enumerate twice
_TWIN = ManagerScope(capacities=(2, 2), holders=2, tickets=1, pressures=0, txs=1, needs=(((1, 1),), ((2, 1),)),
                     bundles=0, losses=False, limits=False)  # two interchangeable authorities too
_PARTS = attrs.evolve(PARTS_SCOPE, limits=False)  # pressure, a transaction, device loss, an alias lease
#: Two holders' transactions publishing, executing and remapping views (a key without the views merges its 1,924
#: states into 64 orbits, and the bisimulation check below fails).
_VIEWS = attrs.evolve(VIEW_SCOPE, holders=2, removals=False)


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


@pytest.mark.parametrize("scope", [_SMALL, _TWIN, _PARTS, _VIEWS], ids=["holders", "holders+authorities", "parts",
                                                                       "views"])
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
    # Nor where a transaction spans one of them and an authority between them: swapping 1 and 3 would turn "reserve
    # on 1, then on 2" into "reserve on 3 after 2".
    assert manager_symmetry(1, (2, 3, 2), (((1, 1), (2, 1)), ((2, 1), (3, 1)))).name == "none"
    assert manager_symmetry(1, (2, 3, 2, 3), (((1, 1), (4, 1)), ((3, 1), (4, 1)))).name == "authorities [1, 3]"


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


# --- the key encodes every component of the composed state --------------------------------------------------------

def _rich_state() -> "M.Manager":
    """A reachable state of a scope with two interchangeable holders and authorities in which every component of
    `Manager` holds something: a granted and a pending ticket, a pinned lease, a pressure with a deadline, a
    transaction in a bundle that holds its need and binds its published view, an allowance, a limit change and a
    reconfigured authority's generation, an aborted transaction's retry intent, and a tier's process quota."""
    m = manager_start(_TWIN)
    for act in [M.SetProcessQuota(m.ledger.authorities[1].tier, 4), M.Reconfigure(1), M.Submit(1, 1, 1), M.TryReserve(1, 1, 1), M.PlanTx(2, ((2, 1),)), M.ReserveTx(1),
                M.PublishView(1), M.ExecuteView(1, 1, 1), M.Press(1, 1, 1, 0, 5), M.SetUse(1, 2, True, False),
                A.OpenAllowance(2, 2, 1), M.PrepareLimit(2, 1), M.OpenBundle(), M.JoinBundle(1, 1),
                M.Submit(2, 1, 2), M.PlanTx(1, ((1, 1),), 1), M.AbortTx(2)]:
        m = MG.step(m, act)[0]
    return m


def _other(v: object) -> object:
    """A value unlike `v` and unlike any permutation of it (ids outside the scope's 1..2)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 7
    if v is None:
        return 7
    if isinstance(v, enum.Enum):
        return next(x for x in type(v) if x is not v)
    if isinstance(v, str):
        return v + "'"
    assert isinstance(v, tuple), v
    return v[:-1] if v else (7,)


def _variants(v: object, path: str) -> Iterator[tuple[str, object]]:
    """(path, `v` with the one component at that path changed), for every component of `v`, recursively."""
    if attrs.has(type(v)):
        for f in attrs.fields(type(v)):
            for p, x in _variants(getattr(v, f.name), f"{path}.{f.name}"):
                yield p, attrs.evolve(v, **{f.name: x})
    elif isinstance(v, immutables.Map):
        for k in sorted(v):
            yield f"{path}[{k}] dropped", v.delete(k)
            for p, x in _variants(v[k], f"{path}[{k}]"):
                yield p, v.set(k, x)
    else:
        yield path, _other(v)


#: Labels the key drops on purpose (rule 1 of the soundness argument): no step or check reads them but for equality.
_LABELS = re.compile(r"\.ledger\.holders\[\d+\]\.name$|\.ledger\.authorities\[[12]\]\.pool$")
_VARIANTS = [(p, x) for p, x in _variants(_rich_state(), "m") if not _LABELS.search(p)]


@pytest.mark.parametrize(("path", "changed"), _VARIANTS, ids=[p for p, _ in _VARIANTS])
def test_states_that_differ_in_one_component_get_different_keys(path: str, changed: "M.Manager") -> None:
    # A key that leaves a component out (views, use flags, generations, a pressure's deadline) merges states
    # whose futures differ, and the explorer then never expands the second one.
    key = manager_symmetry(_TWIN.holders, _TWIN.capacities, _TWIN.needs).key
    assert manager_symmetry(_TWIN.holders, _TWIN.capacities, _TWIN.needs).name == "2 holders x authorities [1, 2]"
    assert key(changed) != key(_rich_state()), path


def test_the_component_walk_sees_every_field_of_the_composed_state() -> None:
    # Negative control of the walk itself: each Manager field, and each record kind's fields, is varied.
    paths = {p for p, _ in _VARIANTS}
    for f in attrs.fields(M.Manager):
        assert any(p.startswith(f"m.{f.name}") for p in paths), f.name
    for kind, field in [(M.Ticket, "tickets[1]"), (M.Pressure, "pressures[1]"), (M.Tx, "txs[1]"),
                        (M.View, "views[1]"), (M.Bundle, "bundles[1]"), (M.LimitChange, "changes[2]"),
                        (M.Intent, "intents[2]")]:
        for f in attrs.fields(kind):
            assert f"m.{field}.{f.name}" in paths, (kind.__name__, f.name)
