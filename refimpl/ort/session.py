# Session construction that cannot silently land on the wrong device.
#
# Owns: turning our knobs into SessionOptions and checking the result. ORT
# falls back to CPU when the requested EP cannot load (the CPU wheel warns,
# the GPU wheel only logs), so every session is checked against
# `get_providers()` and a miss is a typed error [ort:cuda-fallback].
# Must not touch: any ledger or lease; a session is a reporter, not a holder.

from __future__ import annotations

import os
import warnings

import onnx
import onnxruntime as ort

from spec.errors import ProviderUnavailable

__all__ = ["ModelSource", "make_session"]

ModelSource = onnx.ModelProto | bytes | str | os.PathLike


def _model_arg(model: ModelSource) -> bytes | str:
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    return model if isinstance(model, bytes) else os.fspath(model)


def make_session(
    model: ModelSource,
    *,
    provider: str = "CPUExecutionProvider",
    intra_op_threads: int = 1,
    use_env_allocators: bool = False,
    enable_mem_pattern: bool = False,
    profile_prefix: str | os.PathLike | None = None,
    optimize: bool = True,
    prepack: bool = True,
) -> ort.InferenceSession:
    # enable_mem_pattern defaults off: with it on, a repeated input shape's
    # intermediates are taken before the first kernel [ort:mem-pattern], so
    # the calibration's per-kernel deltas read 0 and the peak is not seen.
    # optimize=False keeps node names 1:1 with the graph (the liveness method).
    # Verify the provider is compiled into this build before paying for a session.
    available = ort.get_available_providers()
    if provider not in available:
        raise ProviderUnavailable(f"{provider} is not in this onnxruntime build; available: {available}")
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra_op_threads
    so.enable_mem_pattern = enable_mem_pattern
    if use_env_allocators:
        so.add_session_config_entry("session.use_env_allocators", "1")
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = os.fspath(profile_prefix)
    if not prepack:  # ORT then reads initializers where they lie, keeping no packed copy [ort:prepacking]
        so.add_session_config_entry("session.disable_prepacking", "1")
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = ort.InferenceSession(_model_arg(model), so, providers=[provider])
    # Verify the EP actually loaded: a CUDA EP whose libraries are missing
    # leaves a working CPU session and no exception [ort:cuda-fallback].
    if provider not in session.get_providers():
        said = "; ".join(str(w.message) for w in caught) or "nothing (see ORT's log)"
        raise ProviderUnavailable(
            f"asked for {provider}, session runs on {session.get_providers()}; ORT said: {said}"
        )
    for w in caught:  # not ours to swallow
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return session
