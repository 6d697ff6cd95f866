"""Subprocess body for tests/ort/test_ort_facts.py: ORT facts that need a process of their own.

`python tests/ort/ort_facts_proc.py env DIR` registers env arenas (process-wide,
and the Python binding cannot unregister one); `... shrink` reads the
process's RssAnon around Runs, which other tests' allocations would blur.
Prints one JSON object of what happened; the tests decide what it means.
Nothing here imports ortmem: these are observations of ORT itself.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MiB = 1 << 20


def matmul_model(n: int, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """y = relu(x @ W), x: [rows, n], W: [n, n] float32 initializer."""
    w = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["h"], name="MatMul_0"),
                           helper.make_node("Relu", ["h"], ["y"], name="Relu_1")], "g", [x], [y],
                          initializer=[numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    return m.SerializeToString(), w


def options(env: bool = False, prepack: bool = True) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.enable_mem_pattern = False
    so.intra_op_num_threads = 1
    if env:
        so.add_session_config_entry("session.use_env_allocators", "1")
    if not prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    return so


def run(session: ort.InferenceSession, rows: int, width: int, ro: ort.RunOptions | None = None) -> str:
    try:
        session.run(None, {"x": np.ones((rows, width), np.float32)}, ro)
        return "ok"
    except Exception as e:  # ORT's own error, recorded as it came
        return f"{type(e).__name__}: {e}"


def env() -> dict[str, object]:
    width, small, big = 256, 4, 8192  # big: an 8 MiB MatMul output, twice the cap
    model, _ = matmul_model(width)
    mi = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    cap = 4 * MiB
    out: dict[str, object] = {"cap": cap, "registered": repr(ort.create_and_register_allocator(
        mi, ort.OrtArenaCfg({"max_mem": cap, "arena_extend_strategy": 1})))}
    early = ort.InferenceSession(model, options(env=True), providers=["CPUExecutionProvider"])
    own = ort.InferenceSession(model, options(env=False), providers=["CPUExecutionProvider"])
    try:
        out["opted_in"] = early.get_session_options().get_session_config_entry("session.use_env_allocators")
    except RuntimeError as e:  # ORT raises for a key that was never set
        out["opted_in"] = f"unset: {e}"
    out["opted_in_small"] = run(early, small, width)
    out["opted_in_big"] = run(early, big, width)
    out["opted_in_small_after"] = run(early, small, width)
    out["own_arena_big"] = run(own, big, width)
    # Initializers beside the cap: a 16 MiB weight, from the model (prepacked or not) and from add_initializer.
    wide, w = matmul_model(2048)
    for name, prepack in (("init_prepacked", True), ("init_in_place", False)):
        so = options(env=True, prepack=prepack)
        so.enable_profiling, so.profile_file_prefix = True, f"{sys.argv[2]}/{name}"
        s = ort.InferenceSession(wide, so, providers=["CPUExecutionProvider"])
        out[name] = run(s, 8, 2048)
        with open(s.end_profiling()) as f:  # the env arena's own figures, sampled after each kernel
            out[f"{name}_in_use"] = max(int(e["args"]["mem_bytes_in_use"]) for e in json.load(f)
                                        if e.get("cat") == "Node")
    kept = w.copy()  # the caller keeps the buffer (and its OrtValue) alive for the session's life
    value = ort.OrtValue.ortvalue_from_numpy(kept)
    so = options(env=True, prepack=False)
    so.add_initializer("W", value)
    s = ort.InferenceSession(wide, so, providers=["CPUExecutionProvider"])
    out["add_initializer"] = run(s, 8, 2048)
    # Register again, 64x the cap: later sessions get the new arena, the earlier one keeps its own.
    out["recap"] = 64 * cap
    out["reregistered"] = repr(ort.create_and_register_allocator(
        mi, ort.OrtArenaCfg({"max_mem": 64 * cap, "arena_extend_strategy": 1})))
    late = ort.InferenceSession(model, options(env=True), providers=["CPUExecutionProvider"])
    out["late_big"] = run(late, big, width)
    out["early_big_after_reregister"] = run(early, big, width)
    return out


def _rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def shrink() -> dict[str, object]:
    width, small, big = 256, 4, 65_536  # big: two 64 MiB activations in the session's own CPU arena
    model, _ = matmul_model(width)
    out: dict[str, object] = {}
    for arm in ("plain", "shrink"):
        s = ort.InferenceSession(model, options(), providers=["CPUExecutionProvider"])
        run(s, small, width)
        before = _rss_anon()
        run(s, big, width)
        peak = _rss_anon()
        ro = ort.RunOptions()
        if arm == "shrink":
            ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        status = run(s, small, width, ro)
        out[arm] = {"before": before, "peak": peak, "after": _rss_anon(), "status": status}
        del s
    return out


if __name__ == "__main__":
    print(json.dumps({"env": env, "shrink": shrink}[sys.argv[1]]()))
