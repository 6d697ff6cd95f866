"""Governance overhead per decode step: governed vs ungoverned, in one run, over model sizes.

Governed: `GovernedRuntime` decode (ledger + KV holder with IOBinding into
leased buffers, bucketed growth with reclaim). Ungoverned: the same model
in a plain session, `run(None, feeds)` with concatenated KV, the way an
unmanaged caller runs it. Steps alternate between the arms so both see the
same machine state; medians per step. Goal (issue #5): <= 5% where a step
takes >= 1 ms. Usage: python benchmarks/bench_decode.py [--steps 64] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from invariants import contracts
from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.ort.session import make_session
from refimpl.ort.zoo import reporter_facts, save_decoder_external
from refimpl.topology import scaled_topology
from spec import sessions as S

SIZES = (64, 256, 1024, 2048)


def bench(d_model: int, steps: int, reps: int, directory: str) -> tuple[float, float]:
    heads = 8 if d_model >= 256 else 4
    path = save_decoder_external(directory, d_model=d_model, heads=heads, name=f"d{d_model}")
    f = reporter_facts(path, steps, 16)
    topo = scaled_topology(1 << 31, 0)
    gov, ungov = [], []
    ref = make_session(path)
    for rep in range(reps):
        rt = GovernedRuntime(topo, 1 << 31, {"m": path}, steps, 16)
        rt.execute(S.LoadModel("m", "m", f, f.loop_carried))
        rid = rt.execute(S.Open("m"))
        dh = d_model // heads
        pk = pv = np.zeros((1, heads, 0, dh), np.float32)
        for t in range(steps):
            x = decode_input(rid, t, d_model)
            t0 = time.perf_counter()
            rt.execute(S.Decode(rid))
            t1 = time.perf_counter()
            _, pk, pv = ref.run(None, {"x": x, "past_key": pk, "past_value": pv})
            t2 = time.perf_counter()
            if rep or t >= 4:  # warm-up
                gov.append(t1 - t0)
                ungov.append(t2 - t1)
        rt.close()
    return statistics.median(gov), statistics.median(ungov)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    print(f"{'d_model':>8} {'weights MiB':>12} {'ungoverned us':>14} {'governed us':>12} {'overhead':>9}")
    with contracts.contracts(False), tempfile.TemporaryDirectory() as d:
        for size in SIZES:
            g, u = bench(size, args.steps, args.reps, d)
            print(f"{size:>8} {4 * size * size * 4 / 2**20:>12.2f} {u * 1e6:>14.1f} {g * 1e6:>12.1f} "
                  f"{(g - u) / u * 100:>8.1f}%")


if __name__ == "__main__":
    main()
