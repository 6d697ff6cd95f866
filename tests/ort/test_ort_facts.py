"""ORT's own behaviour, as the project's documents state it, observed through the Python binding.

Each test is the evidence of entries of docs/ort-claims.md (named in each
docstring) and asserts what those entries say, on the installed onnxruntime
(the CPU wheel; the registry names the version the facts were observed on,
and `test_the_registry_names_the_installed_version` fails when they part).
Nothing here goes through ortmem: the models are built inline and every
call is ORT's. The env arena is process-wide and the binding cannot
unregister it, and RSS readings need a quiet process, so those run in a
subprocess (`ort_facts_proc.py`), which only records what happened.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from ort_facts_proc import MiB, matmul_model, options  # noqa: E402

CPU = ["CPUExecutionProvider"]


def _proc(mode: str, tmp: str = "") -> dict:
    r = subprocess.run([sys.executable, os.path.join(HERE, "ort_facts_proc.py"), mode, tmp], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def env_report(tmp_path_factory) -> dict:
    return _proc("env", str(tmp_path_factory.mktemp("profiles")))


@pytest.fixture(scope="module")
def shrink_report() -> dict:
    return _proc("shrink")


def _session(model: bytes, so: ort.SessionOptions | None = None) -> ort.InferenceSession:
    return ort.InferenceSession(model, so or options(), providers=CPU)


# --- the env arena ------------------------------------------------------------------------------


def test_env_arena_caps_the_runs_of_sessions_that_opt_in(env_report) -> None:
    """env-arena-cap: max_mem fails an opted-in session's Run past the cap, per Run; the session recovers."""
    r = env_report
    assert 256 * 8192 * 4 > r["cap"]  # the big Run's MatMul output alone is past the cap
    assert r["registered"] == "None" and r["opted_in"] == "1"
    assert r["opted_in_small"] == "ok"
    assert r["opted_in_big"].startswith("Fail: [ONNXRuntimeError] : 1 : FAIL"), r["opted_in_big"]
    assert re.search(r"Available memory of \d+ is smaller than requested bytes of \d+", r["opted_in_big"])
    assert r["opted_in_small_after"] == "ok"


def test_env_arena_scope_excludes_other_sessions_and_initializers(env_report) -> None:
    """env-arena-scope: a session that does not opt in, and weights (from the model or add_initializer), are outside."""
    r = env_report
    assert r["own_arena_big"] == "ok"  # the same 8 MiB-output Run, in the session's own arena
    assert 2048 * 2048 * 4 >= 4 * r["cap"]  # the weight is 16 MiB, at least four times the cap ...
    assert (r["init_prepacked"], r["init_in_place"], r["add_initializer"]) == ("ok", "ok", "ok")  # ... and runs
    # Prepacked, the packed copy sits in the env arena past its cap (the arena's own in-use figure); in place,
    # the initializer is not in the arena at all.
    assert r["init_prepacked_in_use"] >= 16 * MiB > r["cap"] > r["init_in_place_in_use"]


def test_reregistering_replaces_the_env_arena_for_later_sessions_only(env_report) -> None:
    """env-arena-reregister: a second create_and_register_allocator raises nothing and reaches only later sessions."""
    r = env_report
    assert r["reregistered"] == "None" and r["recap"] > 256 * 8192 * 4 * 2  # room for the big Run
    assert r["late_big"] == "ok"  # created after: the new arena, 64 times the cap
    assert r["early_big_after_reregister"].startswith("Fail"), r  # created before: still the first cap


def test_python_binding_has_no_unregister_and_no_allocator_stats() -> None:
    """py-no-unregister: the binding registers env allocators and has no call to unregister one or read its stats."""
    from onnxruntime.capi import _pybind_state as C

    names = set(dir(ort)) | set(dir(C))
    assert {n for n in names if "alloc" in n.lower()} == {
        "OrtAllocatorType", "create_and_register_allocator", "create_and_register_allocator_v2"}
    assert {n for n in names if "unregister" in n.lower()} == {"unregister_execution_provider_library"}
    assert not {n for n in names if "stats" in n.lower()}


# --- the session's own arena --------------------------------------------------------------------


