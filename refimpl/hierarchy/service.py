"""The coordinator's decisions over its connections, transport-free (C10, I11): what `coordinator` runs per event.

`Service` holds the ledger (`refimpl.hierarchy.core.Core`, resumed from an
audited journal) and answers the events of the coordinator's loop: an
authenticated hello, a frame on a connection, an operator's control op, a
worker's observed exit, a missed heartbeat. Connections are any objects with
`send(body)` (raising `OSError` when the peer vanished) and `close()`: sockets
in `refimpl.hierarchy.coordinator`, memory in `refimpl.verify.hierarchy_sim`.
Every send goes through `_send`, which drops a connection whose peer is gone
instead of letting that stop the coordinator.

A worker's hello carries what it committed and the last sequence number it
had accepted: a live worker that knows a step the journal lacks (a sequence
number above the journal's, units committed past its quota, a valid key for
an id never issued) proves the journal stale, and the coordinator stops
(`JournalStale`) rather than grant those units twice. A reconnect replaces the
worker's previous connection, unread frames and all (its epoch is over).

Fault injection (the environment's freedom, FoundationDB's buggify), armed by
the operator for the next worker hello, worker message or arbitration round:
crash before handling it or after (the journal holds the step, the reply is
never sent), or drop the connection before handling it or after (reply
lost). Used by the campaigns; never armed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.core import ACTIVE, EXITED, SPAWNED, Core
from refimpl.hierarchy.journal import Journal
from spec.errors import GovernorError, InvalidArgument, JournalStale, UnknownWorker
from spec.guards import GuardSet

__all__ = ["Service", "Conn", "Processes", "FAULTS"]

FAULTS = ("crash-before-handle", "crash-before-reply", "drop-message", "drop-reply")


class Conn(Protocol):
    def send(self, body: Any) -> None: ...

    def close(self) -> None: ...


class Processes(Protocol):
    """The coordinator's view of worker processes (the OS, or the simulation's process table)."""

    def spawn(self, wid: int, held: bool) -> tuple[int, int]:
        """Start worker `wid`'s process; its (pid, start time). Raises `CalloutFailed` if it cannot."""

    def alive(self, pid: int, starttime: int) -> bool:
        """True iff `pid` still names the process started at `starttime`, and it has not exited."""

    def watch(self, wid: int, pid: int) -> None:
        """Report the exit of `pid` (worker `wid`) as an event later."""

    def kill(self, pid: int, starttime: int) -> None:
        """SIGKILL the process, if `pid` still names it."""

    def state(self, pid: int, starttime: int) -> str:
        """'running', 'stopped' or 'dead'."""


