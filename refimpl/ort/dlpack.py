# A typed, shaped OrtValue over bytes we already own, at any offset: the one
# constructor ORT's Python binding lacks.
#
# Why this exists (ORT 1.32's binding, observed in tests/ort/test_ort_facts.py):
# `SessionOptions.add_initializer` refuses an OrtValue that owns its buffer
# ("Buffer containing the initializer must be owned by the user"), as an
# OrtValue the binding allocates does (`ortvalue_from_shape_and_type`,
# observed with 'cpu'; with 'cuda' the same call allocates on the device), so
# such a value cannot be an initializer [ort:user-initializer].
# `ortvalue_from_numpy` wraps host memory only (for another device it holds a
# copy) [ort:zero-copy]. What the binding does take is
# `OrtValue.from_dlpack(capsule)`: no copy, a tensor that does not own its
# buffer, on the DLPack capsule's device (kDLCPU -> 'cpu', kDLCUDA -> 'cuda')
# [ort:user-initializer]. Producing such a capsule over a device pointer needs
# a DLPack producer; the usual ones (PyTorch, CuPy, JAX) are heavyweight
# dependencies for forty lines of ABI, so this module writes the legacy
# `DLManagedTensor` (DLPack 0.x ABI, capsule name "dltensor") with ctypes.
#
# Lifetime: the struct and its shape array are one malloc'd block whose
# `deleter` is libc's `free`, so when ORT drops the OrtValue it frees exactly
# that block (ORT calls the deleter once, when the tensor dies; no Python
# callback runs inside ORT's destructor). The data pointer is NOT owned: the
# caller keeps the memory alive (a lease's region) for as long as any OrtValue
# or session over it lives.
#
# Owns: the capsule layout. Must not touch: any ledger or lease.

from __future__ import annotations

import ctypes

import numpy as np
import onnxruntime as ort

__all__ = ["KDL_CPU", "KDL_CUDA", "ortvalue_over"]

KDL_CPU, KDL_CUDA = 1, 2  # DLDeviceType codes (dlpack.h)
_CODES = {"i": 0, "u": 1, "f": 2}  # kDLInt, kDLUInt, kDLFloat


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_FREE = ctypes.cast(_libc.free, ctypes.c_void_p).value
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_HEAD = ctypes.sizeof(_Managed)


def ortvalue_over(ptr: int, device_type: int, device_id: int, dtype: np.dtype | type,
                  shape: tuple[int, ...]) -> ort.OrtValue:
    """A non-owning, zero-copy OrtValue of `dtype`/`shape` at address `ptr` on the given DLPack device."""
    dt = np.dtype(dtype)
    if dt.kind not in _CODES or dt.byteorder == ">":
        raise TypeError(f"no DLPack code for dtype {dt}")
    if device_type not in (KDL_CPU, KDL_CUDA):
        raise ValueError(f"device_type must be kDLCPU (1) or kDLCUDA (2), got {device_type!r}")
    nd = len(shape)
    block = _libc.malloc(_HEAD + 8 * max(nd, 1))
    if not block:
        raise MemoryError("malloc failed for a DLPack header")
    m = _Managed.from_address(block)
    dims = (ctypes.c_int64 * max(nd, 1)).from_address(block + _HEAD)
    for i, s in enumerate(shape):
        dims[i] = int(s)
    m.dl_tensor.data = ptr
    m.dl_tensor.device = _Device(device_type, device_id)
    m.dl_tensor.ndim = nd
    m.dl_tensor.dtype = _DType(_CODES[dt.kind], dt.itemsize * 8, 1)
    m.dl_tensor.shape = ctypes.cast(ctypes.c_void_p(block + _HEAD), ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.strides = None  # contiguous, row-major
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _FREE  # ORT frees the header block when the OrtValue dies; never the data
    return ort.OrtValue.from_dlpack(_capsule_new(block, b"dltensor", None))
