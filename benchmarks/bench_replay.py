"""Replay throughput (events/s) against trace size: linear replay means a flat rate (issue #14).

Each ledger-only trace is written by refimpl's traced `ProcessMemoryManager`
(contracts off) to a temporary file, then replayed from that file with
`invariants.manager_replay.replay` (the one engine). The workload is the
adversarial shape of the issue: per four events one reservation is left open (so live state grows
with the trace: n/4 provisional reservations at the end, before a declared
boundary) and one more is reserved, committed and released. A quadratic
checker's rate falls as n grows; a linear one's stays flat. CPU time of the
replaying process is reported beside wall time: on a shared machine wall
time mostly measures the neighbours.

Composed traces (`ortmem-manager/2`, replayed by the same
engine; issue #21) are written by refimpl's traced
composed manager in two shapes, each sized in MB: `mixed` is `ortmem
trace`'s own workload (`refimpl.manager_workload`: tickets, pressure,
transactions, bundles, limits, device loss; its live state stays small), and
`kv` is a paged KV cache: per five events one page (a ticket granted and
claimed) is left live and one more is claimed and released, so live leases
grow with the trace. `--live-leases N` adds one `kv` trace that first leaves
N pages live (two events each) and then churns 20,000 events against them.
The goal (issue #21): at least 20k events per CPU second, and CPU time per
event flat across sizes. Run:

    python benchmarks/bench_replay.py [--sizes 10000,100000,1000000] [--composed-mb 1,5,20]
        [--live-leases 100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from invariants import contracts
from invariants.manager_replay import replay, replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.manager import ProcessMemoryManager as Composed
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import JsonlSink, boundary
from refimpl.verify.manager_hooks import abstract_manager
from spec.types import AllocState, Role, Tier


def write_trace(path: str, events: int) -> int:
    """Write about `events` events; returns the exact count."""
    with open(path, "w") as f, contracts.contracts(False):
        pmm = ProcessMemoryManager(trace=JsonlSink(f))
        h = pmm.register_holder("bench")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 2**62)
        n = 3  # configure (the manager's aging bound, written first) and the two registrations
        while n + 5 <= events:
            pmm.reserve(h, a, Tier.DEVICE, 64, Role.KV)  # left open: live state grows with the trace
            b = pmm.reserve(h, a, Tier.DEVICE, 128, Role.STAGING)
            pmm.commit(h, b, 96)
            pmm.release(h, b)
            n += 4
        boundary(pmm)
        return n + 1


def _leases(pmm: Any) -> int:
    return sum(r.state is AllocState.LIVE for r in abstract_manager(pmm).ledger.allocations.values())


def write_mixed(path: str, mb: float) -> int:
    """`ortmem trace`'s composed workload, with operations scaled to about `mb` MB (1,400 per MB: it writes
    702-738 B per operation at 1 and 5 MB). Returns the leases live at the end, as do the other writers."""
    with open(path, "w") as f, contracts.contracts(False):
        pmm = Composed(trace=JsonlSink(f))
        run_manager_workload(pmm, seed=1, operations=max(50, round(1400 * mb)))
    return _leases(pmm)


def write_kv(path: str, mb: float = 0.0, live: int = 0, churn: int = 0) -> int:
    """A paged KV cache: `live` pages left live first, then rounds of (one page kept, one claimed and released)
    until the file reaches `mb` MB, or `churn` events of claim-and-release against the live pages."""
    with open(path, "w") as f, contracts.contracts(False):
        pmm = Composed(trace=JsonlSink(f))
        h = pmm.register_holder("kv")
        a = pmm.register_authority("hbm0", Tier.DEVICE, 2**50)
        for _ in range(live):
            pmm.claim(h, pmm.submit(h, a, 4096, 0, Role.KV))
        for _ in range(churn // 3):
            pmm.release(h, pmm.claim(h, pmm.submit(h, a, 4096, 0, Role.KV)))
        while f.tell() < mb * 1e6:
            pmm.claim(h, pmm.submit(h, a, 4096, 0, Role.KV))  # a page left live: live state grows
            pmm.release(h, pmm.claim(h, pmm.submit(h, a, 4096, 0, Role.KV)))
    return _leases(pmm)


def bench_composed(shape: str, write: Any, *args: Any) -> dict[str, Any]:
    fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="ortmem-bench-")
    os.close(fd)
    try:
        c0 = time.process_time()
        live = write(path, *args)
        written = time.process_time() - c0
        size = os.path.getsize(path)
        t0, c0 = time.perf_counter(), time.process_time()
        with open(path, "rb") as f:
            r = replay_manager_lines(f)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        os.unlink(path)
    assert r.ok, r.describe()
    n = r.events
    return {"shape": shape, "events": n, "bytes": size, "live_leases_at_end": live, "write_cpu_s": round(written, 2),
            "replay_s": round(took, 2), "cpu_s": round(cpu, 2), "events_per_cpu_s": round(n / cpu),
            "cpu_us_per_event": round(1e6 * cpu / n, 1)}


def _print_composed(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"{row['shape']:>6} {row['events']:>8} {row['bytes'] / 1e6:>6.1f} {row['live_leases_at_end']:>7} "
              f"{row['cpu_s']:>7.2f} {row['events_per_cpu_s']:>13} {row['cpu_us_per_event']:>13}", flush=True)


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
    ap.add_argument("--sizes", default="10000,100000,1000000", help="ledger traces: comma-separated event counts "
                                                                     "(empty: none)")
    ap.add_argument("--composed-mb", default="1,5,20", help="composed traces: comma-separated sizes in MB (empty: none)")
    ap.add_argument("--live-leases", type=int, default=100_000, help="one composed trace with this many live leases "
                                                                      "(0: none)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    mbs = [float(x) for x in args.composed_mb.split(",") if x]
    if any(n < 10 for n in sizes) or any(x <= 0 for x in mbs) or args.live_leases < 0:
        ap.error("--sizes must list event counts >= 10, --composed-mb positive sizes, --live-leases >= 0")
    rows = []
    if sizes:
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
    composed: list[dict[str, Any]] = []
    if mbs or args.live_leases:
        print(f"{'shape':>6} {'events':>8} {'MB':>6} {'live':>7} {'CPU s':>7} {'events/CPU s':>13} {'CPU us/event':>13}")
    for shape, write in (("mixed", write_mixed), ("kv", write_kv)):
        for mb in mbs:
            composed.append(bench_composed(shape, write, mb))
            _print_composed(composed[-1:])
        mine = [r for r in composed if r["shape"] == shape]
        if len(mine) > 1:
            print(f"{shape}: CPU us/event, largest / smallest trace: "
                  f"{mine[-1]['cpu_us_per_event'] / mine[0]['cpu_us_per_event']:.2f}x")
    if args.live_leases:
        composed.append(bench_composed("kv", write_kv, 0.0, args.live_leases, 20_000))
        _print_composed(composed[-1:])
    if composed:
        worst = min(r["events_per_cpu_s"] for r in composed)
        print(f"composed: slowest {worst} events per CPU s; goal 20,000: {'met' if worst >= 20_000 else 'NOT met'}")
    load = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average_1_5_15": [round(x, 2) for x in load], "ledger": rows, "composed": composed},
                      f, indent=2)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
