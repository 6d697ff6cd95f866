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
import signal
import time
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


class Clock:
    """Stands in for the `time` module in invariants.explore_parallel (and in its forked workers): each reading
    is one tick T later, and each step a worker takes costs it one tick of CPU, so every figure is known."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0

    def perf_counter(self) -> float:
        self.wall += 1
        return self.wall * T

    def process_time(self) -> float:
        self.cpu += 1
        return self.cpu * T


T = 1.234567


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(P, "time", c)
    return c


def grid(k: int = 4, bad: int | None = None, jump: int | None = None, boom: tuple | None = None,
         die: tuple | None = None, clock: Clock | None = None, **kw: Any) -> Model:
    """k counters 0..4, actions (i, +1), (i, +2) for each counter below 4 (refused past 4) and "x" (always
    refused); `bad` forbids a state of that total, `jump` a step of +2 from a state 2 below it."""
    def state_P(s: tuple) -> None:
        if BAD.case(sum(s) == bad):
            BAD.fail(f"at {s}")

    def step_P(p: tuple, a: Any, n: tuple) -> None:
        if JUMP.case(a[1] == 2 and sum(p) + 2 == sum(n) == jump):
            JUMP.fail(f"{p} jumps to {n}")

    def stepper(s: tuple, a: Any) -> tuple:
        if clock is not None:
            clock.cpu += 1
        if s == die:
            os._exit(3)  # a worker dies
        if s == boom:
            raise RuntimeError(f"broken at {s}")
        return step(s, a)
    def actions(s: tuple) -> tuple:
        return tuple((i, d) for i in range(k) if s[i] < TOP for d in (1, 2)) + ("x",)
    return Model(f"grid{k}", (0,) * k, stepper, actions, lambda s: conjunction({"T": (state_P,)}, s),
                 lambda p, a, n: conjunction({"T": (step_P,)}, p, a, n), rejects=(KeyError, ValueError), **kw)


@pytest.fixture(autouse=True)
def _one_level_here() -> None:
    parent, child = mp.Pipe()
    parent.send(([(-1, 0)], True))
    parent.send(None)
    P._worker(grid(1), child)
    parent.recv()


FOUND = ("model", "complete", "violated", "message", "counterexample", "clause", "clauses", "trace", "exhausted",
         "depth")
# The serial explorer stops mid-level at a violation; the parallel one finishes the level: counts (and the deepest
# state seen, `diameter`) differ there.
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
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter, r.complete) == (625, 3500, 1125, 9, 8, True)
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
    assert (r.transitions, r.rejected, r.coverage) == (316, 45, "state bound hit at depth 3")
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


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The worker processes explore_parallel starts during the test (this process may hold other tests' children,
    so counting `mp.active_children()` would judge them too)."""
    made: list[Any] = []
    real = mp.get_context

    class Recording:
        def __init__(self, method: str | None) -> None:
            self.ctx = real(method)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.ctx, name)

        def Process(self, *args: Any, **kw: Any) -> Any:  # noqa: N802 - the context's own name
            made.append(self.ctx.Process(*args, **kw))
            return made[-1]

    monkeypatch.setattr(P.mp, "get_context", Recording)
    return made


def test_a_workers_error_is_raised_here_and_every_worker_ends(started: list[Any]) -> None:
    with pytest.raises(RuntimeError, match=r"broken at \(1, 0, 0, 0\)"):
        explore_parallel(grid(boom=(1, 0, 0, 0)), max_depth=20, workers=2)
    with pytest.raises(RuntimeError, match=r"broken at \(2, 2, 2, 1\)"):  # in a dealt-out level: one worker's
        explore_parallel(grid(boom=(2, 2, 2, 1)), max_depth=20, workers=2)
    assert len(started) == 4 and not any(p.is_alive() for p in started)


def test_a_worker_that_dies_is_an_error_not_a_hang(started: list[Any]) -> None:
    with pytest.raises(EOFError):
        explore_parallel(grid(die=(0, 0, 0, 1)), max_depth=20, workers=2)
    assert len(started) == 2 and not any(p.is_alive() for p in started)


