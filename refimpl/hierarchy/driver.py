"""The operator's handle on a running hierarchy: start, control, fault injection, clean shutdown.

Used by the fault tests, the Hypothesis campaign and `ortmem serve`. Every wait
is bounded. The driver makes itself a child subreaper (Linux prctl) so that
processes orphaned by a killed coordinator or zygote are reparented here and
reaped, and `leftovers()` lists any process of ours still alive, for the
tests' "nothing left behind" check. Workers are forked by a zygote
(`refimpl.hierarchy.zygote`) the driver starts once per process and shares
between hierarchies: it holds no key, and starting an interpreter per
hierarchy would cost more than the hierarchy (see `shared_zygote`).

The first `start()` initialises the hierarchy's journal (the explicit first
start); every later start (a restart) opens the journal it left, and a
coordinator that refuses to start (a damaged or missing journal) surfaces as
`CoordinatorExited` with its exit code and what it said on stderr.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import secrets
import signal
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy import transport as T
from refimpl.hierarchy.coordinator import Config, proc_state, start_coordinator, starttime
from refimpl.hierarchy.core import Core
from refimpl.hierarchy.zygote import Zygote
from spec.errors import AuthenticationFailed

__all__ = ["Hierarchy", "CoordinatorExited", "leftovers", "live_processes", "become_subreaper", "shared_zygote",
           "impostor_hello", "REPLY_S"]

_PR_SET_CHILD_SUBREAPER = 36


class CoordinatorExited(RuntimeError):
    """The coordinator process ended on its own (it refused to start, or stopped): its code and its words."""

    def __init__(self, code: int | None, stderr: str) -> None:
        super().__init__(f"the coordinator exited with status {code}: {stderr.strip()[-600:]}")
        self.code, self.stderr = code, stderr


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


#: This process's worker zygotes, by preloaded modules (each ended at exit).
_SHARED: dict[tuple[str, ...], Zygote] = {}

#: True once this process generated a master key. Until then a zygote that preloads modules (ORT for
#: `ortmem serve`) may be forked from it: no key can be in its memory, and it inherits what this process
#: imported. Otherwise, and always without preloads (tests, campaigns: this process may have patched modules
#: for a mutation control), a zygote is a fresh interpreter running the code on disk.
_KEYED: list[bool] = [False]


def shared_zygote(preload: tuple[str, ...] = ()) -> Zygote:
    """This process's worker zygote for `preload` (started at first use, ended at exit)."""
    z = _SHARED.get(preload)
    if z is None or not z.alive() or z.owner != os.getpid():
        fork = bool(preload) and not _KEYED[0] and threading.active_count() == 1
        z = _SHARED[preload] = Zygote(preload, fork=fork)
        atexit.register(z.close)
    return z


def _zygotes() -> list[Zygote]:
    return [z for z in _SHARED.values() if z.owner == os.getpid() and z.alive()]


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
    """Processes of ours still alive: the given pids, any live child of this process, and any live worker a
    shared zygote forked (the zygotes themselves live as long as this process, on purpose).

    With `starts` (a `Hierarchy`'s pid -> start time), a pid counts only while it still names the
    process that was recorded: an exited worker's pid reused by another program is not ours."""
    alive = {p for p in pids if proc_state(p) != "dead" and (starts is None or starttime(p) == starts.get(p))}
    zygotes = {z.pid for z in _zygotes()}
    children = set(live_processes(parent=os.getpid())) - zygotes
    for z in zygotes:
        children |= set(live_processes(parent=z))
    return sorted(alive | children)


#: How long the driver waits for a reply, a socket or a worker. A safety net against a hang, not a
#: deadline of the protocol: on a loaded 2-core machine a live coordinator took over 10 s to answer.
REPLY_S = 60.0


def _wait_pid(pid: int, timeout: float) -> int | None:
    """Reap our child `pid` (bounded); its exit status. Not `Process.join`: its sentinel pipe is inherited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for process {pid} to exit")
        time.sleep(0.005)


def _until(pred: Any, timeout: float, what: str, step: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def _dial(address: str, wid: int, key: bytes) -> T.Channel | None:
    """A control connection, counted only once the server's READY frame verified; None if it did not."""
    try:
        ch = T.dial(address, "control", wid, key)
        if not ch.poll(REPLY_S) or ch.recv() != P.READY:
            raise OSError("the server did not confirm the handshake")
        return ch
    except (OSError, EOFError, AuthenticationFailed):
        return None


