"""The OS ceiling of the machine (C10 budget, I11): what the OS still has, read from the kernel.

cgroup v2 first (`memory.max` - `memory.current` of this process's cgroup,
when the limit is not "max"), otherwise `/proc/meminfo` MemAvailable; pressure
stall information (`/proc/pressure/memory`, "some avg10") is reported beside
it where the kernel has it. Outside programs appear only here, as a lower
ceiling: nothing asks them to give anything back (I11).

`FileCeiling` reads the same figure from a file the campaign writes: the
campaign's emulated OS (its outside programs are figures, not processes), so
refinement against the spec stays exact on a shared machine.
"""

from __future__ import annotations

from pathlib import Path

import attrs

__all__ = ["Ceiling", "read_ceiling", "OsCeiling", "FileCeiling"]


@attrs.frozen
class Ceiling:
    available: int  # bytes the OS can still give
    source: str  # "cgroup2" | "meminfo" | "file"
    psi_some_avg10: float | None  # % of time some task stalled on memory, last 10 s


def _cgroup_dir() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                d = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
                return d if (d / "memory.max").is_file() else None
    except OSError:
        return None
    return None


def _psi() -> float | None:
    try:
        for line in Path("/proc/pressure/memory").read_text().splitlines():
            if line.startswith("some"):
                return float(dict(kv.split("=") for kv in line.split()[1:])["avg10"])
    except (OSError, KeyError, ValueError):
        return None
    return None


def read_ceiling() -> Ceiling:
    d = _cgroup_dir()
    if d is not None:
        limit = (d / "memory.max").read_text().strip()
        if limit != "max":
            current = int((d / "memory.current").read_text())
            return Ceiling(max(0, int(limit) - current), "cgroup2", _psi())
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return Ceiling(int(line.split()[1]) * 1024, "meminfo", _psi())
    raise OSError("neither cgroup v2 memory.max nor /proc/meminfo MemAvailable is readable")


class OsCeiling:
    """The real machine: `free()` is what the OS has left for everyone."""

    def free(self) -> int:
        return read_ceiling().available


class FileCeiling:
    """An emulated OS: `free()` is the integer in `path` (bytes), written by the campaign's driver."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def free(self) -> int:
        return int(self.path.read_text())