def test_each_levels_seconds_and_the_totals_are_read_off_the_clock(clock: Clock) -> None:
    one: list[dict] = []
    r1 = explore_parallel(grid(clock=clock), max_depth=20, workers=1, levels=one)
    calls = [round(v["worker_cpu_sum"] / T) - 1 for v in one]  # one tick for the level, one per step tried
    assert sum(calls) == r1.transitions + r1.rejected and calls[0] == 9 and calls[-1] == 16 * 5
    assert [v["shared"] for v in one][:4] == [True, True, False, False]  # level 1 made 32: one worker's share
    for v, c in zip(one, calls):
        assert v["wall_seconds"] == v["coordinator_cpu_seconds"] == round(T, 4)
        assert v["worker_cpu_max"] == v["worker_cpu_sum"] == round((1 + c) * T, 4)
    assert r1.seconds == pytest.approx((2 * len(one) + 1) * T)
    two: list[dict] = []
    explore_parallel(grid(clock=clock), max_depth=20, workers=2, levels=two)
    for v, c in zip(two, calls):
        assert v["worker_cpu_sum"] == round((2 * (1 + c) if v["shared"] else 2 + c) * T, 4)
        assert v["worker_cpu_sum"] / 2 <= v["worker_cpu_max"] + 1e-4 and v["worker_cpu_max"] < v["worker_cpu_sum"]
        assert v["worker_cpu_max"] == round((1 + c) * T, 4) or not v["shared"]
    assert any(v["worker_cpu_max"] > v["worker_cpu_sum"] / 2 + T for v in two)  # the holders' shares differ
    # Each new state is held by worker fingerprint % 2 when that one made it: the busiest worker's ticks, pinned.
    assert [round(v["worker_cpu_max"] / T) for v in two] == [10, 73, 281, 349, 646, 691, 563, 227, 48]
    r = explore_parallel(grid(clock=clock), max_depth=20, workers=2)
    own = (len(two) + 1) * T  # the coordinator reads the clock once per level, and at each end
    assert r.seconds == pytest.approx(own)
    assert r.cpu_seconds == pytest.approx(own + sum(v["worker_cpu_sum"] for v in two), abs=1e-3)
    assert r.critical_cpu_seconds == pytest.approx(own + sum(v["worker_cpu_max"] for v in two), abs=1e-3)
    cut: list[dict] = []
    explore_parallel(grid(clock=clock), max_depth=2, workers=1, levels=cut)
    assert [(v["level"], v["expanded"], v["worker_cpu_sum"]) for v in cut][-1] == (2, 0, round(T, 4))  # no step


def test_one_worker_per_core_by_default(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    def workers(**kw: Any) -> int:
        levels: list[dict] = []
        explore_parallel(grid(clock=clock), max_depth=0, levels=levels, **kw)
        return round(levels[0]["worker_cpu_sum"] / T)  # each worker's one tick at the only-checked level
    monkeypatch.setattr(P.os, "cpu_count", lambda: 3)
    assert (workers(), workers(workers=1), workers(workers=2)) == (3, 1, 2)
    monkeypatch.setattr(P.os, "cpu_count", lambda: None)
    assert workers() == 1


def test_a_violating_initial_state_is_found_before_any_worker_starts(clock: Clock, started: list[Any]) -> None:
    r = explore_parallel(grid(bad=0, clock=clock), max_depth=20, workers=2)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter, r.complete, r.bound_hit) == \
        (1, 0, 0, 0, 0, False, False)
    assert (r.counterexample, r.trace, r.clause, r.violated, r.seconds) == \
        ((), ((0, 0, 0, 0),), "state_P.not_nine", "T", pytest.approx(T))
    assert clock.cpu == 1 and started == []


def test_a_violations_counts_and_seconds(clock: Clock) -> None:
    r = explore_parallel(grid(bad=9, clock=clock), max_depth=20, workers=2)
    assert (r.states, r.transitions, r.rejected, r.depth, r.diameter, r.bound_hit) == (417, 1756, 357, 5, 5, False)
    assert r.seconds == pytest.approx(7 * T)  # six levels, each one reading, and the end


def test_workers_are_daemons() -> None:
    def step(s: tuple, a: Any) -> tuple:
        if not mp.current_process().daemon:
            raise RuntimeError("a worker that would outlive its coordinator")
        return grid().step(s, a)
    m = grid()
    explore_parallel(Model(m.name, m.initial, step, m.actions, m.check_state, m.check_step, m.rejects),
                     max_depth=2, workers=2)


def test_a_violation_seen_only_in_a_worker_is_a_nondeterministic_model() -> None:
    here = os.getpid()

    def check_state(s: tuple) -> None:
        if os.getpid() != here and sum(s) == 3:
            BAD.fail(f"at {s}")
    m = grid()
    with pytest.raises(AssertionError, match=r"^path \(0, 1\) was reported violating but its replay passes$"):
        explore_parallel(Model(m.name, m.initial, m.step, m.actions, check_state, m.check_step, m.rejects),
                         max_depth=5, workers=2)


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"  # a zombie has ended; nobody may reap an orphan
    except FileNotFoundError:
        return True


def test_workers_end_when_their_coordinator_is_killed(tmp_path: Any) -> None:
    """The coordinator is SIGKILLed while both workers are busy (daemon workers are not ended then): each must see
    its pipe closed and end, rather than wait forever on a pipe some process still holds open."""
    def stepper(s: tuple, a: Any) -> tuple:
        (tmp_path / str(os.getpid())).touch()
        if len(list(tmp_path.iterdir())) == 2 and not (tmp_path / "killed").exists():  # both workers are in
            (tmp_path / "killed").touch()
            os.kill(os.getppid(), signal.SIGKILL)
        return step(s, a)
    m = grid()
    model = Model(m.name, m.initial, stepper, m.actions, m.check_state, m.check_step, m.rejects)
    coordinator = mp.get_context("fork").Process(target=explore_parallel, args=(model,),
                                                 kwargs={"max_depth": 20, "workers": 2})
    coordinator.start()
    coordinator.join(60)
    workers = [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]
    try:
        deadline = time.monotonic() + 60  # a liveness bound, not a speed goal: the workers end at once
        while not all(_ended(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert coordinator.exitcode == -signal.SIGKILL and len(workers) == 2
        assert [w for w in workers if not _ended(w)] == []
    finally:
        for w in workers:
            if not _ended(w):
                os.kill(w, signal.SIGKILL)