def impostor_hello(path: str, role: str, wid: int, key: bytes) -> None:
    """A real connection claiming (`role`, `wid`) that answers the challenge with `key` without checking the
    server first (an impostor does not care who the server is). Raises `AuthenticationFailed` on the server's
    verdict REFUSED; returns if the key was right; `OSError` / `EOFError` if dropped before any verdict."""
    from multiprocessing.connection import Client
    conn = Client(path, family="AF_UNIX")
    try:
        hello = P.hello_bytes(role, wid, secrets.token_bytes(32))
        conn.send_bytes(hello)
        if not conn.poll(T.DIAL_TIMEOUT):
            raise TimeoutError("no challenge")
        nonce = conn.recv_bytes(128)[:32]
        conn.send_bytes(P.answer(key, hello, nonce))
        if not conn.poll(T.DIAL_TIMEOUT):
            raise TimeoutError("no verdict")
        if conn.recv_bytes(P.MAX_REPLY) == P.REFUSED:
            raise AuthenticationFailed(f"{role} {wid}: challenge failed (the server refused the answer)")
    finally:
        conn.close()


class Hierarchy:
    def __init__(self, dir: str, serving_quota: int, *, guards: frozenset[str] = frozenset(),
                 heartbeat_timeout: float = 3600.0, ceiling: tuple[str, ...] = ("os",), aging_cap: int = 8,
                 heartbeat_interval: float = 0.05, terminate_on_fence: bool = True, core: type = Core,
                 mutants: tuple[str, ...] = (), manual_redial: bool = False, preload: tuple[str, ...] = ()) -> None:
        become_subreaper()
        zygote = shared_zygote(tuple(preload))
        _KEYED[0] = True  # from here on this process holds a key: no zygote is forked from it again
        self.cfg = Config(dir, secrets.token_bytes(32), serving_quota, aging_cap, heartbeat_interval,
                          heartbeat_timeout, ceiling, frozenset(guards), terminate_on_fence, core, zygote.path,
                          manual_redial=manual_redial, mutants=tuple(mutants))
        self.proc: Any = None
        self.ctl: T.Channel | None = None
        self.workers: dict[int, T.Channel] = {}
        self.pids: list[int] = []
        self.started = False
        #: Each pid's start time when we recorded it: a pid is ours only while it still names that process.
        #: A pid whose process exited and was reaped can be reused at once (pid_max 32768, a busy machine):
        #: killing "every pid not dead" in `close` SIGKILLed whatever process had been given the number
        #: since, such as a worker of a hierarchy running beside this one (another campaign, a test run).
        self.starts: dict[int, int | None] = {}

    # --- coordinator --------------------------------------------------------------

    def start(self) -> Hierarchy:
        """Start the coordinator: the first time it initialises the journal, later it opens it."""
        cfg = attrs.evolve(self.cfg, init=not self.started)
        err = cfg.stop_file
        if os.path.exists(err):
            os.unlink(err)
        self.proc = start_coordinator(cfg)
        self.started = True
        self._own(self.proc.pid, starttime(self.proc.pid))  # our unreaped child: the number cannot move yet
        deadline = time.monotonic() + REPLY_S
        while True:
            ch = _dial(self.cfg.address, 0, P.control_key(self.cfg.master))
            if ch is not None:
                self.ctl = ch
                return self
            code = _exited(self.proc.pid)
            if code is not None:
                self.proc = None
                raise CoordinatorExited(code, Path(err).read_text(errors="replace") if os.path.exists(err) else "")
            if time.monotonic() > deadline:
                raise TimeoutError("the coordinator's socket never answered")
            time.sleep(0.005)

    def op(self, name: str, *args: Any, timeout: float = REPLY_S) -> Any:
        assert self.ctl is not None
        return T.call(self.ctl, {"op": name, "args": list(args)}, timeout)["ok"]

    def snapshot(self) -> dict[str, Any]:
        snap = self.op("snapshot")
        for k in ("workers", "intents", "tickets"):
            snap[k] = {int(i): v for i, v in snap[k].items()}
        return snap

    def restart(self, timeout: float = REPLY_S, reconnects: bool = True) -> None:
        """Kill the coordinator (SIGKILL: no goodbye) and start a new one on the same journal; `reconnects`:
        wait until the workers redialled (not with `manual_redial`)."""
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            _wait_pid(self.proc.pid, timeout)
        self.start()
        if reconnects:
            self.await_reconnects(timeout)

    def crashed(self, timeout: float = REPLY_S) -> int | None:
        """Wait for a coordinator that is dying on its own (an armed crash); its exit status."""
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        code = _wait_pid(self.proc.pid, timeout)
        self.proc = None
        return code

    def await_reconnects(self, timeout: float = REPLY_S) -> None:
        """Until every running, live worker is connected again (a stopped one reconnects when continued)."""
        _until(lambda: all(w["connected"] or w["state"] != "active" or w["proc"] != "running"
                           for w in self.snapshot()["workers"].values()), timeout, "workers to reconnect")

    # --- workers --------------------------------------------------------------------

    def spawn(self, timeout: float = REPLY_S, held: bool = False) -> int:
        """Start a worker and wait until it authenticated; `held`: until it exists, unauthenticated."""
        wid = self.op("spawn", held)
        w = self.snapshot()["workers"][wid]
        self._own(w["pid"], w["starttime"])
        if held:
            _until(lambda: self.wop(wid, "snapshot"), timeout, f"worker {wid}'s control socket")
            return wid
        _until(lambda: (lambda s: s["state"] == "active" and s["connected"])(self.snapshot()["workers"][wid]),
               timeout, f"worker {wid} to authenticate")
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

        Raises `AuthenticationFailed` on a wrong key. A connection dropped before any verdict (the server's
        HANDSHAKE_TIMEOUT passed while this process was descheduled) says nothing about the key: it is dialled
        again, so the outcome never depends on the machine's load."""
        def attempt() -> bool:
            try:
                impostor_hello(self.cfg.address, "worker", wid, key)
            except AuthenticationFailed:  # a verdict (a PermissionError, so before the OSError below)
                raise
            except (OSError, EOFError, TimeoutError):
                return False
            return True
        _until(attempt, REPLY_S, f"a verdict on a hello claiming worker {wid}")

    def _worker_conn(self, wid: int) -> T.Channel:
        ch = self.workers.get(wid)
        if ch is None:
            path = os.path.join(self.cfg.dir, f"w{wid}.sock")
            key = P.worker_control_key(self.cfg.master, wid)
            ch = _until(lambda: _dial(path, wid, key), REPLY_S, f"worker {wid}'s control socket")
            self.workers[wid] = ch
        return ch

    def wop(self, wid: int, name: str, *args: Any, timeout: float = REPLY_S) -> Any:
        """A local action in worker `wid` (request, return, reserve, commit, free, answer, snapshot, ...)."""
        return T.call(self._worker_conn(wid), {"op": name, "args": list(args)}, timeout)["ok"]

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
        ch = self.workers.pop(wid, None)
        if ch is not None:
            ch.close()

    # --- shutdown ---------------------------------------------------------------------

    def close(self, timeout: float = REPLY_S) -> None:
        """Shut down: every worker terminated and observed, the coordinator gone, everything reaped."""
        try:
            if self.ctl is not None and self.proc is not None and proc_state(self.proc.pid) != "dead":
                self.op("shutdown")
                _wait_pid(self.proc.pid, timeout)
        except (OSError, EOFError, TimeoutError):
            pass
        for ch in [*self.workers.values(), *([self.ctl] if self.ctl else [])]:
            ch.close()
        self.workers.clear()
        self.ctl = None
        if self.proc is not None and self._alive(self.proc.pid):
            os.kill(self.proc.pid, signal.SIGKILL)
            _wait_pid(self.proc.pid, timeout)
        for pid in self.pids:  # last resort: nothing of ours may outlive the hierarchy (and nothing else is hit)
            if self._alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _until(lambda: not [p for p in self.pids if self._alive(p)], timeout, "every hierarchy process to be gone")
        for pid in self.pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def __enter__(self) -> Hierarchy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _exited(pid: int) -> int | None:
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status) if got == pid else None
