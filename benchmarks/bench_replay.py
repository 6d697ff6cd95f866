"""Replay throughput (events/s) against trace size: linear replay means a flat rate (issue #14).

Each trace is written by refimpl's traced `ProcessMemoryManager` (contracts
off) to a temporary file, then replayed from that file with
`invariants.replay.replay`. The workload is the adversarial shape of the
issue: per four events one reservation is left open (so live state grows
with the trace: n/4 provisional reservations at the end, before a declared
boundary) and one more is reserved, committed and released. A quadratic
checker's rate falls as n grows; a linear one's stays flat. CPU time of the
replaying process is reported beside wall time: on a shared machine wall
time mostly measures the neighbours. Run:

    python benchmarks/bench_replay.py [--sizes 10000,100000,1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from invariants import contracts
from invariants.replay import replay
from refimpl.governor import ProcessMemoryManager
from refimpl.tracing import JsonlSink, boundary
from spec.types import Role, Tier


def write_trace(path: str, events: int) -> int:
    """Write about `events` events; returns the exact count."""
    with open(path, "w") as f, contracts.contracts(False):
        pmm = ProcessMemoryManager(trace=JsonlSink(f))
        h = pmm.register_holder("bench")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 2**62)
        n = 2
        while n + 5 <= events:
            pmm.reserve(h, a, Tier.DEVICE, 64, Role.KV)  # left open: live state grows with the trace
            b = pmm.reserve(h, a, Tier.DEVICE, 128, Role.STAGING)
            pmm.commit(h, b, 96)
            pmm.release(h, b)
            n += 4
        boundary(pmm)
        return n + 1


def bench(events: int) -> dict[str, float]:
    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="ortmem-bench-")
    os.close(fd)
    try:
        t0 = time.perf_counter()
        n = write_trace(path, events)
        written = time.perf_counter() - t0
        size = os.path.getsize(path)
        t0, c0 = time.perf_counter(), time.process_time()
        with open(path, "rb") as f:
            r = replay(f)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        os.unlink(path)
    assert r.ok and r.events == n, r.describe()
    return {"events": n, "bytes": size, "write_s": round(written, 2), "replay_s": round(took, 2),
            "cpu_s": round(cpu, 2), "events_per_s": round(n / took), "events_per_cpu_s": round(n / cpu),
            "cpu_us_per_event": round(1e6 * cpu / n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated event counts")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if not sizes or any(n < 10 for n in sizes):
        ap.error("--sizes must list event counts >= 10")
    rows = []
    print(f"{'events':>10} {'MB':>8} {'wall s':>8} {'events/s':>10} {'CPU s':>8} {'events/CPU s':>13} "
          f"{'CPU us/event':>13}")
    for n in sizes:
        row = bench(n)
        rows.append(row)
        print(f"{row['events']:>10} {row['bytes'] / 1e6:>8.1f} {row['replay_s']:>8.2f} {row['events_per_s']:>10} "
              f"{row['cpu_s']:>8.2f} {row['events_per_cpu_s']:>13} {row['cpu_us_per_event']:>13}", flush=True)
    if len(rows) > 1:
        ratio = rows[-1]["cpu_us_per_event"] / rows[0]["cpu_us_per_event"]
        print(f"CPU time per event, largest / smallest trace: {ratio:.2f}x (linear replay: about 1x; CPU time, "
              "not wall time, because these machines are shared)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