def test_arena_keeps_its_high_water_mark_until_a_run_asks_to_shrink(shrink_report) -> None:
    """arena-high-water, arena-shrink: RssAnon stays at the peak after a small Run, and drops after a shrinking one."""
    plain, shrink = shrink_report["plain"], shrink_report["shrink"]
    for arm in (plain, shrink):
        assert arm["peak"] - arm["before"] >= 100 * MiB and arm["status"] == "ok", arm  # two 64 MiB activations
    assert plain["after"] >= plain["peak"] - 8 * MiB, plain  # kept: the arena does not give its regions back
    assert shrink["after"] <= shrink["before"] + 8 * MiB, shrink  # returned at the end of the shrinking Run


@pytest.mark.parametrize("value, message", [
    ("cpu 0", "Unsupported device specified in the memory arena shrink list"),
    ("gpu:0", "Did not find an arena based allocator registered for device-id combination"),
])
def test_arena_shrink_names_its_arenas_by_device_and_id(value: str, message: str) -> None:
    """arena-shrink: the run option takes "<device>:<id>" of an arena the session has; anything else fails the Run."""
    model, _ = matmul_model(64)
    s = _session(model)
    ro = ort.RunOptions()
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", value)
    with pytest.raises(Exception, match=f"INVALID_ARGUMENT : {message}"):
        s.run(None, {"x": np.ones((2, 64), np.float32)}, ro)
    ok = ort.RunOptions()
    ok.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert s.run(None, {"x": np.ones((2, 64), np.float32)}, ok)[0].shape == (2, 64)


# --- weights ------------------------------------------------------------------------------------


@pytest.mark.parametrize("prepack, write_reaches_runs", [(True, False), (False, True)])
def test_prepacking_keeps_its_own_copy_and_disable_prepacking_reads_the_buffer(prepack: bool,
                                                                               write_reaches_runs: bool) -> None:
    """prepacking, zero-copy: add_initializer's buffer is wrapped, not copied; prepacking packs its own copy."""
    model, w = matmul_model(256)
    kept = w.copy()
    value = ort.OrtValue.ortvalue_from_numpy(kept)
    assert value.data_ptr() == kept.ctypes.data  # the OrtValue is the array's memory
    so = options(prepack=prepack)
    so.add_initializer("W", value)
    s = _session(model, so)
    x = {"x": np.ones((4, 256), np.float32)}
    before = s.run(None, x)[0]
    kept[:] = 0  # written after the session was created
    after = s.run(None, x)[0]
    assert (not np.array_equal(before, after)) is write_reaches_runs
    if write_reaches_runs:
        assert not after.any()  # relu(x @ 0) = 0: the Run read the zeroed buffer itself


# A DLPack producer written here, so that no ortmem code is in the loop: the legacy DLManagedTensor
# (DLPack 0.x, capsule "dltensor") of a C-contiguous float32 array, in one malloc'd block whose deleter is
# libc's free. `device_type` is the label the capsule carries (1 kDLCPU, 2 kDLCUDA): over host memory a
# kDLCUDA label lets the CPU wheel show what ORT does with a value of another device without reading it.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None)
_libc.malloc.restype, _libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype, _capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
KDL_CPU, KDL_CUDA = 1, 2


def _dlpack(arr: np.ndarray, device_type: int) -> object:
    assert arr.dtype == np.float32 and arr.flags.c_contiguous
    head = ctypes.sizeof(_DLManaged)
    block = _libc.malloc(head + 8 * arr.ndim)
    (ctypes.c_int64 * arr.ndim).from_address(block + head)[:] = arr.shape
    m = _DLManaged.from_address(block)
    m.dl_tensor = _DLTensor(arr.ctypes.data, _DLDevice(device_type, 0), arr.ndim, _DLDataType(2, 32, 1),
                            block + head, None, 0)
    m.manager_ctx, m.deleter = None, ctypes.cast(_libc.free, ctypes.c_void_p).value
    return _capsule(block, b"dltensor", None)


def _relu_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w, 0)


def test_add_initializer_takes_only_buffers_the_caller_owns() -> None:
    """user-initializer: an OrtValue owning its buffer is refused; a DLPack view is taken and read in place."""
    so = options(prepack=False)
    owning = ort.OrtValue.ortvalue_from_shape_and_type([256, 256], np.float32, "cpu", 0)
    with pytest.raises(Exception, match="Buffer containing the initializer must be owned by the user"):
        so.add_initializer("W", owning)
    model, w = matmul_model(256)
    kept = w.copy()
    view = ort.OrtValue.from_dlpack(_dlpack(kept, KDL_CPU))
    assert (view.device_name(), view.data_ptr()) == ("cpu", kept.ctypes.data)  # no copy
    so.add_initializer("W", view)  # accepted
    s = _session(model, so)
    x = np.ones((4, 256), np.float32)
    assert np.allclose(s.run(None, {"x": x})[0], _relu_matmul(x, w), atol=1e-3)
    kept[:] = 0  # written after the session was created: the next Run reads it
    assert not s.run(None, {"x": x})[0].any()


