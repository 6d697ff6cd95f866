"""Where a checked round trip spends its time: cProfile of one path, contracts on at level "local".

    python benchmarks/profile_contracts.py [ledger|tickets|pressure|transaction] [--background 10000] [--n 2000]

Builds a manager whose authority holds `--background` live leases (contracts off), runs one round trip (the
first checked operation counts the ledger's book), times `--n` round trips by thread CPU time without the
profiler, then profiles `--n` more and prints the functions with the most time of their own. With the code of
`main` before issue #24 (PYTHONPATH pointing at a checkout of it) the same command shows the contract's
whole-ledger recount (`local_contract._moved`) and the frozen views of every row (`invariants.ledger`,
`views._alloc_rec`); figures: docs/contracts.md.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_manager  # noqa: E402

from invariants import contracts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", choices=sorted(bench_manager.ROUND_TRIPS), nargs="?", default="ledger")
    ap.add_argument("--background", type=int, default=10000)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    import bench_ledger

    pmm, a, h = bench_ledger.manager(args.background)
    body = bench_manager.ROUND_TRIPS[args.path]
    with contracts.contracts(True, level="local"):
        body(pmm, a, h, 1)
        t0 = time.thread_time()
        body(pmm, a, h, args.n)
        per = (time.thread_time() - t0) / args.n
        prof = cProfile.Profile()
        prof.enable()
        body(pmm, a, h, args.n)
        prof.disable()
    print(f"{args.path} round trip, {args.background:,} live leases on the authority: {per * 1e6:.1f} us "
          f"(unprofiled, thread CPU time); profiled, by own time:")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)

if __name__ == "__main__":
    main()
