"""Governance overhead per decode step: governed vs ungoverned, in one run, over model sizes.

Governed: `GovernedRuntime` decode (ledger + KV holder with IOBinding into
leased buffers, bound once per bucket, bucketed growth with reclaim).
Three more arms on the same model:
  plain: a plain session, `run(None, feeds)` with concatenated KV, the way
         an unmanaged caller runs it;
  bound: the same prebuilt-binding KV bundle (`refimpl.ort.holders.KvBundle`)
         driven directly, with no runtime, ledger or holder around it, so
         `governed - bound` is the governance layer's own fixed cost;
  lease: the governed runtime's own session (weights read from the lease)
         driven by a bare bundle: `governed - lease` ("path") is the runtime's
         decode path alone, `lease - bound` the cost of lease-supplied weights.
Every arm reads the same precomputed token inputs. Steps rotate between the
arms so all see the same machine state; medians per step (growth steps
included in the sample); `paired` is the median over steps of (governed - bound)
measured back to back, the figure least moved by other load. Goal (issue #11 item 7): governed - ungoverned
<= 5 us fixed cost, and <= 2% at d_model >= 1024.
Usage: python benchmarks/bench_decode.py [--steps 64] [--reps 5] [--bucket 16] [--provider cuda]
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


def bench(d_model: int, steps: int, reps: int, bucket: int, directory: str,
          provider: str = "CPUExecutionProvider", prepack: bool = False) -> tuple[float, ...]:
    heads = 8 if d_model >= 256 else 4
    dh = d_model // heads
    path = save_decoder_external(directory, d_model=d_model, heads=heads, name=f"d{d_model}")
    f = reporter_facts(path, steps, bucket)
    topo = scaled_topology(1 << 31, 0)
    gov: list[float] = []
    plain_t: list[float] = []
    bound_t: list[float] = []
    sess_t: list[float] = []
    ref = make_session(path, provider=provider, prepack=prepack)  # the managed sessions' ORT options
    for rep in range(reps):
        table = {}
        rt = GovernedRuntime(topo, 1 << 31, {"m": path}, steps, bucket,
                             inputs=lambda rid, t, d: table[t], provider=provider, prepack=prepack)
        rt.execute(S.LoadModel("m", "m", f, f.loop_carried))
        rid = rt.execute(S.Open("m"))
        for t in range(steps):
            table[t] = decode_input(rid, t, d_model)
        b = KvBundle(heads, dh, steps, 0, make_session(path, provider=provider, prepack=prepack))
        b.bind()
        gb = KvBundle(heads, dh, steps, 0, rt.models["m"].session)
        gb.bind()
        pk = pv = np.zeros((1, heads, 0, dh), np.float32)
        for t in range(steps):
            x = table[t]
            times = {}

            def governed() -> None:
                rt.execute(S.Decode(rid))

            def plain() -> None:
                nonlocal pk, pv
                _, pk, pv = ref.run(None, {"x": x, "past_key": pk, "past_value": pv})

            def bound() -> None:
                b.x[...] = x
                b.session.run_with_iobinding(b.bindings[t])
                b.cur, b.tokens = 1 - b.cur, t + 1

            def gsess() -> None:
                gb.x[...] = x
                gb.session.run_with_iobinding(gb.bindings[t])
                gb.cur, gb.tokens = 1 - gb.cur, t + 1

            arms = [("g", governed), ("p", plain), ("b", bound), ("s", gsess)]
            for name, fn in arms[t % 4:] + arms[:t % 4]:  # rotate the order: no arm always runs first
                t0 = time.perf_counter()
                fn()
                times[name] = time.perf_counter() - t0
            if rep or t >= 4:  # warm-up
                gov.append(times["g"])
                plain_t.append(times["p"])
                bound_t.append(times["b"])
                sess_t.append(times["s"])
        assert np.array_equal(rt.last_output, b.y)  # same result, or the comparison means nothing
        assert provider in rt.models["m"].session.get_providers()[:1]
        rt.close()
    paired = statistics.median(g - b for g, b in zip(gov, bound_t))  # per step, same machine moment
    path_cost = statistics.median(g - x for g, x in zip(gov, sess_t))  # the runtime's decode path alone
    return (statistics.median(gov), statistics.median(plain_t), statistics.median(bound_t), paired,
            statistics.median(sess_t), path_cost)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--bucket", type=int, default=16)
    p.add_argument("--provider", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--prepack", action="store_true",
                   help="every arm with ORT's weight prepacking on: ORT keeps its own packed weight copy and "
                        "never reads the leased one (the governance layer's cost alone); default off, as "
                        "managed sessions run")
    args = p.parse_args()
    provider = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}[args.provider]
    print(f"provider: {provider}, prepacking {'on' if args.prepack else 'off'}")
    print(f"{'d_model':>8} {'weights MiB':>12} {'plain us':>9} {'bound us':>9} {'lease us':>9} {'governed us':>12} "
          f"{'gov-plain us':>13} {'gov-bound us':>13} {'paired us':>10} {'path us':>8} {'vs plain':>9} "
          f"{'vs bound':>9}")
    with contracts.contracts(False), tempfile.TemporaryDirectory() as d:
        for size in SIZES:
            g, u, b, pd, ls, pc = bench(size, args.steps, args.reps, args.bucket, d, provider, args.prepack)
            print(f"{size:>8} {4 * size * size * 4 / 2**20:>12.2f} {u * 1e6:>9.1f} {b * 1e6:>9.1f} {ls * 1e6:>9.1f} "
                  f"{g * 1e6:>12.1f} {(g - u) * 1e6:>13.1f} {(g - b) * 1e6:>13.1f} {pd * 1e6:>10.1f} "
                  f"{pc * 1e6:>8.1f} {(g - u) / u * 100:>8.1f}% {pd / b * 100:>8.1f}%")


if __name__ == "__main__":
    main()
