# Tiny ONNX models that exercise the ORT reporter and the I8 byte accounting,
# plus pure-numpy references to test ORT's outputs against.
#
# Owns: graph construction (onnx.helper) and the numpy references. It must not
# import onnxruntime: a model is data, and building one needs no runtime.
# Every model is IR 10 / opset 18 (ORT-NOTES 1: onnx 1.23 defaults to IR 14,
# which older ORT and the lagging GPU wheel reject) and every node is named
# `<op>_<i>`, so the profiler's `<name>_kernel_time` events map 1:1 onto
# graph nodes (the liveness method in reporter.py relies on it).

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "IR_VERSION",
    "OPSET",
    "EXTERNAL_MODEL_FILE",
    "EXTERNAL_BLOB_FILE",
    "build_decoder",
    "build_external",
    "build_dead_prefix",
    "build_dynamic",
    "reference_decoder_step",
    "reference_external",
    "reference_dynamic",
    "empty_past",
]

IR_VERSION = 10
OPSET = 18
EXTERNAL_MODEL_FILE = "ext.onnx"
EXTERNAL_BLOB_FILE = "weights.bin"
_ORPHAN_FILL = b"\xab"  # recognisable dead bytes in a hex dump


def _finish(nodes: list[onnx.NodeProto], graph: onnx.GraphProto) -> onnx.ModelProto:
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type}_{i}"  # profile events are "<name>_kernel_time"
    graph.node.extend(nodes)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def build_decoder(d_model: int = 64, heads: int = 4, seed: int = 0) -> onnx.ModelProto:
    # One attention decoder step (ORT-NOTES 3a): the KV cache grows by one
    # token per call, `present_*` = concat(past_*, new) along axis 2.
    if d_model <= 0 or heads <= 0 or d_model % heads:
        raise ValueError(f"d_model={d_model} must be a positive multiple of heads={heads}")
    dh = d_model // heads
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((d_model, d_model)) / np.sqrt(d_model)).astype(np.float32), name)
        for name in ("Wq", "Wk", "Wv", "Wo")
    ]
    inits += [
        numpy_helper.from_array(np.array([1, 1, heads, dh], np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([1, 1, d_model], np.int64), "out_shape"),
        numpy_helper.from_array(np.array(1 / np.sqrt(dh), np.float32), "scale"),
    ]
    n = helper.make_node
    nodes = []
    for p in "qkv":
        nodes += [
            n("MatMul", ["x", "W" + p], [p + "_lin"]),
            n("Reshape", [p + "_lin", "heads_shape"], [p + "_4d"]),
            n("Transpose", [p + "_4d"], [p + "_new"], perm=[0, 2, 1, 3]),
        ]
    nodes += [
        n("Concat", ["past_key", "k_new"], ["present_key"], axis=2),
        n("Concat", ["past_value", "v_new"], ["present_value"], axis=2),
        n("Transpose", ["present_key"], ["kT"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q_new", "kT"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1),
        n("MatMul", ["p", "present_value"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "out_shape"], ["ctx_f"]),
        n("MatMul", ["ctx_f", "Wo"], ["y"]),
    ]
    vi, f = helper.make_tensor_value_info, TensorProto.FLOAT
    graph = helper.make_graph(
        [],
        "toy_decoder_step",
        [vi("x", f, [1, 1, d_model]), vi("past_key", f, [1, heads, "past_seq", dh]),
         vi("past_value", f, [1, heads, "past_seq", dh])],
        [vi("y", f, [1, 1, d_model]), vi("present_key", f, [1, heads, "total_seq", dh]),
         vi("present_value", f, [1, heads, "total_seq", dh])],
        initializer=inits,
    )
    return _finish(nodes, graph)


def empty_past(d_model: int = 64, heads: int = 4, past: int = 0) -> np.ndarray:
    return np.zeros((1, heads, past, d_model // heads), np.float32)


def _initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference_decoder_step(
    model: onnx.ModelProto, x: np.ndarray, past_key: np.ndarray, past_value: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Reads the weights out of the model rather than regenerating them, so it
    # checks the graph, not the random generator.
    w = _initializers(model)
    heads, dh = int(w["heads_shape"][2]), int(w["heads_shape"][3])

    def split(lin: np.ndarray) -> np.ndarray:  # [1,1,D] -> [1,H,1,Dh]
        return lin.reshape(1, 1, heads, dh).transpose(0, 2, 1, 3)

    q, k, v = (split(x @ w[name]) for name in ("Wq", "Wk", "Wv"))
    present_key = np.concatenate([past_key, k], axis=2)
    present_value = np.concatenate([past_value, v], axis=2)
    p = _softmax((q @ present_key.transpose(0, 1, 3, 2)) * w["scale"])
    ctx = (p @ present_value).transpose(0, 2, 1, 3).reshape(1, 1, heads * dh)
    return ctx @ w["Wo"], present_key, present_value


def build_external(directory: str | os.PathLike[str], n: int = 256, orphan_ratio: float = 1.0, seed: int = 0) -> str:
    # y = (x @ W1) @ W2 with both weights in one external blob (ORT-NOTES 3b).
    # After each weight's referenced bytes comes a dead region of
    # round(orphan_ratio * weight bytes), so at ratio 1.0 the file is exactly
    # twice the referenced bytes: the #853/#856 "2.00x" blob in miniature.
    if n <= 0 or orphan_ratio < 0:
        raise ValueError(f"need n > 0 and orphan_ratio >= 0, got n={n}, orphan_ratio={orphan_ratio}")
    rng = np.random.default_rng(seed)
    inits, offset = [], 0
    with open(os.path.join(directory, EXTERNAL_BLOB_FILE), "wb") as blob:
        for name in ("W1", "W2"):
            tensor = numpy_helper.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), name)
            raw = tensor.raw_data
            orphan = round(orphan_ratio * len(raw))
            blob.write(raw)
            blob.write(_ORPHAN_FILL * orphan)
            onnx.external_data_helper.set_external_data(
                tensor, location=EXTERNAL_BLOB_FILE, offset=offset, length=len(raw)
            )
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            inits.append(tensor)
            offset += len(raw) + orphan
    vi, f = helper.make_tensor_value_info, TensorProto.FLOAT
    graph = helper.make_graph(
        [], "external_two_matmuls", [vi("x", f, ["batch", n])], [vi("y", f, ["batch", n])], initializer=inits
    )
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("MatMul", ["h", "W2"], ["y"])]
    model = _finish(nodes, graph)
    path = os.path.join(directory, EXTERNAL_MODEL_FILE)
    onnx.save_model(model, path)
    return path


def build_dead_prefix(directory: str | os.PathLike[str], referenced: int, dead_prefix: int,
                      model_file: str = "prefix.onnx", blob_file: str = "prefix.bin") -> str:
    # A blob whose first `dead_prefix` bytes no tensor references, then one
    # uint8 weight of `referenced` bytes (y = Identity(W)): the #853/#856
    # layout, where the orphaned half sat in front of the live extents.
    if referenced <= 0 or dead_prefix < 0:
        raise ValueError(f"need referenced > 0 and dead_prefix >= 0, got {referenced}, {dead_prefix}")
    rng = np.random.default_rng(0)
    tensor = numpy_helper.from_array(rng.integers(0, 256, referenced, dtype=np.uint8), "W")
    with open(os.path.join(directory, blob_file), "wb") as blob:
        blob.write(_ORPHAN_FILL * dead_prefix)
        blob.write(tensor.raw_data)
    onnx.external_data_helper.set_external_data(tensor, location=blob_file, offset=dead_prefix, length=referenced)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    graph = helper.make_graph([], "dead_prefix", [], [helper.make_tensor_value_info("y", TensorProto.UINT8,
                                                                                   [referenced])],
                              initializer=[tensor])
    model = _finish([helper.make_node("Identity", ["W"], ["y"])], graph)
    path = os.path.join(directory, model_file)
    onnx.save_model(model, path)
    return path


def reference_external(model_path: str | os.PathLike[str], x: np.ndarray) -> np.ndarray:
    w = _initializers(onnx.load(os.fspath(model_path)))  # loads the blob through onnx, not ORT
    return (x @ w["W1"]) @ w["W2"]


def build_dynamic(width: int = 64, seed: int = 0) -> onnx.ModelProto:
    # Activations scale with the dynamic `rows` axis, so the transient peak is
    # a function of the input shape that the calibration has to measure.
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), "W"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "W"], ["h"]),
        n("Relu", ["h"], ["r"]),
        n("Mul", ["r", "h"], ["m"]),
        n("Add", ["m", "x"], ["a"]),
        n("ReduceSum", ["a", "axes"], ["y"], keepdims=0),
    ]
    vi, f = helper.make_tensor_value_info, TensorProto.FLOAT
    graph = helper.make_graph(
        [], "dynamic_rows", [vi("x", f, ["rows", width])], [vi("y", f, ["rows"])], initializer=inits
    )
    return _finish(nodes, graph)


def reference_dynamic(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    h = x @ _initializers(model)["W"]
    return (np.maximum(h, 0) * h + x).sum(axis=1)
