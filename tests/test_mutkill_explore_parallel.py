"""invariants/explore_parallel.py pinned (its mutation run, benchmarks/mutation.py): the parallel explorer equals the
serial one (`explore(..., fingerprints=True)`) on states, transitions, refusals, depth, diameter, "complete" vs
"to depth d", the counterexample, its trace and clauses, on toy scopes small enough to run per mutant: a counter
(levels shared by both workers) and a 4-counter grid whose wide levels are dealt out; one with a violation deep
in a dealt-out level, one cut by the state bound (checked between levels only), one with a symmetry key.

The workers are forked: a mutant is active in them (mutmut's MUTANT_UNDER_TEST is in the inherited environment and
memory), but mutmut's record of which test calls which function stays in the worker, so the fixture below runs
one worker level in this process, asserting nothing, to tie `_worker` and `_level` to every test here."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

import pytest

from invariants import explore_parallel as P
from invariants.clauses import Clause, conjunction
from invariants.explore import Model, explore
from invariants.explore_parallel import explore_parallel

TOP = 4
BAD = Clause("T", "state_P", "not_nine", "no state sums to the forbidden total")
JUMP = Clause("T", "step_P", "no_jump", "no step of +2 into the forbidden total")


def step(s: tuple, a: Any) -> tuple:
    if a == "x":
        raise KeyError("never enabled")
    i, d = a
    if s[i] + d > TOP:
        raise ValueError("past the top")
    return s[:i] + (s[i] + d,) + s[i + 1:]


def grid(k: int = 4, bad: int | None = None, jump: int | None = None, boom: tuple | None = None,
         die: tuple | None = None, **kw: Any) -> Model:
    """k counters 0..4, actions (i, +1), (i, +2) (refused past 4) and "x" (always refused)."""
    def state_P(s: tuple) -> None:
        if BAD.case(sum(s) == bad):
            BAD.fail(f"at {s}")

    def step_P(p: tuple, a: Any, n: tuple) -> None:
        if JUMP.case(a[1] == 2 and sum(n) == jump):
            JUMP.fail(f"{p} jumps to {n}")

    def stepper(s: tuple, a: Any) -> tuple:
        if s == die:
            os._exit(3)  # a worker dies
        if s == boom:
            raise RuntimeError(f"broken at {s}")
        return step(s, a)
    acts = tuple((i, d) for i in range(k) for d in (1, 2)) + ("x",)
    return Model(f"grid{k}", (0,) * k, stepper, lambda s: acts, lambda s: conjunction({"T": (state_P,)}, s),
                 lambda p, a, n: conjunction({"T": (step_P,)}, p, a, n), rejects=(KeyError, ValueError), **kw)


@pytest.fixture(autouse=True)
def _one_level_here() -> None:
    parent, child = mp.Pipe()
    parent.send(([(-1, 0)], True))
    parent.send(None)
    P._worker(grid(1), child)
    parent.recv()


FOUND = ("model", "complete", "violated", "message", "counterexample", "clause", "clauses", "trace", "exhausted")
# The serial explorer stops mid-level at a violation; the parallel one finishes the level: counts differ there.
FIELDS = FOUND + ("states", "transitions", "rejected", "depth", "bound_hit", "diameter", "coverage")


def same(model: Model, workers: int = 2, **kw: Any) -> Any:
    par, ser = explore_parallel(model, workers=workers, **kw), explore(model, fingerprints=True, **kw)
    fields = FOUND if ser.found else FIELDS
    assert [getattr(par, f) for f in fields] == [getattr(ser, f) for f in fields]
    assert 0 <= par.critical_cpu_seconds <= par.cpu_seconds and par.seconds >= 0
    return par


def test_a_grid_explored_whole_equals_the_serial_explorer_and_deals_its_wide_levels_out() -> None:
    levels: list[dict] = []
    r = explore_parallel(grid(), max_depth=20, workers=2, levels=levels)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter, r.complete) == (625, 3500, 2125, 9, 8, True)
    assert r.coverage == "complete, diameter 8" and not r.found and r.bound_hit is False
    assert [(v["level"], v["expanded"], v["new"], v["shared"]) for v in levels] == [
        (0, 1, 8, True), (1, 8, 32, True), (2, 32, 80, True), (3, 80, 136, False), (4, 136, 160, False),
        (5, 160, 128, False), (6, 128, 64, False), (7, 64, 16, False), (8, 16, 0, False)]
    for v in levels:
        assert set(v) == {"level", "expanded", "new", "shared", "wall_seconds", "coordinator_cpu_seconds",
                          "worker_cpu_max", "worker_cpu_sum"}
        assert 0 <= v["worker_cpu_max"] <= v["worker_cpu_sum"] and v["wall_seconds"] >= 0
    same(grid(), max_depth=20)
    same(grid(), max_depth=20, workers=1)


def test_depth_cuts_are_to_depth_d_and_the_last_level_is_only_checked() -> None:
    for depth in (0, 1, 3, 5, 8):
        r = same(grid(), max_depth=depth)
        assert not r.complete and r.coverage == f"to depth {depth}"
    levels: list[dict] = []
    explore_parallel(grid(), max_depth=4, workers=2, levels=levels)
    assert [(v["level"], v["expanded"], v["new"], v["shared"]) for v in levels][-2:] == [(3, 80, 136, False),
                                                                                         (4, 0, 0, False)]
    same(grid(2), max_depth=2)
    assert not same(grid(2), max_depth=4).complete  # the 5 x 5 grid's corner, at depth 4, is not expanded
    r = same(grid(2), max_depth=5)  # now it is, and makes nothing new
    assert r.complete and (r.states, r.depth, r.diameter) == (25, 5, 4)


def test_the_state_bound_stops_between_levels() -> None:
    r = explore_parallel(grid(), max_depth=20, max_states=50, workers=2)
    assert (r.states, r.depth, r.diameter, r.bound_hit, r.complete, r.exhausted) == (121, 3, 3, True, False, False)
    assert (r.transitions, r.rejected, r.coverage) == (316, 53, "state bound hit at depth 3")
    r = explore_parallel(grid(), max_depth=20, max_states=41, workers=2)
    assert (r.states, r.depth, r.bound_hit) == (41, 2, True)
    r = explore_parallel(grid(), max_depth=20, max_states=42, workers=2)
    assert (r.states, r.depth, r.bound_hit) == (121, 3, True)


@pytest.mark.parametrize("kw", [{"bad": 9}, {"jump": 9}, {"bad": 9, "jump": 9}, {"bad": 3}, {"jump": 2},
                                {"bad": 14}, {"bad": 0}, {"jump": 10, "bad": 10}])
def test_a_violation_is_the_serial_explorers_shortest_counterexample(kw: dict) -> None:
    r = same(grid(**kw), max_depth=20)
    assert r.found and not r.complete and r.violated == "T"
    assert r.trace[0] == (0, 0, 0, 0) and len(r.trace) == len(r.counterexample) + 1
    for depth in (3, 4, 5, 6):
        same(grid(**kw), max_depth=depth)


def test_a_violation_in_a_dealt_out_level_counts_the_whole_level_and_names_every_broken_clause() -> None:
    path = ((0, 1), (0, 2), (1, 2), (1, 2), (2, 2))  # the least arrival at total 9 (serial order), 5 steps deep
    for kw, clauses in (({"bad": 9}, ("state_P.not_nine",)), ({"jump": 9}, ("step_P.no_jump",)),
                        ({"bad": 9, "jump": 9}, ("step_P.no_jump", "state_P.not_nine"))):
        r = explore_parallel(grid(**kw), max_depth=20, workers=2)
        assert (r.states, r.transitions, r.depth, r.counterexample, r.clauses) == (417, 1756, 5, path, clauses)
        assert r.trace == ((0, 0, 0, 0), (1, 0, 0, 0), (3, 0, 0, 0), (3, 2, 0, 0), (3, 4, 0, 0), (3, 4, 2, 0))
        assert r.coverage == "stopped at a violation at depth 5" and not r.bound_hit


def test_a_symmetry_key_keeps_one_state_per_orbit() -> None:
    r = same(grid(key=lambda s: tuple(sorted(s))), max_depth=20)
    assert (r.states, r.complete) == (70, True)
    same(grid(key=lambda s: tuple(sorted(s)), bad=9), max_depth=20)


def test_a_workers_error_is_raised_here_and_every_worker_ends() -> None:
    before = len(mp.active_children())
    with pytest.raises(RuntimeError, match=r"broken at \(1, 0, 0, 0\)"):
        explore_parallel(grid(boom=(1, 0, 0, 0)), max_depth=20, workers=2)
    with pytest.raises(RuntimeError, match=r"broken at \(2, 2, 2, 1\)"):  # in a dealt-out level: one worker's
        explore_parallel(grid(boom=(2, 2, 2, 1)), max_depth=20, workers=2)
    assert len(mp.active_children()) == before


def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    before = len(mp.active_children())
    with pytest.raises(EOFError):
        explore_parallel(grid(die=(0, 0, 0, 1)), max_depth=20, workers=2)
    assert len(mp.active_children()) == before
