# The models the real-ORT checker, the demo and the benchmark load: tiny
# decoders and a two-matmul model, each written with its weights in an
# external blob padded with orphaned regions (file = 2x referenced bytes,
# the #853/#856 harm in miniature), plus the session reporter's facts
# measured independently of `refimpl.ort.governed.measure`.
#
# Owns: writing model files into a directory and the "reporter facts"
# (referenced bytes from the loaded tensors' geometry, file sizes from the
# file system). Must not touch: any ledger.

from __future__ import annotations

import os

import onnx
from onnx import TensorProto, numpy_helper

from refimpl.ort.governed import loop_carried, measure
from refimpl.ort.models import build_decoder, build_external
from spec import sessions as S

__all__ = ["save_decoder_external", "build_zoo", "build_padded_twins", "reporter_facts", "ENV_ARENA_CAP"]

_ORPHAN = b"\xab"

#: The env arena cap every runtime over the zoo's models uses (the checker's campaign, the tests, the
#: demo): ONE figure per process, because the process's env arena caps its sessions' Runs at the cap it
#: was registered with [ort:env-arena-cap], registering again would reach only later sessions
#: [ort:env-arena-reregister], and `refimpl.ort.arena.ArenaHolder` refuses any other grant. Each managed
#: model's measured transient peak (dec 4,608 B, dec_wide 8,960 B, mlp 256 B) is lent within it, so dec +
#: dec_wide + mlp fit and a second dec_wide beside a first is refused (AllowanceExceeded). ORT's own use through IOBinding is far smaller
#: (a dec_wide Run needs under 768 B: tests/ort/run_fail_proc.py).
ENV_ARENA_CAP = 16 << 10


def save_decoder_external(directory: str, d_model: int = 32, heads: int = 4, orphan_ratio: float = 1.0,
                          seed: int = 0, name: str = "decoder") -> str:
    """The toy decoder with its weight matrices in `<name>.bin`, each followed by a dead region."""
    model = build_decoder(d_model=d_model, heads=heads, seed=seed)
    blob_name = f"{name}.bin"
    offset = 0
    with open(os.path.join(directory, blob_name), "wb") as blob:
        for t in model.graph.initializer:
            if len(t.raw_data) < 256:
                continue  # small shape constants stay embedded
            raw = t.raw_data
            orphan = round(orphan_ratio * len(raw))
            blob.write(raw)
            blob.write(_ORPHAN * orphan)
            onnx.external_data_helper.set_external_data(t, location=blob_name, offset=offset, length=len(raw))
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            offset += len(raw) + orphan
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save_model(model, path)
    return path


def build_zoo(directory: str, d_model: int = 32, heads: int = 4) -> dict[str, str]:
    """source name -> model path: a 2x-blob decoder, a larger one, and a 2x-blob two-matmul model."""
    sub = os.path.join(directory, "ext")
    os.makedirs(sub, exist_ok=True)
    return {
        "dec": save_decoder_external(directory, d_model, heads, name="dec"),
        "dec_wide": save_decoder_external(directory, 2 * d_model, heads, name="dec_wide", seed=1),
        "mlp": build_external(sub, n=d_model, orphan_ratio=1.0),
    }


def build_padded_twins(directory: str, d_model: int = 32, heads: int = 4) -> dict[str, str]:
    """source name -> the same decoder graph and weights, its blob with three times the dead space (I8's
    metamorphic twin: a larger file, the same referenced extents at other offsets)."""
    sub = os.path.join(directory, "padded")
    os.makedirs(sub, exist_ok=True)
    return {
        "dec": save_decoder_external(sub, d_model, heads, orphan_ratio=3.0, name="dec"),
        "dec_wide": save_decoder_external(sub, 2 * d_model, heads, orphan_ratio=3.0, name="dec_wide", seed=1),
    }


def reporter_facts(path: str, max_context: int, bucket: int, peak_on: str = "cpu") -> S.ModelFacts:
    """Facts from an independent route: tensor geometry of the loaded arrays, sizes from the file system."""
    proto = onnx.load(path)  # external data loaded: the tensors' own bytes
    referenced = sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)
    locations = {e.value for t in onnx.load(path, load_external_data=False).graph.initializer
                 for e in t.external_data if e.key == "location"}
    base = os.path.dirname(path)
    file_bytes = os.path.getsize(path) + sum(os.path.getsize(os.path.join(base, loc)) for loc in locations)
    carried = loop_carried(proto)
    peak = measure(path, max_context, bucket, peak_on).facts.transient_peak  # the reporter's calibration
    bpt, mc, bk = 0, 0, 0
    if carried:
        dims = next(i for i in proto.graph.input if i.name == "past_key").type.tensor_type.shape.dim
        bpt, mc, bk = 16 * dims[1].dim_value * dims[3].dim_value, max_context, bucket
    return S.ModelFacts(referenced, file_bytes, peak, carried, bpt, mc, bk)


