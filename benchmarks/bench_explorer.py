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

Run:

    python benchmarks/bench_explorer.py [--rounds 3] [--max-depth 8] [--manager-depth 4] [--workers N] [--speedup-only]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time

from invariants.explore import explore
from invariants.explore_parallel import explore_parallel
from invariants.ledger_scope import QUICK_SCOPE, ledger_model
from invariants.manager_scope import CONTROLS as MANAGER_CONTROLS
from invariants.manager_scope import manager_model
from invariants.replay import replay_lines
from refimpl.verify.checkers import CHECKERS
from refimpl.governor import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify import PROFILES
from refimpl.workload import run_workload
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
            assert not r.found and r.complete, r.message
            if best[i] is None or r.seconds < best[i].seconds:
                best[i] = r
    out: list[dict] = []
    first: dict[str, tuple[int, int, float]] = {}
    print(f"\n{'scope':<13} {'explorer':<30} {'states':>8} {'depth':>5} {'seconds':>8} {'states/s':>9} {'ratio':>6} "
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
        print(f"{scope:<13} {how:<30} {r.states:>8} {r.depth:>5} {r.seconds:8.2f} {rate:>9,.0f} {rate / base:>6.2f} "
              f"{r.cpu_seconds:7.2f} {r.critical_cpu_seconds:7.2f} {cpu_ratio:9.2f}")
    return out


def bench_replay() -> dict:
    buf = io.StringIO()
    run_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=0, operations=5000)
    lines = [line.encode() for line in buf.getvalue().splitlines()]
    t0 = time.perf_counter()
    r = replay_lines(lines)
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
    args = ap.parse_args()
    report: dict = {"speedup": bench_speedup(args.max_depth, args.manager_depth, args.workers, args.rounds)}
    if not args.speedup_only:
        report.update(explorer=bench_explorer(args.rounds, args.max_depth), manager=bench_manager(args.manager_depth),
                      controls=bench_controls(), replay=bench_replay())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)

if __name__ == "__main__":
    main()
