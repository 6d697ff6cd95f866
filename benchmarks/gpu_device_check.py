"""The device path's figures on one CUDA GPU (issue #22 item 3), written to a file: run by gpu_check.sh.

Three checks on a decoder big enough that every device lease is a whole number of the driver's
2 MiB pages (d_model 1024, 8 heads: 16 MiB of weights, 16 KiB of KV per token, buckets of 128
tokens = 2 MiB), under a device topology whose granule is 2 MiB:

1. identical: a governed generation to max context (KV growing through every bucket) against an
   ungoverned CUDA session (`run()` with host KV), output and K/V bit for bit at every step;
2. device bytes = the ledger's charge: around every action that only leases or frees device
   regions (Open, growth, Prefetch, Pressure, Close) the driver's figure (cudaMemGetInfo,
   device-wide: run it on an otherwise idle GPU) must move by exactly what the device ledger's
   charge moved; around actions that create a session (LoadModel) or run kernels, the difference is
   what stays outside the ledger (context, library handles, arena regions), and it is recorded, not
   asserted away;
3. decode overhead: median wall time per decode step, governed device path vs an ungoverned device
   loop (the same session options, KV bound by pointer into unleased regions, no cap, no shrink) vs
   plain `run()` with host KV; interleaved per step, arm order random per round.

Usage: python benchmarks/gpu_device_check.py OUT.json   (exit 1 if check 1 or 2 fails)
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time

import numpy as np

from invariants import contracts
from refimpl.ort.device import CudaMemory
from refimpl.ort.device_holders import DeviceKvBundle
from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.ort.session import make_session
from refimpl.ort.zoo import reporter_facts, save_decoder_external
from spec import sessions as S

CUDA = "CUDAExecutionProvider"
MIB = 1 << 20
D_MODEL, HEADS, MAX_CONTEXT, BUCKET = 1024, 8, 512, 128
GRANULE = 2 * MIB


def _runtime(path: str, facts: S.ModelFacts, arena: int) -> GovernedRuntime:
    topo = S.Topology(capacity=4096 * MIB, reserve=0, granule=GRANULE, host_mapped_capacity=0, headroom=GRANULE,
                      source="a 4 GiB budget on cuda:0 for the check; granule: the driver's 2 MiB page", arena=arena)
    return GovernedRuntime(topo, 4096 * MIB, {"m": path}, MAX_CONTEXT, BUCKET, provider=CUDA)


def check_identical(rt: GovernedRuntime, path: str, steps: int) -> dict[str, object]:
    ref = make_session(path, provider=CUDA, prepack=False)
    rid = rt.execute(S.Open("m"))
    dh = D_MODEL // HEADS
    pk = pv = np.zeros((1, HEADS, 0, dh), np.float32)
    mismatches = []
    for t in range(steps):
        rt.execute(S.Decode(rid))
        y, pk, pv = ref.run(None, {"x": decode_input(rid, t, D_MODEL), "past_key": pk, "past_value": pv})
        gk, gv = rt.kv.present(rid)
        if not (np.array_equal(y, rt.last_output) and np.array_equal(pk, gk) and np.array_equal(pv, gv)):
            mismatches.append(t)
    rt.execute(S.Close(rid))
    return {"steps": steps, "mismatched_steps": mismatches, "ok": not mismatches}


def check_bytes(rt: GovernedRuntime, facts: S.ModelFacts) -> dict[str, object]:
    mem = rt.memory
    rows = []

    def act(label: str, action: object, lease_only: bool) -> object:
        d0, c0 = mem.device_used(), rt.pmm.snapshot(rt.auth).used
        out = rt.execute(action)
        d1, c1 = mem.device_used(), rt.pmm.snapshot(rt.auth).used
        rows.append({"action": label, "driver_delta": d1 - d0, "charge_delta": c1 - c0, "lease_only": lease_only,
                     "outside_after": d1 - c1})
        return out

    act("LoadModel", S.LoadModel("m", "m", facts, facts.loop_carried), False)
    rid = act("Open (one 2 MiB bucket)", S.Open("m"), True)
    for t in range(BUCKET):
        rt.execute(S.Decode(rid))  # kernels run: not a lease-only step
    act("Decode with growth (two-phase: +4 MiB, -2 MiB after the Run)", S.Decode(rid), False)
    act("Prefetch (borrowed device cache)", S.Prefetch(), True)
    act("Pressure (cache yields)", S.Pressure(8 * MIB), True)
    act("Close", S.Close(rid), True)
    bad = [r for r in rows if r["lease_only"] and r["driver_delta"] != r["charge_delta"]]
    snap = rt.device_snapshot()
    return {"rows": rows, "ok": not bad, "mismatched": bad,
            "snapshot": {"device_used": snap.device.used, "allocated": snap.allocated, "driver_used": snap.driver_used,
                         "arena_caps": snap.arena_caps,
                         "not_enforced": [(n.what, n.nbytes, n.source) for n in snap.not_enforced]},
            "baseline_at_registration": getattr(rt, "device_baseline", None)}


def check_overhead(rt: GovernedRuntime, path: str, steps: int, reps: int) -> dict[str, object]:
    mem: CudaMemory = rt.memory
    dh = D_MODEL // HEADS
    plain = make_session(path, provider=CUDA, prepack=False)
    bare_sess = make_session(path, provider=CUDA, prepack=False)
    times: dict[str, list[float]] = {"governed": [], "device_loop": [], "plain_run": []}
    rng = random.Random(0)
    for _ in range(reps):
        rid = rt.execute(S.Open("m"))
        decode = S.Decode(rid)
        b = DeviceKvBundle(HEADS, dh, steps, 0, bare_sess, mem, mem.alloc(16 * HEADS * dh * steps), None)
        b.bind()
        pk = pv = np.zeros((1, HEADS, 0, dh), np.float32)
        for t in range(steps):
            x = decode_input(rid, t, D_MODEL)

            def governed() -> None:
                rt.execute(decode)

            def device_loop() -> None:
                b.x[...] = x
                bare_sess.run_with_iobinding(b.bindings[b.tokens])
                b.cur, b.tokens = 1 - b.cur, b.tokens + 1

            def plain_run() -> None:
                nonlocal pk, pv
                _, pk, pv = plain.run(None, {"x": x, "past_key": pk, "past_value": pv})

            for name, fn in rng.sample([("governed", governed), ("device_loop", device_loop),
                                        ("plain_run", plain_run)], 3):
                t0 = time.perf_counter()
                fn()
                if t >= 4:
                    times[name].append(time.perf_counter() - t0)
        rt.execute(S.Close(rid))
        mem.free(b.region)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    return {"median_us": med, "governed_minus_device_loop_us": med["governed"] - med["device_loop"],
            "steps": steps, "reps": reps, "note": "governed includes the per-Run EP arena shrink and growth"}


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else "gpu_device_check.json"
    with contracts.contracts(False), tempfile.TemporaryDirectory() as d:
        path = save_decoder_external(d, d_model=D_MODEL, heads=HEADS, name="big")
        facts = reporter_facts(path, MAX_CONTEXT, BUCKET, "cuda:0")
        arena = -(-facts.transient_peak // GRANULE) * GRANULE
        result: dict[str, object] = {"model": {"d_model": D_MODEL, "heads": HEADS, "max_context": MAX_CONTEXT,
                                               "bucket": BUCKET, "referenced": facts.referenced,
                                               "device_transient_peak": facts.transient_peak, "arena_lease": arena}}
        rt = _runtime(path, facts, arena)
        result["bytes"] = check_bytes(rt, facts)
        result["identical"] = check_identical(rt, path, MAX_CONTEXT)
        result["overhead"] = check_overhead(rt, path, 256, 3)
        rt.close()
        result["after_close"] = {"device_charge": rt.pmm.snapshot(rt.auth).used, "allocated": rt.memory.allocated}
    with open(out_path, "w") as fh:
        json.dump(result, fh, indent=2, default=str)
    print(json.dumps(result, indent=2, default=str))
    ok = result["identical"]["ok"] and result["bytes"]["ok"]
    print("gpu_device_check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
