"""The operator's handle on a running hierarchy: start, control, fault injection, clean shutdown.

Used by the fault tests, the Hypothesis campaign and `ortmem serve`. Every wait
is bounded. The driver makes itself a child subreaper (Linux prctl) so that
workers orphaned by a killed coordinator are reparented here and reaped, and
`leftovers()` lists any process of ours still alive, for the tests' "nothing
left behind" check.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.coordinator import Config, proc_state, start_coordinator, starttime
from refimpl.hierarchy.core import Core

__all__ = ["Hierarchy", "leftovers", "live_processes", "become_subreaper"]

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def live_processes(parent: int | None = None, session: int | None = None) -> list[int]:
    """Pids of live (not zombie) processes with the given parent pid and/or session id, from /proc/<pid>/stat."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()  # after "(comm)": state ppid pgrp sid
            except OSError:
                continue
            if fields[0] in ("Z", "X"):
                continue
            if (parent is None or int(fields[1]) == parent) and (session is None or int(fields[3]) == session):
                out.append(int(d.name))
    return out


def leftovers(pids: list[int] | tuple[int, ...] = (), starts: dict[int, int | None] | None = None) -> list[int]:
    """Processes of ours still alive: the given pids, and any live child of this process.

    With `starts` (a `Hierarchy`'s pid -> start time), a pid counts only while it still names the
    process that was recorded: an exited worker's pid reused by another program is not ours."""
    alive = {p for p in pids if proc_state(p) != "dead" and (starts is None or starttime(p) == starts.get(p))}
    return sorted(alive | set(live_processes(parent=os.getpid())))


#: How long the driver waits for a reply, a socket or a worker. A safety net against a hang, not a
#: deadline of the protocol: on a loaded 2-core machine a live coordinator took over 10 s to answer.
REPLY_S = 60.0


def _wait_pid(pid: int, timeout: float) -> None:
    """Reap our child `pid` (bounded). Not `Process.join`: its sentinel pipe is inherited by the workers."""
    def gone() -> bool:
        try:
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            return True
    _until(gone, timeout, f"process {pid} to exit")


