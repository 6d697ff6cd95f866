"""invariants/explore.py pinned (its mutation run, benchmarks/mutation.py): breadth-first exploration of a toy
counter scope whose figures are worked out by hand: states, transitions, refusals, depth and diameter; a fixpoint
is "complete", a depth-cut or state-bounded search never is; a violation's shortest counterexample, its states and
every clause it breaks; the rendered counterexample whole."""

from __future__ import annotations

import gc
import inspect
import time
from typing import Any

import pytest

from invariants import explore as E
from invariants._violation import InvariantViolation
from invariants.clauses import Clause, conjunction
from invariants.explore import ExploreResult, Model, explore, no_cyclic_gc, render_counterexample, replay_states

TOP = 5
# Not registered in invariants.clauses.CLAUSES: a toy's clauses must not join the catalog.
NOT_AT = Clause("T", "state_T", "not_at", "the state is not the forbidden one")
NO_JUMP = Clause("T", "step_T", "no_jump", "no step of +2 into the forbidden state")
FROM = Clause("T", "step_U", "from", "no step of +2 into the forbidden state, judged from where it starts")


def step(s: int, a: Any) -> int:
    if a == "x":
        raise KeyError("never enabled")
    if s + a > TOP:
        raise ValueError("past the top")
    return s + a


def counter(bad: int | None = None, jump: int | None = None, calls: list | None = None, **kw: Any) -> Model:
    """States 0..5, actions +1 and +2 (refused past 5) and "x" (always refused): 9 steps, 9 refusals."""
    def state_T(s: int) -> None:
        if calls is not None:
            calls.append(s)
        if NOT_AT.case(s == bad):
            NOT_AT.fail(f"at {s}")

    def step_T(p: int, a: Any, n: int) -> None:
        if NO_JUMP.case(a == 2 and n == jump):
            NO_JUMP.fail(f"{p} jumps to {n}")

    def step_U(p: int, a: Any, n: int) -> None:  # fails with step_T, on what it is handed
        if FROM.case(a == 2 and p == jump - 2 and n == jump):
            FROM.fail(f"from {p}")
    return Model("counter", 0, step, lambda s: (1, 2, "x"), lambda s: conjunction({"T": (state_T,)}, s),
                 lambda p, a, n: conjunction({"T": (step_T, step_U) if jump else (step_T,)}, p, a, n),
                 rejects=(KeyError, ValueError), **kw)


def test_a_fixpoint_is_complete_and_counts_every_state_step_and_refusal() -> None:
    calls: list[int] = []
    t0, c0 = time.perf_counter(), time.process_time()
    r = explore(counter(calls=calls), max_depth=10)
    assert 0 <= r.seconds <= time.perf_counter() - t0 and 0 <= r.cpu_seconds <= time.process_time() - c0
    assert r.critical_cpu_seconds == r.cpu_seconds
    assert (r.model, r.states, r.transitions, r.rejected, r.depth, r.diameter) == ("counter", 6, 9, 9, 4, 3)
    assert r.complete and r.exhausted and not r.found and r.bound_hit is False
    assert (r.violated, r.message, r.counterexample, r.clause, r.clauses, r.trace) == \
        (None, "no violation", (), None, (), ())
    assert r.coverage == "complete, diameter 3"
    assert sorted(calls) == [0, 1, 2, 3, 4, 5]  # each state checked once, when first seen


def test_a_depth_cut_search_is_never_called_complete() -> None:
    r = explore(counter(), max_depth=2)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter) == (5, 6, 3, 2, 2)
    assert not r.complete and r.exhausted and r.coverage == "to depth 2"
    # the last level (state 5 at depth 3) has no successor, but it was not expanded: still only "to depth 3"
    r = explore(counter(), max_depth=3)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter) == (6, 9, 6, 3, 3)
    assert not r.complete and r.coverage == "to depth 3"
    r = explore(counter(), max_depth=4)
    assert r.complete and r.depth == 4
    r = explore(counter(), max_depth=0)
    assert (r.states, r.transitions, r.depth, r.complete, r.coverage) == (1, 0, 0, False, "to depth 0")


def test_a_state_bound_stops_the_search_and_says_so() -> None:
    r = explore(counter(), max_depth=10, max_states=3)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter) == (3, 6, 3, 2, 1)
    assert r.bound_hit and not r.complete and not r.exhausted and r.coverage == "state bound hit at depth 2"
    r = explore(counter(), max_depth=10, max_states=6)  # exactly enough: no bound hit
    assert r.complete and not r.bound_hit