@pytest.mark.parametrize("device_type, used", [(KDL_CUDA, False), (KDL_CPU, True)])
def test_a_user_initializer_is_used_only_on_the_device_ort_plans_for_it(capfd, device_type: int,
                                                                       used: bool) -> None:
    """user-initializer: a value on another device than the planned one is logged and replaced by ORT's own."""
    model, w = matmul_model(64)
    zeros = np.zeros((64, 64), np.float32)
    value = ort.OrtValue.from_dlpack(_dlpack(zeros, device_type))
    assert value.device_name() == ("cuda" if device_type == KDL_CUDA else "cpu")  # the capsule's device
    so = options(prepack=False)
    so.log_severity_level = 2  # WARNING
    so.add_initializer("W", value)
    s = _session(model, so)
    x = np.ones((2, 64), np.float32)
    out = s.run(None, {"x": x})[0]
    warned = "Cannot use user supplied initializer with name: (W)" in capfd.readouterr().err
    assert warned is not used
    assert (not out.any()) if used else np.allclose(out, _relu_matmul(x, w), atol=1e-3)  # zeros, or the model's W


def test_iobinding_reads_and_writes_bound_buffers_in_place() -> None:
    """iobinding-in-place: inputs and outputs bound by pointer or as views on the session's device are not copied."""
    model, w = matmul_model(64)
    s = _session(model)
    x, y = np.ones((2, 64), np.float32), np.zeros((2, 64), np.float32)
    io = s.io_binding()
    io.bind_input("x", "cpu", 0, np.float32, [2, 64], x.ctypes.data)
    io.bind_output("y", "cpu", 0, np.float32, [2, 64], y.ctypes.data)
    s.run_with_iobinding(io)
    assert np.allclose(y, _relu_matmul(x, w), atol=1e-3)  # the Run wrote into our buffer
    x[:] = -1.0  # written between Runs, without binding again
    s.run_with_iobinding(io)
    assert np.allclose(y, _relu_matmul(x, w), atol=1e-3) and not np.allclose(y, _relu_matmul(x * -1, w), atol=1e-3)
    view = s.io_binding()
    view.bind_ortvalue_input("x", ort.OrtValue.from_dlpack(_dlpack(x, KDL_CPU)))
    view.bind_ortvalue_output("y", ort.OrtValue.from_dlpack(_dlpack(y, KDL_CPU)))
    x[:] = 2.0
    s.run_with_iobinding(view)
    assert np.allclose(y, _relu_matmul(x, w), atol=1e-3)


@pytest.mark.parametrize("device_type", [KDL_CUDA, KDL_CPU])
def test_iobinding_copies_an_input_of_another_device_when_it_is_bound(device_type: int) -> None:
    """iobinding-in-place: an input on another device than its consumer's is copied at bind time, not per Run."""
    model, _ = matmul_model(64)
    s = _session(model)
    x = np.ones((2, 64), np.float32)
    io = s.io_binding()
    value = ort.OrtValue.from_dlpack(_dlpack(x, device_type))
    if device_type == KDL_CUDA:  # the CPU wheel has no CUDA copy: bind_ortvalue_input itself fails
        with pytest.raises(RuntimeError, match=r"Error when binding input: There's no data transfer registered "
                                               r"for copying tensors from Device:\[DeviceType:1"):
            io.bind_ortvalue_input("x", value)
    else:
        io.bind_ortvalue_input("x", value)  # same device: bound as it is
        io.bind_output("y", "cpu")
        s.run_with_iobinding(io)
        assert io.copy_outputs_to_cpu()[0].shape == (2, 64)


# --- Runs ---------------------------------------------------------------------------------------


def _node_events(session: ort.InferenceSession) -> list[dict]:
    with open(session.end_profiling()) as f:
        return [e for e in json.load(f) if e.get("cat") == "Node"]


def test_terminate_refuses_the_run_before_any_kernel(tmp_path) -> None:
    """run-terminate: a Run with RunOptions.terminate set fails with ORT's Fail and runs no kernel."""
    model, _ = matmul_model(64)
    so = options()
    so.enable_profiling, so.profile_file_prefix = True, str(tmp_path / "p")
    s = _session(model, so)
    ro = ort.RunOptions()
    ro.terminate = True
    with pytest.raises(Exception, match="Exiting due to terminate flag being set to true"):
        s.run(None, {"x": np.ones((2, 64), np.float32)}, ro)
    assert _node_events(s) == []
    control = _session(model, so)  # negative control: the same session options, an ordinary Run
    control.run(None, {"x": np.ones((2, 64), np.float32)})
    assert len(_node_events(control)) == 2


