# The device pool's EP arena under the ledger, the arithmetic from a loan to
# the CUDA EP's options, and what on the device stays outside the ledger.
#
# DeviceArena: ONE lease of the topology's arena bytes on the device
# authority (Role.ARENA, reserve + commit before any session exists, I2).
# Each managed model's measured transient peak is lent within it (an
# allowance of this holder: `ArenaHolder.lend`, no second charge, I8), and
# the model's session is created with its CUDA EP arena capped at exactly
# that loan (`gpu_mem_limit`, a per-session provider option) [ort:gpu-mem-limit].
# So the caps in force sum to the bytes lent, never more than the lease.
# That they also bound what the EP arenas hold together rests on each
# session's CUDA EP keeping one device arena under its cap, which we have not
# checked on a GPU.
#
# What `gpu_mem_limit` caps, as read in ORT's source (about ORT 1.23; the
# CUDA EP of 1.32 was not read or run): the bytes the session's CUDA EP arena
# (a BFC arena) holds from the device: activations, outputs ORT allocates, and
# the scratch buffers kernels take through `GetScratchBuffer` (cuDNN
# convolution workspaces among them) [ort:gpu-mem-limit-outside]. A request
# the arena cannot take under its limit fails ("Available memory of X is
# smaller than requested bytes of Y"), which on the CPU fails that Run only
# [ort:bfc-arena] [ort:env-arena-cap]. It does not cover the CUDA context,
# what cuBLAS/cuDNN allocate for their handles, the workspace of cuDNN's
# exhaustive algorithm search (taken with `Reserve`, past the limit's check),
# or other EPs [ort:gpu-mem-limit-outside]; nor pinned host staging buffers
# (host memory), nor allocations the Python binding makes outside any session
# (`OrtValue.ortvalue_from_shape_and_type(..., 'cuda')`; this path makes
# none). What of these this path can meet is `OUTSIDE_LEDGER`, reported not
# enforced (I3; XXX: the algorithm search's workspace, met by models with
# convolutions, is not in it yet). Weights and KV are not in the arena on
# this path: they are leased device regions the session reads in place
# [ort:user-initializer] [ort:iobinding-in-place].
#
# Every Run of a device session carries arena shrinkage for its device
# (`memory.enable_memory_arena_shrinkage = gpu:N`) [ort:arena-shrink], which at
# the Run's end returns every arena region whose chunks are all free (with
# `kSameAsRequested`, the first region too) [ort:bfc-arena]. A calibrated peak
# (`refimpl.ort.device_peak`) is a cap that holds only if each Run then starts
# from an arena holding nothing that depends on earlier Runs; what survives a
# shrink on the CUDA EP (a bound input's device copy would be a candidate) has
# not been observed (no GPU).
#
# Owns: the arena lease and loans, the provider options, the not-enforced
# list. Must not touch: weights, KV, admission policy.

from __future__ import annotations

from typing import Any

import attrs
import onnxruntime as ort

from refimpl.manager import ProcessMemoryManager
from refimpl.ort.arena import SHRINK_KEY, ArenaHolder
from spec.errors import InvalidBytes, InvalidTransition
from spec.types import Role, Tier

__all__ = ["DeviceArena", "NotEnforced", "OUTSIDE_LEDGER", "cuda_provider_options", "device_run_options",
           "shrink_value"]

CUDA = "CUDAExecutionProvider"


@attrs.frozen
class NotEnforced:
    """A class of device bytes the ledger does not govern: no limit binds it (I3). `nbytes` None: not measured."""

    what: str
    why: str
    nbytes: int | None = None
    source: str = "not measured"


#: What stays outside the device ledger on the CUDA EP (I3: reported, never silently left out).
OUTSIDE_LEDGER = (
    NotEnforced("CUDA context", "created by the driver at first use (module images, local memory, heaps); "
                "no allocator ORT or ortmem controls"),
    NotEnforced("cuBLAS / cuDNN handles", "the CUDA EP's library handles allocate their own workspaces "
                "outside the EP allocator, so gpu_mem_limit does not bound them"),
    NotEnforced("CUDA graph capture", "off on this path (enable_cuda_graph=0); what a captured graph holds on "
                "the device, and whether gpu_mem_limit bounds it, was not checked"),
    NotEnforced("driver page rounding", "cudaMalloc rounds each region (leases and arena extensions) to the "
                "driver's page size; the ledger charges the requested bytes"),
    NotEnforced("CUDA pinned host staging", "the CUDA EP's CUDA_PINNED allocator (host memory for transfers) "
                "is neither the device pool nor the host env arena"),
)


