"""Verification power, measured: explorer speed, and time + steps to each negative control's counterexample.

(a) Explorer states per second over the ledger's quick scope, per depth
    (best of N rounds: these machines are shared and noisy).
(b) For every registered guard, in the quick profile: the explorer's
    shortest counterexample (steps, states, seconds), and the Hypothesis
    negative controls in the spec and in refimpl (steps, seconds).
(c) Replay speed: events per second of `ortmem replay` on a refimpl trace.
(d) The composed manager's scope (`invariants.manager_scope`): distinct
    states, depth and states per second, per depth (`--manager-depth`).
(e) Speedups, per scope (ledger quick at `--max-depth`, composed manager at
    `--manager-depth`), measured in this one run: serial with full checks,
    serial with incremental checks (manager only), with successor memoization
    too (`invariants.explore_memo`, manager only), and the parallel explorer
    (`invariants.explore_parallel`, one worker per core); distinct states and
    depth must agree, and the ratios are to the first row of the scope.
    Wall-clock ratios on a shared machine mostly measure the other load, so
    each row also gives CPU seconds (all processes) and critical-path CPU
    seconds (per level, the busiest worker); "cpu ratio" (first row's CPU
    over this row's critical path) estimates the speedup on idle cores.
(f) Decomposition of the composed scope (`--decompose`, and in a full run):
    CPU microseconds per accepted step and per distinct state in the spec's
    step, the checks, and the explorer itself (the scope's recorded state
    graph explored as integers with a free step: its states/s is the
    explorer machinery's ceiling), and the parallel explorer per level
    (coordinator vs workers' CPU).
(g) Symmetry reduction (`invariants.explore_symmetry`, `--symmetry-only`): each complete composed scope
    (`invariants.manager_scope.COMPLETE_SCOPES`) and the ledger's quick scope to `--max-depth`, with and
    without symmetry, serial and parallel: distinct states, transitions, diameter, seconds and states/s
    (best of `--rounds`); with symmetry the states are orbits, so "states/s" counts orbits.

Run:

    python benchmarks/bench_explorer.py [--rounds 3] [--max-depth 8] [--manager-depth 4] [--workers N] [--speedup-only]
        [--decompose] [--symmetry-only] [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections.abc import Callable
from typing import Any

from invariants.explore import explore
from invariants.explore_parallel import explore_parallel
from invariants.ledger_scope import QUICK_SCOPE, ledger_model
from invariants.manager_scope import CONTROLS as MANAGER_CONTROLS
from invariants.manager_scope import manager_model
from invariants.manager_replay import replay_manager_lines
from refimpl.verify.checkers import CHECKERS
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import JsonlSink
from refimpl.verify import PROFILES
from spec.guards import GUARDS, GuardSet, Layer


def bench_explorer(rounds: int, max_depth: int) -> list[dict]:
    out = []
    for depth in range(4, max_depth + 1):
        best = min((explore(ledger_model(QUICK_SCOPE), max_depth=depth) for _ in range(rounds)),
                   key=lambda r: r.seconds)
        out.append({"depth": depth, "states": best.states, "transitions": best.transitions,
                    "seconds": round(best.seconds, 3), "states_per_second": round(best.states_per_second)})
        print(f"explorer depth {depth}: {best.states:>7} states {best.transitions:>8} transitions "
              f"{best.seconds:7.3f} s  {best.states_per_second:>9,.0f} states/s")
    return out


def bench_controls() -> list[dict]:
    budget = PROFILES["quick"]
    out = []
    print(f"\n{'guard':<28} {'explorer (steps, states, s)':<30} {'hypothesis spec (steps, s)':<28} "
          "hypothesis refimpl (steps, s)")
    for g in GUARDS:
        if g.model not in CHECKERS:  # the composed manager's checker is not registered yet: explorer control only
            x = explore(manager_model(GuardSet.without(g.name), MANAGER_CONTROLS[g.name]), max_depth=8)
            out.append({"guard": g.name, "ids": list(g.ids), "explorer": {
                "found": x.found, "steps": len(x.counterexample), "states": x.states, "seconds": round(x.seconds, 4)}})
            print(f"{g.name:<28} {len(x.counterexample):>3} {x.states:>7} {x.seconds:8.3f}      (no checker yet)")
            continue
        checker = CHECKERS[g.model]
        row: dict = {"guard": g.name, "ids": list(g.ids)}
        if hasattr(checker, "explore"):
            x = checker.explore(g, budget)
            row["explorer"] = {"found": x.found, "steps": len(x.counterexample), "states": x.states,
                               "seconds": round(x.seconds, 4)}
        for layer in Layer:
            c = checker.control(g, layer, budget)
            row[layer.value] = {"found": c.found, "steps": c.steps, "seconds": round(c.seconds, 3)}
        e = row.get("explorer", {})
        print(f"{g.name:<28} {e.get('steps', '-')!s:>3} {e.get('states', '-')!s:>7} {e.get('seconds', 0):8.3f}      "
              f"   {row['spec']['steps']!s:>4} {row['spec']['seconds']:8.2f}                "
              f"   {row['refimpl']['steps']!s:>4} {row['refimpl']['seconds']:8.2f}")
        out.append(row)
    return out


def bench_manager(max_depth: int) -> list[dict]:
    """The composed scope, every guard on: distinct states, depth and states/s per depth (one round: it is slow)."""
    out = []
    for depth in range(3, max_depth + 1):
        r = explore(manager_model(), max_depth=depth)
        assert not r.found, r.message
        out.append({"depth": r.depth, "states": r.states, "transitions": r.transitions, "complete": r.complete,
                    "diameter": r.diameter,
                    "seconds": round(r.seconds, 3), "states_per_second": round(r.states_per_second)})
        print(f"manager depth {r.depth}: {r.states:>7} states {r.transitions:>8} transitions "
              f"{r.seconds:7.3f} s  {r.states_per_second:>9,.0f} states/s")
    return out


def bench_speedup(ledger_depth: int, manager_depth: int, workers: int, rounds: int) -> list[dict]:
    """Serial vs incremental vs parallel, per scope, in one run: the ratios are within this run (no absolute goal).

    Rounds are interleaved (every explorer once per round) and the best round of each is kept, so a burst of load
    from other processes on a shared machine does not land on one explorer only.
    """
    runs = [
        ("ledger quick", "serial", lambda: explore(ledger_model(QUICK_SCOPE), max_depth=ledger_depth)),
        ("ledger quick", f"parallel x{workers}",
         lambda: explore_parallel(ledger_model(QUICK_SCOPE), max_depth=ledger_depth, workers=workers)),
        ("manager", "serial, full checks",
         lambda: explore(manager_model(incremental=False, memo=False), max_depth=manager_depth)),
        ("manager", "serial, incremental checks",
         lambda: explore(manager_model(memo=False), max_depth=manager_depth)),
        ("manager", "serial, incremental + memo",
         lambda: explore(manager_model(memo=True), max_depth=manager_depth)),
        ("manager", f"parallel x{workers}, incremental",
         lambda: explore_parallel(manager_model(memo=False), max_depth=manager_depth, workers=workers)),
        ("manager", f"parallel x{workers}, incremental + memo",
         lambda: explore_parallel(manager_model(memo=True), max_depth=manager_depth, workers=workers)),
    ]
    best: list = [None] * len(runs)
    for _ in range(rounds):
        for i, (scope, how, run) in enumerate(runs):
            r = run()
            assert not r.found and r.exhausted, r.message
            if best[i] is None or r.seconds < best[i].seconds:
                best[i] = r
    out: list[dict] = []
    first: dict[str, tuple[int, int, float]] = {}
    print(f"\n{'scope':<13} {'explorer':<36} {'states':>8} {'depth':>5} {'seconds':>8} {'states/s':>9} {'ratio':>6} "
          f"{'cpu s':>7} {'crit s':>7} {'cpu ratio':>9}   (best of {rounds})")
    for (scope, how, _), r in zip(runs, best):
        rate = r.states_per_second
        states, depth, base, base_cpu = first.setdefault(scope, (r.states, r.depth, rate, r.cpu_seconds))
        assert (states, depth) == (r.states, r.depth), (scope, how, r.states, r.depth)
        cpu_ratio = base_cpu / r.critical_cpu_seconds
        out.append({"scope": scope, "explorer": how, "states": r.states, "depth": r.depth, "rounds": rounds,
                    "seconds": round(r.seconds, 3), "states_per_second": round(rate), "ratio": round(rate / base, 2),
                    "cpu_seconds": round(r.cpu_seconds, 3), "critical_cpu_seconds": round(r.critical_cpu_seconds, 3),
                    "cpu_ratio": round(cpu_ratio, 2)})
        print(f"{scope:<13} {how:<36} {r.states:>8} {r.depth:>5} {r.seconds:8.2f} {rate:>9,.0f} {rate / base:>6.2f} "
              f"{r.cpu_seconds:7.2f} {r.critical_cpu_seconds:7.2f} {cpu_ratio:9.2f}")
    return out


class _Rejected(Exception):
    """A disabled action in the recorded integer graph."""


def _record_graph(depth: int) -> tuple[list, list, list]:
    """The composed scope explored breadth-first as `explore` does (every guard on, plain step, no checks).

    Returns the expanded states, each with its action list and, per action, the next state the step made (a fresh
    object, as in a real run; None if rejected); the accepted steps (state, action, next, result, next is new) in
    the explorer's order ("new": the step is the first to reach its next state, which is then checked); and the
    state graph renumbered as integers (per state number, per action: the next state's number, -1 if rejected).
    """
    from collections import deque

    from invariants.manager_scope import QUICK_SCOPE as MQ
    from invariants.manager_scope import manager_actions
    from spec import manager as MG
    from spec.errors import GovernorError

    start = manager_model().initial
    ids = {start: 0}
    graph: list[list[int]] = [[]]
    expanded: list[tuple] = []
    steps: list[tuple] = []
    frontier = deque([(start, 0)])
    while frontier:
        s, d = frontier.popleft()
        if d >= depth:
            continue
        acts = list(manager_actions(MQ, s))
        made: list = []
        expanded.append((s, acts, made))
        out = graph[ids[s]]
        for act in acts:
            try:
                nxt, result = MG.step(s, act)
            except GovernorError:
                out.append(-1)
                made.append(None)
                continue
            made.append(nxt)
            k = ids.get(nxt)
            fresh = k is None
            if fresh:
                k = ids[nxt] = len(graph)
                graph.append([])
                frontier.append((nxt, d + 1))
            steps.append((s, act, nxt, result, fresh))
            out.append(k)
    return expanded, steps, graph


def bench_decompose(depth: int, rounds: int) -> dict:
    """Where the composed scope's serial time goes, per accepted step and per distinct state.

    CPU time, best of `rounds` (interleaved), each part timed alone over the same recorded exploration:
    (a) the spec's step over every tried (state, action) pair, memo off (and memo on: a fresh cache), and the
    scope's action enumeration; (b) the checks over the accepted steps and new states in the explorer's order
    (full registries; incremental; and memo on with the incremental checks, which includes the memoized step);
    (c) the explorer itself, exploring the scope's recorded state graph renumbered as integers with a free step
    and no checks, so only its seen-set, frontier and bookkeeping remain, and (c') the same graph over the recorded
    states (the seen-set then hashes and compares real states, as a real run's does). (c)'s states/s is what
    this explorer would reach with a free spec.
    """
    from invariants import manager as IM
    from invariants.explore import Model, no_cyclic_gc
    from invariants.explore_checks import IncrementalChecks
    from invariants.explore_memo import MemoStep
    from invariants.manager_scope import QUICK_SCOPE as MQ
    from invariants.manager_scope import manager_actions
    from spec import manager as MG
    from spec.errors import GovernorError

    expanded, judged, graph = _record_graph(depth)

    def step_all() -> None:
        for s, acts, _ in expanded:
            for act in acts:
                try:
                    MG.step(s, act)
                except GovernorError:
                    pass

    def memo_all() -> None:
        memo = MemoStep(MG.step, (GovernorError,))
        for s, acts, _ in expanded:
            for act in acts:
                try:
                    memo(s, act)
                except GovernorError:
                    pass

    def actions_all() -> None:
        for s, _, _ in expanded:
            for _ in manager_actions(MQ, s):
                pass

    def checks(check_state: Callable, check_step: Callable) -> None:
        for s, a, n, r, fresh in judged:
            check_step(s, a, n, r)
            if fresh:
                check_state(n)

    def full() -> None:
        checks(IM.check_all, IM.check_step)

    def incremental() -> None:
        inc = IncrementalChecks()
        checks(inc.check_state, inc.check_step)

    def memo_checks() -> None:  # memoized steps, judged as `manager_model(memo=True)` does
        memo = MemoStep(MG.step, (GovernorError,))
        inc = IncrementalChecks()
        i = 0
        for s, acts, _ in expanded:
            for act in acts:
                try:
                    nxt, result = memo(s, act)
                except GovernorError:
                    continue
                inc.check_step(s, act, nxt, result)
                if judged[i][4]:
                    inc.check_state(nxt)
                i += 1

    def lookup(s: Any, a: Any) -> Any:
        if a is None or (a.__class__ is int and a < 0):
            raise _Rejected
        return a

    runs: dict[str, list] = {"integer": [], "states": []}
    int_model = Model("manager graph", 0, lookup, graph.__getitem__, _nothing, _nothing3, rejects=(_Rejected,))
    made = {id(s): m for s, _, m in expanded}  # the explorer's frontier holds the first object to reach a state
    obj_model = Model("manager graph", expanded[0][0], lookup, lambda s: made.get(id(s), ()), _nothing, _nothing3,
                      rejects=(_Rejected,))

    def explore_ints() -> None:
        runs["integer"].append(explore(int_model, max_depth=depth))

    def explore_states() -> None:
        runs["states"].append(explore(obj_model, max_depth=depth))

    parts = {"(a) step, memo off": step_all, "(a) step, memo on": memo_all, "(a) actions": actions_all,
             "(b) checks, full": full, "(b) checks, incremental": incremental,
             "(a+b) memo step + incremental": memo_checks,
             "(c) explorer, integer graph": explore_ints, "(c') explorer, recorded states": explore_states}
    best = {k: float("inf") for k in parts}
    with no_cyclic_gc():
        for _ in range(rounds):
            for name, run in parts.items():
                c0 = time.process_time()
                run()
                best[name] = min(best[name], time.process_time() - c0)
    n_states, n_steps = len(graph), len(judged)
    for r in (runs["integer"][-1], runs["states"][-1]):
        assert (r.states, r.transitions) == (n_states, n_steps) and not r.found, (r.states, r.transitions)
    rejected = runs["integer"][-1].rejected
    rows = {k: {"cpu_seconds": round(v, 3), "us_per_accepted_step": round(v / n_steps * 1e6, 2),
                "us_per_state": round(v / n_states * 1e6, 2), "states_per_second": round(n_states / v)}
            for k, v in best.items()}
    print(f"\ndecomposition, composed scope depth {depth}: {n_states} states, {n_steps} accepted + {rejected} "
          f"rejected steps (CPU s, best of {rounds}; states/s: this part alone)")
    print(f"{'part':<32} {'cpu s':>7} {'us/step':>8} {'us/state':>9} {'states/s':>10}")
    for k, r in rows.items():
        print(f"{k:<32} {r['cpu_seconds']:7.3f} {r['us_per_accepted_step']:8.2f} {r['us_per_state']:9.2f} "
              f"{r['states_per_second']:>10,}")
    return {"depth": depth, "states": n_states, "accepted": n_steps, "rejected": rejected, "rounds": rounds,
            "parts": rows}


def bench_in_situ(depth: int, rounds: int) -> list[dict]:
    """The same split inside real serial runs (memo off and on, incremental checks): CPU seconds in the model's
    step, check_step, check_state and action enumeration, each call timed; "rest" is the explorer with the model's
    glue and the timing itself (about a third of a microsecond a call). Best of `rounds` by total."""
    import attrs

    out = []
    for memo in (False, True):
        best = None
        for _ in range(rounds):
            m = manager_model(memo=memo)
            acc = {"step": 0.0, "check_step": 0.0, "check_state": 0.0, "actions": 0.0}
            clock = time.process_time

            def timed(name: str, f: Callable) -> Callable:
                def run(*a: Any) -> Any:
                    t = clock()
                    try:
                        return f(*a)
                    finally:
                        acc[name] += clock() - t
                return run

            def actions(s: Any, f: Callable = m.actions) -> list:
                t = clock()
                r = list(f(s))
                acc["actions"] += clock() - t
                return r

            r = explore(attrs.evolve(m, step=timed("step", m.step), check_step=timed("check_step", m.check_step),
                                     check_state=timed("check_state", m.check_state), actions=actions),
                        max_depth=depth)
            assert not r.found and r.exhausted, r.message
            if best is None or r.cpu_seconds < best[0]:
                best = (r.cpu_seconds, dict(acc), r)
        total, acc, r = best
        row = {"memo": memo, "cpu_seconds": round(total, 3), **{k: round(v, 3) for k, v in acc.items()},
               "rest": round(total - sum(acc.values()), 3),
               "us_per_accepted_step": {k: round(v / r.transitions * 1e6, 2) for k, v in acc.items()}}
        out.append(row)
    print(f"\nin situ, serial incremental (CPU s, best of {rounds}):  {'total':>6} {'step':>6} {'chk step':>8} "
          f"{'chk state':>9} {'actions':>7} {'rest':>6}")
    for row in out:
        print(f"{'memo on' if row['memo'] else 'memo off':<44} {row['cpu_seconds']:6.2f} {row['step']:6.2f} "
              f"{row['check_step']:8.2f} {row['check_state']:9.2f} {row['actions']:7.2f} {row['rest']:6.2f}")
    return out


def bench_levels(depth: int, workers: int, rounds: int) -> list[dict]:
    """The parallel explorer (incremental + memo) per level: is the coordinator the bottleneck, are the workers
    balanced? CPU seconds per level: the coordinator's (numbering, dealing out) and the workers' (busiest, all),
    from the round with the least critical-path CPU; the serial memo run's CPU in the same rounds for scale."""
    best, serial = None, float("inf")
    for _ in range(rounds):
        levels: list[dict] = []
        r = explore_parallel(manager_model(memo=True), max_depth=depth, workers=workers, levels=levels)
        assert not r.found and r.exhausted, r.message
        if best is None or r.critical_cpu_seconds < best[0].critical_cpu_seconds:
            best = (r, levels)
        serial = min(serial, explore(manager_model(memo=True), max_depth=depth).cpu_seconds)
    r, levels = best
    print(f"\nparallel x{workers}, incremental + memo, per level (CPU s; best of {rounds} by critical path): "
          f"serial memo {serial:.2f}, parallel all {r.cpu_seconds:.2f}, critical {r.critical_cpu_seconds:.2f}")
    print(f"{'level':>5} {'expanded':>8} {'new':>7} {'shared':>6} {'coord':>7} {'worker max':>10} {'worker all':>10}")
    for lv in levels:
        print(f"{lv['level']:>5} {lv['expanded']:>8} {lv['new']:>7} {lv['shared']!s:>6} "
              f"{lv['coordinator_cpu_seconds']:7.3f} {lv['worker_cpu_max']:10.3f} {lv['worker_cpu_sum']:10.3f}")
    return [{"serial_memo_cpu_seconds": round(serial, 3), "cpu_seconds": round(r.cpu_seconds, 3),
             "critical_cpu_seconds": round(r.critical_cpu_seconds, 3)}, *levels]


def bench_symmetry(ledger_depth: int, workers: int, rounds: int) -> list[dict]:
    """Each scope with and without symmetry (serial; parallel with it): the reduction in states, its cost per state."""
    import attrs

    from invariants.manager_scope import COMPLETE_SCOPES, PARTS_SCOPE

    # The parts scope changes limits, so its holders are not permuted; without limit changes they are.
    named = {**COMPLETE_SCOPES["quick"], "manager_parts, no limits": attrs.evolve(PARTS_SCOPE, limits=False)}
    scopes: list[tuple[str, Callable[[bool], Any], int]] = [
        (name, lambda sym, sc=sc, name=name: manager_model(scope=sc, symmetry=sym, name=name), 10**6)
        for name, sc in named.items()]
    scopes.append(("ledger quick", lambda sym: ledger_model(QUICK_SCOPE, symmetry=sym), ledger_depth))
    out: list[dict] = []
    print(f"\n{'scope':<26} {'explorer':<26} {'states':>8} {'transitions':>11} {'diameter':>8} {'coverage':<22} "
          f"{'seconds':>8} {'states/s':>9}   (best of {rounds})")
    for name, model, depth in scopes:
        runs = [("serial", False, lambda m, d: explore(m, max_depth=d)),
                ("serial, symmetry", True, lambda m, d: explore(m, max_depth=d)),
                (f"parallel x{workers}, symmetry", True,
                 lambda m, d: explore_parallel(m, max_depth=d, workers=workers))]
        for how, sym, run in runs:
            best = None
            for _ in range(rounds):
                r = run(model(sym), depth)
                assert not r.found and not r.bound_hit, r.message
                if best is None or r.seconds < best.seconds:
                    best = r
            assert best is not None
            out.append({"scope": name, "explorer": how, "symmetry": sym, "states": best.states,
                        "transitions": best.transitions, "diameter": best.diameter, "complete": best.complete,
                        "coverage": best.coverage, "rounds": rounds, "seconds": round(best.seconds, 3),
                        "cpu_seconds": round(best.cpu_seconds, 3),
                        "critical_cpu_seconds": round(best.critical_cpu_seconds, 3),
                        "states_per_second": round(best.states_per_second)})
            print(f"{name:<26} {how:<26} {best.states:>8} {best.transitions:>11} {best.diameter:>8} "
                  f"{best.coverage:<22} {best.seconds:8.2f} {best.states_per_second:>9,.0f}")
    return out


def _nothing(s: Any) -> None:
    return None


def _nothing3(s: Any, a: Any, n: Any) -> None:
    return None


def bench_replay() -> dict:
    buf = io.StringIO()
    run_manager_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=0, operations=5000)
    lines = [line.encode() for line in buf.getvalue().splitlines()]
    t0 = time.perf_counter()
    r = replay_manager_lines(lines)
    dt = time.perf_counter() - t0
    assert r.ok, r.describe()
    print(f"\nreplay: {len(lines)} events in {dt:.2f} s, {len(lines) / dt:,.0f} events/s")
    return {"events": len(lines), "seconds": round(dt, 3), "events_per_second": round(len(lines) / dt)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-depth", type=int, default=8)
    ap.add_argument("--manager-depth", type=int, default=4)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--speedup-only", action="store_true", help="only (e): serial / incremental / parallel")
    ap.add_argument("--decompose", action="store_true", help="also (f): where the composed scope's time goes")
    ap.add_argument("--symmetry-only", action="store_true",
                    help="only (g): with and without symmetry; with --json, replaces that file's \"symmetry\" entry")
    args = ap.parse_args()
    if args.symmetry_only:
        rows = bench_symmetry(args.max_depth, args.workers, args.rounds)
        if args.json:
            report = json.load(open(args.json)) if os.path.exists(args.json) else {}
            report["symmetry"] = rows
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
        return
    report: dict = {"speedup": bench_speedup(args.max_depth, args.manager_depth, args.workers, args.rounds)}
    if args.decompose or not args.speedup_only:
        report["decomposition"] = bench_decompose(args.manager_depth, args.rounds)
        report["in_situ"] = bench_in_situ(args.manager_depth, args.rounds)
        report["parallel_levels"] = bench_levels(args.manager_depth, args.workers, args.rounds)
    if not args.speedup_only:
        report.update(explorer=bench_explorer(args.rounds, args.max_depth), manager=bench_manager(args.manager_depth),
                      controls=bench_controls(), replay=bench_replay(),
                      symmetry=bench_symmetry(args.max_depth, args.workers, args.rounds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)

if __name__ == "__main__":
    main()
