"""Governance overhead per decode step: governed vs ungoverned, in one run, over model sizes.

Governed: `GovernedRuntime` decode (ledger + KV holder with IOBinding into
leased buffers, bound once per bucket, bucketed growth with reclaim).
Two ungoverned arms on the same model:
  plain: a plain session, `run(None, feeds)` with concatenated KV, the way
         an unmanaged caller runs it;
  bound: the same prebuilt-binding KV bundle (`refimpl.ort.holders.KvBundle`)
         driven directly, with no runtime, ledger or holder around it, so
         `governed - bound` is the governance layer's own fixed cost.
Every arm reads the same precomputed token inputs. Steps rotate between the
arms so all see the same machine state; medians per step (growth steps
included in the sample). Goal (issue #11 item 7): governed - ungoverned
<= 5 us fixed cost, and <= 2% at d_model >= 1024.
Usage: python benchmarks/bench_decode.py [--steps 64] [--reps 5] [--bucket 16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from invariants import contracts
from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.ort.holders import KvBundle
from refimpl.ort.session import make_session
from refimpl.ort.zoo import reporter_facts, save_decoder_external
from refimpl.topology import scaled_topology
from spec import sessions as S

SIZES = (64, 256, 1024, 2048)


def bench(d_model: int, steps: int, reps: int, bucket: int, directory: str) -> tuple[float, float, float]:
    heads = 8 if d_model >= 256 else 4
    dh = d_model // heads
    path = save_decoder_external(directory, d_model=d_model, heads=heads, name=f"d{d_model}")
    f = reporter_facts(path, steps, bucket)
    topo = scaled_topology(1 << 31, 0)
    gov, plain, bound = [], [], []
    ref = make_session(path)
    for rep in range(reps):
        table = {}
        rt = GovernedRuntime(topo, 1 << 31, {"m": path}, steps, bucket,
                             inputs=lambda rid, t, d: table[t])
        rt.execute(S.LoadModel("m", "m", f, f.loop_carried))
        rid = rt.execute(S.Open("m"))
        for t in range(steps):
            table[t] = decode_input(rid, t, d_model)
        b = KvBundle(heads, dh, steps, 0, make_session(path))
        b.bind()
        pk = pv = np.zeros((1, heads, 0, dh), np.float32)
        for t in range(steps):
            x = table[t]
            t0 = time.perf_counter()
            rt.execute(S.Decode(rid))
            t1 = time.perf_counter()
            _, pk, pv = ref.run(None, {"x": x, "past_key": pk, "past_value": pv})
            t2 = time.perf_counter()
            b.x[...] = x
            b.session.run_with_iobinding(b.bindings[t])
            b.cur, b.tokens = 1 - b.cur, t + 1
            t3 = time.perf_counter()
            if rep or t >= 4:  # warm-up
                gov.append(t1 - t0)
                plain.append(t2 - t1)
                bound.append(t3 - t2)
        assert np.array_equal(rt.last_output, b.y)  # same result, or the comparison means nothing
        rt.close()
    return statistics.median(gov), statistics.median(plain), statistics.median(bound)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--bucket", type=int, default=16)
    args = p.parse_args()
    print(f"{'d_model':>8} {'weights MiB':>12} {'plain us':>9} {'bound us':>9} {'governed us':>12} "
          f"{'gov-plain us':>13} {'gov-bound us':>13} {'vs plain':>9} {'vs bound':>9}")
    with contracts.contracts(False), tempfile.TemporaryDirectory() as d:
        for size in SIZES:
            g, u, b = bench(size, args.steps, args.reps, args.bucket, d)
            print(f"{size:>8} {4 * size * size * 4 / 2**20:>12.2f} {u * 1e6:>9.1f} {b * 1e6:>9.1f} {g * 1e6:>12.1f} "
                  f"{(g - u) * 1e6:>13.1f} {(g - b) * 1e6:>13.1f} {(g - u) / u * 100:>8.1f}% {(g - b) / b * 100:>8.1f}%")


if __name__ == "__main__":
    main()
