"""`ortmem demo`: one governed generation on a built model, static split vs elastic, charge per holder per step.

Both arms run the same decoder, inputs and limit. Static: the KV reservation
is the maximum context, taken at load (bucket = max context). Elastic: KV
starts at one bucket and grows, reclaiming the weight holder's borrowed
cache through the production reclaim path: each reclaim is a pressure ticket
on the weight holder, answered by its callback (the counts are reported).
Every output is compared with an
ungoverned session; stranded KV (charged minus used) is summed over steps.
Rendering only here; the work is `refimpl.ort.governed.GovernedRuntime`.
"""

from __future__ import annotations

import tempfile
from typing import Any

import attrs
import numpy as np

__all__ = ["ArmTrace", "run_demo", "plot"]


@attrs.frozen
class ArmTrace:
    name: str
    steps: tuple[dict[str, int], ...]  # per step: weights, cache, kv, kv_used, stranded, released
    tickets: tuple[int, int] = (0, 0)  # pressure tickets on the weight holder: (opened, answered)

    @property
    def stranded_byte_steps(self) -> int:
        return sum(s["stranded"] for s in self.steps)

    @property
    def mean_cache(self) -> float:
        return sum(s["cache"] for s in self.steps) / len(self.steps)


def _arm(name: str, sources: dict[str, str], limit: int, max_context: int, bucket: int, steps: int,
         headroom: int, arena: int) -> tuple[ArmTrace, list[np.ndarray]]:
    from refimpl.ort.governed import GovernedRuntime
    from refimpl.ort.zoo import reporter_facts
    from refimpl.topology import scaled_topology
    from spec import sessions as S

    # Every managed session allocates from the process's one env arena (`arena`, one cap for both arms:
    # ortmem registers it once per process and refuses another cap, since re-registering in ORT reaches only
    # sessions created afterwards, docs/ort-claims.md#env-arena-reregister); its lease is inside `limit`.
    topo = scaled_topology(max(limit, 1 << 20), headroom, arena=arena)
    rt = GovernedRuntime(topo, limit, sources, max_context, bucket)
    f = reporter_facts(sources["dec"], max_context, bucket)
    rt.execute(S.LoadModel("dec", "dec", f, f.loop_carried))
    rt.execute(S.Prefetch())
    rid = rt.execute(S.Open("dec"))
    rows, outs = [], []
    for _ in range(steps):
        released = rt.execute(S.Decode(rid))
        outs.append(rt.last_output.copy())
        s = rt.abstract()
        kv = s.kv_charge(s.requests[rid])
        used = s.requests[rid].tokens * f.bytes_per_token
        rows.append({"weights": s.models["dec"].admitted, "cache": s.cache, "kv": kv, "kv_used": used,
                     "stranded": kv - used, "released": released})
    tickets = (rt.weights.opened, rt.weights.answered)
    rt.close()
    return ArmTrace(name, tuple(rows), tickets), outs


def _arena_cap(path: str, max_context: int, buckets: tuple[int, ...]) -> int:
    """The env arena cap of the demo's runtimes: the zoo's process-wide cap, or, when the decoder's measured
    transient peak at this context needs more, that peak rounded up to 4 KiB. A process that already
    registered another cap refuses it (ArenaHolder: InvalidTransition, naming both); the `ortmem demo`
    command runs in its own process, where the first registration is the demo's."""
    from refimpl.ort.zoo import ENV_ARENA_CAP, reporter_facts
    from spec.arith import round_up

    peak = max(reporter_facts(path, max_context, b).transient_peak for b in buckets)
    return max(ENV_ARENA_CAP, round_up(peak, 4096))


def run_demo(steps: int = 48, max_context: int = 64, bucket: int = 8, limit: int = 160 * 1024,
             headroom: int = 4096) -> tuple[ArmTrace, ArmTrace, bool]:
    """Static and elastic arms on the same model and inputs; True iff every output equals the ungoverned run."""
    from refimpl.ort.governed import decode_input
    from refimpl.ort.session import make_session
    from refimpl.ort.zoo import build_zoo

    with tempfile.TemporaryDirectory(prefix="ortmem-demo-") as d:
        sources = build_zoo(d)
        arena = _arena_cap(sources["dec"], max_context, (max_context, bucket))
        static, s_out = _arm("static", sources, limit, max_context, max_context, steps, headroom, arena)
        elastic, e_out = _arm("elastic", sources, limit, max_context, bucket, steps, headroom, arena)
        ref = make_session(sources["dec"], prepack=False)  # the managed sessions' ORT options
        heads, dh, identical = 4, 8, True
        pk = pv = np.zeros((1, heads, 0, dh), np.float32)
        for t in range(steps):
            y, pk, pv = ref.run(None, {"x": decode_input(1, t, heads * dh), "past_key": pk, "past_value": pv})
            identical &= np.array_equal(y, s_out[t]) and np.array_equal(y, e_out[t])
    return static, elastic, identical


def plot(static: ArmTrace, elastic: ArmTrace, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - matplotlib is a core dependency
        raise RuntimeError(f"--plot needs matplotlib: {e}") from e
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, arm in zip(axes, (static, elastic)):
        x = range(1, len(arm.steps) + 1)
        series: dict[str, Any] = {k: [s[k] for s in arm.steps] for k in ("weights", "cache", "kv")}
        ax.stackplot(x, series["weights"], series["cache"], series["kv"],
                     labels=["weights (pinned)", "weight cache (borrowed)", "KV (charged)"])
        ax.plot(x, [s["weights"] + s["cache"] + s["kv_used"] for s in arm.steps], "k--", lw=1,
                label="KV actually used (top)")
        ax.set_title(f"{arm.name}: stranded KV {arm.stranded_byte_steps:,} byte-steps")
        ax.set_xlabel("decode step")
    axes[0].set_ylabel("charge (bytes)")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
