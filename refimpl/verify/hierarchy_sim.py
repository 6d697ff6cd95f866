"""The hierarchy's real code in one process, its network and processes simulated (FoundationDB style).

`SimAdapter(config, guards, seed)` runs the coordinator's own decisions
(`refimpl.hierarchy.service.Service` over the real `Core` and an sqlite
`Journal` in a temporary directory) and each worker's own rules
(`refimpl.hierarchy.worker_core.WorkerCore` over a real `ProcessMemoryManager`),
and carries every byte between them through the real protocol: the mutual
handshake (`refimpl.hierarchy.protocol`: hello, challenge, answer) and frames
sealed and opened with per-direction session keys. What is simulated is only
what the OS would do: sockets (in-memory queues), processes (a table of pids:
running, stopped, dead), the OS ceiling (the machine less outside programs
and the live workers' own charge), and crashes (the coordinator object is
dropped mid-step, as SIGKILL would, and a new one resumes from the journal;
the page cache survives, so the journal runs without fsyncs).

Every fault the campaign action names is injected exactly where it names it:
a message dropped before the coordinator reads it, a reply dropped after the
coordinator journaled it, a crash before the coordinator handles a message or
between its journal write and its reply (the coordinator's own armed fault
points, `Service.arm`), grant pushes lost with their connections. Because the
network is ours, a worker whose call went unanswered stays out of sync until
the campaign lets it say hello, while the others act: the window the issue's
double grant lived in. `hostile(rng)` throws garbage at the coordinator
between steps (bytes that are not a hello, a pickle, a wrong key, a frame
failing its tag, an authentic body that does not parse) and reports what it
threw; none of it may change anything.

`abstract()` is the refinement mapping to `spec.hierarchy.HierarchyState`, read
from the coordinator's ledger, each worker's own manager and the process table.
Same action vocabulary as `refimpl.verify.hierarchy_adapter.HierarchyAdapter`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import random
import shutil
import tempfile
from typing import Any

from invariants.hierarchy_machine import Crash, Lose, SpawnHeld
from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.core import EXITED, Core
from refimpl.hierarchy.journal import Journal
from refimpl.hierarchy.service import Service
from refimpl.hierarchy.worker_core import WorkerCore
from refimpl.verify.hierarchy_adapter import hierarchy_state, injected, open_ticket, take_outside
from spec import hierarchy as H
from spec.errors import AuthenticationFailed, InvalidArgument, InvalidTransition
from spec.guards import GuardSet

__all__ = ["SimAdapter", "SimCrash"]


class SimCrash(BaseException):
    """The simulated coordinator dies here (as SIGKILL would): unwinds it, never caught by its own code."""


class _Conn:
    """The coordinator's end of one simulated connection (what `Service` sends on)."""

    def __init__(self, session: P.Session) -> None:
        self.session, self.to_client, self.closed = session, [], False

    def send(self, body: Any) -> None:
        if self.closed:
            raise BrokenPipeError("the simulated peer is gone")
        self.to_client.append(self.session.seal(body))

    def close(self) -> None:
        self.closed = True


class _Worker:
    """A simulated worker process: its real core, its connection (server end + its own session), its state."""

    def __init__(self, core: WorkerCore, pid: int, key: bytes) -> None:
        self.core, self.pid, self.key = core, pid, key
        self.proc = "running"
        self.conn: _Conn | None = None
        self.session: P.Session | None = None


class _Ceiling:
    def __init__(self, sim: SimAdapter) -> None:
        self.sim = sim

    def free(self) -> int:
        return self.sim.os_free() * P.UNIT


class _Processes:
    """The OS's process table, as `Service` sees it."""

    def __init__(self, sim: SimAdapter) -> None:
        self.sim = sim

    def spawn(self, wid: int, held: bool) -> tuple[int, int]:
        return self.sim.fork(wid), 1

    def alive(self, pid: int, starttime: int) -> bool:
        return self.state(pid, starttime) != "dead"

    def watch(self, wid: int, pid: int) -> None:
        pass  # the simulation reports each exit itself, at once

    def kill(self, pid: int, starttime: int) -> None:
        w = self.sim.by_pid.get(pid)
        if w is not None:
            w.proc = "dead"

    def state(self, pid: int, starttime: int) -> str:
        w = self.sim.by_pid.get(pid)
        return "dead" if w is None else w.proc


