# The device path of `GovernedRuntime` (issue #22 item 3): on the CUDA EP the
# pool `spec.sessions` models is the device's, governed by a DEVICE authority
# on the runtime's one ProcessMemoryManager, beside the host authority (the
# process's one shared host quota, C1; DESIGN-FACTS 7, "Discrete GPU").
#
#   device authority  weights (leased device regions ORT reads in place,
#                     [ort:user-initializer]), KV (leased device regions bound
#                     through IOBinding, [ort:iobinding-in-place]), the weight
#                     cache (borrowed device bytes), and the EP arenas' one
#                     lease (`DeviceArena`), each session capped at its model's
#                     loan (`gpu_mem_limit`, [ort:gpu-mem-limit]).
#   host authority    the CPU env arena (the CPU-side tensors of device
#                     sessions) and the host copies of host-planned
#                     initializers (`refimpl.ort.device_holders`).
#   not enforced      the CUDA context, library handles
#                     [ort:gpu-mem-limit-outside], driver rounding, pinned
#                     staging (host memory): `device_snapshot().not_enforced`
#                     (I3), with the driver's own figure where there is one.
#                     XXX: for a model with convolutions, the workspace of
#                     cuDNN's exhaustive algorithm search is outside the cap
#                     too [ort:gpu-mem-limit-outside] and not in that report.
#
# Weight replicas (`refimpl.ort.replicas`) stay on the host path: a replica
# session on the device would bring a second EP arena no loan caps.
#
# The same wiring runs on the CPU EP over `StandInMemory` (a CPU stand-in,
# labelled so in every figure it produces): it exercises the device
# authority, the lease-to-OrtValue wiring, the IOBinding plan, the cap
# arithmetic and the not-enforced report, and no CUDA at all. On the
# stand-in the caps are computed and recorded but no EP enforces them (the
# CPU EP's activations go to the host env arena).
#
# Owns: the device path's construction and its snapshot. Must not touch:
# admission or the request path (governed, requests), spec code.
# A mixin of `GovernedRuntime`.

from __future__ import annotations

from typing import Any

import attrs

from refimpl.ort.arena import ArenaHolder, env_arena_cap
from refimpl.ort.device import CudaMemory, DeviceMemory, StandInMemory, STAND_IN_LABEL
from refimpl.ort.device_arena import (OUTSIDE_LEDGER, DeviceArena, NotEnforced, cuda_provider_options,
                                      device_run_options, shrink_value)
from refimpl.ort.device_holders import DeviceKvHolder, DeviceWeightHolder
from spec.errors import InvalidArgument, InvalidBytes
from spec.ledger_state import Snapshot
from spec.types import Tier

__all__ = ["DevicePath", "DeviceSnapshot", "device_memory"]

CUDA = "CUDAExecutionProvider"


def device_memory(provider: str, device: DeviceMemory | None) -> DeviceMemory | None:
    """The device path's memory for `provider`: CUDA always has one; the CPU EP only with a stand-in."""
    if device is not None and not isinstance(device, DeviceMemory):
        raise InvalidArgument(f"device must be a DeviceMemory or None, got {device!r:.80}")
    if provider == CUDA:
        if isinstance(device, StandInMemory):  # ORT would ignore host initializers for CUDA nodes
            raise InvalidArgument("the CUDA EP reads device memory: a cpu stand-in cannot back it")
        return device if device is not None else CudaMemory(0)
    if device is not None and not isinstance(device, StandInMemory):
        raise InvalidArgument(f"the CPU EP reads host memory only: {device.label} cannot back it")
    return device


@attrs.frozen
class DeviceSnapshot:
    """The device path's figures: both ledgers, the caps in force, the mechanism's and the driver's counts."""

    memory: str  # "cuda:N", or the stand-in's label
    device: Snapshot  # the device authority's charge figures
    host: Snapshot  # the host authority's
    arena_caps: tuple[tuple[str, int], ...]  # model -> its session's EP arena cap (= its loan)
    allocated: int  # bytes in the mechanism's live regions (cudaMalloc'd, or the stand-in's mappings)
    driver_used: int | None  # the driver's device-wide figure (cudaMemGetInfo); None: none (stand-in)
    not_enforced: tuple[NotEnforced, ...]  # I3: device bytes no limit of this runtime binds


