"""The OS ceiling's cgroup v2 branch (C10 budget, I11): `memory.max`, `memory.current` and PSI `memory.pressure`
parsed from a temporary directory laid out like cgroup v2, the /proc/meminfo fallback, typed errors on bad
files, and the real machine's files where this host has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.hierarchy.osceiling import (
    Ceiling,
    cgroup2_mount,
    cgroup_dir,
    parse_memory_current,
    parse_memory_max,
    parse_psi_some_avg10,
    read_ceiling,
)
from spec.errors import CeilingUnreadable, EnvironmentFault

PSI = "some avg10=1.50 avg60=0.75 avg300=0.10 total=12345\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=99\n"
HOST_PSI = "some avg10=7.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
MEMINFO = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"


def _host(tmp: Path, *, files: dict[str, str], group: str = "/svc/ortmem", meminfo: str = MEMINFO,
          host_psi: str | None = HOST_PSI) -> tuple[Path, Path]:
    """(cgroup root, proc root): this process in cgroup `group`, whose directory holds `files`."""
    root, proc = tmp / "cgroup", tmp / "proc"
    d = root / group.lstrip("/")
    d.mkdir(parents=True)
    for name, text in files.items():
        (d / name).write_text(text)
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(f"0::{group}\n")
    (proc / "meminfo").write_text(meminfo)
    if host_psi is not None:
        (proc / "pressure").mkdir()
        (proc / "pressure" / "memory").write_text(host_psi)
    return root, proc


@pytest.mark.parametrize("files, host_psi, want", [
    ({"memory.max": "1073741824\n", "memory.current": "268435456\n", "memory.pressure": PSI}, HOST_PSI,
     Ceiling(1073741824 - 268435456, "cgroup2", 1.5)),  # max - current, with the cgroup's own PSI
    ({"memory.max": "1000\n", "memory.current": "4096\n"}, HOST_PSI,
     Ceiling(0, "cgroup2", 7.0)),  # over its limit: nothing left; no cgroup PSI file: the host's
    ({"memory.max": "max\n", "memory.current": "268435456\n", "memory.pressure": PSI}, HOST_PSI,
     Ceiling(8000000 * 1024, "meminfo", 1.5)),  # "max" is unlimited, so meminfo decides
    ({}, None, Ceiling(8000000 * 1024, "meminfo", None)),  # a v1 / hybrid host: no memory.max in the v2 tree
], ids=["cgroup2-limit", "cgroup2-over-its-limit", "cgroup2-max-is-meminfo", "no-cgroup2-controller-is-meminfo"])
def test_the_ceiling_is_read_from_cgroup2_or_else_meminfo(tmp_path: Path, files: dict[str, str],
                                                          host_psi: str | None, want: Ceiling) -> None:
    root, proc = _host(tmp_path, files=files, host_psi=host_psi)
    assert read_ceiling(root, proc) == want


def test_the_cgroup2_mount_is_read_from_proc_mounts(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mounts").write_text("proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
    assert cgroup2_mount(tmp_path) == Path("/sys/fs/cgroup/unified")
    (tmp_path / "self" / "mounts").write_text("proc /proc proc rw 0 0\n")
    assert cgroup2_mount(tmp_path) == Path("/sys/fs/cgroup")


@pytest.mark.parametrize(("parse", "text", "want"), [
    *((parse_memory_max, t, w) for t, w in [("max\n", None), ("max", None), ("0\n", 0), ("8589934592\n", 8589934592)]),
    (parse_psi_some_avg10, PSI, 1.5),
    (parse_psi_some_avg10, "full avg10=3.00 avg60=0 avg300=0 total=0\nsome avg10=0.00 avg60=0 avg300=0 total=0\n", 0.0),
])
def test_cgroup_text_parses(parse, text: str, want: float | None) -> None:
    assert parse(text) == want


@pytest.mark.parametrize(("parse", "file", "text"), [
    *((parse_memory_max, "memory.max", t) for t in ["", "unlimited\n", "-1\n", "1.5G\n", "12 34\n"]),
    *((parse_memory_current, "memory.current", t) for t in ["", "max\n", "-5\n", "4k\n"]),
    *((parse_psi_some_avg10, "memory.pressure", t) for t in ["", "full avg10=1.00 avg60=0 avg300=0 total=0\n",
      "some avg60=1.00 total=0\n", "some avg10=abc total=0\n", "some avg10=140.00 total=0\n"]),
], ids=lambda v: v if type(v) is str else None)
def test_invalid_cgroup_text_is_a_typed_error_naming_its_file(parse, file: str, text: str) -> None:
    with pytest.raises(CeilingUnreadable, match=file):
        parse(text)


@pytest.mark.parametrize("files, meminfo, match", [
    ({"memory.max": "1073741824\n", "memory.current": "lots\n"}, MEMINFO, "memory.current: expected a byte count"),
    ({"memory.max": "1073741824\n"}, MEMINFO, "memory.current is unreadable"),  # a limit without memory.current
    ({}, "MemTotal: 1 kB\n", "no MemAvailable"),
], ids=["malformed-current", "no-current", "no-memavailable"])
def test_unreadable_ceiling_files_fail_the_read_not_guess(tmp_path: Path, files: dict[str, str], meminfo: str,
                                                          match: str) -> None:
    root, proc = _host(tmp_path, files=files, meminfo=meminfo)
    with pytest.raises(CeilingUnreadable, match=match):
        read_ceiling(root, proc)
    assert issubclass(CeilingUnreadable, EnvironmentFault) and issubclass(CeilingUnreadable, OSError)


# --- the real machine ------------------------------------------------------------------------------------

_REAL = cgroup_dir(cgroup2_mount())


@pytest.mark.skipif(_REAL is None or not (_REAL / "memory.max").is_file(),
                    reason=f"no cgroup v2 memory controller for this process (cgroup v2 dir {_REAL}: no memory.max;"
                           " the memory controller is on cgroup v1 here)")
def test_real_cgroup2_memory_files_parse() -> None:
    assert _REAL is not None
    limit = parse_memory_max((_REAL / "memory.max").read_text())
    current = parse_memory_current((_REAL / "memory.current").read_text())
    assert current > 0  # this very process is charged to its cgroup
    c = read_ceiling()
    if limit is not None:
        assert c.source == "cgroup2" and 0 <= c.available <= limit
    else:
        assert c.source == "meminfo"


@pytest.mark.skipif(_REAL is None or not (_REAL / "memory.pressure").is_file(),
                    reason="no cgroup v2 memory.pressure (PSI) for this process")
def test_real_cgroup2_memory_pressure_parses() -> None:
    assert _REAL is not None
    value = parse_psi_some_avg10((_REAL / "memory.pressure").read_text())
    assert 0.0 <= value <= 100.0
    assert read_ceiling().psi_some_avg10 is not None


def test_real_machine_ceiling_is_positive_and_at_most_memtotal() -> None:
    total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    c = read_ceiling()
    assert 0 < c.available <= total and c.source in ("cgroup2", "meminfo")
