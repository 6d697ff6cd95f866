"""The composed manager's round trips as ratios to a bare dict-and-lock ledger, measured in one run (issue #10).

Arms, interleaved, best of N rounds (these machines are shared and noisy):
(a) `BareLedger` of bench_ledger.py: reserve -> commit -> release;
(b) `refimpl.manager.ProcessMemoryManager`, contracts off:
    ledger:  reserve -> commit -> release
    tickets: submit (granted at once: the ledger has room) -> claim -> release
(c) the same with contracts on at the default level "local" (`refimpl.manager.local_contract`: the harms on
    the concrete records each operation touched, no frozen spec views);
(d) contracts on at level "full" (frozen partial views + the catalog's predicates), for reference only.
Goals: (b)/(a) <= 3x and (c)/(b) <= 3x, time per round trip.

    python benchmarks/bench_manager.py [--rounds 7] [--n 20000] [--clock cpu|wall] [--json out.json]

--clock cpu (the default) times each arm by this thread's CPU time (`time.thread_time`): on a machine shared
with other jobs the wall clock also counts the time the scheduler gave them, which lands on whichever arm is
running; --clock wall uses `time.perf_counter`.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_ledger import BareLedger  # noqa: E402

from invariants import contracts  # noqa: E402
from refimpl.manager import ProcessMemoryManager  # noqa: E402
from spec.types import Role, Tier  # noqa: E402

SIZE = 4096
_clock = time.thread_time  # set by --clock


def bare(n: int) -> float:
    led = BareLedger(1 << 40)
    reserve, commit, release = led.reserve, led.commit, led.release
    t0 = _clock()
    for _ in range(n):
        i = reserve(SIZE)
        commit(i)
        release(i)
    return _clock() - t0


def _pmm() -> tuple[ProcessMemoryManager, int, int]:
    pmm = ProcessMemoryManager()
    return pmm, pmm.register_authority("gpu0", Tier.DEVICE, 1 << 40), pmm.register_holder("kv")


def ledger(n: int) -> float:
    pmm, a, h = _pmm()
    reserve, commit, release = pmm.reserve, pmm.commit, pmm.release
    dev, kv = Tier.DEVICE, Role.KV
    t0 = _clock()
    for _ in range(n):
        i = reserve(h, a, dev, SIZE, kv)
        commit(h, i, SIZE)
        release(h, i)
    return _clock() - t0


def tickets(n: int) -> float:
    pmm, a, h = _pmm()
    submit, claim, release = pmm.submit, pmm.claim, pmm.release
    t0 = _clock()
    for _ in range(n):
        lease = claim(h, submit(h, a, SIZE))
        release(h, lease)
    return _clock() - t0


def measure(rounds: int, n: int) -> dict[str, float]:
    def arm(body: Callable[[int], float], on: bool, level: str = "local") -> Callable[[int], float]:
        def run(m: int) -> float:
            with contracts.contracts(on, level=level):
                return body(m)
        return run

    arms = {"bare": bare, "ledger_off": arm(ledger, False), "ledger_on": arm(ledger, True),
            "tickets_off": arm(tickets, False), "tickets_on": arm(tickets, True),
            "ledger_full": arm(ledger, True, "full"), "tickets_full": arm(tickets, True, "full")}
    best = {k: float("inf") for k in arms}
    gc.disable()  # as timeit does: a collection pass would land on whichever arm is running
    try:
        for _ in range(rounds):
            for k, f in arms.items():
                m = n // 20 if k.endswith("_full") else n // 4 if k.endswith("_on") else n
                best[k] = min(best[k], f(m) / m)
    finally:
        gc.enable()
    return {k: 1.0 / v for k, v in best.items()}  # round trips per second


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="thread CPU time or wall time")
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    global _clock
    _clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    rate = measure(args.rounds, args.n)
    ratios = {"ledger off/bare": rate["bare"] / rate["ledger_off"],
              "ledger on/off": rate["ledger_off"] / rate["ledger_on"],
              "tickets off/bare": rate["bare"] / rate["tickets_off"],
              "tickets on/off": rate["tickets_off"] / rate["tickets_on"]}
    reference = {"ledger full/off": rate["ledger_off"] / rate["ledger_full"],
                 "tickets full/off": rate["tickets_off"] / rate["tickets_full"]}
    for k, v in rate.items():
        print(f"  {k:12} {v:12,.0f} round trips/s  ({1e6 / v:7.2f} us each)")
    for k, v in ratios.items():
        print(f"  {k:18} {v:5.2f}x  (goal <= 3x: {'met' if v <= 3 else 'NOT met'})")
    for k, v in reference.items():
        print(f"  {k:18} {v:5.2f}x  (contracts level \"full\", no goal)")
    if args.json:
        Path(args.json).write_text(json.dumps({"clock": args.clock, "round_trips_per_s": rate, "time_ratios": ratios,
                                               "full_level_ratios": reference}, indent=2) + "\n")


if __name__ == "__main__":
    main()
