"""Successor memoization (`invariants.explore_memo`) gives the plain step's outcomes: over every (state, action)
pair of the composed scopes, the memoized next state, result, error type and error message equal
`spec.manager.step`'s; a footprint missing a read part or a write part is caught by that comparison; and the
explorer with memoization counts the same states and finds the same shortest counterexamples. (I1 I2 I6 I13)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from manager_harness import outcome, walk

from invariants.explore import explore
from invariants.explore_memo import FOOTPRINTS, Footprint, FootprintError, MemoStep
from invariants.manager_scope import CONTROL_SCOPE, CONTROLS, QUICK_SCOPE, VIEW_SCOPE, ManagerScope, \
    manager_actions, manager_model, manager_start
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GUARDS, GuardSet

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")


def _first_mismatch(scope: ManagerScope, guards: GuardSet, depth: int,
                    footprints: Mapping[type, Footprint] = FOOTPRINTS) -> tuple[Any, ...] | None:
    """Walk the scope breadth-first by the plain step; the first pair whose memoized outcome differs, else None."""
    def plain(s: Any, a: Any) -> tuple[Any, Any]:
        return MG.step(s, a, guards)

    memo = MemoStep(plain, (GovernorError,), footprints)
    pairs = 0
    for s, act, want in walk(manager_start(scope), lambda s: manager_actions(scope, s), plain, depth):
        pairs += 1
        try:
            got = outcome(memo, s, act)
        except FootprintError as e:
            return (s, act, "footprint", str(e))
        if got != want:
            return (s, act, want, got)
    # Every action the scope offers has a footprint (test_every_scope_action_has_a_footprint): all are memoized.
    assert memo.hits > 0 and memo.misses > 0 and pairs == memo.hits + memo.misses
    return None


def test_every_scope_action_has_a_footprint_and_every_footprint_is_confirmed() -> None:
    """A kind the scopes offer has a footprint (else it is stepped plainly, and the walk's count check fails); a
    footprint for a kind no compared scope offers (SetUse, Reconfigure, ExpirePressure) would be unconfirmed."""
    offered = {type(act) for scope, depth in ((QUICK_SCOPE, 4), (VIEW_SCOPE, 10**6))
               for _, act, _ in walk(manager_start(scope), lambda s, scope=scope: manager_actions(scope, s), MG.step,
                                     depth)}
    assert offered == set(FOOTPRINTS)
    assert {M.TryReserve, M.RemoveAuthority, A.LoseDevice, M.CommitLimit, M.PublishView, M.ExecuteView,
            M.RemapView} <= offered
    for fp in FOOTPRINTS.values():
        assert set(fp.writes) <= set(fp.reads)


def test_memoized_successors_are_the_plain_ones_over_the_quick_scope() -> None:
    assert _first_mismatch(QUICK_SCOPE, ALL_ON, 4) is None


@pytest.mark.parametrize("guard", [None, "publish_after_all_held", "current_generation", "remap_when_idle"])
def test_memoized_successors_are_the_plain_ones_over_the_whole_view_scope(guard: str | None) -> None:
    assert _first_mismatch(VIEW_SCOPE, ALL_ON if guard is None else GuardSet.without(guard), 10**6) is None


@pytest.mark.parametrize("guard", _MANAGER_GUARDS)
def test_memoized_successors_are_the_plain_ones_with_a_guard_off(guard: str) -> None:
    assert _first_mismatch(CONTROL_SCOPE, GuardSet.without(guard), 4) is None


def _without(kind: type, *, read: str | None = None, write: str | None = None) -> dict[type, Footprint]:
    fp = FOOTPRINTS[kind]
    reads = tuple(f for f in fp.reads if f != read)
    writes = tuple(f for f in fp.writes if f not in (read, write))
    return {**FOOTPRINTS, kind: Footprint(reads, writes)}


# Negative controls: a footprint that misses a part the step reads reuses a successor computed on another value of
# that part; one that misses a part the step writes drops the change. Each is caught within the quick scope.
_WRONG = [
    ("Submit without next_ticket read", M.Submit, "next_ticket", None),
    ("Claim without tickets read", M.Claim, "tickets", None),
    ("Release without ledger read", A.Release, "ledger", None),
    ("LoseDevice without txs read", A.LoseDevice, "txs", None),
    ("Answer without changes read", M.Answer, "changes", None),
    ("ReserveTx without ledger read", M.ReserveTx, "ledger", None),
    ("Press without pressures read", M.Press, "pressures", None),
    ("PrepareLimit without changes read", M.PrepareLimit, "changes", None),
    ("Press without next_pressure write", M.Press, None, "next_pressure"),
    ("CommitTx without bundles write", M.CommitTx, None, "bundles"),
    ("JoinBundle without bundles read", M.JoinBundle, "bundles", None),
    ("Submit without tickets write (arbitration)", M.Submit, None, "tickets"),
    # Model views (VIEW_SCOPE): the transaction verbs and device loss end executions and drop or invalidate
    # views; removal is refused while a view pins the authority; each view verb reads the views and transactions.
    ("CommitTx without views write", M.CommitTx, None, "views"),
    ("AbortTx without views write", M.AbortTx, None, "views"),
    ("LoseDevice without views write", A.LoseDevice, None, "views"),
    ("LoseDevice without views read", A.LoseDevice, "views", None),
    ("CommitTx without views read", M.CommitTx, "views", None),
    ("RemoveAuthority without views read", M.RemoveAuthority, "views", None),
    ("PublishView without views read", M.PublishView, "views", None),
    ("PublishView without next_view write", M.PublishView, None, "next_view"),
    ("ExecuteView without txs read", M.ExecuteView, "txs", None),
    ("ExecuteView without views read", M.ExecuteView, "views", None),
    ("RemapView without views read", M.RemapView, "views", None),
]
_VIEW_KINDS = (M.PublishView, M.ExecuteView, M.RemapView)


#: CONTROL_SCOPE opens no bundle: the bundle controls run in a small scope with one.
_BUNDLE_SCOPE = ManagerScope(tickets=1, pressures=1, txs=1, needs=(((1, 1),),), losses=False, limits=False)


@pytest.mark.parametrize(("what", "kind", "read", "write"), _WRONG, ids=[w[0] for w in _WRONG])
def test_a_wrong_footprint_is_caught(what: str, kind: type, read: str | None, write: str | None) -> None:
    scope = _BUNDLE_SCOPE if "bundles" in (read, write) else CONTROL_SCOPE
    if kind in _VIEW_KINDS or "views" in (read, write):
        scope = VIEW_SCOPE
    bad = _first_mismatch(scope, ALL_ON, 10 if scope is VIEW_SCOPE else 4, _without(kind, read=read, write=write))
    assert bad is not None, what
    assert isinstance(bad[1], kind)
    if write is not None:
        assert bad[2] == "footprint" and write in bad[3]


def test_a_footprint_whose_writes_are_not_reads_is_refused() -> None:
    with pytest.raises(ValueError):
        MemoStep(lambda s, a: MG.step(s, a), (GovernorError,), {M.Press: Footprint(("ledger",), ("pressures",))})


def test_a_memoized_rejection_raises_a_fresh_error_of_the_same_type_and_message() -> None:
    memo = MemoStep(lambda s, a: MG.step(s, a), (GovernorError,))
    m = manager_start(QUICK_SCOPE)
    errors = []
    for _ in range(3):
        with pytest.raises(GovernorError) as e:
            memo(m, M.ReserveTx(9))
        errors.append(e.value)
    assert memo.hits == 2 and memo.misses == 1
    assert len({id(e) for e in errors}) == 3 and len({(type(e), str(e)) for e in errors}) == 1


def test_the_explorer_with_memoization_counts_and_finds_what_the_plain_one_does() -> None:
    plain = explore(manager_model(memo=False), max_depth=3)
    memo = explore(manager_model(memo=True), max_depth=3)
    assert (memo.states, memo.transitions, memo.rejected, memo.depth) == \
        (plain.states, plain.transitions, plain.rejected, plain.depth)
    for g, scope in CONTROLS.items():
        want = explore(manager_model(GuardSet.without(g), scope, memo=False), max_depth=8)
        got = explore(manager_model(GuardSet.without(g), scope, memo=True), max_depth=8)
        assert want.found and attrs.evolve(got, seconds=0, cpu_seconds=0, critical_cpu_seconds=0) == \
            attrs.evolve(want, seconds=0, cpu_seconds=0, critical_cpu_seconds=0), g
