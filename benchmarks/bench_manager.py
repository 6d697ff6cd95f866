"""The composed manager's round trips, contracts off and on, with 0 to 100,000 live leases on the authority (one run).

Round trips (each leaves the ledger as it found it):
    ledger       reserve -> commit -> release
    tickets      submit (granted at once: the ledger has room) -> claim -> release
    pressure     reserve -> commit -> open_pressure -> answer with that lease
    transaction  plan_tx -> reserve_all -> commit_tx -> release
Arms, interleaved over N rounds (every other round in reverse order), each arm's figure its best round (these
machines are shared and noisy); on/off is the median over rounds of on / off timed back to back, as in
bench_ledger.py, with the ratio of the bests beside it:
(a) `BareLedger` of bench_ledger.py: reserve -> commit -> release (the strict baseline);
(a') `FairLedger` of bench_ledger.py: the same with the manager's bookkeeping (the fair baseline, issue #24);
(b) `refimpl.manager.ProcessMemoryManager`, contracts off;
(c) the same with contracts on at the default level "local": the ledger and ticket round trips check the
    harms on the concrete records they touch (`refimpl.manager.local_contract`); the pressure and transaction
    round trips, and any operation while a pressure ticket or transaction is open, check the catalog's
    predicates on frozen views of the rows they touch (`refimpl.manager.views`); conservation is against the
    contract's own books (`refimpl.manager.contract_books`), so no arm reads the ledger's other rows;
(d) contracts on at level "full" (frozen views of every row of the touched ledgers), with no leases in the
    background, for reference only.
Ledger and tickets run at every background size (0, 1,000, 10,000, 100,000 live leases of another holder on
the authority the round trips touch); pressure and transaction at 0 and 10,000, to show their cost does not
grow with the ledger either. Goals: (b)/(a) <= 3x and (c)/(b) <= 3x for ledger and tickets, time per round
trip; (c) at 10,000 within 1.5x of (c) at 0 for pressure and transaction (no goal on their (c)/(b): their
check is the catalog's predicates on frozen views, tens of microseconds whatever the ledger holds).

    python benchmarks/bench_manager.py [--rounds 9] [--n 20000] [--clock cpu|wall] [--json out.json]
    python benchmarks/bench_manager.py --campaigns [--rounds 3] [--examples 100] [--json out.json]

--campaigns measures instead what `ortmem verify` spends per checked step of the composed machine
(`invariants.manager_machine`): the ledger restriction's campaign (`LedgerMachine`) and the composed campaign,
on `ManagerAdapter` with contracts on, as the ledger and manager checkers run them (40 steps an example, the
same fixed seed every round, so every round searches the same examples): CPU seconds of this process per
1,000 steps, every round printed. No baseline runs beside it: compare two trees by running each back to back.

--clock cpu (the default) times each arm by this thread's CPU time (`time.thread_time`): on a machine shared
with other jobs the wall clock also counts the time the scheduler gave them, which lands on whichever arm is
running; --clock wall uses `time.perf_counter`. Each manager and its leases are built once (contracts off);
each contracts-on run does one round trip before its clock starts (the first checked operation after the
switch counts the touched ledger's book once).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_ledger  # noqa: E402

from invariants import contracts  # noqa: E402
from refimpl.manager import ProcessMemoryManager  # noqa: E402
from spec.types import Role, Tier  # noqa: E402

SIZE = 4096
BACKGROUND = (0, 1_000, 10_000, 100_000)
SLOW_BACKGROUND = (0, 10_000)  # pressure and transaction
DEV, KV = Tier.DEVICE, Role.KV


def ledger(pmm: ProcessMemoryManager, a: int, h: int, n: int) -> None:
    reserve, commit, release = pmm.reserve, pmm.commit, pmm.release
    for _ in range(n):
        i = reserve(h, a, DEV, SIZE, KV)
        commit(h, i, SIZE)
        release(h, i)


def tickets(pmm: ProcessMemoryManager, a: int, h: int, n: int) -> None:
    submit, claim, release = pmm.submit, pmm.claim, pmm.release
    for _ in range(n):
        release(h, claim(h, submit(h, a, SIZE)))


def pressure(pmm: ProcessMemoryManager, a: int, h: int, n: int) -> None:
    reserve, commit, open_pressure, answer = pmm.reserve, pmm.commit, pmm.open_pressure, pmm.answer
    for _ in range(n):
        x = reserve(h, a, DEV, SIZE, KV)
        commit(h, x, SIZE)
        answer(h, open_pressure(h, a, SIZE), (x,))


def transaction(pmm: ProcessMemoryManager, a: int, h: int, n: int) -> None:
    plan, reserve, commit, release = pmm.plan_tx, pmm.reserve_all, pmm.commit_tx, pmm.release
    for _ in range(n):
        t = plan(h, ((a, SIZE),))
        reserve(t)
        (x,) = commit(t)
        release(h, x)


ROUND_TRIPS: dict[str, Callable[[ProcessMemoryManager, int, int, int], None]] = {
    "ledger": ledger, "tickets": tickets, "pressure": pressure, "transaction": transaction}


def arm(kind: str, background: int, on: bool, level: str = "local") -> Callable[[int], float]:
    """n round trips of `kind` on a manager whose authority holds `background` leases; returns the time taken."""
    pmm, a, h = bench_ledger.manager(background)
    body = ROUND_TRIPS[kind]

    def run(n: int) -> float:
        with contracts.contracts(on, level=level):
            body(pmm, a, h, 1)  # with contracts on: the book of the touched ledger is counted here, once
            t0 = bench_ledger._clock()
            body(pmm, a, h, n)
            return bench_ledger._clock() - t0
    return run


def arms() -> dict[str, tuple[Callable[[int], float], int]]:
    """name -> (run, divisor of --n it runs)."""
    out: dict[str, tuple[Callable[[int], float], int]] = {}
    for bg in BACKGROUND:
        out[f"bare@{bg}"] = bench_ledger.bare_arm(bg), 1
        out[f"fair@{bg}"] = bench_ledger.fair_arm(bg), 1
        for kind in ("ledger", "tickets"):
            quarter = 4 if bg == 100_000 else 1
            out[f"{kind}_off@{bg}"] = arm(kind, bg, False), quarter
            out[f"{kind}_on@{bg}"] = arm(kind, bg, True), 2 * quarter
    for bg in SLOW_BACKGROUND:
        for kind in ("pressure", "transaction"):
            out[f"{kind}_off@{bg}"] = arm(kind, bg, False), 4
            out[f"{kind}_on@{bg}"] = arm(kind, bg, True), 40
    for kind in ("ledger", "tickets"):
        out[f"{kind}_full@0"] = arm(kind, 0, True, "full"), 20
    return out


def measure(rounds: int, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """Round trips per second of every arm (best of `rounds`, interleaved; every other round in reverse order),
    and for each X_off / X_on pair the median over rounds of on / off timed back to back."""
    runs = arms()
    best = {k: float("inf") for k in runs}
    per_round: dict[str, list[float]] = {k: [] for k in runs}
    gc.collect()
    gc.disable()  # as timeit does: a collection pass would land on whichever arm is running
    try:
        for i in range(rounds):
            for k in (list(runs) if i % 2 == 0 else list(reversed(runs))):
                f, div = runs[k]
                m = max(1, n // div)
                took = f(m) / m
                per_round[k].append(took)
                best[k] = min(best[k], took)
    finally:
        gc.enable()
    paired = {k.replace("_on@", "@"): statistics.median(on / off for on, off in
                                                        zip(per_round[k], per_round[k.replace("_on@", "_off@")]))
              for k in runs if "_on@" in k}
    return {k: 1.0 / v for k, v in best.items()}, paired


def ratios(rate: dict[str, float], paired: dict[str, float]) -> dict[str, Any]:
    """Per background size: off over the baselines (bests), on over off (the paired median, and of the bests)."""
    out: dict[str, Any] = {}
    for bg in BACKGROUND:
        r = {}
        for kind in ("ledger", "tickets"):
            r[f"{kind} off/bare"] = rate[f"bare@{bg}"] / rate[f"{kind}_off@{bg}"]
            r[f"{kind} off/fair"] = rate[f"fair@{bg}"] / rate[f"{kind}_off@{bg}"]
            r[f"{kind} on/off"] = paired[f"{kind}@{bg}"]
            r[f"{kind} on/off of the bests"] = rate[f"{kind}_off@{bg}"] / rate[f"{kind}_on@{bg}"]
        out[str(bg)] = r
    for kind in ("pressure", "transaction"):
        out[kind] = {f"on/off@{bg}": paired[f"{kind}@{bg}"] for bg in SLOW_BACKGROUND}
        out[kind]["on@10000 / on@0"] = rate[f"{kind}_on@0"] / rate[f"{kind}_on@10000"]
    out["full"] = {f"{kind} full/off@0": rate[f"{kind}_off@0"] / rate[f"{kind}_full@0"] for kind in ("ledger", "tickets")}
    return out


def campaigns(rounds: int, examples: int) -> dict[str, list[float]]:
    """CPU seconds per 1,000 checked steps of the ledger restriction's and the composed campaign, per round."""
    from invariants.campaign import campaign_settings, run_machine
    from invariants.manager_ledger_machine import LedgerMachine
    from invariants.manager_machine import ManagerMachine
    from refimpl.verify.manager_adapter import ManagerAdapter
    out: dict[str, list[float]] = {"ledger restriction": [], "composed": []}
    for _ in range(rounds):
        for name, machine in (("ledger restriction", LedgerMachine), ("composed", ManagerMachine)):
            t0 = time.process_time()
            with contracts.contracts(True):
                stats = run_machine(machine, ManagerAdapter, campaign_settings(examples, 40))
            out[name].append(1000 * (time.process_time() - t0) / stats.steps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="thread CPU time or wall time")
    ap.add_argument("--json", help="write the figures as JSON")
    ap.add_argument("--campaigns", action="store_true", help="CPU s per 1,000 campaign steps instead")
    ap.add_argument("--examples", type=int, default=100, help="examples per campaign run (--campaigns)")
    args = ap.parse_args()
    if args.campaigns:
        per = campaigns(args.rounds, args.examples)
        for k, v in per.items():
            print(f"  {k:20} {min(v):6.3f} CPU s per 1,000 steps (best; rounds: {', '.join(f'{x:.3f}' for x in v)})")
        if args.json:
            Path(args.json).write_text(json.dumps({"examples": args.examples, "steps_per_example": 40,
                                                   "cpu_s_per_1000_steps": per}, indent=2) + "\n")
        return
    bench_ledger._clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    rate, paired = measure(args.rounds, args.n)
    r = ratios(rate, paired)
    for k, v in rate.items():
        print(f"  {k:22} {v:12,.0f} round trips/s  ({1e6 / v:8.2f} us each)")
    for bg in BACKGROUND:
        print(f"live leases on the touched authority: {bg:,}")
        for k, v in r[str(bg)].items():
            goal = "" if "fair" in k or "bests" in k else f"  (goal <= 3x: {'met' if v <= 3 else 'NOT met'})"
            print(f"  {k:30} {v:5.2f}x{goal}")
    for kind in ("pressure", "transaction"):
        for k, v in r[kind].items():
            goal = f"  (goal <= 1.5x: {'met' if v <= 1.5 else 'NOT met'})" if k.startswith("on@") else ""
            print(f"  {kind + ' ' + k:30} {v:6.2f}x{goal}")
    for k, v in r["full"].items():
        print(f"  {k:22} {v:5.2f}x  (contracts level \"full\", no goal)")
    if args.json:
        Path(args.json).write_text(json.dumps({"clock": args.clock, "rounds": args.rounds, "n": args.n,
                                               "round_trips_per_s": rate, "time_ratios": r}, indent=2) + "\n")


if __name__ == "__main__":
    main()
