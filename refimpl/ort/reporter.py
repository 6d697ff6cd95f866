# The session as a *reporter*: it tells the governor the per-run transient
# peak and the mapping granularity, the two I8 facts only it can know.
#
# Owns: running a calibration session with profiling on, reading ORT's
# profile JSON, and turning node events into per-run peaks; the host page
# size. Must not touch: leases, ledgers or any governor state. The session
# holds no lease: its buffers stay leased by the arenas; it only reports.
#
# Two methods, kept side by side so they can be compared (ORT-NOTES 2.5):
# - allocator: ORT's profiler samples the CPU arena after every kernel
#   (`mem_bytes_requested_in_use`) [ort:profiler-mem-fields];
#   peak = max over the run - the level before the first kernel.
# - liveness: replays the executed node order over the graph and sums output
#   sizes while they are live. Works on any ORT, needs node names 1:1 (so the
#   calibration session runs unoptimised) and ignores aliasing (Reshape).
# Profiling costs ~130 us per step, so this is for calibration sessions only.

from __future__ import annotations

import enum
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import attrs
import numpy as np
import onnx

from refimpl.ort.session import ModelSource, make_session

__all__ = [
    "PeakMethod",
    "PeakReport",
    "GranularityReport",
    "calibrate_transient_peak",
    "peaks_from_profile",
    "granularity",
]

_KERNEL_SUFFIX = "_kernel_time"
_BYTES_PER_ELEMENT = MappingProxyType({
    "float": 4, "double": 8, "float16": 2, "bfloat16": 2,
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "bool": 1,
})


class PeakMethod(enum.Enum):
    ALLOCATOR = "allocator"
    LIVENESS = "liveness"


@attrs.frozen
class PeakReport:
    run_index: int
    method: PeakMethod  # which of the two numbers `transient_peak_bytes` is
    transient_peak_bytes: int
    allocator_peak_bytes: int | None  # requested bytes; None when the profile has no mem_* fields
    allocator_chunk_peak_bytes: int | None  # same, in the arena's chunk bytes [ort:profiler-mem-fields]
    liveness_peak_bytes: int | None  # None when events do not map 1:1 onto graph nodes


@attrs.frozen
class GranularityReport:
    granule_bytes: int
    source: str  # where the number came from, so a reader can re-derive it


def granularity() -> GranularityReport:
    # Host (CPU) only: the OS page is the unit a host mapping is charged in.
    # XXX: device granularity needs the EP's allocator; no Python API reports it.
    return GranularityReport(granule_bytes=os.sysconf("SC_PAGE_SIZE"), source='os.sysconf("SC_PAGE_SIZE")')


def _split_runs(events: Sequence[Mapping]) -> list[list[Mapping]]:
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    kernels = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith(_KERNEL_SUFFIX)]
    return [
        sorted((k for k in kernels if r["ts"] <= k["ts"] <= r["ts"] + r["dur"]), key=lambda k: k["ts"])
        for r in sorted(runs, key=lambda r: r["ts"])
    ]


def _allocator_peak(run: Sequence[Mapping], level: str, delta: str) -> int | None:
    args = [k.get("args", {}) for k in run]
    if not args or any(level not in a or delta not in a for a in args):
        return None
    before = int(args[0][level]) - int(args[0][delta])
    return max(int(a[level]) for a in args) - before


def _output_bytes(shape_entry: Mapping) -> int | None:
    ((dtype, shape),) = shape_entry.items()
    per = _BYTES_PER_ELEMENT.get(dtype)
    return None if per is None else per * math.prod(shape)


def _liveness_peak(graph: onnx.GraphProto, run: Sequence[Mapping]) -> int | None:
    by_name = {n.name: n for n in graph.node}
    if len(by_name) != len(graph.node) or "" in by_name:
        return None  # unnamed or duplicate names: events cannot be mapped
    names = [k["name"].removesuffix(_KERNEL_SUFFIX) for k in run]
    if any(name not in by_name for name in names):
        return None  # fused or subgraph nodes
    order = [by_name[name] for name in names]
    graph_outputs = {o.name for o in graph.output}
    last_use = {t: i for i, node in enumerate(order) for t in node.input}
    live: dict[str, int] = {}
    current = peak = 0
    for i, (node, kernel) in enumerate(zip(order, run)):
        outputs = [t for t in node.output if t]
        shapes = kernel.get("args", {}).get("output_type_shape", [])
        if len(outputs) != len(shapes):
            return None
        for t, entry in zip(outputs, shapes):
            size = _output_bytes(entry)
            if size is None:
                return None
            live[t] = size
            current += size
        peak = max(peak, current)  # outputs allocated, inputs not yet freed
        for t in [t for t in live if t not in graph_outputs and last_use.get(t, -1) <= i]:
            current -= live.pop(t)
    return peak


def peaks_from_profile(model: onnx.ModelProto, events: Sequence[Mapping]) -> list[PeakReport]:
    reports = []
    for i, run in enumerate(_split_runs(events)):
        requested = _allocator_peak(run, "mem_bytes_requested_in_use", "mem_requested_in_use_delta")
        chunks = _allocator_peak(run, "mem_bytes_in_use", "mem_in_use_delta")
        liveness = _liveness_peak(model.graph, run)
        if requested is not None:
            method, peak = PeakMethod.ALLOCATOR, requested
        elif liveness is not None:
            method, peak = PeakMethod.LIVENESS, liveness
        else:
            raise ValueError(f"run {i}: profile has neither mem_* fields nor events that map onto the graph")
        reports.append(PeakReport(i, method, peak, requested, chunks, liveness))
    return reports


def _load(model: ModelSource) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(os.fspath(model), load_external_data=False)


def calibrate_transient_peak(
    model: ModelSource, feeds_list: Sequence[Mapping[str, np.ndarray]]
) -> list[PeakReport]:
    # mem pattern off: with it on, a repeated shape's intermediates are taken
    # before the first kernel and the deltas read 0 [ort:mem-pattern].
    # Unoptimised, so events map onto graph nodes.
    # XXX: the peak is of the unoptimised graph; fusions in a serving session
    # usually lower it, but nothing here proves that.
    proto = _load(model)
    source = model if isinstance(model, (str, os.PathLike)) else proto  # a path keeps external data resolvable
    with tempfile.TemporaryDirectory(prefix="ortmem-profile-") as tmp:
        session = make_session(
            source, enable_mem_pattern=False, optimize=False, profile_prefix=os.path.join(tmp, "calibration")
        )
        for feeds in feeds_list:
            session.run(None, dict(feeds))
        profile = session.end_profiling()
        with open(profile, encoding="utf-8") as f:
            events = json.load(f)
        os.remove(profile)  # the directory goes too; the explicit remove says the file is consumed
    reports = peaks_from_profile(proto, events)
    if len(reports) != len(feeds_list):
        raise RuntimeError(f"profile holds {len(reports)} runs for {len(feeds_list)} feeds")
    return reports
