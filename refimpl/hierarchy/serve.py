"""`ortmem serve`: a coordinator and N worker processes on this machine, each serving a real small ORT model.

The models are the project's own (two-matmul graphs with their weights in a
2x external blob, `refimpl.ort.served.build_served_models`; no downloads).
Each round, every worker either loads its next model through its own
`ProcessMemoryManager` (weights and transient peak reserved and committed
inside its budget = min(delegated slice, OS ceiling) before the session
exists; a load that does not fit is refused with `CapacityDenied`, charges
nothing, and the worker asks the coordinator for the missing quota, which
may defer), runs a few real inference requests, or unloads its model (the
charge goes back to its slice) to switch to the other one. The coordinator
then arbitrates deferred intents. A table shows, per worker, its quota at
the coordinator, its slice, its budget, what its ledger holds, the model it
serves and the requests run. The OS ceiling is the real one (cgroup v2 or
/proc/meminfo). Ctrl-C (SIGINT to the process group) stops the workers, the
coordinator observes every exit and returns their quota, and the command
checks that no process is left and that every output it saw equals an
ungoverned ORT session's output for the same request, bit for bit.
"""

from __future__ import annotations

import random
import shutil
import signal
import tempfile
import time
from typing import Any

from refimpl.hierarchy.driver import Hierarchy, leftovers
from spec.errors import CapacityDenied, GovernorError

__all__ = ["run_serve", "WIDTHS"]

#: Model widths n (weights 2 n^2 float32): 512 KiB, 2 MiB and 4.5 MiB referenced, each file twice that.
WIDTHS = (256, 512, 768)


class _Served:
    """What the serve loop remembers per worker: its two models, the requests run and their digests."""

    def __init__(self, wid: int, paths: list[str]) -> None:
        self.wid = wid
        k = (wid - 1) % len(paths)
        self.plan = [(f"m{k}", paths[k]), (f"m{(k + 1) % len(paths)}", paths[(k + 1) % len(paths)])]
        self.turn = 0
        self.next_rid = wid * 1_000_000
        self.outputs: dict[str, dict[int, str]] = {}  # path -> rid -> digest
        self.note = "-"

    @property
    def model(self) -> tuple[str, str]:
        return self.plan[self.turn % 2]


def _round(h: Hierarchy, served: dict[int, _Served], costs: dict[str, int], rng: random.Random) -> None:
    for wid, s in served.items():
        name, path = s.model
        try:
            w = h.wop(wid, "snapshot")
            if name not in w["models"]:
                try:
                    units = h.wop(wid, "load", name, path)
                    s.note = f"loaded {name} ({units['weights']}+{units['arena']} units)"
                except CapacityDenied:
                    room = w["slice"] - w["committed"] - w["reserved"]
                    if w["waiting"] is None:
                        result = h.wop(wid, "request", max(1, costs[path] - room), rng.randint(0, 1))
                        s.note = f"load of {name} refused: asked quota, {result[0]}"
                    else:
                        s.note = f"load of {name} waits for quota"
            elif rng.random() < 0.2:
                h.wop(wid, "unload", name)
                s.turn += 1
                s.note = f"unloaded {name}"
            else:
                rids = [s.next_rid + i for i in range(rng.randint(1, 3))]
                s.next_rid += len(rids)
                got = h.wop(wid, "infer", name, rids)
                s.outputs.setdefault(path, {}).update({int(r): d for r, d in got.items()})
                s.note = f"{name}: {len(rids)} requests"
        except GovernorError as e:
            s.note = f"refused: {type(e).__name__}"  # a refusal is an outcome, not a failure
    h.op("arbitrate")


def _table(h: Hierarchy, served: dict[int, _Served], seen: int) -> tuple[list[str], int]:
    snap = h.snapshot()
    events = h.op("events", seen)
    lines = [f"free {snap['free']} of {snap['serving_quota']} MiB; incarnation {snap['incarnation']}"]
    for wid, s in served.items():
        c = snap["workers"][wid]
        w = h.wop(wid, "snapshot")
        led = h.wop(wid, "ledger")
        mine = [e["event"] for e in events if e.get("worker") == wid]
        done = sum(len(d) for d in s.outputs.values())
        lines.append(f"  worker {wid} (pid {c['pid']}, {c['state']}, epoch {c['epoch']}): quota {c['quota']} MiB, "
                     f"slice {w['slice']}, budget {w['budget']}, ledger {led['workload']} B, "
                     f"models {w['models'] or '-'}, requests {done}, waiting {w['waiting'] is not None}; "
                     f"{s.note}; events: {', '.join(mine) or '-'}")
    return lines, seen + len(events)


def _check_outputs(served: dict[int, _Served]) -> tuple[int, int]:
    """(requests compared, mismatches) against ungoverned sessions (ORT loads the weights itself)."""
    from refimpl.ort.served import reference_outputs
    compared = bad = 0
    for s in served.values():
        for path, got in s.outputs.items():
            want = reference_outputs(path, sorted(got))
            compared += len(got)
            bad += sum(want[r] != d for r, d in got.items())
    return compared, bad


def run_serve(workers: int, quota_mib: int, seconds: float | None, interval: float, out: Any,
              seed: int = 0) -> int:
    """Run until Ctrl-C (or `seconds`): 0 when shutdown left no process behind and outputs matched, 1 when not,
    130 after Ctrl-C (the usual status of an interrupted command; the checks still run and print).

    The models live in a temporary folder removed on the way out, whatever happened. A Ctrl-C during
    start-up (models still building, the coordinator starting) shuts down what was started and re-raises,
    so the CLI prints its one line; nothing is left running that would keep this process from exiting."""
    from refimpl.ort.served import build_served_models, needs
    # Ctrl-C is this command's stop button, also when it was started with SIGINT ignored (a background job of
    # a non-interactive shell inherits SIG_IGN, and Python then installs no KeyboardInterrupt handler).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="ortmem-serve-")
    h: Hierarchy | None = None
    try:
        paths = build_served_models(f"{root}/models", WIDTHS)
        costs = {p: -(-needs(p).weights // (1 << 20)) + -(-needs(p).peak // (1 << 20)) for p in paths}
        h = Hierarchy(root, quota_mib, heartbeat_timeout=2.0, preload=("refimpl.ort.served",))
        served: dict[int, _Served] = {}
        interrupted = False
        try:
            h.start()
            seen = 0
            for _ in range(workers):
                wid = h.spawn()
                served[wid] = _Served(wid, paths)
            out(f"serving quota {quota_mib} MiB, {workers} workers, coordinator pid {h.proc.pid}; models "
                + ", ".join(f"n={n}: {costs[p]} MiB" for n, p in zip(WIDTHS, paths)) + "; Ctrl-C to stop")
            t0 = time.monotonic()
            while seconds is None or time.monotonic() - t0 < seconds:
                _round(h, served, costs, rng)
                lines, seen = _table(h, served, seen)
                for line in lines:
                    out(line)
                time.sleep(interval)
        except KeyboardInterrupt:
            interrupted = True
            out("Ctrl-C: shutting down")
        finally:
            _close(h)
        left = leftovers(h.pids)
        out("shutdown clean: no process left" if not left else f"processes left behind: {left}")
        compared, bad = _check_outputs(served)
        out(f"outputs: {compared} requests compared with an ungoverned session, {bad} differ")
        return 1 if left or bad else 130 if interrupted else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _close(h: Hierarchy) -> None:
    """Shut the hierarchy down; a second Ctrl-C meanwhile does not leave it half closed."""
    while True:
        try:
            h.close()
            return
        except KeyboardInterrupt:
            continue
