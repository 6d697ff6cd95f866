# The transient peak of a model on the CUDA EP, measured as what the device
# path's cap needs: the smallest `gpu_mem_limit` under which the model's
# decodes all pass [ort:gpu-mem-limit] (I8: admitted = weights + transient
# peak, the peak from the reporter's own measurement). ORT's profiler samples
# the session's CPU arena after each kernel [ort:profiler-mem-fields]; whether it reports a CUDA arena's figures we have
# not checked, so the CUDA figure is found by search: probe sessions built
# exactly as the device path builds managed sessions (weights as
# leased-device-region views, KV bound by pointer, x and y on the host, arena
# shrinkage on every Run, `refimpl.ort.device_holders`), each with a cap,
# running one whole generation from an empty past to max context; the
# smallest passing cap, to the BFC arena's 256 B resolution [ort:bfc-arena].
# The searched cap holds for any interleaving of requests only if each Run
# starts from an arena holding nothing that depends on earlier Runs; the
# shrink at every Run's end returns each wholly free region [ort:bfc-arena],
# and what survives it on the CUDA EP has not been observed (no GPU; see
# `refimpl.ort.device_arena`).
#
# The probes' device bytes are a calibration before admission, outside any
# ledger, freed before this returns (as the CPU reporter's profiling session).
#
# Owns: the search. Must not touch: any ledger. Needs a GPU to run
# (`smallest_passing` is pure and tested everywhere).

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from refimpl.ort.device import CudaMemory, DeviceMemory
from refimpl.ort.device_arena import device_run_options
from refimpl.ort.device_holders import DeviceKvBundle, weight_layout, host_planned
from refimpl.ort.measure import _kv_geometry, loop_carried, session_providers
from spec.errors import InvalidArgument, ProviderUnavailable

__all__ = ["device_transient_peak", "smallest_passing", "ARENA_GRAIN", "PEAK_CEILING"]

ARENA_GRAIN = 256  # the BFC arena's allocation unit, bfc_arena.h kMinAllocationSize [ort:bfc-arena]
PEAK_CEILING = 1 << 30  # a probe needing more than this is an error, not a peak
CUDA = "CUDAExecutionProvider"


def smallest_passing(passes: Callable[[int], bool], start: int, grain: int = ARENA_GRAIN,
                     ceiling: int = PEAK_CEILING) -> int:
    """The smallest multiple of `grain` for which `passes` holds, assuming it is monotone (fail ... pass)."""
    if start <= 0 or start % grain or grain <= 0:
        raise InvalidArgument(f"start must be a positive multiple of {grain}, got {start!r}")
    hi = start
    while not passes(hi):
        if hi >= ceiling:
            raise InvalidArgument(f"no cap up to {ceiling} B passes")
        hi = min(2 * hi, ceiling)
    lo = 0  # a cap of 0 admits nothing
    while hi - lo > grain:
        mid = (lo + hi) // 2 // grain * grain
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _probe(path: str, max_context: int, memory: DeviceMemory, cap: int) -> bool:
    """One probe session at `cap`: True iff a whole generation (or one run) passes under it."""
    proto = onnx.load(path)
    arrays = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    nbytes = sum(-(-a.nbytes // 256) * 256 for a in arrays.values()) or 256
    weights = memory.alloc(nbytes)
    keep: list[object] = []
    kv = sess = None
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_mem_pattern = False
        so.add_session_config_entry("session.disable_prepacking", "1")
        for key, off, arr in weight_layout(arrays, nbytes):
            memory.upload(weights, off, arr)
            value = (ort.OrtValue.ortvalue_from_numpy(arr) if host_planned(arr)
                     else memory.value(weights, off, arr.dtype, arr.shape))
            keep += [arr, value]
            so.add_initializer(key, value)
        sess = ort.InferenceSession(path, so, providers=session_providers(CUDA, cap, memory.device_id))
        if CUDA not in sess.get_providers():
            raise ProviderUnavailable(f"the probe session runs on {sess.get_providers()}")
        ro = device_run_options(memory.ort_device, memory.device_id)
        try:
            if loop_carried(proto):
                heads, dh = _kv_geometry(proto)
                kv = memory.alloc(16 * heads * dh * max_context)
                b = DeviceKvBundle(heads, dh, max_context, 0, sess, memory, kv, ro)
                b.bind()
                for t in range(max_context):
                    b.x[...] = 1.0
                    sess.run_with_iobinding(b.bindings[t], ro)
            else:
                x = proto.graph.input[0]
                n = x.type.tensor_type.shape.dim[1].dim_value
                sess.run(None, {x.name: np.ones((1, n), np.float32)}, ro)
        except Exception as e:
            if "Available memory" in str(e) or "Failed to allocate memory" in str(e):
                return False  # the arena cap refused an allocation: this cap is too small
            raise
        return True
    finally:
        sess = None  # no session outlives the regions it reads
        keep.clear()
        memory.free(weights)
        if kv is not None:
            memory.free(kv)


def device_transient_peak(path: str, max_context: int, device_id: int = 0) -> int:
    """The smallest CUDA EP arena cap (256 B steps) under which the model's decodes to max context pass."""
    memory = CudaMemory(device_id)
    return smallest_passing(lambda cap: _probe(path, max_context, memory, cap), start=64 * 1024)