class Service:
    def __init__(self, journal: Journal, master: bytes, serving_quota: int, guards: GuardSet, procs: Processes,
                 crash: Callable[[], None], core: type = Core, terminate_on_fence: bool = True) -> None:
        """`crash()`: die at once, as a SIGKILL would (an armed fault); `terminate_on_fence`: kill a worker when
        it is fenced (the campaigns leave that to their environment, so the window before its exit is explored)."""
        self.master, self.procs, self.crash, self.terminate_on_fence = master, procs, crash, terminate_on_fence
        self.core = core(journal, guards)
        if self.core.serving_quota != serving_quota:
            raise JournalStale(f"the journal's serving quota is {self.core.serving_quota}, this coordinator's "
                               f"{serving_quota}: it is another hierarchy's journal")
        self.primary: dict[int, Conn] = {}
        self.roles: dict[int, tuple[str, int]] = {}  # id(conn) -> (role, worker)
        self.armed: str | None = None
        self.stopping = False

    # --- start ------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """After a restart: re-observe recorded exits (crediting nothing twice), adopt live workers, and
        observe the exit of every worker that died (or never started) while no coordinator watched."""
        for wid, w in list(self.core.workers.items()):
            if w["state"] == EXITED:
                self.core.exit_observed(wid)  # re-observation: credits nothing (return once)
            elif w["pid"] and self.procs.alive(w["pid"], w["starttime"]):
                self.procs.watch(wid, w["pid"])
            else:
                self.core.exit_observed(wid)  # it exited while we were down (or its spawn never completed)

    # --- connections -----------------------------------------------------------------------------

    def key_for(self, role: str, wid: int) -> bytes:
        if role == "worker":
            return P.worker_key(self.master, wid)
        return P.control_key(self.master)

    def _send(self, conn: Conn, body: Any) -> bool:
        """Send, surviving a peer that vanished (its connection is dropped); True iff sent."""
        try:
            conn.send(body)
            return True
        except OSError:
            self.drop(conn)
            return False

    def drop(self, conn: Conn) -> None:
        role, wid = self.roles.pop(id(conn), ("", 0))
        if role == "worker" and self.primary.get(wid) is conn:
            del self.primary[wid]
        try:
            conn.close()
        except OSError:
            pass

    def opened(self, conn: Conn, role: str, wid: int, first: Any = None) -> bool:
        """An authenticated connection; a worker's `first` frame is its hello view. True iff it stays open."""
        if role != "worker":
            self.roles[id(conn)] = (role, wid)
            return self._send(conn, P.READY)
        fault, self.armed = self.armed, None
        if fault == "crash-before-handle":
            self.crash()
        if fault == "drop-message":
            self.drop(conn)
            return False
        try:
            if not isinstance(first, dict):
                raise InvalidArgument(f"a worker's hello is an object, got {type(first).__name__}")
            seq = P.counter(first.get("seq"), "seq")
            committed = P.units(first.get("committed"), "committed", zero_ok=True)
            w = self.core.workers.get(wid)
            if w is None:  # it holds the key of an id we never issued: only our master could have made it
                raise JournalStale(f"worker {wid} authenticated with its key, but the journal issued ids only "
                                   f"up to {self.core.next_worker - 1}: the journal lost a spawn")
            if w["state"] in (SPAWNED, ACTIVE) and (seq > w["seq"] or committed > w["quota"]):
                raise JournalStale(f"worker {wid} had accepted sequence {seq} and holds {committed} committed "
                                   f"units; the journal says {w['seq']} and quota {w['quota']}: it lost answered steps")
            reply = self.core.hello(wid, committed)
        except JournalStale:
            raise  # fatal: the caller stops the coordinator
        except GovernorError as e:
            self.core._event("refused-hello", worker=wid, error=type(e).__name__)
            if fault == "crash-before-reply":
                self.crash()
            if fault != "drop-reply":
                self._send(conn, P.refusal(e))
            self.drop(conn)
            return False
        old = self.primary.pop(wid, None)
        if old is not None:  # a reconnect: the previous connection's epoch is over, unread frames and all
            self.drop(old)
        if fault == "crash-before-reply":
            self.crash()
        if fault == "drop-reply":
            self.drop(conn)
            return False
        self.roles[id(conn)] = (role, wid)
        self.primary[wid] = conn
        return self._send(conn, {"ok": reply})

    def malformed(self, conn: Conn, err: GovernorError) -> None:
        """An authenticated frame whose body did not parse: refused, typed; nothing changes."""
        self._send(conn, P.refusal(err, reply=None))

    def refused_hello(self, err: BaseException) -> None:
        self.core._event("refused-hello", error=type(err).__name__)

    def frame(self, conn: Conn, body: Any) -> None:
        """One authenticated frame on `conn`: a worker message, a heartbeat, or an operator's op."""
        role, wid = self.roles.get(id(conn), ("", 0))
        if role == "control":
            try:
                reply: dict[str, Any] = {"ok": self.control(body)}
            except GovernorError as e:
                if isinstance(e, JournalStale):
                    raise
                reply = P.refusal(e)
            self._send(conn, reply)
            return
        if role == "worker" and isinstance(body, dict) and body.get("kind") == "heartbeat":
            return  # the loop counts it (a frame on the worker's own connection)
        fault, self.armed = (self.armed, None) if role == "worker" else (None, self.armed)
        if fault == "crash-before-handle":
            self.crash()
        if fault == "drop-message":
            self.drop(conn)
            return
        seq = body.get("seq") if isinstance(body, dict) else None
        try:
            reply = {"reply": seq, "ok": self.message(body, role, wid)}
        except GovernorError as e:
            reply = P.refusal(e, reply=seq)
        if fault == "crash-before-reply":
            self.crash()
        if fault == "drop-reply":
            self.drop(conn)
            return
        self._send(conn, reply)

    def message(self, msg: Any, role: str, wid: int) -> Any:
        """A worker message: on the worker's own connection it is authentic; injected, its MAC decides."""
        if not isinstance(msg, dict):
            raise InvalidArgument(f"a message is an object, got {type(msg).__name__}")
        claimed = msg.get("worker")
        known = type(claimed) is int and claimed in self.core.workers
        if role == "worker":
            authentic = known and claimed == wid
        else:
            authentic = known and P.sealed_ok(P.worker_key(self.master, claimed), msg)
        return self.core.handle(msg, authentic)

    # --- the operator's ops ---------------------------------------------------------------------

    def control(self, cmd: Any) -> Any:
        if not isinstance(cmd, dict) or not isinstance(cmd.get("args", []), list):
            raise InvalidArgument("a control op is {op, args: [...]}")
        op, args = cmd.get("op"), cmd.get("args", [])
        ops: dict[str, Callable[..., Any]] = {
            "spawn": self.spawn, "snapshot": self.snapshot, "events": self.events, "arbitrate": self.arbitrate,
            "reclaim": self.reclaim, "expire": self.expire, "outside": self.core.outside, "arm": self.arm,
            "inject": lambda msg: self.message(msg, "inject", 0), "shutdown": self.shutdown}
        fn = ops.get(op) if isinstance(op, str) else None
        if fn is None:
            raise InvalidArgument(f"unknown control op {str(op)[:40]!r}")
        try:
            return fn(*args)
        except TypeError as e:
            raise InvalidArgument(f"control op {op}: {e}") from None

    def spawn(self, held: object = False) -> int:
        """Start worker `wid`'s process; `held`: it authenticates only when the operator tells it to."""
        if type(held) is not bool:
            raise InvalidArgument(f"held must be a bool, got {held!r:.40}")
        wid = self.core.spawn()  # journaled before the process exists
        pid, start = self.procs.spawn(wid, held)
        self.core.started(wid, pid, start)
        self.procs.watch(wid, pid)
        return wid

    def events(self, since: object = 0) -> list[dict[str, Any]]:
        return self.core.events[P.counter(since, "since"):][:10_000]

    def arm(self, fault: object) -> None:
        """Arm `fault` for the next worker hello, worker message or arbitration round (None: disarm)."""
        if fault is not None and fault not in FAULTS:
            raise InvalidArgument(f"fault must be one of {FAULTS} or None, got {str(fault)[:40]!r}")
        self.armed = fault  # type: ignore[assignment]

    def arbitrate(self) -> list[int] | None:
        fault, self.armed = self.armed, None
        grants = self.core.arbitrate()
        if fault == "crash-before-reply":
            self.crash()
        for iid, wid, n in grants:
            conn = self.primary.get(wid)
            if conn is not None:
                if fault == "drop-reply":  # the round is journaled; its pushes are lost with the connection
                    self.drop(conn)
                else:
                    self._send(conn, {"push": "grant", "intent": iid, "nbytes": n})
        return [g[0] for g in grants]

    def reclaim(self, target: object, n: object) -> int:
        tid = self.core.reclaim(target, n)
        conn = self.primary.get(target) if type(target) is int else None
        if conn is not None:
            self._send(conn, {"push": "reclaim", "ticket": tid, "nbytes": n})
        return tid

    def expire(self, wid: object) -> None:
        """Worker `wid`'s heartbeat deadline passed: fence it, then terminate it (`terminate_on_fence`)."""
        w = self.core._worker(wid)
        self.core.fence(w["id"])  # its connection stays: what it still sends is of an old epoch, refused
        if self.terminate_on_fence:
            self.procs.kill(w["pid"], w["starttime"])

    def observed_exit(self, wid: int) -> None:
        """The process of worker `wid` is gone: return its quota (once) and forget its connection."""
        if wid not in self.core.workers:
            raise UnknownWorker(f"worker {wid} was never spawned")
        self.core.exit_observed(wid)
        conn = self.primary.pop(wid, None)
        if conn is not None:
            self.drop(conn)

    def shutdown(self) -> None:
        self.stopping = True
        for w in self.core.workers.values():
            if w["state"] != EXITED and w["pid"]:
                self.procs.kill(w["pid"], w["starttime"])

    def live(self) -> bool:
        return any(w["state"] != EXITED for w in self.core.workers.values())

    def snapshot(self) -> dict[str, Any]:
        snap = self.core.snapshot()
        for wid, w in snap["workers"].items():
            w["connected"] = wid in self.primary
            w["proc"] = "dead" if w["state"] == EXITED or not w["pid"] else self.procs.state(w["pid"], w["starttime"])
        return snap