def _until(pred: Any, timeout: float, what: str, step: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


class Hierarchy:
    def __init__(self, dir: str, serving_quota: int, *, guards: frozenset[str] = frozenset(),
                 heartbeat_timeout: float = 3600.0, ceiling: tuple[str, ...] = ("os",), aging_cap: int = 8,
                 heartbeat_interval: float = 0.05, terminate_on_fence: bool = True, core: type = Core) -> None:
        become_subreaper()
        self.cfg = Config(dir, secrets.token_bytes(32), serving_quota, aging_cap, heartbeat_interval,
                          heartbeat_timeout, ceiling, frozenset(guards), terminate_on_fence, core)
        self.proc: Any = None
        self.ctl: Connection | None = None
        self.workers: dict[int, Connection] = {}
        self.pids: list[int] = []
        #: Each pid's start time when we recorded it: a pid is ours only while it still names that process.
        #: A pid whose process exited and was reaped can be reused at once (pid_max 32768, a busy machine):
        #: killing "every pid not dead" in `close` SIGKILLed whatever process had been given the number
        #: since, such as a worker of a hierarchy running beside this one (another campaign, a test run).
        self.starts: dict[int, int | None] = {}

    # --- coordinator --------------------------------------------------------------

    def start(self) -> Hierarchy:
        self.proc = start_coordinator(self.cfg)
        self._own(self.proc.pid, starttime(self.proc.pid))  # our unreaped child: the number cannot move yet
        self.ctl = _until(self._dial_coordinator, REPLY_S, "the coordinator's socket")
        return self

    def _dial_coordinator(self) -> Connection | None:
        try:
            return P.dial(self.cfg.address, "control", 0, P.control_key(self.cfg.master))
        except (OSError, EOFError):
            return None

    def op(self, name: str, *args: Any, timeout: float = REPLY_S) -> Any:
        assert self.ctl is not None
        return P.call(self.ctl, {"op": name, "args": args}, timeout)["ok"]

    def snapshot(self) -> dict[str, Any]:
        return self.op("snapshot")

    def restart(self, timeout: float = REPLY_S) -> None:
        """Kill the coordinator (SIGKILL: no goodbye) and start a new one on the same journal."""
        assert self.ctl is not None
        self.ctl.close()
        os.kill(self.proc.pid, signal.SIGKILL)
        _wait_pid(self.proc.pid, timeout)
        self.start()
        _until(lambda: all(w["connected"] or w["state"] in ("exited", "fenced", "spawned") or w["proc"] != "running"
                           for w in self.snapshot()["workers"].values()), timeout, "workers to reconnect")

    # --- workers --------------------------------------------------------------------

    def spawn(self, timeout: float = REPLY_S, held: bool = False) -> int:
        """Start a worker and wait until it authenticated; `held`: until it exists, unauthenticated."""
        wid = self.op("spawn", held)
        if held:
            w = self.snapshot()["workers"][wid]
            self._own(w["pid"], w["starttime"])
            _until(lambda: self.wop(wid, "snapshot"), timeout, f"worker {wid}'s control socket")
            return wid
        w = _until(lambda: (lambda s: s if s["state"] == "active" and s["connected"] else None)(
            self.snapshot()["workers"][wid]), timeout, f"worker {wid} to authenticate")
        self._own(w["pid"], w["starttime"])
        return wid

    def _own(self, pid: int, start: int | None) -> None:
        self.pids.append(pid)
        self.starts[pid] = start

    def _alive(self, pid: int) -> bool:
        """`pid` still names the process we started (same start time) and it has not exited."""
        return proc_state(pid) != "dead" and starttime(pid) == self.starts.get(pid)

    def hello(self, wid: int, timeout: float = REPLY_S) -> None:
        """Let held worker `wid` authenticate, and wait until the coordinator counts it active and connected."""
        self.wop(wid, "hello", timeout=timeout)
        _until(lambda: (lambda s: s["state"] == "active" and s["connected"])(self.snapshot()["workers"][wid]),
               timeout, f"worker {wid} to authenticate")

    def forged_hello(self, wid: int, key: bytes) -> None:
        """A real connection claiming to be worker `wid`, answering the challenge with `key`.

        Raises `multiprocessing.AuthenticationError` on a wrong key. A connection dropped before any verdict
        (the server's HANDSHAKE_TIMEOUT passed while this process was descheduled) says nothing about the
        key: it is dialled again, so the outcome never depends on the machine's load."""
        def attempt() -> bool:
            try:
                conn = P.dial(self.cfg.address, "worker", wid, key)
            except (OSError, EOFError):
                return False
            conn.close()
            return True
        _until(attempt, REPLY_S, f"a verdict on a hello claiming worker {wid}")

    def _worker_conn(self, wid: int) -> Connection:
        conn = self.workers.get(wid)
        if conn is None:
            path = os.path.join(self.cfg.dir, f"w{wid}.sock")
            conn = _until(lambda: self._dial_worker(path, wid), REPLY_S, f"worker {wid}'s control socket")
            self.workers[wid] = conn
        return conn

    def _dial_worker(self, path: str, wid: int) -> Connection | None:
        try:
            return P.dial(path, "control", wid, P.control_key(self.cfg.master))
        except (OSError, EOFError):
            return None

    def wop(self, wid: int, name: str, *args: Any, timeout: float = REPLY_S) -> Any:
        """A local action in worker `wid` (request, return, reserve, commit, free, answer, snapshot)."""
        return P.call(self._worker_conn(wid), {"op": name, "args": args}, timeout)["ok"]

    def pid(self, wid: int) -> int:
        return self.snapshot()["workers"][wid]["pid"]

    def signal(self, wid: int, sig: int) -> None:
        os.kill(self.pid(wid), sig)
        if sig == signal.SIGSTOP:
            _until(lambda: proc_state(self.pid(wid)) == "stopped", REPLY_S, f"worker {wid} to stop")
        elif sig == signal.SIGCONT:
            _until(lambda: proc_state(self.pid(wid)) == "running", REPLY_S, f"worker {wid} to continue")

    def kill(self, wid: int, timeout: float = REPLY_S) -> None:
        """SIGKILL worker `wid` and wait until the coordinator has observed its exit."""
        os.kill(self.pid(wid), signal.SIGKILL)
        self.await_exit(wid, timeout)

    def await_exit(self, wid: int, timeout: float = REPLY_S) -> None:
        _until(lambda: self.snapshot()["workers"][wid]["state"] == "exited", timeout, f"worker {wid}'s exit")
        conn = self.workers.pop(wid, None)
        if conn is not None:
            conn.close()
        self.reap()

    def reap(self) -> None:
        for pid in self.pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    # --- shutdown ---------------------------------------------------------------------

    def close(self, timeout: float = REPLY_S) -> None:
        """Shut down: every worker terminated and observed, the coordinator gone, everything reaped."""
        try:
            if self.ctl is not None and self.proc is not None and proc_state(self.proc.pid) != "dead":
                self.op("shutdown")
                _wait_pid(self.proc.pid, timeout)
        except (OSError, EOFError, TimeoutError):
            pass
        for conn in [*self.workers.values(), *([self.ctl] if self.ctl else [])]:
            conn.close()
        self.workers.clear()
        for pid in self.pids:  # last resort: nothing of ours may outlive the hierarchy (and nothing else is hit)
            if self._alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _until(lambda: (self.reap(), not [p for p in self.pids if self._alive(p)])[1], timeout,
               "every hierarchy process to be gone")
        self.reap()

    def __enter__(self) -> Hierarchy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