class SimAdapter:
    def __init__(self, config: tuple[int, int, int], guards: GuardSet, seed: int = 0) -> None:
        self.q, self.machine, self.cap = config
        self.guards = guards
        self.rng = random.Random(seed)
        self.master = self.rng.randbytes(32)
        self.dir = tempfile.mkdtemp(prefix="h23sim-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.path = os.path.join(self.dir, "journal.sqlite")
        self.outside: dict[str, int] = {}
        self.workers: dict[int, _Worker] = {}
        self.by_pid: dict[int, _Worker] = {}
        self.next_pid = 1000
        self.procs = _Processes(self)
        #: Journal commits so far, and their count when the current call began: a crash after more of them fell
        #: between a journal write and its reply.
        self.commits = self.call_began = 0
        #: One entry per coordinator crash: "after-journal", "before-journal" or "between-steps".
        self.crash_log: list[str] = []
        self.dead: list[Journal] = []  # the journals of crashed coordinators, still open (see `restart`)
        self.svc = self._boot(Journal.create(self.path, P.journal_key(self.master), self.q, self.cap, durable=False))

    # --- the coordinator ------------------------------------------------------------------

    def _boot(self, journal: Journal) -> Service:
        commit = journal.commit

        def counted(*args: Any) -> None:
            commit(*args)
            self.commits += 1
        journal.commit = counted  # type: ignore[method-assign]
        svc = Service(journal, self.master, self.q, self.guards, self.procs, self._crash, Core,
                      terminate_on_fence=False)
        svc.reconcile()
        return svc

    @staticmethod
    def _crash() -> None:
        raise SimCrash()

    def _crashed(self, during_call: bool = True) -> None:
        """The coordinator died (SimCrash, or on its own between steps): log where, then restart it."""
        self.crash_log.append("between-steps" if not during_call else
                              "after-journal" if self.commits > self.call_began else "before-journal")
        self.restart()

    def _arm(self, fault: str) -> None:
        self.call_began = self.commits
        self.svc.arm(fault)

    def restart(self) -> None:
        """The coordinator dies (whatever it was doing) and a new one resumes from the journal."""
        # A killed process closes nothing: its connection stays open (sqlite would checkpoint and remove the WAL
        # on a close), as the WAL of a SIGKILLed coordinator stays on disk.
        self.dead.append(self.svc.core.journal)
        for w in self.workers.values():  # every connection is lost; each worker notices when it next looks
            if w.conn is not None:
                w.conn.closed = True
                w.conn = w.session = None
            w.core.disconnected()
        self.svc = self._boot(Journal.open(self.path, P.journal_key(self.master), durable=False))

    # --- processes and the OS ----------------------------------------------------------------

    def fork(self, wid: int) -> int:
        self.next_pid += 1
        w = _Worker(WorkerCore(wid, self.q, self.guards, _Ceiling(self)), self.next_pid,
                    P.worker_key(self.master, wid))
        self.workers[wid] = self.by_pid[self.next_pid] = w
        return self.next_pid

    def os_free(self) -> int:
        live = sum(len(w.core.leases) + len(w.core.provisional) for w in self.workers.values() if w.proc != "dead")
        return max(0, self.machine - sum(self.outside.values()) - live)

    def _deliver(self) -> None:
        """Frames waiting for live workers (a stopped one's wait in its socket: applied as if already read, which
        is what the spec's slice of a stopped worker counts)."""
        for w in self.workers.values():
            if w.conn is None or w.proc == "dead" or w.session is None:
                continue
            while w.conn.to_client:
                body = w.session.open(w.conn.to_client.pop(0))
                if isinstance(body, dict) and "push" in body:
                    w.core.push(body)

    # --- connections -------------------------------------------------------------------------

    def _handshake(self, role: str, wid: int, key: bytes) -> tuple[_Conn, P.Session]:
        hello = P.hello_bytes(role, wid, self.rng.randbytes(32))
        role, wid = P.parse_hello(hello)
        skey = self.svc.key_for(role, wid)
        nonce = self.rng.randbytes(32)
        got = P.check_challenge(key, hello, P.challenge(skey, hello, nonce)) if key == skey else nonce
        try:
            P.check_answer(skey, hello, nonce, P.answer(key, hello, got))
        except AuthenticationFailed as e:
            self.svc.refused_hello(e)
            raise
        return _Conn(P.session(skey, hello, nonce, server=True)), P.session(key, hello, nonce, server=False)

    def _hello(self, wid: int) -> None:
        """Worker `wid` dials, authenticates and resynchronises; refused, it keeps the connection it had."""
        w = self.workers[wid]
        conn, session = self._handshake("worker", wid, w.key)
        if not self.svc.opened(conn, "worker", wid, conn.session.open(session.seal(w.core.hello_view()))):
            P.raise_refusal(session.open(conn.to_client.pop(0)))
        reply = session.open(conn.to_client.pop(0))
        w.conn, w.session = conn, session  # the service dropped the previous connection (its epoch is over)
        w.core.hello_done(reply["ok"])

    def _call(self, wid: int, msg: dict[str, Any], fate: str) -> Any:
        """One call of worker `wid` over its connection, meeting `fate` (or a crash the service is armed for)."""
        w = self.workers[wid]
        assert w.conn is not None and w.session is not None
        conn, session = w.conn, w.session
        frame = session.seal(msg)
        answered = None
        if fate != H.MESSAGE_LOST:
            try:
                self.svc.frame(conn, conn.session.open(frame))
            except SimCrash:
                self._crashed()
                w.core.lost(msg)
                return None
            while conn.to_client and answered is None:
                body = session.open(conn.to_client.pop(0))
                if isinstance(body, dict) and "push" in body:
                    w.core.push(body)
                else:
                    answered = body
        if fate != H.DELIVERED or answered is None or conn.closed:  # dropped before or after the coordinator
            conn.closed = True
            self.svc.drop(conn)
            w.conn = w.session = None
            w.core.lost(msg)
            return None
        P.raise_refusal(answered)
        return w.core.done(msg, answered.get("ok"))

    # --- actions ------------------------------------------------------------------------------

    def execute(self, act: Any) -> Any:
        try:
            return self._execute(act)
        finally:
            self._deliver()

    def _running(self, wid: int) -> _Worker:
        w = self.workers.get(wid) if type(wid) is int else None
        if w is None:
            raise P.REFUSALS["UnknownWorker"](f"worker {wid!r} was never spawned")
        if w.proc != "running":
            raise InvalidTransition(f"worker {wid} is {w.proc}: it cannot act")
        return w

    def _own(self, act: Any) -> bool:
        w, c = self.workers.get(act.worker), self.svc.core.workers.get(act.worker)
        return (w is not None and c is not None and act.authentic is True and c["state"] != "spawned"
                and w.proc == "running" and w.core.synced and act.epoch == w.core.epoch and act.seq == c["seq"] + 1)

    def _execute(self, act: Any) -> Any:
        svc = self.svc
        if isinstance(act, (H.Spawn, SpawnHeld)):
            wid = svc.spawn(isinstance(act, SpawnHeld))
            if isinstance(act, H.Spawn):
                self._hello(wid)
            return wid
        if isinstance(act, H.Hello):
            self._running(act.worker)
            if act.authentic is not True:
                self._handshake("worker", act.worker, b"forged-" + bytes(8))
            self._hello(act.worker)
            return None
        if isinstance(act, (H.Request, H.Return)):
            if self._own(act):
                core = self.workers[act.worker].core
                msg = core.request(act.nbytes, act.priority) if isinstance(act, H.Request) else core.give_back(act.nbytes)
                got = self._call(act.worker, msg, H.DELIVERED)
                return tuple(got) if isinstance(got, list) else got
            got = svc.control({"op": "inject", "args": [injected(self.master, act)]})
            return tuple(got) if isinstance(got, list) else got
        if isinstance(act, (Lose, Crash)):
            return self._fault(act)
        if isinstance(act, H.Reserve):
            return self._running(act.worker).core.reserve(act.nbytes)
        if isinstance(act, H.Commit):
            return self._running(act.worker).core.commit()
        if isinstance(act, H.Free):
            msg = self._running(act.worker).core.free(act.nbytes)
            if msg is not None:
                self._call(act.worker, msg, act.fate)
            return None
        if isinstance(act, (H.Stop, H.Cont)):
            w = self.workers.get(act.worker)
            want = "running" if isinstance(act, H.Stop) else "stopped"
            if w is None or w.proc != want:
                raise InvalidTransition(f"worker {act.worker} is {w.proc if w else 'unknown'}")
            w.proc = "stopped" if isinstance(act, H.Stop) else "running"
            return None
        if isinstance(act, H.Kill):
            w = self.workers.get(act.worker)
            if w is None or w.proc == "dead":
                raise InvalidTransition(f"worker {act.worker} is already dead")
            w.proc = "dead"
            if w.conn is not None:
                w.conn.closed = True
                w.conn = w.session = None
            svc.observed_exit(act.worker)
            return None
        if isinstance(act, H.MissHeartbeat):
            return svc.expire(act.worker)
        if isinstance(act, H.Restart):
            self._crashed(during_call=False)
            return None
        if isinstance(act, H.Outside):
            take_outside(self.outside, self.machine, act)
            return svc.core.outside(act.delta)
        if isinstance(act, H.Reclaim):
            return svc.reclaim(act.target, act.nbytes)
        if isinstance(act, H.Answer):
            wid = open_ticket(svc.core.tickets, act, self._running)["target"]
            return self._call(wid, self.workers[wid].core.answer(act.ticket, act.nbytes), act.fate)
        if isinstance(act, H.Arbitrate):
            return tuple(svc.arbitrate() or ())
        raise InvalidArgument(f"not a hierarchy action: {act!r}")

    def _fault(self, act: Lose | Crash) -> None:
        inner = act.act
        if isinstance(inner, H.Hello):
            self._running(inner.worker)
            if not isinstance(act, Crash) or inner.authentic is not True or \
                    self.svc.core.workers[inner.worker]["state"] != "active":
                raise InvalidArgument(f"{act!r:.80}: the campaign crashes only a live worker's own reconnect")
            self._arm("crash-before-reply" if act.fate == H.REPLY_LOST else "crash-before-handle")
            try:
                self._hello(inner.worker)
            except SimCrash:
                pass
            self._crashed()
            return None
        if isinstance(inner, (H.Request, H.Return)) and not self._own(inner):
            raise InvalidArgument(f"{inner!r}: only a worker's own call can lose its reply")
        fault = {(Lose, H.REPLY_LOST): "drop-reply", (Lose, H.MESSAGE_LOST): "drop-message",
                 (Crash, H.REPLY_LOST): "crash-before-reply", (Crash, H.MESSAGE_LOST): "crash-before-handle"}
        if isinstance(inner, H.Arbitrate):
            self._arm(fault[(type(act), act.fate)])
            try:
                self.svc.arbitrate()
            except SimCrash:
                pass
            if isinstance(act, Crash):
                self._crashed()
            for w in self.workers.values():  # a push lost with its connection: that worker is out of sync
                if w.conn is not None and w.conn.closed:
                    w.conn = w.session = None
                    w.core.disconnected()
            return None
        wid = (open_ticket(self.svc.core.tickets, inner, self._running)["target"] if isinstance(inner, H.Answer)
               else inner.worker)
        core = self._running(wid).core
        msg = (core.request(inner.nbytes, inner.priority) if isinstance(inner, H.Request)
               else core.give_back(inner.nbytes) if isinstance(inner, H.Return)
               else core.answer(inner.ticket, inner.nbytes) if isinstance(inner, H.Answer)
               else core.free(inner.nbytes) if isinstance(inner, H.Free) else None)
        if msg is None and not isinstance(inner, H.Free):
            raise InvalidArgument(f"{inner!r} carries no message that can be lost")
        if msg is not None:
            if isinstance(act, Crash):
                self._arm("crash-before-reply" if act.fate == H.REPLY_LOST else "crash-before-handle")
                self._call(wid, msg, H.DELIVERED)  # the crash takes the reply (or the message) with it
                self.svc.arm(None)
                return None
            self._call(wid, msg, act.fate)
        if isinstance(act, Crash):  # nothing was sent: the coordinator crashes on its own
            self._crashed(during_call=False)
        return None

    # --- what the environment throws at the coordinator between steps ---------------------------

    def hostile(self, rng: random.Random) -> str:
        """One piece of garbage at the coordinator; returns what it was. It must change nothing."""
        kind = rng.choice(["not-a-hello", "pickle", "wrong-key", "bad-tag", "bad-body", "unknown-role"])
        if kind in ("not-a-hello", "pickle", "unknown-role"):
            data = (pickle.dumps(object) if kind == "pickle" else rng.randbytes(rng.randint(0, 80))
                    if kind == "not-a-hello" else P.hello_bytes("control", 0, rng.randbytes(32))[:14] + b"\x09" +
                    rng.randbytes(36))
            try:
                P.parse_hello(data)
            except InvalidArgument:
                return kind
            raise AssertionError(f"{kind}: garbage parsed as a hello")
        if kind == "wrong-key":
            try:
                self._handshake("control", 0, rng.randbytes(32))
            except AuthenticationFailed:
                return kind
            raise AssertionError("a wrong key passed the challenge")
        conn, session = self._handshake("control", 0, P.control_key(self.master))
        self.svc.opened(conn, "control", 0)
        if kind == "bad-tag":
            frame = session.seal({"op": "snapshot", "args": []})
            frame = frame[:5] + bytes([frame[5] ^ 1]) + frame[6:]
        else:
            data = rng.choice([b"\x80\x04K\x01.", b"{", b'{"op": NaN}', b"[" * 5000, b"1" * 100])
            frame = session_tag(session, data)
        try:
            body = conn.session.open(frame)
        except AuthenticationFailed:
            assert kind == "bad-tag"
        except InvalidArgument as e:
            assert kind == "bad-body"
            self.svc.malformed(conn, e)
        else:
            raise AssertionError(f"{kind}: accepted as {body!r:.80}")
        self.svc.drop(conn)
        return kind

    # --- the refinement mapping ------------------------------------------------------------

    def abstract(self) -> H.HierarchyState:
        c = self.svc.core
        workers = {}
        for wid, x in c.workers.items():
            w = self.workers.get(wid)
            proc = "dead" if x["state"] == EXITED or w is None else w.proc
            dead = proc == "dead"
            f = w.core.figures() if w is not None and not dead else {"committed": 0, "reserved": 0}
            slice_ = 0 if x["state"] == EXITED or w is None else w.core.slice
            workers[wid] = H.Worker(H.WorkerState(x["state"]), H.ProcState(proc), x["epoch"],
                                    w.core.epoch if w is not None else 0, x["seq"], x["quota"], slice_,
                                    f["committed"], f["reserved"], x["returned"],
                                    bool(w is not None and w.core.synced))
        return hierarchy_state(lambda name: getattr(c, name), self.machine, workers, self.outside)

    def close(self) -> None:
        try:
            for j in (*self.dead, self.svc.core.journal):
                j.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def session_tag(session: P.Session, data: bytes) -> bytes:
    """A frame carrying `data` as its body with a valid tag: what an authenticated but hostile peer sends."""
    tag = hmac.new(session.out_key, session.sent.to_bytes(8, "big") + data, hashlib.sha256).digest()
    session.sent += 1
    return tag + data

