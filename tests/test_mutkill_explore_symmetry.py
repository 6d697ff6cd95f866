"""Survivors of invariants/explore_symmetry.py's mutation run, killed (benchmarks/mutation.py).

Canonical keys of states that differ only by a permutation of holders (authorities) are equal under a symmetry that
permutes them, and keys of states that differ otherwise are not; the trivial group keys a state by itself."""

from __future__ import annotations

import re

import attrs
import immutables
import pytest

from invariants.explore_symmetry import ledger_symmetry, manager_symmetry
from invariants.ledger_scope import LedgerScope, ledger_model
from invariants.liveness import build_graph
from invariants.manager_scope import ManagerScope, manager_start
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from tests.test_explore_symmetry import _rich_state, _variants

_TWIN = ManagerScope(capacities=(2, 2), holders=2, tickets=1, pressures=0, txs=1, needs=(((1, 1),), ((2, 1),)),
                     bundles=0, losses=False, limits=False)
_SWAP = {1: 2, 2: 1}


def _mirror(act: object, holders: bool, authorities: bool) -> object:
    """`act` with holders 1 and 2 swapped (`holders`) and authorities 1 and 2 swapped (`authorities`)."""
    fields = {}
    if holders and hasattr(act, "holder"):
        fields["holder"] = _SWAP.get(act.holder, act.holder)
    if authorities and hasattr(act, "authority"):
        fields["authority"] = _SWAP.get(act.authority, act.authority)
    if authorities and hasattr(act, "needs"):
        fields["needs"] = tuple((_SWAP.get(y, y), n) for y, n in act.needs)
    return attrs.evolve(act, **fields)


_SCRIPT = [M.Submit(1, 1, 1), M.Submit(2, 2, 1), M.PlanTx(1, ((2, 1),)), M.ReserveTx(1), A.OpenAllowance(2, 1, 1),
           M.Press(2, 1, 1, 0, 3)]


def _run(acts: list) -> M.Manager:
    m = manager_start(_TWIN)
    for act in acts:
        m, _ = MG.step(m, act)[:2]
    return m


def _syms() -> dict:
    """Built in each test (a symmetry built at import is built before benchmarks/mutation.py's mutant is active)."""
    return {"both": manager_symmetry(2, (2, 2), _TWIN.needs), "holders": manager_symmetry(2, (2, 3), ()),
            "authorities": manager_symmetry(2, (2, 2), _TWIN.needs, limits=True)}


def test_the_groups_names() -> None:
    assert [s.name for s in _syms().values()] == ["2 holders x authorities [1, 2]", "2 holders", "authorities [1, 2]"]
    assert manager_symmetry(3, (2, 2, 2), ()).name == "3 holders x authorities [1, 2, 3]"
    assert manager_symmetry(1, (2, 3), ()).name == "none" and ledger_symmetry(3).name == "3 holders"
    # a transaction over both, even one the swap maps onto itself, forbids the swap (rule 3)
    assert manager_symmetry(2, (2, 2), (((1, 1), (2, 1)),)).name == "2 holders"
    # one member of a group and an authority beside it (not between): the group stays
    assert manager_symmetry(1, (2, 2, 3), (((2, 1), (3, 1)), ((1, 1), (3, 1)))).name == "authorities [1, 2]"


@pytest.mark.parametrize("holders, authorities, equal", [
    (True, False, {"both", "holders"}), (False, True, {"both", "authorities"}), (True, True, {"both"})])
def test_a_permuted_run_has_the_key_of_the_run_exactly_under_the_groups_that_permute_it(holders, authorities,
                                                                                        equal) -> None:
    s = _run(_SCRIPT)
    t = _run([_mirror(a, holders, authorities) for a in _SCRIPT])
    assert s != t and len(s.tickets) == len(t.tickets) == 2
    assert {n for n, sym in _syms().items() if sym.key(s) == sym.key(t)} == equal


def test_the_trivial_group_keys_a_state_by_itself() -> None:
    s = _run(_SCRIPT)
    assert manager_symmetry(1, (2, 3), ()).key(s) is s
    assert manager_symmetry(2, (2, 2), _TWIN.needs, limits=True).key(s) != s  # two authority perms: an orbit
    g = build_graph(ledger_model(LedgerScope(allocations=1, allowances=0)), max_states=400)
    key = ledger_symmetry(2).key
    one = [x for x in g.states if len(x.holders) <= 1]
    two = [x for x in g.states if len(x.holders) == 2]
    assert one and two and all(key(x) is x for x in one) and all(isinstance(key(x), frozenset) for x in two)
    # two registered holders: the key is the set of both orderings' encodings
    assert all(len(key(x)) in (1, 2) for x in two) and any(len(key(x)) == 2 for x in two)


@pytest.mark.parametrize("part", ["generations", "changes"])
def test_which_authority_a_generation_or_limit_change_is_on_counts(part: str) -> None:
    s = _run([])
    one, two = ({1: 1}, {2: 1}) if part == "generations" else (
        {1: M.LimitChange(1, 1)}, {2: M.LimitChange(2, 1)})
    a, b = (attrs.evolve(s, **{part: immutables.Map(x)}) for x in (one, two))
    assert {n for n, sym in _syms().items() if sym.key(a) == sym.key(b)} == {"both", "authorities"}


def test_which_holder_is_registered_counts() -> None:
    s = _run([])
    a, b = (attrs.evolve(s, ledger=attrs.evolve(s.ledger, holders=s.ledger.holders.delete(h))) for h in (1, 2))
    assert {n for n, sym in _syms().items() if sym.key(a) == sym.key(b)} == {"both", "holders"}


_LABELS = re.compile(r"\.ledger\.holders\[\d+\]\.name$")
_POOLS = re.compile(r"\.ledger\.authorities\[[12]\]\.pool$")
_VARIANTS = [(p, x) for p, x in _variants(_rich_state(), "m") if not _LABELS.search(p)]


@pytest.mark.parametrize("sym", ["holders", "authorities"])
def test_every_component_counts_under_each_group(sym: str) -> None:
    key, base = _syms()[sym].key, _syms()[sym].key(_rich_state())
    same = [p for p, x in _VARIANTS if key(x) == base]
    # pools are labels only of the permuted authorities
    assert same == ([] if sym == "holders" else [p for p, _ in _VARIANTS if _POOLS.search(p)])
