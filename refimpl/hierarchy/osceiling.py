"""The OS ceiling of the machine (C10 budget, I11): what the OS still has, read from the kernel.

cgroup v2 first (`memory.max` - `memory.current` of this process's cgroup,
when the limit is not "max"), otherwise `/proc/meminfo` MemAvailable; pressure
stall information ("some avg10") is reported beside it where the kernel has
it: the cgroup's own `memory.pressure`, else `/proc/pressure/memory`. Outside
programs appear only here, as a lower ceiling: nothing asks them to give
anything back (I11).

The roots are injectable (`read_ceiling(cgroup_root=..., proc_root=...)`), so
the parsing is tested on a temporary directory laid out like cgroup v2. By
default the cgroup v2 mount is found in /proc/self/mounts (a hybrid host
mounts it at /sys/fs/cgroup/unified), falling back to /sys/fs/cgroup. A file
that exists but does not parse is `CeilingUnreadable`, never a guess.

`FileCeiling` reads the same figure from a file the campaign writes: the
campaign's emulated OS (its outside programs are figures, not processes), so
refinement against the spec stays exact on a shared machine.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from spec.errors import CeilingUnreadable

__all__ = ["Ceiling", "read_ceiling", "OsCeiling", "FileCeiling", "parse_memory_max", "parse_memory_current",
           "parse_psi_some_avg10", "cgroup_dir", "cgroup2_mount"]


@attrs.frozen
class Ceiling:
    available: int  # bytes the OS can still give
    source: str  # "cgroup2" | "meminfo" | "file"
    psi_some_avg10: float | None  # % of time some task stalled on memory, last 10 s


def parse_memory_max(text: str) -> int | None:
    """cgroup v2 `memory.max`: None for "max" (no limit), else the limit in bytes."""
    word = text.strip()
    if word == "max":
        return None
    if not word.isdigit():
        raise CeilingUnreadable(f"memory.max: expected 'max' or a byte count, got {text!r:.60}")
    return int(word)


def parse_memory_current(text: str) -> int:
    """cgroup v2 `memory.current`: bytes charged to the cgroup now."""
    word = text.strip()
    if not word.isdigit():
        raise CeilingUnreadable(f"memory.current: expected a byte count, got {text!r:.60}")
    return int(word)


def parse_psi_some_avg10(text: str) -> float:
    """PSI `memory.pressure` / `/proc/pressure/memory`: the "some" line's avg10 (percent)."""
    for line in text.splitlines():
        if line.startswith("some "):
            try:
                fields = dict(kv.split("=", 1) for kv in line.split()[1:])
                value = float(fields["avg10"])
            except (KeyError, ValueError) as e:
                raise CeilingUnreadable(f"memory.pressure: malformed 'some' line {line!r:.80}") from e
            if not 0.0 <= value <= 100.0:
                raise CeilingUnreadable(f"memory.pressure: avg10 {value} is not a percentage")
            return value
    raise CeilingUnreadable(f"memory.pressure: no 'some' line in {text!r:.80}")


def cgroup2_mount(proc_root: Path = Path("/proc")) -> Path:
    """Where cgroup v2 is mounted (the first `cgroup2` entry of /proc/self/mounts), else /sys/fs/cgroup."""
    try:
        for line in (proc_root / "self" / "mounts").read_text().splitlines():
            f = line.split()
            if len(f) >= 3 and f[2] == "cgroup2":
                return Path(f[1])
    except OSError:
        pass
    return Path("/sys/fs/cgroup")


def cgroup_dir(cgroup_root: Path, proc_root: Path = Path("/proc")) -> Path | None:
    """This process's cgroup v2 directory under `cgroup_root` (the "0::" line), if it exists."""
    try:
        for line in (proc_root / "self" / "cgroup").read_text().splitlines():
            if line.startswith("0::"):
                d = cgroup_root / line[3:].strip().lstrip("/")
                return d if d.is_dir() else None
    except OSError:
        return None
    return None


def _psi(d: Path | None, proc_root: Path) -> float | None:
    for f in ([d / "memory.pressure"] if d is not None else []) + [proc_root / "pressure" / "memory"]:
        try:
            text = f.read_text()
        except OSError:
            continue
        return parse_psi_some_avg10(text)
    return None


def read_ceiling(cgroup_root: Path | None = None, proc_root: Path = Path("/proc")) -> Ceiling:
    root = cgroup_root if cgroup_root is not None else cgroup2_mount(proc_root)
    d = cgroup_dir(root, proc_root)
    psi = _psi(d, proc_root)
    if d is not None and (d / "memory.max").is_file():
        limit = parse_memory_max((d / "memory.max").read_text())
        if limit is not None:
            try:
                current = parse_memory_current((d / "memory.current").read_text())
            except OSError as e:
                if isinstance(e, CeilingUnreadable):
                    raise
                raise CeilingUnreadable(f"{d}: memory.max is set but memory.current is unreadable: {e}") from e
            return Ceiling(max(0, limit - current), "cgroup2", psi)
    try:
        lines = (proc_root / "meminfo").read_text().splitlines()
    except OSError as e:
        raise CeilingUnreadable(f"neither a cgroup v2 memory.max limit nor {proc_root}/meminfo: {e}") from e
    for line in lines:
        if line.startswith("MemAvailable:"):
            f = line.split()
            if len(f) < 2 or not f[1].isdigit():
                raise CeilingUnreadable(f"meminfo: malformed line {line!r:.80}")
            return Ceiling(int(f[1]) * 1024, "meminfo", psi)
    raise CeilingUnreadable(f"{proc_root}/meminfo has no MemAvailable line")


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
