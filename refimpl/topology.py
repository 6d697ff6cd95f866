"""Topology providers (C7): the host authority sized from the machine, a CUDA authority when a GPU is present.

Owns: reading capacity and granularity from the platform and saying where
each number came from. Host-mapped read capacity is 0 unless a caller
passes a measured figure (C7: unreported = zero). No ORT here: the CUDA
figure comes from nvidia-ml-py when it is installed and a device answers;
otherwise `cuda_topology` raises `ProviderUnavailable` with the reason,
never a made-up figure. Also the residency reader for I8b: RSS from
/proc/self/status, labelled with its source and conditions.
"""

from __future__ import annotations

import os

import attrs

from spec.errors import BudgetBelowFloor, InvalidBytes, ProviderUnavailable
from spec.sessions import Topology

__all__ = ["host_topology", "cuda_topology", "scaled_topology", "ResidencyFigure", "process_rss"]


def _check(n: object, what: str) -> int:
    if type(n) is not int or n < 0:
        raise InvalidBytes(f"{what} must be a non-negative int, got {n!r}")
    return n


def host_topology(reserve: int = 1 << 30, headroom: int = 0, host_mapped_capacity: int = 0) -> Topology:
    """One host authority: physical memory minus a configurable safety reserve."""
    for v, w in ((reserve, "reserve"), (headroom, "headroom"), (host_mapped_capacity, "host_mapped_capacity")):
        _check(v, w)
    page = os.sysconf("SC_PAGE_SIZE")
    physical = os.sysconf("SC_PHYS_PAGES") * page
    if reserve + headroom >= physical:
        raise BudgetBelowFloor(f"reserve {reserve} + headroom {headroom} leave nothing of {physical} B")
    return Topology(physical - reserve, reserve, page, host_mapped_capacity, headroom,
                    f"sysconf SC_PHYS_PAGES x SC_PAGE_SIZE = {physical} B minus reserve {reserve} B; granule = "
                    f"SC_PAGE_SIZE; host-mapped read capacity {'reported' if host_mapped_capacity else 'unreported (0)'}")


def scaled_topology(capacity: int, headroom: int, granule: int | None = None,
                    host_mapped_capacity: int = 0, arena: int = 0) -> Topology:
    """A small budget carved from the host authority, for checking and demos (the source says so).

    `arena`: the env arena's cap, leased once inside this budget (0: no env arena).
    """
    host = host_topology(reserve=0)
    if capacity > host.capacity:
        raise BudgetBelowFloor(f"scaled capacity {capacity} exceeds the host's {host.capacity}")
    return attrs.evolve(host, capacity=_check(capacity, "capacity"), reserve=host.capacity - capacity,
                        granule=granule or host.granule, headroom=_check(headroom, "headroom"),
                        host_mapped_capacity=host_mapped_capacity, arena=_check(arena, "arena"),
                        source=f"scaled: {capacity} B carved from the host authority ({host.source})"
                        + (f"; env arena {arena} B leased inside it" if arena else ""))


def cuda_topology(device: int = 0, reserve: int = 256 << 20, headroom: int = 0) -> Topology:
    """Device capacity from NVML; raises ProviderUnavailable (with the reason) where there is no GPU."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as e:
        raise ProviderUnavailable(f"nvidia-ml-py is not installed: {e}") from e
    try:
        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(device))
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        raise ProviderUnavailable(f"NVML cannot read device {device}: {e}") from e
    if reserve + headroom >= info.total:
        raise BudgetBelowFloor(f"reserve {reserve} + headroom {headroom} leave nothing of {info.total} B")
    # XXX: the CUDA allocator granule is not exposed to Python; 2 MiB is the VMM granule on current GPUs.
    return Topology(info.total - reserve, reserve, 2 << 20, 0, headroom,
                    f"NVML nvmlDeviceGetMemoryInfo(device {device}).total = {info.total} B minus reserve {reserve} B; "
                    f"granule 2 MiB assumed (VMM); host-mapped read capacity unreported (0)")


@attrs.frozen
class ResidencyFigure:
    """A residency claim (I8b): never a charge; names its source and the conditions it holds under."""

    nbytes: int
    source: str
    conditions: str


def process_rss() -> ResidencyFigure:
    with open("/proc/self/status", encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    kib = int(fields["VmRSS"].split()[0])
    return ResidencyFigure(kib * 1024, "/proc/self/status VmRSS",
                           "whole process, resident now, includes unmanaged and file-backed pages")