def test_a_violation_gives_a_shortest_counterexample_its_states_and_every_broken_clause() -> None:
    r = explore(counter(bad=4), max_depth=10)
    assert (r.violated, r.message, r.clause, r.clauses) == ("T", "T: at 4", "state_T.not_at", ("state_T.not_at",))
    assert r.counterexample == (2, 2) and r.trace == (0, 2, 4) and r.found and not r.complete and not r.exhausted
    assert r.coverage == "stopped at a violation at depth 2"
    assert render_counterexample(r) == " 0. (initial)\n     0\n 1. 2\n     -> 2\n 2. 2\n     -> 4\n=> T: at 4\n"
    r = explore(counter(bad=4, jump=4), max_depth=10)
    assert r.clause == "step_T.no_jump" and r.clauses == ("step_T.no_jump", "step_U.from", "state_T.not_at")
    assert r.message == "T: 2 jumps to 4"
    r = explore(counter(jump=3), max_depth=10)  # a step check runs on a step into a state already seen too
    assert r.counterexample == (1, 2) and r.clauses == ("step_T.no_jump", "step_U.from") and r.trace == (0, 1, 3)
    r = explore(counter(bad=0), max_depth=10)
    assert (r.violated, r.clause, r.counterexample, r.trace, r.states) == ("T", "state_T.not_at", (), (0,), 1)
    assert r.clauses == () and r.coverage == "stopped at a violation at depth 0"
    assert render_counterexample(r) == " 0. (initial)\n     0\n=> T: at 0\n"


def test_checks_that_raise_outside_a_registry_still_report_their_id() -> None:
    def raw(s: int) -> None:
        if s == 3:
            raise InvariantViolation("RAW", "three")
    m = Model("raw", 0, step, lambda s: (1, "x"), raw, lambda p, a, n: None, rejects=(KeyError, ValueError))
    r = explore(m, max_depth=10)
    assert (r.violated, r.clause, r.clauses, r.counterexample) == ("RAW", None, ("RAW",), (1, 1, 1))


class Collide:
    def __init__(self, s: int) -> None:
        self.s = s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collide) and other.s == self.s

    def __hash__(self) -> int:
        return 7


def test_a_key_and_fingerprints_merge_states() -> None:
    r = explore(counter(key=lambda s: s % 3), max_depth=10)  # 0..5 fall into three classes
    assert (r.states, r.complete, r.diameter) == (3, True, 1)
    f = explore(counter(), max_depth=10, fingerprints=True)
    assert (f.states, f.transitions, f.rejected, f.diameter, f.complete) == (6, 9, 9, 3, True)
    m = counter(key=lambda s: (s % 3,))
    assert explore(m, max_depth=10, fingerprints=True).states == 3
    # a fingerprint collision (distinct states, one hash) silently merges them; without fingerprints it does not
    m = counter(key=Collide)
    assert explore(m, max_depth=10).states == 6 and explore(m, max_depth=10, fingerprints=False).states == 6
    assert explore(m, max_depth=10, fingerprints=True).states == 1


def test_states_are_ticked_in_blocks_of_1024(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: list[tuple[str, int]] = []
    monkeypatch.setattr(E, "tick", lambda what, n: ticks.append((what, n)))
    m = Model("line", 0, lambda s, a: s + 1, lambda s: (1,) if s < 2047 else (), lambda s: None, lambda p, a, n: None)
    r = explore(m, max_depth=5000)
    assert r.states == 2048 and ticks == [("states", 1024), ("states", 1024)]
    assert inspect.signature(explore).parameters["max_states"].default == 1_000_000


def test_the_results_words_and_rates() -> None:
    r = ExploreResult("m", 10, 0, 0, 1, True, 2.0, None, "", ())
    assert r.states_per_second == 5.0
    r0 = ExploreResult("m", 10, 0, 0, 1, True, 0.0, None, "", ())
    assert r0.states_per_second == 10.0 and type(r0.states_per_second) is float
    assert render_counterexample(r0) == "=> no violation\n"
    scripted = ExploreResult("m", 3, 2, 0, 2, False, 0.0, "T", "T: bad", (1, 2))  # a counterexample, no states
    assert render_counterexample(scripted) == " 1. 1\n 2. 2\n=> T: bad\n"
    assert replay_states(counter(), (1, 2, 2)) == (0, 1, 3, 5)
    assert replay_states(counter(), ()) == (0,)


def test_no_cyclic_gc_restores_the_collector_as_it_was() -> None:
    was = gc.isenabled()
    try:
        for on in (True, False, True):
            (gc.enable if on else gc.disable)()
            with no_cyclic_gc():
                assert not gc.isenabled()
            assert gc.isenabled() is on
        with pytest.raises(RuntimeError), no_cyclic_gc():
            raise RuntimeError
        assert gc.isenabled()
        seen = []
        m = Model("gc", 0, lambda s, a: s + 1, lambda s: (seen.append(gc.isenabled()),) if s < 1 else (),
                  lambda s: None, lambda p, a, n: None)
        explore(m, max_depth=3)
        assert seen == [False] and gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
