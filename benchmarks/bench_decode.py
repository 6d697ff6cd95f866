"""Governance overhead per decode step: governed vs ungoverned, in one run, over model sizes.

Governed: `GovernedRuntime` decode (ledger + KV holder with IOBinding into
leased buffers, bound once per bucket, bucketed growth with reclaim).
Three more arms on the same model:
  plain: a plain session, `run(None, feeds)` with concatenated KV, the way
         an unmanaged caller runs it;
  bound: the same prebuilt-binding KV bundle (`refimpl.ort.holders.KvBundle`)
         driven directly, with no runtime, ledger or holder around it, on a
         session that loads its weights from the file itself: it grows in the
         same buckets at the same steps as the governed arm (a bigger bundle,
         the old K/V copied, the new bucket bound once), only without leases,
         so `governed - bound` is the governance layer's whole cost, growth
         included (the arm used to keep one bundle of max context, so every
         growth round charged the governed arm alone);
  lease: the governed runtime's own session (weights read from the lease)
         driven by a bare bundle that grows the same way: `governed - lease`
         ("path") is the runtime's decode path alone, `lease - bound` the cost
         of lease-supplied weights.
Fairness: every arm reads the same precomputed token input of the step
(written into its bound x buffer, one 4 d_model-byte copy in every arm),
runs with no RunOptions, one intra-op thread and the managed sessions' ORT
options; plain and bound read one physical copy of the weights (ORT maps the
model's file: the same page-cache pages), governed and lease the other one
(the lease), so each copy is read twice per round. The three binding arms
(governed, bound, lease) run one prebuilt binding per step and build bindings
only when they grow; after every runtime the governed output and K/V are
checked equal to the bound and plain arms' (same result, or the comparison
means nothing). Per size, the share of the weight lease the kernel put on
huge pages is printed (`/proc/self/smaps`): on 4 KiB shared pages, as it was,
the lease read 3-5% slower than ORT's own file mapping at d_model >= 1024
(`refimpl.ort.holders.WeightHolder.admit`). Rounds where the arms grow (token = a multiple of the bucket) are
reported apart as well ("growth rounds": copy + bind, governed: + the ledger's
lease, reclaim and release), and the steady figure over the other rounds.

Measurement (robust to other load on a shared machine): every decode step is
one round in which each arm runs that same step once, back to back, in an
order drawn afresh for every round (a seeded random permutation): in
expectation every arm runs equally often at every position and after every
other arm, to any depth of carryover (the arm after the plain one, which
allocates its outputs every step, or after its own twin or itself, which
leave its weights warm in cache). Fixed order schemes measured biased here:
the forward/reversed alternation put the governed arm after the plain one in
every reversed round and the lease arm never, about 50 us at d_model 1024 on
`path` (10 / 62 us by order) that a two-arm run of the same pair does not
show (about 5 us, as for two identical arms); a fixed cycle of eight orders
balanced by predecessor still gave 27, 99 and 73 us on `lease - bound` at
d_model 1024 in three runs, where a random-order run of the same sessions
alone (separate copies, no plain arm) gives 6-17 us and this benchmark -10 us.
Each round gives one *pair difference* per comparison (governed - plain,
governed - bound, governed - lease, lease - bound), measured at the same
moment of the machine. Over `--reps` fresh runtimes of `--steps` steps each
(growth steps included), the figure is the median of the round differences,
printed with their quartiles (the spread); as a percentage, the same over
per-round ratios difference /
baseline. Absolute medians per arm are printed beside them. Clock: `--clock thread` (default)
times each arm with the calling thread's CPU time (`time.thread_time`;
every session runs one intra-op thread, ORT's kernels in the caller's
thread), so time the process spends descheduled on a loaded machine is not
charged to whichever arm it hit; `--clock wall` uses `time.perf_counter`. Goal (issue #11 item 7): governed -
ungoverned <= 5 us fixed cost, and <= 2% at d_model >= 1024; it is a figure
to read, never a timed assert.
Cold caches: at d_model >= 1024 a Run streams more weight bytes than the L2
holds (and, with four arms and other load, through much of the L3), so every
arm starts cold and the governed Python path (dispatch, lookups, the input
callback) runs from cold caches too. That path costs 0.7-0.9 us warm at
d_model 64 with a kept action (1.5-2.5 us with a fresh one) and about 9 us cold, plus about 10 us to build a fresh `S.Decode` (attrs, frozen)
cold: measured in a two-arm loop with 48 MiB read between arms (governed
minus a bare bundle on the same session, d_model 64: 19.8 us with a fresh
action, 9.6 us with a kept one, 9.1 us calling `_decode` directly; two
identical bare arms: 1.0 us; without the flush 2.1 us). This is what `path`
shows at d_model >= 1024 (20-50 us with fresh actions). The governed arm
keeps its request's action (frozen, so reusable, as a caller holding a
request handle would); `--fresh-action` builds one per step.
Device arm (issue #22 item 3): `--provider cuda` runs the governed device
path (weights and KV in leased device regions, each Run shrinking its
capped EP arena); the bound and lease arms then drive device KV regions by
pointer too (allocated outside the ledger, benchmark only), the plain arm
round-trips KV through the host as an unmanaged `run()` caller does. Use
`--clock wall` there (device time is not the thread's CPU time).
`--device standin` runs the device path's wiring on the CPU stand-in (no
CUDA: its figures are the wiring's CPU cost, not a device's).
Usage: python benchmarks/bench_decode.py [--sizes 64,256,1024] [--steps 64] [--reps 9] [--bucket 16]
       [--clock thread|wall] [--provider cuda] [--device standin] [--prepack]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
from collections.abc import Callable
import tempfile
import time

import numpy as np

from invariants import contracts
from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.ort.device import DeviceMemory, StandInMemory
from refimpl.ort.device_holders import DeviceKvBundle
from refimpl.ort.holders import KvBundle
from refimpl.ort.session import make_session
from refimpl.ort.zoo import reporter_facts, save_decoder_external
from refimpl.topology import scaled_topology
from spec import sessions as S

SIZES = (64, 256, 1024, 2048)
#: The comparisons reported: (name, minuend arm, baseline arm).
PAIRS = (("gov-plain", "g", "p"), ("gov-bound", "g", "b"), ("path", "g", "s"), ("lease-bound", "s", "b"))
#: The env arena cap of this process's runtimes (every managed session allocates from it). ortmem registers
#: one env arena per process, at one cap, and refuses another cap (`refimpl.ort.arena`: re-registering in ORT
#: reaches only sessions created afterwards, docs/ort-claims.md#env-arena-reregister), so every size shares
#: it. It must hold each size's measured
#: transient peak (d2048 at 64 steps: about 1 MiB), lent within it; a peak past it is refused, typed.
BENCH_ARENA_CAP = 64 << 20
def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:  # too few rounds of a kind (a short run): its one value, or nothing
        return (xs[0],) * 3 if xs else (float("nan"),) * 3
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _huge_kib(arr: np.ndarray) -> tuple[int, int] | None:
    """(AnonHugePages, Rss) in KiB of the mapping that holds `arr` (/proc/self/smaps), None if unreadable."""
    addr = arr.ctypes.data
    try:
        with open("/proc/self/smaps") as fh:
            text = fh.read()
    except OSError:
        return None
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
        lo, hi = (int(x, 16) for x in block.split(None, 1)[0].split("-"))
        if lo <= addr < hi:
            fields = dict(re.findall(r"^(\w+):\s+(\d+) kB", block, re.M))
            return int(fields.get("AnonHugePages", 0)), int(fields.get("Rss", 0))
    return None


def _grow_bare(b: KvBundle, cap: int) -> KvBundle:
    """The ungoverned twin of `KvHolder.grow` + `install`: a bigger bundle, the old K/V copied, bound once."""
    new = KvBundle(b.heads, b.dh, cap, 0, b.session, b.tokens, b.cur)
    n = b.heads * b.tokens * b.dh
    for name in ("key", "value"):
        new.bufs[name][b.cur][:n] = b.bufs[name][b.cur][:n]
    new.bind()
    return new


def _device_bundle(memory: DeviceMemory, heads: int, dh: int, cap: int, session: object,
                   old: DeviceKvBundle | None = None) -> DeviceKvBundle:
    """An unleased device KV bundle (benchmark only): the governed device bundle's layout and binding plan."""
    new = DeviceKvBundle(heads, dh, cap, 0, session, memory, memory.alloc(16 * heads * dh * cap), None,
                         old.tokens if old else 0, old.cur if old else 0)
    if old is not None:
        n = heads * old.tokens * dh * 4
        for name in ("key", "value"):
            memory.copy(new.region, new.offset(name, old.cur), old.region, old.offset(name, old.cur), n)
        memory.free(old.region)
    new.bind()
    return new


