# A hierarchy worker's real ORT model (C10): a session whose weights live in
# bytes the worker's own ProcessMemoryManager granted first.
#
# Owns: measuring what a model needs (referenced extents, never the file
# size, plus the transient peak of one run), building the session over the
# leased bytes (initializers copied into the backing buffer and handed to
# ORT zero-copy [ort:zero-copy], as `WeightHolder.admit` does), running requests and the
# ungoverned reference a test compares with. Must not touch: the ledger. The
# caller (`refimpl.hierarchy.worker`) reserves and commits the charge before
# `open_served` builds the session, and releases it after `close`; a failed
# session build raises `SessionCreationFailed` and the caller gives the
# charge back, so nothing stays charged.

from __future__ import annotations

import hashlib
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from refimpl.ort.extents import referenced_extents
from refimpl.ort.models import build_external
from refimpl.ort.reporter import calibrate_transient_peak
from refimpl.ort.session import make_session
from spec.errors import GovernorError, ModelFileInvalid, SessionCreationFailed

__all__ = ["ModelNeeds", "ServedModel", "needs", "open_served", "request_input", "reference_outputs",
           "build_served_models", "digest"]


class ModelNeeds:
    """What loading `path` costs: the referenced weight bytes and one run's transient peak."""

    __slots__ = ("path", "weights", "peak", "width")

    def __init__(self, path: str, weights: int, peak: int, width: int) -> None:
        self.path, self.weights, self.peak, self.width = path, weights, peak, width

    def __repr__(self) -> str:
        return f"ModelNeeds({os.path.basename(self.path)}, weights={self.weights}, peak={self.peak})"


def needs(path: object) -> ModelNeeds:
    """Measure a two-matmul model (x: [batch, n]); a missing or unusable file is `ModelFileInvalid`."""
    if type(path) is not str or not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise ModelFileInvalid(f"model file {path!r} does not exist, is not a regular file or is empty")
    try:
        rep = referenced_extents(path)
        proto = onnx.load(path, load_external_data=False)
        x = proto.graph.input[0]
        width = x.type.tensor_type.shape.dim[1].dim_value
        peak = calibrate_transient_peak(path, [{x.name: np.ones((1, width), np.float32)}])[0].transient_peak_bytes
    except GovernorError:
        raise
    except Exception as e:  # DecodeError, IndexError, ORT's InvalidProtobuf ...
        raise ModelFileInvalid(f"model file {path!r} is not a usable model: {type(e).__name__}: {e}") from e
    return ModelNeeds(path, rep.referenced_bytes + rep.embedded_bytes, peak, width)


def request_input(rid: int, width: int) -> np.ndarray:
    """The deterministic input of request `rid` (governed and reference runs share it)."""
    return np.random.default_rng(rid).standard_normal((1, width)).astype(np.float32)


def digest(y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(y).tobytes()).hexdigest()


class ServedModel:
    """A session over leased weight bytes; `keep` holds the buffer ORT uses in place [ort:zero-copy].

    The OrtValues given to `add_initializer` must outlive the session [ort:zero-copy]. XXX: prepacking is
    left on here, so ORT also packs its own copy of the MatMul weights at creation, outside the grant, and
    those Runs read that copy [ort:prepacking].
    """

    def __init__(self, need: ModelNeeds, nbytes: int) -> None:
        proto = onnx.load(need.path)
        arrays = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        if sum(a.nbytes for a in arrays.values()) > nbytes:
            raise SessionCreationFailed(f"{need.path}: initializers exceed the {nbytes} B granted")
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_mem_pattern = False
        self.backing = np.empty(nbytes, np.uint8)  # allocated only after the charge was committed (I2)
        self.keep: list[object] = []
        off = 0
        for key, arr in sorted(arrays.items(), key=lambda kv: -kv[1].itemsize):
            view = self.backing[off:off + arr.nbytes].view(arr.dtype).reshape(arr.shape)
            view[...] = arr
            value = ort.OrtValue.ortvalue_from_numpy(view)  # zero-copy over the leased bytes
            self.keep += [view, value]
            so.add_initializer(key, value)
            off += arr.nbytes
        try:
            self.session: ort.InferenceSession | None = ort.InferenceSession(
                need.path, so, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise SessionCreationFailed(f"{need.path}: ORT could not create the session: {e}") from e
        self.need = need
        self.input = self.session.get_inputs()[0].name

    def run(self, rid: int) -> np.ndarray:
        if self.session is None:
            raise SessionCreationFailed("the session was closed")
        return self.session.run(None, {self.input: request_input(rid, self.need.width)})[0]

    def close(self) -> None:
        self.session = None
        self.keep.clear()
        self.backing = np.empty(0, np.uint8)


def open_served(need: ModelNeeds, nbytes: int) -> ServedModel:
    return ServedModel(need, nbytes)


def reference_outputs(path: str, rids: list[int]) -> dict[int, str]:
    """Digests of an ungoverned session's outputs (weights loaded by ORT itself) for the same requests."""
    sess = make_session(path, intra_op_threads=1)
    name = sess.get_inputs()[0].name
    width = sess.get_inputs()[0].shape[1]
    return {rid: digest(sess.run(None, {name: request_input(rid, width)})[0]) for rid in rids}


def build_served_models(directory: str, widths: tuple[int, ...]) -> list[str]:
    """One two-matmul model per width, each in its own folder (weights in a 2x external blob)."""
    paths = []
    for k, n in enumerate(widths):
        sub = os.path.join(directory, f"model{k}_{n}")
        os.makedirs(sub, exist_ok=True)
        paths.append(build_external(sub, n=n, orphan_ratio=1.0, seed=k))
    return paths