def test_a_bound_output_of_another_shape_fails_the_run() -> None:
    """iobinding-shape: a preallocated output must have the shape the Run computes."""
    model, _ = matmul_model(64)
    s = _session(model)
    io = s.io_binding()
    io.bind_cpu_input("x", np.ones((4, 64), np.float32))
    io.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(np.zeros((5, 64), np.float32)))
    with pytest.raises(Exception, match=r"has shape \{5,64\} but the computed output shape for this run is \{4,64\}"):
        s.run_with_iobinding(io)


@pytest.mark.parametrize("arena", [True, False])
def test_profiler_samples_the_arena_after_each_kernel_only_with_the_arena_on(tmp_path, arena: bool) -> None:
    """profiler-mem-fields: each Node event carries the arena's mem_* figures, and none with the arena off."""
    model, _ = matmul_model(64)
    so = options()
    so.enable_cpu_mem_arena = arena
    so.enable_profiling, so.profile_file_prefix = True, str(tmp_path / "p")
    s = _session(model, so)
    s.run(None, {"x": np.ones((16, 64), np.float32)})
    keys = [{k for k in e["args"] if k.startswith("mem_")} for e in _node_events(s)]
    expected = {"mem_arena_held", "mem_arena_held_delta", "mem_bytes_in_use", "mem_bytes_requested_in_use",
                "mem_in_use_delta", "mem_in_use_peak", "mem_requested_in_use_delta"} if arena else set()
    assert len(keys) == 2 and all(k == expected for k in keys)


@pytest.mark.parametrize("pattern", [True, False])
def test_mem_pattern_takes_a_runs_intermediates_before_its_first_kernel(tmp_path, pattern: bool) -> None:
    """mem-pattern: from an input shape's second Run, the first kernel's allocation delta reads 0."""
    model, _ = matmul_model(256)
    so = options()
    so.enable_mem_pattern = pattern
    so.enable_profiling, so.profile_file_prefix = True, str(tmp_path / "p")
    s = _session(model, so)
    for _ in range(3):
        s.run(None, {"x": np.ones((1024, 256), np.float32)})
    matmul = [int(e["args"]["mem_in_use_delta"]) for e in _node_events(s) if e["name"] == "MatMul_0_kernel_time"]
    assert len(matmul) == 3 and matmul[0] == 1024 * 256 * 4  # the first Run of a shape allocates in the kernel
    assert matmul[1:] == ([0, 0] if pattern else [1024 * 256 * 4] * 2)


# --- providers ----------------------------------------------------------------------------------


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="the GPU wheel is installed")
def test_cuda_asked_of_the_cpu_wheel_warns_and_runs_on_cpu() -> None:
    """cuda-fallback: the CPU wheel warns (UserWarning) and the session runs on the CPU EP."""
    model, _ = matmul_model(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = ort.InferenceSession(model, options(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert any(issubclass(w.category, UserWarning) and "not in available provider names" in str(w.message)
               for w in caught)


def test_a_failed_session_creation_is_retried_on_the_cpu_ep_and_printed(capsys) -> None:
    """cuda-fallback: InferenceSession catches an error of session creation, prints it and retries on the CPU EP."""
    model, _ = matmul_model(64)
    bad = {"providers": ["CPUExecutionProvider"], "provider_options": [{}, {}]}  # an error the CPU wheel can make
    s = ort.InferenceSession(model, options(), **bad)
    out = capsys.readouterr().out
    assert "EP Error" in out and "Falling back to ['CPUExecutionProvider'] and retrying." in out
    assert s.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(ValueError, match="should be the same length"):  # the control: no retry, the error itself
        ort.InferenceSession(model, options(), enable_fallback=0, **bad)


def test_the_registry_names_the_installed_version() -> None:
    """The facts above were observed on the version docs/ort-claims.md names; an upgrade must re-read them."""
    with open(os.path.join(ROOT, "docs", "ort-claims.md")) as f:
        named = re.search(r"Observed on onnxruntime (\d+\.\d+\.\d+)", f.read())
    assert named and named.group(1) == ort.__version__, (named and named.group(1), ort.__version__)