def _bare(heads: int, dh: int, bucket: int, steps: int, session: object,
          memory: DeviceMemory | None = None) -> Callable[[np.ndarray], KvBundle]:
    """A bare bundle driven as the governed runtime drives its own: same buckets, growth at the same steps."""
    if memory is not None:
        b: KvBundle = _device_bundle(memory, heads, dh, min(bucket, steps), session)
    else:
        b = KvBundle(heads, dh, min(bucket, steps), 0, session)
        b.bind()

    def step(x: np.ndarray) -> KvBundle:
        nonlocal b
        if b.tokens == b.cap:
            b = (_device_bundle(memory, heads, dh, min(b.cap + bucket, steps), b.session, b) if memory is not None
                 else _grow_bare(b, min(b.cap + bucket, steps)))
        t = b.tokens
        b.x[...] = x
        b.session.run_with_iobinding(b.bindings[t])
        b.cur, b.tokens = 1 - b.cur, t + 1
        return b

    return step


def bench(d_model: int, steps: int, reps: int, bucket: int, directory: str,
          provider: str = "CPUExecutionProvider", prepack: bool = False,
          clock: Callable[[], float] = time.thread_time, seed: int = 0,
          fresh_action: bool = False, standin: bool = False) -> dict[str, object]:
    """Per-arm medians (s) and, per comparison and round kind, the quartiles (s and ratios)."""
    heads = 8 if d_model >= 256 else 4
    dh = d_model // heads
    path = save_decoder_external(directory, d_model=d_model, heads=heads, name=f"d{d_model}")
    cuda = provider == "CUDAExecutionProvider"
    f = reporter_facts(path, steps, bucket, "cuda:0" if cuda else "cpu")
    topo = scaled_topology(1 << 31, 0, arena=BENCH_ARENA_CAP)
    times: dict[str, list[float]] = {"g": [], "p": [], "b": [], "s": []}
    ref = make_session(path, provider=provider, prepack=prepack)  # the managed sessions' ORT options
    rng = random.Random(seed)  # the arm order of every round
    growth: list[bool] = []  # per kept round: the bucketed arms grew their KV in it
    huge: list[tuple[int, int] | None] = []  # per runtime: the weight lease's (huge-page KiB, resident KiB)
    for rep in range(reps):
        table = {}
        rt = GovernedRuntime(topo, 1 << 31, {"m": path}, steps, bucket,
                             inputs=lambda rid, t, d: table[t], provider=provider, prepack=prepack,
                             device=StandInMemory() if standin else None)
        rt.execute(S.LoadModel("m", "m", f, f.loop_carried))
        rid = rt.execute(S.Open("m"))
        decode = S.Decode(rid)  # a frozen action: the caller keeps it for the request (see --fresh-action)
        if rt.memory is None:  # the device path's weights are device regions, not host pages
            huge.append(_huge_kib(rt.weights.layouts["m"][0]))
        for t in range(steps):
            table[t] = decode_input(rid, t, d_model)
        bound = _bare(heads, dh, bucket, steps, make_session(path, provider=provider, prepack=prepack), rt.memory)
        gsess = _bare(heads, dh, bucket, steps, rt.models["m"].session, rt.memory)
        pk = pv = np.zeros((1, heads, 0, dh), np.float32)
        last: KvBundle | None = None
        for t in range(steps):
            # Every arm looks its input up inside its timed call, as the runtime's `inputs` callback does.
            def governed() -> None:
                rt.execute(S.Decode(rid) if fresh_action else decode)

            def plain() -> None:
                nonlocal pk, pv
                _, pk, pv = ref.run(None, {"x": table[t], "past_key": pk, "past_value": pv})

            def bare() -> None:
                nonlocal last
                last = bound(table[t])

            arms = [("g", governed), ("p", plain), ("b", bare), ("s", lambda: gsess(table[t]))]
            order = rng.sample(arms, len(arms))
            got = {}
            for name, fn in order:
                t0 = clock()
                fn()
                got[name] = clock() - t0
            if rep or t >= 4:  # warm-up: the first steps of the first runtime
                for name, dt in got.items():
                    times[name].append(dt)
                growth.append(t > 0 and t % bucket == 0)
        # Same result, or the comparison means nothing: the output and the whole K/V of the last step.
        assert last is not None and np.array_equal(rt.last_output, last.y)
        for got_kv, bare_kv, plain_kv in zip(rt.kv.present(rid), (last.view(n, last.cur, last.tokens)
                                                                    for n in ("key", "value")), (pk, pv)):
            assert np.array_equal(got_kv, bare_kv) and np.array_equal(got_kv, plain_kv)
        assert provider in rt.models["m"].session.get_providers()[:1]
        rt.close()
    out: dict[str, object] = {"median": {k: statistics.median(v) for k, v in times.items()},
                              "rounds": len(times["g"]), "growth_rounds": sum(growth), "huge": huge}
    for kind, keep in (("all", None), ("steady", False), ("growth", True)):
        sel = [i for i in range(len(growth)) if keep is None or growth[i] is keep]
        for name, a, base in PAIRS:
            diffs = [times[a][i] - times[base][i] for i in sel]
            ratios = [(times[a][i] - times[base][i]) / times[base][i] for i in sel]
            out[kind, name] = (_quartiles(diffs), _quartiles(ratios))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="d_model values, comma-separated")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--bucket", type=int, default=16)
    p.add_argument("--provider", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--device", choices=("none", "standin"), default="none",
                   help="standin: the device path's wiring on the CPU stand-in (no CUDA; --provider cpu)")
    p.add_argument("--clock", choices=("thread", "wall"), default="thread",
                   help="thread: the calling thread's CPU time (not charged while descheduled); wall: perf_counter")
    p.add_argument("--fresh-action", action="store_true",
                   help="the governed arm builds a new S.Decode action every step instead of keeping the "
                        "request's one (frozen, reusable): about 10 us more per step with cold caches")
    p.add_argument("--prepack", action="store_true",
                   help="every arm with ORT's weight prepacking on: ORT keeps its own packed weight copy and "
                        "never reads the leased one (the governance layer's cost alone); default off, as "
                        "managed sessions run")
    args = p.parse_args()
    provider = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}[args.provider]
    clock = {"thread": time.thread_time, "wall": time.perf_counter}[args.clock]
    if args.clock == "thread" and provider != "CPUExecutionProvider":
        print("note: with the CUDA EP, device time is not the calling thread's CPU time; use --clock wall")
    print(f"provider: {provider}, prepacking {'on' if args.prepack else 'off'}, governed action "
          f"{'built every step' if args.fresh_action else 'kept per request'}, {args.steps} steps x "
          f"{args.reps} runtimes per size, arm order a random permutation per round, clock {args.clock}")
    print("per arm: median us per step; per comparison: the median of the round differences (us) and ratios (%), "
          "each with the rounds' [p25, p75]")
    with contracts.contracts(False), tempfile.TemporaryDirectory() as d:
        for size in (int(x) for x in args.sizes.split(",")):
            r = bench(size, args.steps, args.reps, args.bucket, d, provider, args.prepack, clock,
                      fresh_action=args.fresh_action, standin=args.device == "standin")
            med = r["median"]
            print(f"d_model {size} ({4 * size * size * 4 / 2**20:.2f} MiB weights, {r['rounds']} rounds): "
                  + "  ".join(f"{k} {med[k] * 1e6:.1f}" for k in ("p", "b", "s", "g")))
            known = [h for h in r["huge"] if h is not None]
            if known:  # whether the kernel granted the lease's huge pages (transparent huge pages, advice only)
                print(f"  weight lease on huge pages: {min(h for h, _ in known)} .. {max(h for h, _ in known)} of "
                      f"{max(rss for _, rss in known)} KiB resident, over {len(known)} runtimes")
            for kind in ("all", "steady", "growth"):
                print(f"  {kind} rounds" + (f" ({r['growth_rounds']})" if kind == "growth" else "") + ":")
                for name, _, _ in PAIRS:
                    (d25, dm, d75), (r25, q, r75) = r[kind, name]
                    print(f"    {name:>12}: {dm * 1e6:8.1f} us [{d25 * 1e6:.1f}, {d75 * 1e6:.1f}]   "
                          f"{q * 100:6.1f}% [{r25 * 100:.1f}, {r75 * 100:.1f}]")


if __name__ == "__main__":
    main()
