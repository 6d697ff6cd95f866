"""The `ServingMemoryCoordinator` process: sockets, worker processes, heartbeats, exit observation (C10).

One single-threaded loop over `multiprocessing.connection.wait`: the server
socket, connections awaiting their hello, authenticated connections (workers,
the operator's control connections, and "inject" connections a test uses as
the network: their messages are judged by their MAC alone), each spawned
worker's process sentinel, and a pidfd for each worker adopted after a
restart (`os.pidfd_open`: readable once the process has exited, also for a
process that is not our child). Exit is observed only there, never assumed
from a missed heartbeat: a missed heartbeat fences (epoch + 1) and terminates
(SIGKILL), and the quota comes back when the sentinel or pidfd says the
process is gone. The ledger and its rules are `refimpl.hierarchy.core`.

A restarted coordinator loads the journal, re-observes every exit it had
recorded (crediting nothing twice), recognises each live worker by pid and
start time (absent or different: it exited while we were down) and waits for
their connections again.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import attrs

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.core import ACTIVE, EXITED, SPAWNED, Core
from refimpl.hierarchy.journal import Journal
from refimpl.hierarchy.worker import worker_main
from spec.errors import GovernorError, InvalidArgument
from spec.guards import GuardSet

__all__ = ["Config", "ServingMemoryCoordinator", "start_coordinator", "proc_state", "starttime"]

FORK = multiprocessing.get_context("fork")


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

    @property
    def address(self) -> str:
        return os.path.join(self.dir, "coord.sock")

    @property
    def journal(self) -> str:
        return os.path.join(self.dir, "journal.sqlite")


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


class ServingMemoryCoordinator:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.core = cfg.core(cfg.serving_quota, cfg.aging_cap, Journal(cfg.journal), GuardSet(cfg.guards))
        if os.path.exists(cfg.address):
            os.unlink(cfg.address)
        self.server = P.listen(cfg.address)
        self.pending: list[Connection] = []
        self.conns: dict[Connection, tuple[str, int]] = {}
        self.primary: dict[int, Connection] = {}
        self.children: dict[int, Any] = {}  # wid -> multiprocessing Process (sentinel)
        self.pidfds: dict[int, int] = {}  # wid -> pidfd (workers adopted after a restart)
        self.last_seen: dict[int, float] = {}
        self.stopping = False
        self._reconcile()

    def _reconcile(self) -> None:
        now = time.monotonic()
        for wid, w in list(self.core.workers.items()):
            if w["state"] == EXITED:
                self.core.exit_observed(wid)  # re-observation: credits nothing (return once)
            elif starttime(w["pid"]) == w["starttime"]:
                self.pidfds[wid] = os.pidfd_open(w["pid"])
                self.last_seen[wid] = now
            else:
                self.core.exit_observed(wid)  # it exited while we were down

    # --- control operations -------------------------------------------------------------

    def spawn(self, held: bool = False) -> int:
        """Start worker process `wid`; `held`: it authenticates only when the operator tells it to."""
        if type(held) is not bool:
            raise InvalidArgument(f"held must be a bool, got {held!r}")
        wid = self.core.next_worker
        keep = [self.server.fileno(), *(c.fileno() for c in self.conns), *(c.fileno() for c in self.pending)]
        p = FORK.Process(target=worker_main, args=(wid, self.cfg, tuple(keep), held), daemon=False)
        p.start()
        got = self.core.spawn(p.pid, starttime(p.pid) or 0)
        assert got == wid  # single-threaded: nothing else issued an id in between
        self.children[wid] = p
        self.last_seen[wid] = time.monotonic()
        return wid

    def terminate(self, wid: int) -> None:
        pid = self.core.workers[wid]["pid"]
        if starttime(pid) == self.core.workers[wid]["starttime"]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def expire(self, wid: int) -> None:
        """The heartbeat deadline of `wid` passed: fence, then terminate."""
        self.core.fence(wid)
        if self.cfg.terminate_on_fence:
            self.terminate(wid)

    def snapshot(self) -> dict[str, Any]:
        snap = self.core.snapshot()
        for wid, w in snap["workers"].items():
            w["proc"] = "dead" if w["state"] == EXITED else proc_state(w["pid"])
            w["connected"] = wid in self.primary
        return snap

    def _push(self, wid: int, msg: dict[str, Any]) -> None:
        conn = self.primary.get(wid)
        if conn is not None:
            try:
                conn.send(msg)
            except OSError:
                self._close(conn)

    def _control_op(self, cmd: dict[str, Any]) -> Any:
        op, args = cmd.get("op"), cmd.get("args", ())
        if op == "spawn":
            return self.spawn(*args)
        if op == "snapshot":
            return self.snapshot()
        if op == "events":
            return self.core.events[args[0] if args else 0:]
        if op == "arbitrate":
            grants = self.core.arbitrate()
            for iid, wid, n in grants:
                self._push(wid, {"push": "grant", "intent": iid, "nbytes": n})
            return [g[0] for g in grants]
        if op == "reclaim":
            tid = self.core.reclaim(*args)
            if not isinstance(args[0], str):
                self._push(args[0], {"push": "reclaim", "ticket": tid, "nbytes": args[1]})
            return tid
        if op == "expire":
            return self.expire(*args)
        if op == "outside":
            return self.core.outside(*args)
        if op == "inject":
            return self._message(args[0], role="inject", wid=0)
        if op == "shutdown":
            self.stopping = True
            for wid, w in self.core.workers.items():
                if w["state"] != EXITED:
                    self.terminate(wid)
            return None
        raise InvalidArgument(f"unknown control op {op!r}")

    # --- messages ---------------------------------------------------------------------------

    def _message(self, msg: Any, role: str, wid: int) -> Any:
        if not isinstance(msg, dict):
            raise InvalidArgument(f"not a message: {msg!r}")
        claimed = msg.get("worker")
        known = type(claimed) is int and claimed in self.core.workers
        authentic = (known and P.sealed_ok(P.worker_key(self.cfg.master, claimed), msg)
                     and (role != "worker" or claimed == wid))
        return self.core.handle(msg, authentic)

    def _hello(self, conn: Connection) -> None:
        self.pending.remove(conn)
        try:
            tag, role, wid = conn.recv()
            if tag != "hello" or role not in ("worker", "control", "inject"):
                raise ValueError(tag)
            if role == "worker":
                if wid not in self.core.workers:
                    conn.send(P.refusal(P.REFUSALS["UnknownWorker"](f"worker {wid!r} was never spawned")))
                    raise ValueError(wid)
                P.challenge_server(conn, P.worker_key(self.cfg.master, wid))
                epoch, seq = self.core.hello(wid)
                w = self.core.workers[wid]
                intent = next((k for k, i in self.core.intents.items() if i["worker"] == wid), None)
                tickets = {t: x["nbytes"] for t, x in self.core.tickets.items() if x["target"] == wid}
                conn.send({"epoch": epoch, "seq": seq, "quota": w["quota"], "intent": intent, "tickets": tickets})
                self.primary[wid] = conn
                self.last_seen[wid] = time.monotonic()
            else:
                P.challenge_server(conn, P.control_key(self.cfg.master))
            P.handshake_done(conn)
            self.conns[conn] = (role, wid)
        except GovernorError as e:
            self.core._event("refused-hello", error=type(e).__name__)
            conn.send(P.refusal(e))
            conn.close()
        except Exception as e:  # noqa: BLE001 - failed challenge, garbage, EOF: that connection only
            self.core._event("refused-hello", error=type(e).__name__)
            conn.close()

    def _close(self, conn: Connection) -> None:
        role, wid = self.conns.pop(conn, ("", 0))
        if role == "worker" and self.primary.get(wid) is conn:
            del self.primary[wid]
        conn.close()

    def _on_conn(self, conn: Connection) -> None:
        role, wid = self.conns[conn]
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            self._close(conn)
            return
        if role == "control":
            try:
                reply: dict[str, Any] = {"ok": self._control_op(msg)}
            except GovernorError as e:
                reply = P.refusal(e)
            conn.send(reply)
            return
        if isinstance(msg, dict) and msg.get("kind") == "heartbeat":
            w = self.core.workers.get(wid)
            if (w is not None and P.sealed_ok(P.worker_key(self.cfg.master, wid), msg)
                    and msg.get("epoch") == w["epoch"]):
                self.last_seen[wid] = time.monotonic()
            return
        try:
            reply = {"reply": msg.get("seq") if isinstance(msg, dict) else None,
                     "ok": self._message(msg, role, wid)}
        except GovernorError as e:
            reply = P.refusal(e, reply=msg.get("seq") if isinstance(msg, dict) else None)
        conn.send(reply)

    def _observe(self, wid: int) -> None:
        if wid in self.children:
            self.children.pop(wid).join(timeout=5)
        if wid in self.pidfds:
            os.close(self.pidfds.pop(wid))
        self.core.exit_observed(wid)
        conn = self.primary.pop(wid, None)
        if conn is not None:
            self.conns.pop(conn, None)
            conn.close()

    def _heartbeats(self) -> None:
        now = time.monotonic()
        for wid, w in self.core.workers.items():
            if w["state"] in (SPAWNED, ACTIVE) and now - self.last_seen.get(wid, now) > self.cfg.heartbeat_timeout:
                self.core._event("heartbeat-lost", worker=wid)
                self.expire(wid)

    def live(self) -> bool:
        return any(w["state"] != EXITED for w in self.core.workers.values())

    def run(self) -> None:
        deadline: float | None = None
        while True:
            if self.stopping:
                deadline = deadline or time.monotonic() + 10.0
                if not self.live() or time.monotonic() > deadline:
                    break
            watch: dict[Any, tuple[str, Any]] = {self.server: ("server", None)}
            watch.update({c: ("pending", c) for c in self.pending})
            watch.update({c: ("conn", c) for c in self.conns})
            watch.update({p.sentinel: ("exit", wid) for wid, p in self.children.items()})
            watch.update({fd: ("exit", wid) for wid, fd in self.pidfds.items()})
            for obj in wait(list(watch), timeout=self.cfg.heartbeat_interval):
                kind, x = watch[obj]
                if kind == "server":
                    conn = P.accept(self.server)
                    if conn is not None:
                        self.pending.append(conn)
                elif kind == "pending":
                    self._hello(x)
                elif kind == "conn" and x in self.conns:
                    self._on_conn(x)
                elif kind == "exit":
                    self._observe(x)
            self._heartbeats()
        for conn in list(self.conns):
            self._close(conn)
        self.server.close()
        self.core.journal.close()


def _main(cfg: Config) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator stops us with "shutdown" (serve handles Ctrl-C)
    try:
        ServingMemoryCoordinator(cfg).run()
    finally:
        os._exit(0)


def start_coordinator(cfg: Config) -> Any:
    """Start the coordinator process (forked); returns the `multiprocessing.Process`."""
    p = FORK.Process(target=_main, args=(cfg,), daemon=False)
    p.start()
    return p
