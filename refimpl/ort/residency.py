# Residency read from the operating system and from ORT (I8b), each figure
# with its source and the conditions it was read under. Residency is what
# is resident, never what is charged: the runtime records these figures
# apart from every lease (spec.sessions.Residency), and nothing here moves
# a charge.
#
# Sources:
#   /proc/self/status VmRSS     process-wide resident set, all of it (20 us a read: never per step);
#   /proc/self/smaps Rss        the resident bytes of the mappings of one file (a model's .onnx and its
#                               external-data blobs) or of the mapping that holds one buffer (a leased
#                               weight buffer: the whole mapping, which may hold other allocations);
#   ORT profiler mem_arena_held  ORT's own arena figure, from a profiling calibration session (CPU arena
#                               on, mem pattern off) [ort:profiler-mem-fields]: that session's arena, not
#                               the serving one's.
# A figure this module cannot read is reported as None, never as 0 under the
# source's name. Invented figures exist only in fault-injection controls and
# are labelled "injected: ...".
#
# Owns: reading /proc and one profiling session. Must not touch: any ledger.

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping

import attrs
import numpy as np

from refimpl.ort.session import make_session

__all__ = ["Figure", "process_rss", "file_rss", "buffer_rss", "arena_held", "INJECTED"]

INJECTED = "injected: "  # the prefix of every invented figure (fault-injection controls only)


@attrs.frozen
class Figure:
    nbytes: int
    source: str  # where it was read and under which conditions (I8b)


def process_rss() -> Figure | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return Figure(int(line.split()[1]) * 1024, "/proc/self/status VmRSS: the whole process, "
                                                               "every mapping, at the time of reading")
    except OSError:
        pass
    return None


def _smaps() -> list[tuple[int, int, str, int]] | None:
    """(start, end, pathname, Rss bytes) of every mapping of this process."""
    try:
        with open("/proc/self/smaps") as f:
            text = f.read()
    except OSError:
        return None
    out, cur = [], None
    for line in text.splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            cur = [lo, hi, head[5] if len(head) > 5 else "", 0]
            out.append(cur)
        elif cur is not None and line.startswith("Rss:"):
            cur[3] = int(line.split()[1]) * 1024
    return [tuple(x) for x in out]  # type: ignore[misc]


def file_rss(paths: Iterable[str]) -> Figure | None:
    """Rss of this process's mappings of `paths` (a model file and its blobs); 0 when none is mapped."""
    maps = _smaps()
    if maps is None:
        return None
    want = {os.path.realpath(p) for p in paths}
    n = sum(rss for _, _, name, rss in maps if name in want)
    return Figure(n, f"/proc/self/smaps Rss of the mappings of {sorted(want)}: 0 means the file is not mapped "
                     f"(ORT read it instead)")


def buffer_rss(buf: np.ndarray) -> Figure | None:
    """Rss of the mapping(s) that hold `buf` (a leased buffer): an upper bound, the mapping may hold more."""
    maps = _smaps()
    if maps is None:
        return None
    lo = buf.__array_interface__["data"][0]
    hi = lo + buf.nbytes
    n = sum(rss for a, b, _, rss in maps if a < hi and lo < b)
    return Figure(n, "/proc/self/smaps Rss of the mapping(s) holding the leased buffer: the whole mapping, "
                     "which may hold other allocations")


def arena_held(model: str, feeds: Mapping[str, np.ndarray]) -> Figure | None:
    """ORT's own `mem_arena_held` after one Run, from a profiling calibration session [ort:profiler-mem-fields]."""
    with tempfile.TemporaryDirectory(prefix="ortmem-residency-") as tmp:
        s = make_session(model, profile_prefix=os.path.join(tmp, "p"))
        s.run(None, dict(feeds))
        path = s.end_profiling()
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    held = [int(e["args"]["mem_arena_held"]) for e in events
            if e.get("cat") == "Node" and "mem_arena_held" in e.get("args", {})]
    if not held:
        return None
    return Figure(max(held), "ORT profiler mem_arena_held: a calibration session's CPU arena (profiling on, "
                             "mem pattern off), max over one Run's kernels; not the serving session's arena")
