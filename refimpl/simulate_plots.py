"""Plots of the `ortmem simulate` scenarios: one PNG per scenario (matplotlib, Agg backend).

Written by `ortmem simulate --plots DIR` and into the `ortmem verify --report DIR` folder.
Rendering only: every number comes from the scenario's series and figures. Each plot states the
geometry under it, marks the design's figures (black markers, the issue named beside each) apart
from the model's lines, and draws no line where it would hide another (a line within a few MB of
another is said in its label instead of drawn).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["write_plots", "PLOT_FILES"]

#: Scenario key -> file name inside the plot folder.
PLOT_FILES = {"static-vs-elastic": "simulate-static-vs-elastic.png", "file-vs-extents": "simulate-file-vs-extents.png",
              "manage-vs-decline": "simulate-manage-vs-decline.png", "batching": "simulate-batching.png"}
_GB = 1e9
_DESIGN = {"color": "k", "zorder": 5}  # the design's figures: black markers


def _static_vs_elastic(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.2))
    t = s["tokens"]
    a.stackplot(t, [w / _GB for w in s["during"]], [k / _GB for k in s["kv"]],
                labels=["elastic: weight budget (lowest point of the step)", "elastic: KV charged"],
                colors=["#4c72b0", "#dd8452"], alpha=0.85)
    a.axhline(s["static_budget"] / _GB, color="#4c72b0", ls="--", lw=1.2, label="static: weight budget")
    a.axhline(s["budget"] / _GB, color="k", lw=1, label="device budget")
    a.plot([s["short_run"]], [s["short_budget"] / _GB], "D", ms=6, label="design: 7.14 GB at 16 tokens (#866)",
           **_DESIGN)
    a.plot([1], [s["static_budget"] / _GB], "s", ms=6, label="design: static 6.12 GB (#857)", **_DESIGN)
    a.set(title="Budget split over a 2,048-token generation (axis from 5 GB)", xlabel="tokens generated",
          ylabel="GB (charge)", ylim=(5, s["budget"] / _GB * 1.16))
    a.legend(loc="upper center", fontsize=7, ncol=2)
    b.axhline(s["weights"] / _GB, color="grey", lw=0.8, label="W: every weight, each step")
    b.axhline(s["static_pinned"] / _GB, color="#4c72b0", ls="--", lw=1.5, label="model, pinned policy, static")
    b.plot(t, [p / _GB for p in s["pinned"]], color="#55a868", lw=1.5,
           label=f"model, pinned policy, elastic (within {s['slack'] / 1e6:.1f} MB of the floor, not drawn apart)")
    b.plot([s["short_run"]], [s["ctx1024_pinned"] / _GB], "^", ms=7, ls="none", mfc="none", color="#4c72b0",
           label="model, pinned policy, static at ctx 1024")
    m = s["measured"]
    for key, marker, label in (("static", "X", "static"), ("elastic", "o", "elastic"),
                               ("ctx1024", "^", "static at ctx 1024")):
        b.plot([s["short_run"]], [m[key] / _GB], marker, ms=7, ls="none", **_DESIGN,
               label=f"measured, {label}: {m[key] / _GB:.2f} (quoted; policy not modelled)")
    b.set(title="Weight bytes streamed per decode step", xlabel="tokens generated", ylabel="GB / step",
          ylim=(0, s["weights"] / _GB * 1.1))
    b.legend(loc="center right", fontsize=7)
    return fig


def _file_vs_extents(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.2))
    x = ["external-data file", "referenced extents"]
    a.bar(x, [s["referenced"] / _GB] * 2, color="#4c72b0", label="referenced by the graph")
    a.bar(x[:1], [s["dead"] / _GB], bottom=[s["referenced"] / _GB], color="#c44e52", label="dead prefix (orphaned)")
    a.axhline(s["budget"] / _GB, color="k", lw=1, label="device budget")
    a.plot(x, [s["file"] / _GB, s["referenced"] / _GB], "D", ms=6, ls="none", label="design: 16.65 / 8.33 GB (#853)",
           **_DESIGN)
    for i, v in enumerate((s["plan_file"], s["plan_ref"])):
        a.text(i, v / _GB + 0.9, f"I8 plan {v / _GB:.2f} GB", ha="center", fontsize=9)
    a.set(title="What admission counts (I8)", ylabel="GB", ylim=(0, s["file"] / _GB * 1.18))
    a.legend(loc="upper right", fontsize=8)
    y = ["floor from file size", "floor from referenced"]
    b.barh(y, [s["floor_file"] / _GB, s["floor_ref"] / _GB], color=["#c44e52", "#4c72b0"])
    b.plot([10.53], [0], "D", ms=6, ls="none", label="design: 10.53 GB/step (#927)", **_DESIGN)
    b.axvline(s["measured"] / _GB, color="k", ls="--", label="measured 4.11 GB/step (#927, quoted)")
    b.set(title="Implied streaming floor at the static budget", xlabel="GB / step")
    b.legend(loc="lower right", fontsize=8)
    return fig


def _manage_vs_decline(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.2))
    arms = s["arms"]
    colors = ["#c44e52", "#dd8452", "#55a868"]
    xs = list(range(len(arms)))
    a.bar(xs, [m / _GB for m in s["moved"]], color=colors)
    a.plot([0, 2], [8.33, 0.6], "D", ms=6, ls="none", label="design: ~8.33 / ~0.6 GB/step (section 9)", **_DESIGN)
    a.set(title="Bytes moved over the link per step (model)", ylabel="GB / step", xticks=xs)
    a.set_xticklabels(arms, fontsize=8)
    a.legend(fontsize=8)
    lo_bw, hi_bw = (f"{v / 1e9:g} GB/s" for v in s["resident_bandwidth"])
    w = 0.35
    b.bar([x - w / 2 for x in xs], [s["tps"][k][0] for k in arms], w, color=colors, label=f"model, {lo_bw} resident")
    b.bar([x + w / 2 for x in xs], [s["tps"][k][1] for k in arms], w, color=colors, alpha=0.45, hatch="//",
          label=f"model, {hi_bw} resident")
    markers = {"#864": "X", "#874 quiet A/B": "o", "#874 run 1": "^", "#874 run 2": "v"}
    for key, (declined, managed) in s["measured"].items():
        b.plot([0, 2], [managed, declined], markers[key], ms=7, ls="none", label=f"measured {key} (quoted)", **_DESIGN)
    b.set(title="Decode speed: bandwidth model vs measured", ylabel="tokens / s (log)", yscale="log", xticks=xs)
    b.set_xticklabels(arms, fontsize=8)
    b.legend(loc="upper left", fontsize=7)
    return fig


def _batching(plt: Any, sc: Any) -> Any:
    s = sc.series
    fig, a = plt.subplots(figsize=(8, 5.2))
    a.plot(s["n"], [v / _GB for v in s["fixed"]], "-", color="#c44e52", lw=1.5,
           label="model, residency fixed: every weight streams (1/N)")
    a.plot(s["n"], [v / _GB for v in s["pinned"]], "o-", color="#4c72b0", ms=3,
           label="model, pinned weights in what N sequences' KV leaves")
    mn = s["measured_n"]
    a.plot(mn, [s["fixed"][n - 1] / _GB for n in mn], "D", ms=7, ls="none",
           label="design: 1/N measured at N = 2, 4, 8 (#884 / #891; a ratio, drawn on the model's line)", **_DESIGN)
    a.axvline(s["n_max"], color="k", lw=1, label=f"N_max = {s['n_max']} (no headroom; design ~19)")
    a.axvline(s["n_head"], color="k", ls="--", lw=1, label=f"N_max = {s['n_head']} (512 MiB headroom)")
    a.set(title="Weight bytes per token, 2,048-token context", xlabel="sequences in one fused forward (N)",
          ylabel="GB / token (log)", yscale="log", xticks=list(range(1, s["n_max"] + 1, 2)))
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
        width = int(fig.get_figwidth() * 17)
        fig.text(0.01, 0.01, textwrap.fill(f"Geometry: {sc.geometry}.", width), fontsize=7, va="bottom")
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        path = folder / PLOT_FILES[sc.key]
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
