# The runtime's own measurement of a model (issue #11 item 1: the facts a
# session reporter gives): referenced extents (never file sizes), the
# transient peak at max context (ORT's profiler / a measured calibration,
# `refimpl.ort.reporter`), loop-carried state and KV geometry; plus the ORT
# provider list of a managed session and the decode inputs governed and
# reference runs share. Written apart from `spec.sessions`' facts.
#
# Owns: reading model files. Must not touch: the ledger, holders, leases.

from __future__ import annotations

import functools
import os
from typing import Any

import attrs
import numpy as np
import onnx

from refimpl.ort.device_arena import cuda_provider_options
from refimpl.ort.extents import referenced_extents
from refimpl.ort.reporter import calibrate_transient_peak
from spec import sessions as S
from spec.errors import CalloutFailed, ModelDataError, ModelFileInvalid, ProviderUnavailable

__all__ = ["MeasuredModel", "measure", "weight_bytes", "loop_carried", "decode_input", "session_providers"]


def loop_carried(model: onnx.ModelProto) -> frozenset[str]:
    """State the graph carries from one run to the next: inputs past_X fed by outputs present_X."""
    outs = {o.name for o in model.graph.output}
    return frozenset(i.name for i in model.graph.input
                     if i.name.startswith("past_") and "present_" + i.name[5:] in outs)


def _kv_geometry(model: onnx.ModelProto) -> tuple[int, int]:
    for i in model.graph.input:
        if i.name == "past_key":
            dims = i.type.tensor_type.shape.dim
            return dims[1].dim_value, dims[3].dim_value
    return 0, 0


@attrs.frozen
class MeasuredModel:
    path: str
    facts: S.ModelFacts
    heads: int
    dh: int


def measure(path: str, max_context: int, bucket: int, device: str = "cpu") -> MeasuredModel:
    """The runtime's own measurement; a missing, empty, truncated or corrupt file is `ModelFileInvalid`.

    `device`: where the transient peak is calibrated: "cpu" (ORT's profiler on a CPU session,
    `refimpl.ort.reporter`) or "cuda:N" (the smallest CUDA EP arena cap the model's decodes pass under,
    `refimpl.ort.device_peak`).
    """
    if type(path) is not str or not os.path.isfile(path):
        raise ModelFileInvalid(f"model file {path!r} does not exist or is not a regular file")
    if os.path.getsize(path) == 0:
        raise ModelFileInvalid(f"model file {path!r} is empty")
    try:
        return _measure(path, max_context, bucket, device)
    except (ModelDataError, ProviderUnavailable, CalloutFailed):  # the device calibration's own faults
        raise
    except Exception as e:  # DecodeError, StopIteration, ORT's InvalidProtobuf / Fail, OSError ...
        raise ModelFileInvalid(f"model file {path!r} is not a usable ONNX model: {type(e).__name__}: {e}") from e


def weight_bytes(path: str) -> tuple[int, int]:
    """(the bytes admission charges for: referenced extents + embedded tensors, the files' total size)."""
    rep = referenced_extents(path)  # typed errors for missing / overlapping / out-of-range ranges
    return rep.referenced_bytes + rep.embedded_bytes, os.path.getsize(path) + rep.file_bytes


@functools.lru_cache(maxsize=32)
def _measure(path: str, max_context: int, bucket: int, device: str = "cpu") -> MeasuredModel:
    """The runtime's own measurement: referenced extents (never file sizes), the peak at max context."""
    referenced, file_bytes = weight_bytes(path)
    proto = onnx.load(path, load_external_data=False)
    heads, dh = _kv_geometry(proto)
    carried = loop_carried(proto)
    if carried:
        d = heads * dh
        past = np.zeros((1, heads, max_context - 1, dh), np.float32)
        feeds = [{"x": np.ones((1, 1, d), np.float32), "past_key": past, "past_value": past}]
    else:
        x = next(i for i in proto.graph.input)
        n = x.type.tensor_type.shape.dim[1].dim_value
        feeds = [{x.name: np.ones((1, n), np.float32)}]
    if device == "cpu":
        peak = calibrate_transient_peak(path, feeds)[0].transient_peak_bytes
    else:
        from refimpl.ort.device_peak import device_transient_peak  # needs cuda-bindings: the device path only
        peak = device_transient_peak(path, max_context, int(device.removeprefix("cuda:")))
    bpt = 2 * 2 * heads * dh * 4 if carried else 0  # K and V, two ping-pong sides, float32
    facts = S.ModelFacts(referenced, file_bytes, peak, carried, bpt, max_context if carried else 0,
                         bucket if carried else 0)
    return MeasuredModel(path, facts, heads, dh)


def session_providers(provider: str, cap: int, device_id: int = 0) -> list[Any]:
    """The `providers` list for a managed session; on CUDA its EP arena is capped at `cap` bytes.

    On the device path `cap` is the model's loan within the device arena's lease
    (`refimpl.ort.device_arena`). `gpu_mem_limit` caps the CUDA EP's device arena only [ort:gpu-mem-limit];
    the exhaustive cuDNN search's workspace, the CUDA context and the cuBLAS/cuDNN handles' memory are
    outside it, and whether initializers count was not checked [ort:gpu-mem-limit-outside].
    `kSameAsRequested` grows the arena by the amount asked rather than in powers of two
    [ort:arena-extend-strategy]; with `cudnn_conv_use_max_workspace=0` ORT clamps the cuDNN workspace to
    32 MB [ort:cudnn-max-workspace]. CPU stays in the list for nodes the CUDA EP cannot run
    [ort:node-partition], and the provider assertion after creation catches a whole-session fallback
    [ort:cuda-fallback].
    """
    if provider != "CUDAExecutionProvider":
        return ["CPUExecutionProvider"]
    return [("CUDAExecutionProvider", cuda_provider_options(device_id, cap)), "CPUExecutionProvider"]


def decode_input(rid: int, step: int, d_model: int) -> np.ndarray:
    """The deterministic token input of request `rid` at `step` (governed and reference runs share it)."""
    return np.random.default_rng(rid * 100_003 + step).standard_normal((1, 1, d_model)).astype(np.float32)
