"""Plots of the `ortmem simulate` scenarios: one PNG per scenario (matplotlib, Agg backend).

Written by `ortmem simulate --plots DIR` and into the `ortmem verify --report DIR` folder.
Rendering only: every number comes from `refimpl.simulate`'s scenario series.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["write_plots", "PLOT_FILES"]

#: Scenario key -> file name inside the plot folder.
PLOT_FILES = {"static-vs-elastic": "simulate-static-vs-elastic.png", "file-vs-extents": "simulate-file-vs-extents.png",
              "manage-vs-decline": "simulate-manage-vs-decline.png", "batching": "simulate-batching.png"}
_GB = 1e9


def _static_vs_elastic(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    t = s["tokens"]
    a.stackplot(t, [w / _GB for w in s["during"]], [k / _GB for k in s["kv"]],
                labels=["elastic: weight budget (lowest point of the step)", "elastic: KV charged"],
                colors=["#4c72b0", "#dd8452"], alpha=0.85)
    a.axhline(s["static_budget"] / _GB, color="#4c72b0", ls="--", lw=1.2, label="static: weight budget")
    a.axhline(s["budget"] / _GB, color="k", lw=1, label="device budget")
    a.set(title="Budget split over a 2,048-token generation (axis from 5 GB)", xlabel="tokens generated",
          ylabel="GB (charge)", ylim=(5, s["budget"] / _GB * 1.14))
    a.legend(loc="upper center", fontsize=8, ncol=2)
    b.axhline(s["lru"] / _GB, color="#c44e52", lw=1.5, label="LRU, static or elastic (whole model streams)")
    b.axhline(s["static_pinned"] / _GB, color="#4c72b0", ls="--", lw=1.5, label="pinned, static split")
    b.plot(t, [p / _GB for p in s["pinned"]], color="#55a868", lw=1.5, label="pinned, elastic split")
    b.plot(t, [f / _GB for f in s["floor"]], color="k", ls=":", lw=1, label="floor = W - weight budget")
    b.axhline(3.943690240, color="grey", ls="-.", lw=1, label="upstream static, measured (3.94)")
    b.axhline(2.349010944, color="grey", ls=(0, (1, 3)), lw=1.2, label="upstream elastic, measured (2.35)")
    b.set(title="Weight bytes streamed per decode step", xlabel="tokens generated", ylabel="GB / step",
          ylim=(0, s["weights"] / _GB * 1.08))
    b.legend(loc="center right", fontsize=8)
    return fig


def _file_vs_extents(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    x = ["external-data file", "referenced extents"]
    a.bar(x, [s["referenced"] / _GB] * 2, color="#4c72b0", label="referenced by the graph")
    a.bar(x[:1], [s["dead"] / _GB], bottom=[s["referenced"] / _GB], color="#c44e52", label="dead prefix (orphaned)")
    a.axhline(s["budget"] / _GB, color="k", lw=1, label="device budget")
    for i, v in enumerate((s["plan_file"], s["plan_ref"])):
        a.text(i, v / _GB + 0.2, f"plan {v / _GB:.2f} GB", ha="center", fontsize=9)
    a.set(title="What admission counts (I8)", ylabel="GB", ylim=(0, s["file"] / _GB * 1.15))
    a.legend(loc="upper right", fontsize=8)
    y = ["floor from file size", "floor from referenced"]
    b.barh(y, [s["floor_file"] / _GB, s["floor_ref"] / _GB], color=["#c44e52", "#4c72b0"])
    b.axvline(s["measured"] / _GB, color="grey", ls="--", label="upstream measured 4.11 GB/step")
    b.set(title="Implied streaming floor at the static budget", xlabel="GB / step")
    b.legend(loc="lower right", fontsize=8)
    return fig


def _manage_vs_decline(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    arms = s["arms"]
    colors = ["#c44e52", "#dd8452", "#55a868"]
    a.bar(arms, [m / _GB for m in s["moved"]], color=colors)
    a.set(title="Bytes moved over the link per step", ylabel="GB / step")
    a.tick_params(axis="x", labelsize=8)
    lo = [s["tps"][k][0] for k in arms]
    hi = [s["tps"][k][1] for k in arms]
    b.bar(arms, hi, color=colors, alpha=0.35, label="high resident bandwidth")
    b.bar(arms, lo, color=colors, label="low resident bandwidth")
    b.axhline(5.53, color="grey", ls="--", lw=1, label="upstream WDDM paging 5.53 (#864)")
    b.axhline(0.18, color="grey", ls=":", lw=1.2, label="upstream managed 0.18 (#864)")
    b.set(title="Decode speed, bandwidth model", ylabel="tokens / s")
    b.tick_params(axis="x", labelsize=8)
    b.legend(loc="upper left", fontsize=8)
    return fig


def _batching(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, a = plt.subplots(figsize=(8, 4.6))
    a.plot(s["n"], [v / _GB for v in s["fixed"]], "o-", color="#c44e52", ms=3, label="every weight streams (1/N)")
    a.plot(s["n"], [v / _GB for v in s["pinned"]], "o-", color="#4c72b0", ms=3,
           label="pinned weights in what N sequences' KV leaves")
    a.axvline(s["n_max"], color="k", lw=1, label=f"N_max = {s['n_max']} (no headroom)")
    a.axvline(s["n_head"], color="k", ls="--", lw=1, label=f"N_max = {s['n_head']} (512 MiB headroom)")
    a.set(title="Weight bytes per token, 2,048-token context", xlabel="sequences in one fused forward (N)",
          ylabel="GB / token", yscale="log", xticks=list(range(1, s["n_max"] + 1, 2)))
    a.legend(fontsize=8)
    return fig


_DRAW: dict[str, Callable[[Any, Any], Any]] = {"static-vs-elastic": _static_vs_elastic,
                                               "file-vs-extents": _file_vs_extents,
                                               "manage-vs-decline": _manage_vs_decline, "batching": _batching}


def write_plots(folder: Path, scenarios: tuple[Any, ...] | None = None) -> list[Path]:
    """One PNG per scenario in `folder` (created); the scenarios are computed when not given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from refimpl.simulate import run_all

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for sc in scenarios if scenarios is not None else run_all():
        fig = _DRAW[sc.key](plt, sc)
        fig.suptitle(sc.title, fontsize=11, fontweight="bold")
        fig.tight_layout()
        path = folder / PLOT_FILES[sc.key]
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
