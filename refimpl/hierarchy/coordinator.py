"""The `ServingMemoryCoordinator` process: sockets, worker processes, heartbeats, exit observation (C10).

One single-threaded loop over `multiprocessing.connection.wait`: the server
socket, connections in their handshake, authenticated connections (workers,
the operator's control connections, and "inject" connections a test uses as
the network: their messages are judged by their MAC alone), and one pidfd
per worker (readable once its process has exited, whoever its parent is).
Exit is observed only there, never assumed from a missed heartbeat: a missed
heartbeat fences (epoch + 1) and terminates (SIGKILL), and the quota comes
back when the pidfd says the process is gone. The decisions are
`refimpl.hierarchy.service`, the ledger `refimpl.hierarchy.core`.

Workers are forked by the operator's zygote (`refimpl.hierarchy.zygote`),
never by this process: this process holds the master key, and a fork would
hand it to the worker. For the same reason it makes itself non-dumpable
(same-user processes cannot read its memory through /proc).

Start: with `init` the journal is created (a new hierarchy), otherwise it is
opened and audited; a restarted coordinator then re-observes every exit it
had recorded (crediting nothing twice), recognises each live worker by pid
and start time (absent or different: it exited while we were down) and
waits for their connections again. A coordinator that must stop says why on
stderr and exits non-zero: 3 for a journal it cannot trust (missing,
unreadable, inconsistent, stale), 1 for anything unexpected; 0 only after
an operator's shutdown.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import attrs

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy import transport as T
from refimpl.hierarchy.core import ACTIVE, SPAWNED, Core
from refimpl.hierarchy.journal import Journal
from refimpl.hierarchy.service import Service
from refimpl.hierarchy.zygote import spawn_via
from spec.errors import GovernorError, InvalidArgument, JournalDamaged
from spec.guards import GuardSet

__all__ = ["Config", "Coordinator", "start_coordinator", "coordinator_main", "proc_state", "starttime",
           "EXIT_JOURNAL", "EXIT_FAILED"]

FORK = multiprocessing.get_context("fork")

#: Exit codes: a journal the coordinator cannot trust; anything else unexpected.
EXIT_JOURNAL, EXIT_FAILED = 3, 1


@attrs.frozen
class Config:
    dir: str
    master: bytes
    serving_quota: int  # units (protocol.UNIT bytes each)
    aging_cap: int = 8
    heartbeat_interval: float = 0.05
    heartbeat_timeout: float = 3600.0  # the campaign fences by `expire`; the fault tests use a short one
    ceiling: tuple[str, ...] = ("os",)  # or ("file", path)
    guards: frozenset[str] = frozenset()
    #: Terminate a fenced worker at once (SIGKILL). The campaign leaves the kill to its environment, so
    #: the window between fence and exit (a slow teardown) is explored too.
    terminate_on_fence: bool = True
    #: The ledger class; a test harness passes a subclass to inject a named bug (mutation controls).
    core: type = Core
    #: The worker zygote's socket (`refimpl.hierarchy.zygote.Zygote.path`).
    zygote: str = ""
    #: Create the journal (the explicit first start of a hierarchy); otherwise open the existing one.
    init: bool = False
    #: Journal fsyncs (off only where a crash is simulated in-process and the page cache survives it).
    durable: bool = True
    #: Workers redial a lost connection only when the operator says so (the campaign: the environment decides
    #: how long a worker stays out of sync); otherwise at once.
    manual_redial: bool = False
    #: Names of worker-side mutants each worker applies after its fork (mutation controls; empty otherwise).
    mutants: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return os.path.join(self.dir, "coord.sock")

    @property
    def journal(self) -> str:
        return os.path.join(self.dir, "journal.sqlite")

    @property
    def stop_file(self) -> str:
        """Where a coordinator that stopped on its own also writes why (stderr may be nobody's terminal)."""
        return os.path.join(self.dir, "coordinator.stopped")


def starttime(pid: int) -> int | None:
    """The process's start time in clock ticks (field 22 of /proc/pid/stat), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def proc_state(pid: int) -> str:
    """'running', 'stopped' or 'dead' from /proc/pid/stat (a zombie is dead)."""
    try:
        code = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "dead"
    return {"T": "stopped", "t": "stopped", "Z": "dead", "X": "dead"}.get(code, "running")


def open_journal(cfg: Config) -> Journal:
    if cfg.init:
        return Journal.create(cfg.journal, P.journal_key(cfg.master), cfg.serving_quota, cfg.aging_cap, cfg.durable)
    return Journal.open(cfg.journal, P.journal_key(cfg.master), cfg.durable)


class _OsProcesses:
    """Worker processes as the OS has them: forked by the zygote, watched through pidfds."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.pidfds: dict[int, int] = {}  # wid -> pidfd
        self.gone: list[int] = []  # workers whose process was already gone when we came to watch it

    def spawn(self, wid: int, held: bool) -> tuple[int, int]:
        cfg = self.cfg
        spec = {"wid": wid, "dir": cfg.dir, "serving_quota": cfg.serving_quota, "guards": sorted(cfg.guards),
                "ceiling": list(cfg.ceiling), "heartbeat_interval": cfg.heartbeat_interval, "held": held,
                "manual_redial": cfg.manual_redial, "mutants": list(cfg.mutants)}
        keys = P.worker_key(cfg.master, wid) + P.worker_control_key(cfg.master, wid)
        pid, start, pidfd = spawn_via(cfg.zygote, spec, keys)
        self.pidfds[wid] = pidfd
        return pid, start

    def alive(self, pid: int, start: int) -> bool:
        return starttime(pid) == start and proc_state(pid) != "dead"

    def watch(self, wid: int, pid: int) -> None:
        if wid in self.pidfds:
            return
        try:
            self.pidfds[wid] = os.pidfd_open(pid)
        except ProcessLookupError:
            self.gone.append(wid)

    def kill(self, pid: int, start: int) -> None:
        if starttime(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def state(self, pid: int, start: int) -> str:
        return proc_state(pid) if starttime(pid) == start else "dead"


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Coordinator:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.procs = _OsProcesses(cfg)
        self.svc = Service(open_journal(cfg), cfg.master, cfg.serving_quota, GuardSet(cfg.guards), self.procs,
                           _crash, cfg.core, cfg.terminate_on_fence)
        self.svc.reconcile()
        if os.path.exists(cfg.address):
            os.unlink(cfg.address)
        self.server = T.listen(cfg.address)
        self.pending: dict[Connection, float] = {}  # connection -> when it was accepted
        self.channels: list[T.Channel] = []
        self.last_seen: dict[int, float] = {wid: time.monotonic() for wid in self.svc.core.workers}

    def _handshake(self, conn: Connection) -> None:
        del self.pending[conn]
        try:
            role, wid, ch = T.server_handshake(conn, self.svc.key_for)
            first = None
            if role == "worker":
                if not ch.poll(T.HANDSHAKE_TIMEOUT):
                    raise TimeoutError("no hello view after the handshake")
                first = ch.recv()
            if self.svc.opened(ch, role, wid, first):
                T.handshake_done(conn)
                self.channels.append(ch)
                self.last_seen[wid] = time.monotonic()
        except JournalDamaged:
            raise
        except (GovernorError, OSError, EOFError, TimeoutError) as e:  # that connection only
            self.svc.refused_hello(e)
            conn.close()

    def _frame(self, ch: T.Channel) -> None:
        try:
            body = ch.recv()
        except InvalidArgument as e:  # an authentic frame whose body does not parse: a typed refusal
            self.svc.malformed(ch, e)
            return
        except (EOFError, OSError, GovernorError):  # gone, an oversized frame, a frame failing its tag
            self.svc.drop(ch)
            return
        role, wid = self.svc.roles.get(id(ch), ("", 0))
        if role == "worker":
            self.last_seen[wid] = time.monotonic()
        self.svc.frame(ch, body)

    def _heartbeats(self) -> None:
        now = time.monotonic()
        for wid, w in list(self.svc.core.workers.items()):
            if w["state"] in (SPAWNED, ACTIVE) and now - self.last_seen.setdefault(wid, now) > self.cfg.heartbeat_timeout:
                self.svc.core._event("heartbeat-lost", worker=wid)
                self.svc.expire(wid)

    def _observe(self, wid: int) -> None:
        fd = self.procs.pidfds.pop(wid, None)
        if fd is not None:
            os.close(fd)
        self.svc.observed_exit(wid)

    def run(self) -> None:
        deadline: float | None = None
        while True:
            if self.svc.stopping:
                deadline = deadline or time.monotonic() + 10.0
                if not self.svc.live() or time.monotonic() > deadline:
                    break
            while self.procs.gone:
                self.svc.observed_exit(self.procs.gone.pop())
            self.channels = [c for c in self.channels if not c.closed]
            watch: dict[Any, tuple[str, Any]] = {self.server: ("server", None)}
            watch.update({c: ("pending", c) for c in self.pending})
            watch.update({c: ("frame", c) for c in self.channels})
            watch.update({fd: ("exit", wid) for wid, fd in self.procs.pidfds.items()})
            for obj in wait(list(watch), timeout=self.cfg.heartbeat_interval):
                kind, x = watch[obj]
                if kind == "server":
                    conn = T.accept(self.server)
                    if conn is not None:
                        self.pending[conn] = time.monotonic()
                elif kind == "pending":
                    self._handshake(x)
                elif kind == "frame" and not x.closed:
                    self._frame(x)
                elif kind == "exit":
                    self._observe(x)
            self._heartbeats()
            for conn, t0 in list(self.pending.items()):  # a client that connected and never said hello
                if time.monotonic() - t0 > 2 * T.HANDSHAKE_TIMEOUT:
                    del self.pending[conn]
                    conn.close()
        for c in self.channels:
            c.close()
        self.server.close()
        self.svc.core.journal.close_cleanly()  # only an operator's shutdown ends the loop


def _non_dumpable() -> None:
    """No same-user process may read our memory (the master key) through /proc or ptrace."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _say(cfg: Config, line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    try:
        with open(cfg.stop_file, "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


def coordinator_main(cfg: Config) -> int:
    """Run a coordinator to its end; the exit code (and, unless 0, why on stderr)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator stops us with "shutdown" (serve handles Ctrl-C)
    _non_dumpable()
    try:
        Coordinator(cfg).run()
        return 0
    except JournalDamaged as e:
        _say(cfg, f"ortmem coordinator: refusing to serve: {type(e).__name__}: {e}")
        return EXIT_JOURNAL
    except InvalidArgument as e:
        _say(cfg, f"ortmem coordinator: cannot start: {type(e).__name__}: {e}")
        return EXIT_FAILED
    except BaseException as e:  # noqa: BLE001 - a coordinator never stops in silence
        traceback.print_exc(file=sys.stderr)
        _say(cfg, f"ortmem coordinator: stopped by an unexpected {type(e).__name__}: {str(e)[:300]}")
        return EXIT_FAILED


def _main(cfg: Config) -> None:
    code = EXIT_FAILED
    try:
        code = coordinator_main(cfg)
    finally:
        sys.stderr.flush()
        os._exit(code)


def start_coordinator(cfg: Config) -> Any:
    """Start the coordinator process (forked); returns the `multiprocessing.Process`."""
    p = FORK.Process(target=_main, args=(cfg,), daemon=False)
    p.start()
    return p
