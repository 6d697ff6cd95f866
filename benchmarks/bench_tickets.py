"""Ticket round trips (submit -> grant -> claim -> release) per second, as ratios to the bare ledger.

Arms, measured in one process, interleaved, best of N rounds (shared, noisy machines):
(a) `BareLedger` of bench_ledger.py (a dict and a lock): reserve -> commit -> release;
(b) `ProcessMemoryManager` with contracts off: submit (granted at once: the ledger has room) -> claim -> release
    of the lease;
(c) the same with contracts on (the composed predicates on what each operation touched).
Each arm runs single-threaded and with two threads sharing one ledger / pool
(each thread its own holder); the figure is total round trips per second.

    python benchmarks/bench_tickets.py [--rounds 5] [--n 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_ledger import BareLedger  # noqa: E402

from invariants import contracts  # noqa: E402
from refimpl.manager import ProcessMemoryManager  # noqa: E402
from spec.types import Tier  # noqa: E402

SIZE = 4096


def _threads(k: int, body: Callable[[int], None]) -> float:
    """Wall time for k threads running body(i) together (started on a barrier)."""
    barrier = threading.Barrier(k + 1)

    def run(i: int) -> None:
        barrier.wait()
        body(i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def bare(n: int, k: int) -> float:
    led = BareLedger(1 << 40)

    def body(i: int) -> None:
        reserve, commit, release = led.reserve, led.commit, led.release
        for _ in range(n // k):
            x = reserve(SIZE)
            commit(x)
            release(x)
    return _threads(k, body)


def tickets(n: int, k: int) -> float:
    pmm = ProcessMemoryManager(mailbox=64)
    holders = [pmm.register_holder(f"h{i}") for i in range(k)]
    aid = pmm.register_authority("bench", Tier.DEVICE, 1 << 40)

    def body(i: int) -> None:
        h = holders[i]
        submit, claim, release = pmm.submit, pmm.claim, pmm.release
        for _ in range(n // k):
            t = submit(h, aid, SIZE, 0)
            release(h, claim(h, t))
    return _threads(k, body)


def measure(rounds: int, n: int) -> dict[str, float]:
    def off(n: int, k: int) -> float:
        with contracts.contracts(False):
            return tickets(n, k)

    def on(n: int, k: int) -> float:
        with contracts.contracts(True):
            return tickets(n, k)

    arms: dict[str, Callable[[int, int], float]] = {"bare": bare, "tickets_contracts_off": off,
                                                     "tickets_contracts_on": on}
    best = {f"{a}/{k}t": float("inf") for a in arms for k in (1, 2)}
    for _ in range(rounds):
        for a, f in arms.items():
            for k in (1, 2):
                m = n // 10 if a == "tickets_contracts_on" else n
                best[f"{a}/{k}t"] = min(best[f"{a}/{k}t"], f(m, k) / m)  # seconds per round trip
    return {key: 1.0 / v for key, v in best.items()}  # round trips per second


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    rate = measure(args.rounds, args.n)
    ratios = {f"{k}t {arm}/bare": rate[f"bare/{k}t"] / rate[f"{arm}/{k}t"]
              for k in (1, 2) for arm in ("tickets_contracts_off", "tickets_contracts_on")}
    for key, v in rate.items():
        print(f"  {key:26} {v:12,.0f} round trips/s  ({1e6 / v:8.2f} us each)")
    for key, v in ratios.items():
        print(f"  {key:40} {v:6.2f}x time per round trip")
    if args.json:
        Path(args.json).write_text(json.dumps({"round_trips_per_s": rate, "time_ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
