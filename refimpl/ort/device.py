# Device memory for the governed device path: the mechanism behind a device
# lease (allocate exactly the granted bytes after the grant, I2; free them
# when the lease goes back; never decide anything: roles in DESIGN-FACTS 3,
# "mechanism maps and frees only").
#
# Two mechanisms with one interface:
#   CudaMemory      cudaMalloc / cudaFree / cudaMemcpy on one CUDA device
#                   through NVIDIA's `cuda-bindings` (the [gpu] extra).
#                   Initializers and IOBinding tensors are DLPack / pointer
#                   views on 'cuda' (`refimpl.ort.dlpack`), which ORT reads in
#                   place when 'cuda' is where it plans them [ort:user-initializer]
#                   [ort:iobinding-in-place]. Device memory in use is read back
#                   with cudaMemGetInfo (device-wide, the driver's figure).
#   StandInMemory   a CPU STAND-IN: anonymous host memory, views on 'cpu'.
#                   It exists so that everything of the device path that does
#                   not need CUDA (the device authority, the lease-to-OrtValue
#                   wiring, the IOBinding plan, the cap arithmetic, the
#                   not-enforced report) runs on machines without a GPU. It
#                   exercises no CUDA code, and nothing it shows is a claim
#                   about CUDA.
# Why not ORT's own device allocation (`ortvalue_from_shape_and_type(...,
# 'cuda', 0)`): those OrtValues own their buffers, which `add_initializer`
# refuses [ort:user-initializer], and their bytes would be allocated by ORT,
# not as a lease's region: the driver's figure would then not move with the
# ledger's.
#
# Owns: regions (one allocation each) and copies between them and the host.
# Must not touch: the ledger, leases, ORT sessions.

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
import onnxruntime as ort

from refimpl.ort.dlpack import KDL_CPU, KDL_CUDA, ortvalue_over
from spec.errors import CalloutFailed, InvalidArgument, InvalidTransition, ProviderUnavailable

__all__ = ["Region", "DeviceMemory", "StandInMemory", "CudaMemory", "STAND_IN_LABEL"]

STAND_IN_LABEL = "cpu stand-in for a device (host memory; exercises no CUDA)"


class Region:
    """One allocation of exactly `nbytes`, backing one lease; `ptr` is its address on the memory's device."""

    __slots__ = ("ptr", "nbytes", "live", "_keep")

    def __init__(self, ptr: int, nbytes: int, keep: Any = None) -> None:
        self.ptr, self.nbytes, self.live, self._keep = ptr, nbytes, True, keep

    def __repr__(self) -> str:
        return f"Region({self.nbytes} B{'' if self.live else ', freed'})"


