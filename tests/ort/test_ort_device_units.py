"""The device path's parts that need no device: DLPack views, the cap arithmetic, the peak search, typed refusals.

Nothing here runs CUDA. The CUDA checks are tests/ort/test_ort_cuda.py (skipped without a GPU);
the device path's wiring on a CPU stand-in is tests/ort/test_ort_device_standin.py.
IDs: I2 (allocate only after a grant), I3 (what stays outside is reported), I8 (the cap is the loan).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from refimpl.ort.device import CudaMemory, StandInMemory
from refimpl.ort.device_arena import OUTSIDE_LEDGER, cuda_provider_options, device_run_options, shrink_value
from refimpl.ort.device_path import device_memory
from refimpl.ort.device_peak import ARENA_GRAIN, smallest_passing
from refimpl.ort.dlpack import KDL_CPU, KDL_CUDA, ortvalue_over
from refimpl.ort.measure import session_providers
from spec.errors import InvalidArgument, InvalidBytes, InvalidTransition, ProviderUnavailable

CUDA = "CUDAExecutionProvider"


def test_dlpack_view_is_zero_copy_at_any_offset() -> None:
    buf = np.arange(64, dtype=np.float32)
    v = ortvalue_over(buf.ctypes.data + 16 * 4, KDL_CPU, 0, np.float32, (4, 4))
    assert v.device_name() == "cpu" and v.shape() == [4, 4]
    assert v.data_ptr() == buf.ctypes.data + 64  # the bytes we own, not a copy
    buf[16] = -1.0
    assert v.numpy()[0, 0] == -1.0 and np.array_equal(v.numpy().ravel()[1:], np.arange(17, 32))


def test_owning_ortvalue_is_refused_as_initializer_and_a_dlpack_view_is_taken() -> None:
    # Why refimpl.ort.dlpack exists: ORT 1.32's add_initializer takes only buffers the caller owns.
    so = ort.SessionOptions()
    owning = ort.OrtValue.ortvalue_from_shape_and_type([4, 4], np.float32, "cpu", 0)
    with pytest.raises(Exception, match="must be owned by the user"):
        so.add_initializer("W", owning)
    buf = np.zeros(16, np.float32)
    so.add_initializer("W", ortvalue_over(buf.ctypes.data, KDL_CPU, 0, np.float32, (4, 4)))  # accepted


@pytest.mark.parametrize("device, dtype, error, match", [
    *((KDL_CPU, dtype, TypeError, "no DLPack code") for dtype in (np.complex64, np.dtype(">f4"), np.str_)),
    (7, np.float32, ValueError, "kDLCPU"),  # a device type other than dlpack.h's kDLCPU and kDLCUDA
])
def test_invalid_dlpack_view_is_refused(device: int, dtype, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ortvalue_over(1 << 20, device, 0, dtype, (1,))
    assert KDL_CUDA == 2  # dlpack.h's kDLCUDA, what CudaMemory's views carry


@pytest.mark.parametrize("device, cap", [(1, 12_288), (None, 123_456)])  # None: device 0 by default
def test_cap_arithmetic_passes_the_loan_as_the_cuda_arena_limit(device: int | None, cap: int) -> None:
    opts = {"device_id": str(device or 0), "gpu_mem_limit": str(cap), "arena_extend_strategy": "kSameAsRequested",
            "cudnn_conv_use_max_workspace": "0", "enable_cuda_graph": "0"}
    assert cuda_provider_options(device or 0, cap) == opts
    assert session_providers(CUDA, cap, *([device] if device else [])) == [(CUDA, opts), "CPUExecutionProvider"]
    assert session_providers("CPUExecutionProvider", cap) == ["CPUExecutionProvider"]


@pytest.mark.parametrize("cap", [0, -1, 1.5, "4096", None])
def test_invalid_cap_is_refused(cap) -> None:
    with pytest.raises(InvalidBytes, match="cap must be a positive int"):
        cuda_provider_options(0, cap)


def test_shrink_options_name_the_arenas_that_exist() -> None:
    assert shrink_value("cuda", 0, cpu=True) == "cpu:0;gpu:0"
    assert shrink_value("cuda", 3, cpu=False) == "gpu:3"
    assert shrink_value("cpu", 0, cpu=True) == "cpu:0"
    assert device_run_options("cpu", 0) is None  # "gpu:0" on a CPU session is INVALID_ARGUMENT in ORT
    assert device_run_options("cuda", 0) is not None


def test_outside_the_ledger_names_what_gpu_mem_limit_does_not_cover() -> None:
    names = {n.what for n in OUTSIDE_LEDGER}
    assert {"CUDA context", "cuBLAS / cuDNN handles", "CUDA graph capture"} <= names
    assert all(n.nbytes is None and n.source == "not measured" for n in OUTSIDE_LEDGER)


@pytest.mark.parametrize("need", [1, 255, 256, 257, 4096, 65_536, 65_537, 1_000_000])
def test_smallest_passing_cap_is_the_first_multiple_of_the_grain_at_or_above_the_need(need: int) -> None:
    probes: list[int] = []

    def passes(cap: int) -> bool:
        probes.append(cap)
        return cap >= need

    got = smallest_passing(passes, start=4096)
    assert got == -(-need // ARENA_GRAIN) * ARENA_GRAIN  # independent: ceil to the grain
    assert len(probes) < 40  # a search, not a scan


def test_smallest_passing_refuses_a_bad_start_and_a_need_past_the_ceiling() -> None:
    with pytest.raises(InvalidArgument, match="positive multiple"):
        smallest_passing(lambda c: True, start=100)
    with pytest.raises(InvalidArgument, match="no cap up to"):
        smallest_passing(lambda c: False, start=256, ceiling=1024)


def test_cuda_memory_without_a_gpu_is_provider_unavailable() -> None:
    # Here: either cuda-bindings is not installed (the [cpu] extra) or there is no driver. Both typed.
    try:
        CudaMemory(0)
    except ProviderUnavailable:
        return
    pytest.skip("CUDA memory works here: this is a GPU machine (tests/ort/test_ort_cuda.py covers it)")


@pytest.mark.parametrize("device_id", [-1, "0", 1.0])
def test_invalid_cuda_device_id_is_refused(device_id) -> None:
    with pytest.raises(InvalidArgument, match="device_id"):
        CudaMemory(device_id)


def test_device_memory_pairs_each_provider_with_memory_its_ep_reads() -> None:
    standin = StandInMemory()
    assert device_memory("CPUExecutionProvider", None) is None  # the host path
    assert device_memory("CPUExecutionProvider", standin) is standin
    with pytest.raises(InvalidArgument, match="cpu stand-in cannot back it"):
        device_memory(CUDA, standin)
    with pytest.raises(InvalidArgument, match="DeviceMemory"):
        device_memory("CPUExecutionProvider", object())


def test_standin_regions_are_exact_and_freed_once() -> None:
    m = StandInMemory()
    r = m.alloc(1000)
    assert r.nbytes == 1000 and m.allocated == 1000
    m.upload(r, 996, np.array([7], np.int32))
    assert m.download(r, 996, np.int32, (1,))[0] == 7
    with pytest.raises(InvalidArgument, match="outside"):
        m.upload(r, 998, np.array([7], np.int32))  # 4 bytes at 998 run past the region
    m.free(r)
    assert m.allocated == 0
    with pytest.raises(InvalidTransition, match="freed"):
        m.free(r)
    with pytest.raises(InvalidTransition, match="freed"):
        m.value(r, 0, np.float32, (1,))
