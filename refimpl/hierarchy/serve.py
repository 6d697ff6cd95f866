"""`ortmem serve`: a coordinator and N worker processes on this machine, with a synthetic workload.

Each round, every worker either asks for quota (when its slice is nearly used),
reserves and commits a few MiB in its `ProcessMemoryManager`, or frees some;
the coordinator then arbitrates deferred intents. A table shows, per worker,
its quota at the coordinator, its own slice, its budget = min(slice, OS
ceiling), what it has committed, and the events since the last round. The OS
ceiling is the real one (cgroup v2 or /proc/meminfo). Ctrl-C (SIGINT to the
process group) stops the workers, the coordinator observes every exit and
returns their quota, and the command checks that no process is left.

The workload is synthetic (ledger reservations, no ORT session): the point is
the hierarchy's protocol on real processes.
"""

from __future__ import annotations

import random
import tempfile
import time
from typing import Any

from refimpl.hierarchy.driver import Hierarchy, leftovers
from spec.errors import GovernorError

__all__ = ["run_serve"]


def _round(h: Hierarchy, wids: list[int], rng: random.Random) -> None:
    for wid in wids:
        try:
            w = h.wop(wid, "snapshot")
            room = w["slice"] - w["committed"] - w["reserved"]
            if w["waiting"] is None and room < 2:
                h.wop(wid, "request", rng.randint(2, 6), rng.randint(0, 1))
            elif room >= 1 and rng.random() < 0.6:
                h.wop(wid, "reserve", rng.randint(1, min(room, 3)))
                h.wop(wid, "commit")
            elif w["committed"]:
                h.wop(wid, "free", rng.randint(1, w["committed"]))
        except GovernorError:
            pass  # a refusal (budget, defer) is an outcome, not a failure
    h.op("arbitrate")


def _table(h: Hierarchy, wids: list[int], seen: int) -> tuple[list[str], int]:
    snap = h.snapshot()
    events = h.op("events", seen)
    lines = [f"free {snap['free']} of {snap['serving_quota']} MiB; incarnation {snap['incarnation']}"]
    for wid in wids:
        c = snap["workers"][wid]
        w = h.wop(wid, "snapshot")
        mine = [e["event"] for e in events if e.get("worker") == wid]
        lines.append(f"  worker {wid} (pid {c['pid']}, {c['state']}, epoch {c['epoch']}): quota {c['quota']} MiB, "
                     f"slice {w['slice']}, budget {w['budget']}, committed {w['committed']}, "
                     f"waiting {w['waiting'] is not None}; events: {', '.join(mine) or '-'}")
    return lines, seen + len(events)


def run_serve(workers: int, quota_mib: int, seconds: float | None, interval: float, out: Any,
              seed: int = 0) -> int:
    """Run until Ctrl-C (or `seconds`); returns 0 when shutdown left no process behind."""
    rng = random.Random(seed)
    h = Hierarchy(tempfile.mkdtemp(prefix="ortmem-serve-"), quota_mib, heartbeat_timeout=2.0)
    h.start()
    seen = 0
    try:
        wids = [h.spawn() for _ in range(workers)]
        out(f"serving quota {quota_mib} MiB, {workers} workers, coordinator pid {h.proc.pid}; Ctrl-C to stop")
        t0 = time.monotonic()
        while seconds is None or time.monotonic() - t0 < seconds:
            _round(h, wids, rng)
            lines, seen = _table(h, wids, seen)
            for line in lines:
                out(line)
            time.sleep(interval)
    except KeyboardInterrupt:
        out("Ctrl-C: shutting down")
    finally:
        h.close()
    left = leftovers(h.pids)
    out("shutdown clean: no process left" if not left else f"processes left behind: {left}")
    return 0 if not left else 1
