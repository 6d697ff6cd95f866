"""The bounded-exhaustive explorer: exhausts the ledger scope clean, and finds every spec-layer guard.

`verify`'s explorer phase (every scope complete, every guard's control found, the figures in `--json`) is checked
on the quick run `tests/test_verify.py` makes anyway, not on a second run of the same phase here.

Golden files `tests/golden/<guard>.txt` hold the explorer's shortest
counterexample per ledger guard, so a change in detection power shows in
review. Regenerate with `python -m refimpl.cli explore --write-golden`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants._violation import InvariantViolation
from invariants.explore import Model, explore, render_counterexample
from invariants.ledger_scope import CONTROL_SCOPE, QUICK_SCOPE, golden_counterexample, ledger_model
from spec import ledger_actions as A
from spec.guards import GUARDS, GuardSet
from spec.ledger_state import EMPTY

GOLDEN = Path(__file__).parent / "golden"
LEDGER_GUARDS = [g for g in GUARDS if g.model == "ledger"]


def test_explorer_exhausts_quick_scope_without_violation() -> None:
    r = explore(ledger_model(QUICK_SCOPE), max_depth=6)
    assert not r.found, render_counterexample(r)
    # Every state within 6 steps, not a fixpoint: states sit at the cut unexpanded, so "to depth 6", not complete.
    assert r.exhausted and not r.complete and r.depth == r.diameter == 6 and r.coverage == "to depth 6"
    # The figure the scope is known to reach; a change means the scope or the spec changed.
    assert r.states == 4098 and r.transitions > r.states


def test_explorer_deduplicates_states() -> None:
    # Registering holder 1 then the authority, or the other way round, reaches one state.
    r = explore(ledger_model(QUICK_SCOPE), max_depth=2)
    two_step_sequences = r.transitions
    assert r.states < 1 + two_step_sequences


@pytest.mark.parametrize("g", LEDGER_GUARDS, ids=lambda g: g.name)
def test_explorer_finds_each_spec_guard(g) -> None:
    r = explore(ledger_model(CONTROL_SCOPE, GuardSet.without(g.name)), max_depth=8)
    assert r.found and r.violated in g.ids, r.message
    assert 1 <= len(r.counterexample) <= 6


@pytest.mark.parametrize("g", LEDGER_GUARDS, ids=lambda g: g.name)
def test_golden_counterexample_unchanged(g) -> None:
    path = GOLDEN / f"{g.name}.txt"
    assert path.is_file(), "run `python -m refimpl.cli explore --write-golden`"
    assert golden_counterexample(g) == path.read_text(), (
        "the explorer's shortest counterexample changed: review, then `python -m refimpl.cli explore --write-golden`")


def test_every_ledger_guard_has_a_golden_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(g.name for g in LEDGER_GUARDS)


def test_counterexample_is_shortest_and_replays() -> None:
    # Replaying the counterexample with the guard off reaches a state the invariants reject.
    from spec.ledger import step

    off = GuardSet.without("limit_check")
    r = explore(ledger_model(CONTROL_SCOPE, off), max_depth=8)
    s = EMPTY
    for a in r.counterexample:
        s = step(s, a, off)[0]
    with pytest.raises(InvariantViolation, match="I2"):
        from invariants.ledger import check_all

        check_all(s)
    assert [type(a) for a in r.counterexample][-1] is A.Reserve
    assert explore(ledger_model(CONTROL_SCOPE, off), max_depth=len(r.counterexample) - 1).found is False


def _counter_model(limit: int) -> Model:
    # A toy model: a counter that may count up to 3; the invariant says it stays <= limit.
    def check(s: int) -> None:
        if s > limit:
            raise InvariantViolation("TOY", f"counter {s} > {limit}")

    def step(s: int, a: int) -> int:
        if s + a > 3:
            raise ValueError("refused")
        return s + a

    return Model("toy", 0, step, lambda s: (1, 2), check, lambda p, a, n: None, rejects=(ValueError,))


def test_explorer_is_generic_over_models() -> None:
    clean = explore(_counter_model(3), max_depth=10)
    assert not clean.found and clean.states == 4 and clean.complete
    assert clean.diameter == 2 and clean.coverage == "complete, diameter 2"
    bad = explore(_counter_model(1), max_depth=10)
    assert bad.violated == "TOY" and bad.counterexample == (2,)


def test_state_bound_is_reported() -> None:
    r = explore(_counter_model(3), max_depth=10, max_states=2)
    assert r.states == 2 and not r.complete and r.bound_hit and r.coverage.startswith("state bound hit")


def test_depth_cut_short_of_the_fixpoint_is_not_complete() -> None:
    # The toy's fixpoint is at depth 2 (states 0..3): cut at 1, states at depth 1 stay unexpanded.
    r = explore(_counter_model(3), max_depth=1)
    assert (r.states, r.complete, r.exhausted, r.coverage) == (3, False, True, "to depth 1")
    whole = explore(_counter_model(3), max_depth=2)
    assert not whole.complete and whole.states == 4  # depth-2 states were not expanded: not known to be all
    assert explore(_counter_model(3), max_depth=3).complete


def test_parallel_explorer_calls_only_a_fixpoint_complete() -> None:
    from invariants.explore_parallel import explore_parallel
    whole = explore_parallel(_counter_model(3), max_depth=3, workers=2)
    assert (whole.states, whole.complete, whole.diameter, whole.coverage) == (4, True, 2, "complete, diameter 2")
    for depth in (1, 2):  # the states at the cut were not expanded: not known to be all
        cut = explore_parallel(_counter_model(3), max_depth=depth, workers=2)
        assert not cut.complete and cut.exhausted and cut.coverage == f"to depth {depth}"


def test_invalid_initial_state_rejected_at_depth_zero() -> None:
    r = explore(_counter_model(-1), max_depth=3)
    assert r.violated == "TOY" and r.counterexample == () and r.transitions == 0