class DeviceMemory:
    """The interface both mechanisms implement; `ort_device` is the OrtDevice type ORT sees ('cuda' or 'cpu')."""

    ort_device: str
    device_id: int
    dl_device: int
    label: str

    def alloc(self, nbytes: int) -> Region:
        raise NotImplementedError

    def free(self, region: Region) -> None:
        raise NotImplementedError

    def upload(self, region: Region, offset: int, arr: np.ndarray) -> None:
        raise NotImplementedError

    def download(self, region: Region, offset: int, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def copy(self, dst: Region, dst_off: int, src: Region, src_off: int, nbytes: int) -> None:
        raise NotImplementedError

    def device_used(self) -> int | None:
        """Bytes in use on the device as its driver reports them (None: no such figure, e.g. the stand-in)."""
        return None

    def value(self, region: Region, offset: int, dtype: Any, shape: tuple[int, ...]) -> ort.OrtValue:
        """A zero-copy OrtValue over `region` at `offset` (the region must outlive it and every session using it)."""
        self._check(region, offset, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
        return ortvalue_over(region.ptr + offset, self.dl_device, self.device_id, dtype, tuple(shape))

    @staticmethod
    def _check(region: Region, offset: int, nbytes: int) -> None:
        if not region.live:
            raise InvalidTransition(f"{region!r} was freed")
        if offset < 0 or nbytes < 0 or offset + nbytes > region.nbytes:
            raise InvalidArgument(f"[{offset}, {offset + nbytes}) is outside {region!r}")


class StandInMemory(DeviceMemory):
    """A CPU stand-in for device memory: private anonymous mappings, views on 'cpu' (see the module header)."""

    ort_device, device_id, dl_device, label = "cpu", 0, KDL_CPU, STAND_IN_LABEL

    def __init__(self) -> None:
        self.allocated = 0  # bytes in live regions (a figure the stand-in can give; not a driver's)

    def alloc(self, nbytes: int) -> Region:
        if type(nbytes) is not int or nbytes <= 0:
            raise InvalidArgument(f"nbytes must be a positive int, got {nbytes!r}")
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        arr = np.frombuffer(m, np.uint8, count=nbytes)
        self.allocated += nbytes
        return Region(arr.ctypes.data, nbytes, (m, arr))

    def free(self, region: Region) -> None:
        if not region.live:
            raise InvalidTransition(f"{region!r} was freed already")
        region.live = False
        self.allocated -= region.nbytes
        region._keep = None  # the mapping goes when the last view over it does (numpy keeps it while exported)

    def _bytes(self, region: Region) -> np.ndarray:
        return region._keep[1]

    def upload(self, region: Region, offset: int, arr: np.ndarray) -> None:
        src = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        self._check(region, offset, src.nbytes)
        self._bytes(region)[offset:offset + src.nbytes] = src

    def download(self, region: Region, offset: int, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        self._check(region, offset, n)
        return self._bytes(region)[offset:offset + n].copy().view(dtype).reshape(shape)

    def copy(self, dst: Region, dst_off: int, src: Region, src_off: int, nbytes: int) -> None:
        self._check(dst, dst_off, nbytes)
        self._check(src, src_off, nbytes)
        self._bytes(dst)[dst_off:dst_off + nbytes] = self._bytes(src)[src_off:src_off + nbytes]


def _cudart() -> Any:
    try:
        from cuda.bindings import runtime  # cuda-bindings >= 12.6 (the [gpu] extra)
    except ImportError as e:
        raise ProviderUnavailable("device memory needs NVIDIA's cuda-bindings (pip install -e '.[gpu]'): "
                                  f"{e}") from e
    return runtime


class CudaMemory(DeviceMemory):
    """cudaMalloc'd regions on CUDA device `device_id` (cuda-bindings); views on 'cuda'."""

    ort_device, dl_device = "cuda", KDL_CUDA

    def __init__(self, device_id: int = 0) -> None:
        if type(device_id) is not int or device_id < 0:
            raise InvalidArgument(f"device_id must be a non-negative int, got {device_id!r}")
        self.rt = _cudart()
        self.device_id = device_id
        self.label = f"cuda:{device_id}"
        self._ok(self.rt.cudaSetDevice(device_id), "cudaSetDevice", unavailable=True)
        self.allocated = 0

    def _ok(self, result: Any, what: str, unavailable: bool = False) -> Any:
        err = result[0]
        if err != self.rt.cudaError_t.cudaSuccess:
            msg = self.rt.cudaGetErrorString(err)[1]
            text = f"{what} on cuda:{self.device_id} failed: {err!r} ({msg.decode() if isinstance(msg, bytes) else msg})"
            raise (ProviderUnavailable if unavailable else CalloutFailed)(text)
        return result[1:]

    def alloc(self, nbytes: int) -> Region:
        if type(nbytes) is not int or nbytes <= 0:
            raise InvalidArgument(f"nbytes must be a positive int, got {nbytes!r}")
        (ptr,) = self._ok(self.rt.cudaMalloc(nbytes), f"cudaMalloc({nbytes})")
        self.allocated += nbytes
        return Region(int(ptr), nbytes)

    def free(self, region: Region) -> None:
        if not region.live:
            raise InvalidTransition(f"{region!r} was freed already")
        self._ok(self.rt.cudaFree(region.ptr), "cudaFree")
        region.live = False
        self.allocated -= region.nbytes

    def _memcpy(self, dst: int, src: int, nbytes: int, kind: Any, what: str) -> None:
        # ORT runs its kernels on its own (non-blocking) stream, which the legacy default stream of
        # cudaMemcpy does not order against, and a host-to-device copy from pageable memory or a
        # device-to-device copy may still be in flight when cudaMemcpy returns (CUDA runtime API,
        # "API synchronization behavior"): synchronize, so the next Run reads the copied bytes. These
        # copies are off the decode path (admission and KV growth only).
        if nbytes:
            self._ok(self.rt.cudaMemcpy(dst, src, nbytes, kind), what)
            self._ok(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def upload(self, region: Region, offset: int, arr: np.ndarray) -> None:
        src = np.ascontiguousarray(arr)
        self._check(region, offset, src.nbytes)
        self._memcpy(region.ptr + offset, src.ctypes.data, src.nbytes,
                     self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice, "cudaMemcpy H2D")

    def download(self, region: Region, offset: int, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        out = np.empty(shape, dtype)
        self._check(region, offset, out.nbytes)
        self._memcpy(out.ctypes.data, region.ptr + offset, out.nbytes,
                     self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, "cudaMemcpy D2H")
        return out

    def copy(self, dst: Region, dst_off: int, src: Region, src_off: int, nbytes: int) -> None:
        self._check(dst, dst_off, nbytes)
        self._check(src, src_off, nbytes)
        self._memcpy(dst.ptr + dst_off, src.ptr + src_off, nbytes,
                     self.rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice, "cudaMemcpy D2D")

    def device_used(self) -> int | None:
        free, total = self._ok(self.rt.cudaMemGetInfo(), "cudaMemGetInfo")
        return int(total) - int(free)