def cuda_provider_options(device_id: int, cap: int) -> dict[str, str]:
    """The CUDA EP options of a managed session whose arena may hold at most `cap` bytes (its loan)."""
    if type(cap) is not int or cap <= 0:
        raise InvalidBytes(f"cap must be a positive int, got {cap!r}")
    if type(device_id) is not int or device_id < 0:
        raise InvalidBytes(f"device_id must be a non-negative int, got {device_id!r}")
    return {
        "device_id": str(device_id),
        # the EP arena's limit [ort:gpu-mem-limit]; extend it by what is asked (kNextPowerOfTwo takes doubling
        # regions, up to all that is left under the limit) [ort:arena-extend-strategy] [ort:bfc-arena]; a clamped
        # cuDNN workspace (its run workspace comes from the arena) [ort:cudnn-max-workspace]
        # [ort:gpu-mem-limit-outside]; no CUDA graph capture (what a captured graph holds on the device was not
        # checked)
        "gpu_mem_limit": str(cap),
        "arena_extend_strategy": "kSameAsRequested",
        "cudnn_conv_use_max_workspace": "0",
        "enable_cuda_graph": "0",
    }


def shrink_value(device: str, device_id: int, cpu: bool) -> str:
    """The arena-shrinkage run option for a session on `device` ('cuda' or 'cpu'), the CPU env arena too if `cpu`."""
    parts = (["cpu:0"] if cpu else []) + ([f"gpu:{device_id}"] if device == "cuda" else [])
    return ";".join(parts)


def device_run_options(device: str, device_id: int) -> ort.RunOptions | None:
    """The RunOptions of every decode Run of a device session: shrink its EP arena at the Run's end (None on cpu)."""
    value = shrink_value(device, device_id, cpu=False)
    if not value:
        return None
    ro = ort.RunOptions()
    ro.add_run_config_entry(SHRINK_KEY, value)
    return ro


class DeviceArena(ArenaHolder):
    """The device pool's EP arenas as one lease on the device authority; each session capped at its loan.

    Shares the lending, pressure and answer rules of `ArenaHolder`; it
    registers no env allocator (the CUDA EP's arenas are per session, each
    capped through its provider options) and its lease goes back when the
    runtime closes (no session outlives it).
    """

    def __init__(self, pmm: ProcessMemoryManager, auth: int, grant: int, on_pressure: Any = None) -> None:
        if type(grant) is not int or grant <= 0:
            raise InvalidBytes(f"grant must be a positive int, got {grant!r}")
        self.pmm, self.auth, self.grant = pmm, auth, grant
        self.id = pmm.register_holder("device-arena")
        self.lease: int | None = pmm.reserve(self.id, auth, Tier.DEVICE, grant, Role.ARENA)  # I2
        pmm.commit(self.id, self.lease, grant)
        self.pending: list[int] = []
        pmm.register_callback(self.id, on_pressure or (lambda _pmm, pid, _target: self.pending.append(pid)))
        self.loans: dict[int, int] = {}
        self.answers: list[Any] = []
        self._released: dict[int, int] = {}
        self.opened = self.answered = 0
        self.runs = self.shrinking_runs = 0
        self.in_flight = False

    def cap_of(self, wid: int) -> int:
        """The arena cap of the session a loan backs: the loan's bytes."""
        return self.loans[wid]

    def session(self, model: Any) -> Any:
        raise InvalidTransition("a device arena registers no env allocator: sessions are capped per loan")

    def release(self) -> None:
        """Give the arena's lease back (the runtime closed: no session is capped by it any more)."""
        if self.loans:
            raise InvalidTransition(f"{len(self.loans)} loans are still out")
        if self.lease is not None:
            self.pmm.release(self.id, self.lease)
            self.lease = None