class _NoReplicas:
    """The device path places no weight replicas (each would be a session with an uncapped EP arena)."""

    def __init__(self) -> None:
        self.by_model: dict[str, Any] = {}
        self.placed = self.dropped = 0

    def place(self, models: Any) -> list[str]:
        return []

    def stale(self) -> list[str]:
        return []

    def before_reclaim(self, target: int) -> None:
        pass

    def drop(self, model: str) -> None:
        raise KeyError(model)

    def session_of(self, model: str, primary: Any) -> Any:
        return primary


class DevicePath:
    """The device pool's construction, session options and snapshot; a mixin of `GovernedRuntime`."""

    def _host_capacity(self, host_capacity: int | None) -> int:
        if host_capacity is None:
            return self.topology.capacity
        if self.memory is None:
            raise InvalidArgument("host_capacity is for the device path; the host path's pool is the topology's")
        if type(host_capacity) is not int or host_capacity <= 0:
            raise InvalidBytes(f"host_capacity must be a positive int, got {host_capacity!r}")
        return host_capacity

    def _device_authority(self) -> int:
        # Before any lease: the driver's figure now is the context and whatever else the device holds.
        self.device_baseline = self.memory.device_used()
        return self.pmm.register_authority(f"device:{self.memory.label}", Tier.DEVICE, self.topology.capacity)

    def _device_holders(self) -> None:
        ro = device_run_options(self.memory.ort_device, self.memory.device_id)
        self.weights = DeviceWeightHolder(self.pmm, self.auth, self.memory, self.host_auth)
        self.replicas = _NoReplicas()
        self.kv = DeviceKvHolder(self.pmm, self.auth, self.memory, ro)
        self.arena_caps: dict[str, int] = {}

    def _device_arena(self, arena_cap: int, zero: Any) -> DeviceArena:
        # The CPU env arena keeps serving the CPU side of every session, on the host authority, at the cap
        # this process's env arena has (one per process, `refimpl.ort.arena`).
        self.host_arena = ArenaHolder(self.pmm, self.host_auth, env_arena_cap() or arena_cap)
        return DeviceArena(self.pmm, self.auth, arena_cap, on_pressure=zero)

    def _pressure_shrink(self) -> str:
        """Arena pressure's Run shrinks the CPU env arena and, on CUDA, the session's EP arena."""
        return shrink_value(self.memory.ort_device, self.memory.device_id, cpu=True)

    @property
    def peak_device(self) -> str:
        """Where the transient peak is calibrated: the CUDA EP's arena on CUDA, ORT's CPU profiler elsewhere."""
        if self.memory is not None and self.memory.ort_device == "cuda":
            return f"cuda:{self.memory.device_id}"
        return "cpu"

    def _providers(self, name: str, rec: Any) -> list[Any]:
        """The managed session's providers: on the device path its EP arena is capped at its loan."""
        if self.memory is None:
            return ["CPUExecutionProvider"]
        cap = self.env_arena.cap_of(rec.arena_loan) if rec.arena_loan is not None else 0
        self.arena_caps[name] = cap
        if self.memory.ort_device != "cuda":  # the stand-in: the cap is recorded, no EP enforces it
            return ["CPUExecutionProvider"]
        return [(CUDA, cuda_provider_options(self.memory.device_id, cap)), "CPUExecutionProvider"]

    def device_snapshot(self) -> DeviceSnapshot:
        """Both ledgers, the caps in force and what stays outside them (I3); raises off the device path."""
        if self.memory is None:
            raise InvalidArgument("the host path has no device pool")
        dev, host = self.pmm.snapshot(self.auth), self.pmm.snapshot(self.host_auth)
        caps = tuple(sorted((n, c) for n, c in self.arena_caps.items()
                            if n in self.models and self.models[n].session is not None))
        driver = self.memory.device_used()
        outside = list(OUTSIDE_LEDGER)
        if driver is not None:
            outside.append(NotEnforced(
                "measured outside the ledger", "the driver's device-wide figure less the device ledger's charge: "
                "all of the above, and any other process on the device", driver - dev.used,
                "cudaMemGetInfo (total - free) minus the device authority's used"))
        if self.memory.label == STAND_IN_LABEL:
            outside.append(NotEnforced("stand-in EP arena caps", "the cpu stand-in computes each session's cap and "
                                       "passes it to no EP: the CPU EP's activations go to the host env arena"))
        return DeviceSnapshot(self.memory.label, dev, host, caps, self.memory.allocated, driver, tuple(outside))
