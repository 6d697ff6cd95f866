"""The real hierarchy as a checked-machine adapter: campaign actions in, the refinement mapping out.

`HierarchyAdapter(config, guards)` starts a real coordinator (its guards
switched through the `GuardSet`) and plays the environment: it spawns, stops,
continues and kills worker processes, restarts the coordinator, injects
forged / replayed / stale messages and messages in the name of dead or
never-spawned identities on an inject path (the network), arms the
coordinator's faults (a dropped message or reply, a crash before or after
its journal write) around a worker's own call, and emulates the OS for the
workers' ceiling (`FileCeiling`: machine - outside programs - the live
workers' own charge, their figures read from their managers). A worker's own
calls are sent by the worker process itself.

`abstract()` is the refinement mapping to `spec.hierarchy.HierarchyState`:
the coordinator's journaled ledger, each worker's own figures (read from its
`ProcessMemoryManager`), process states from /proc. A stopped worker cannot
be asked; its last figures stand, plus the grants pushed to it while stopped
(they wait in its socket and are applied when it continues), and it is out
of sync from the moment a restart or a lost push dropped its connection. The
campaign's workers redial only when the campaign says `Hello` (`manual_redial`).

Environment facts the adapter checks itself (it is the environment): a dead
process cannot be stopped or killed again, a stopped one cannot act, an
outside program cannot free more than it uses. Governor refusals come from
the coordinator and workers, as typed errors.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from typing import Any

import immutables

from invariants.hierarchy_machine import Crash, Lose, SpawnHeld
from invariants.hierarchy_trace import configure_event, encode_event
from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.coordinator import proc_state
from refimpl.hierarchy.core import Core
from refimpl.hierarchy.driver import Hierarchy
from spec import hierarchy as H
from spec.errors import (GovernorError, InvalidArgument, InvalidBytes, InvalidTransition, NotAParticipant,
                         UnknownTicket)
from spec.guards import GuardSet

__all__ = ["HierarchyAdapter", "FAULT_OF", "take_outside", "open_ticket", "injected", "hierarchy_state"]

_PROC = {"running": H.ProcState.RUNNING, "stopped": H.ProcState.STOPPED, "dead": H.ProcState.DEAD}

#: The coordinator fault that produces each campaign fault.
FAULT_OF = {(Lose, H.REPLY_LOST): "drop-reply", (Lose, H.MESSAGE_LOST): "drop-message",
            (Crash, H.REPLY_LOST): "crash-before-reply", (Crash, H.MESSAGE_LOST): "crash-before-handle"}


# --- shared with the in-process sim (`refimpl.verify.hierarchy_sim`) ----------------------------------------

def take_outside(outside: dict[str, int], machine: int, act: H.Outside) -> None:
    """Program `act.name` outside the hierarchy uses `act.delta` more units (never below 0, never past the machine)."""
    if type(act.name) is not str or not act.name or type(act.delta) is not int or act.delta == 0:
        raise InvalidArgument(f"{act!r}: a non-empty name and a non-zero int delta")
    used = outside.get(act.name, 0) + act.delta
    if used < 0 or sum(outside.values()) + act.delta > machine:
        raise InvalidBytes(f"outside program {act.name!r} cannot use {used} units")
    outside[act.name] = used


def open_ticket(tickets: Any, act: H.Answer, running: Callable[[int], Any]) -> dict[str, Any]:
    """The open reclaim ticket `act` answers, whose target worker must be `running`."""
    t = tickets.get(act.ticket) if type(act.ticket) is int else None
    if t is None:
        raise UnknownTicket(f"reclaim ticket {act.ticket!r} is not open")
    if isinstance(t["target"], str):
        raise NotAParticipant(f"{t['target']!r} is outside the hierarchy: it never answers")
    running(t["target"])
    return t


def injected(master: bytes, act: H.Request | H.Return) -> dict[str, Any]:
    """`act` as the network carries it: sealed with its worker's key, or with a forged one."""
    key = P.worker_key(master, act.worker) if act.authentic else b"forged"
    fields: dict[str, Any] = {"nbytes": act.nbytes}
    if isinstance(act, H.Request):
        fields.update(priority=act.priority, keep=0)
    return P.seal(key, kind="request" if isinstance(act, H.Request) else "return", worker=act.worker,
                  epoch=act.epoch, seq=act.seq, **fields)


def hierarchy_state(fig: Callable[[str], Any], machine: int, workers: dict[int, H.Worker],
                    outside: dict[str, int]) -> H.HierarchyState:
    """The abstract state from the coordinator's figures (`fig(name)`) and the workers mapped by the adapter."""
    intents = {k: H.Intent(i["worker"], i["nbytes"], i["priority"], i["seq"], i["age"])
               for k, i in fig("intents").items()}
    tickets = {k: H.Ticket(t["target"], t["nbytes"]) for k, t in fig("tickets").items()}
    return H.HierarchyState(fig("serving_quota"), machine, fig("aging_cap"), fig("free"), immutables.Map(workers),
                            immutables.Map(intents), immutables.Map(tickets), immutables.Map(outside),
                            *map(fig, ("next_worker", "next_intent", "next_ticket", "incarnation")))


class HierarchyAdapter:
    def __init__(self, config: tuple[int, int, int], guards: GuardSet,
                 trace: Callable[[dict[str, Any]], None] | None = None, core: type = Core,
                 mutants: tuple[str, ...] = ()) -> None:
        """`trace`: a sink for one `invariants.hierarchy_trace` event per action (JSONL-ready dicts);
        `mutants`: names of worker-side mutants the workers' zygote applies (mutation controls)."""
        self.q, self.machine, cap = config
        self.trace, self.trace_seq = trace, 1
        if trace is not None:
            trace(configure_event("coordinator", config))
        self.dir = tempfile.mkdtemp(prefix="h12c-")
        self.ceiling_path = os.path.join(self.dir, "ceiling")
        self.outside: dict[str, int] = {}
        self.cache: dict[int, dict[str, Any]] = {}
        self.pending: dict[int, int] = {}  # grants pushed to a stopped worker, not yet applied
        self._write_ceiling()
        self.h = Hierarchy(self.dir, self.q, guards=guards.off, aging_cap=cap, ceiling=("file", self.ceiling_path),
                           terminate_on_fence=False, core=core, mutants=mutants, manual_redial=True)
        self.h.start()

    # --- the emulated OS ---------------------------------------------------------------

    def _write_ceiling(self) -> None:
        live = sum(w["committed"] + w["reserved"] for w in self.cache.values() if not w.get("dead"))
        free = max(0, self.machine - sum(self.outside.values()) - live)
        tmp = self.ceiling_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(free * P.UNIT))
        os.replace(tmp, self.ceiling_path)

    # --- actions -----------------------------------------------------------------------

    def _coord(self) -> dict[str, Any]:
        return self.h.snapshot()

    def _proc(self, wid: int) -> str:
        w = self._coord()["workers"].get(wid)
        if w is None:
            raise P.REFUSALS["UnknownWorker"](f"worker {wid!r} was never spawned")
        return "dead" if w["state"] == "exited" else proc_state(w["pid"])

    def _refresh(self, wid: int) -> None:
        if self._proc(wid) == "running":
            self.cache[wid] = self.h.wop(wid, "snapshot")
            self.pending.pop(wid, None)

    def _unsync_all(self) -> None:
        """Every connection was lost (a coordinator restart): workers that cannot say hello now stay out of sync."""
        for w in self.cache.values():
            w["synced"] = False

    def execute(self, act: Any) -> Any:
        # The workers' figures are those `abstract()` read after the previous step (nothing moves between steps:
        # every push is the result of an action), so the emulated OS starts from them.
        snap = self._coord()
        self._write_ceiling()
        err: GovernorError | None = None
        result: Any = None
        try:
            result = self._execute(act, snap)
            return result
        except GovernorError as e:
            err = e
            raise
        finally:
            self._write_ceiling()
            if self.trace is not None:
                self._emit(act, err, result)

    def _emit(self, act: Any, err: GovernorError | None, result: Any) -> None:
        s = self._coord()  # the governor's own figures, never the spec's
        seen = {"free": s["free"], "quota": {str(w): x["quota"] for w, x in s["workers"].items()},
                "epoch": {str(w): x["epoch"] for w, x in s["workers"].items()},
                "state": {str(w): x["state"] for w, x in s["workers"].items()}}
        self.trace_seq += 1
        self.trace(encode_event("coordinator", self.trace_seq, act, err, result, seen))  # type: ignore[misc]

    def _execute(self, act: Any, snap: dict[str, Any]) -> Any:
        h = self.h
        if isinstance(act, H.Spawn):
            wid = h.spawn()
            self._refresh(wid)
            return wid
        if isinstance(act, SpawnHeld):
            wid = h.spawn(held=True)
            self._refresh(wid)
            return wid
        if isinstance(act, H.Hello):
            return self._hello(act, snap)
        if isinstance(act, (H.Request, H.Return)):
            return self._message(act, snap)
        if isinstance(act, (Lose, Crash)):
            return self._fault(act, snap)
        if isinstance(act, (H.Reserve, H.Commit, H.Free)):
            self._running(act.worker)
            op = {H.Reserve: "reserve", H.Commit: "commit", H.Free: "free"}[type(act)]
            args = () if isinstance(act, H.Commit) else (act.nbytes,)
            return h.wop(act.worker, op, *args)
        if isinstance(act, (H.Stop, H.Cont)):
            want = "running" if isinstance(act, H.Stop) else "stopped"
            if self._proc(act.worker) != want:
                raise InvalidTransition(f"worker {act.worker} is {self._proc(act.worker)}")
            h.signal(act.worker, signal.SIGSTOP if isinstance(act, H.Stop) else signal.SIGCONT)
            return None
        if isinstance(act, H.Kill):
            if self._proc(act.worker) == "dead":
                raise InvalidTransition(f"worker {act.worker} is already dead")
            h.kill(act.worker)
            self.cache[act.worker] = {**self.cache.get(act.worker, {}), "dead": True}
            return None
        if isinstance(act, H.MissHeartbeat):
            return h.op("expire", act.worker)  # the coordinator fences (or refuses); the kill is ours, later
        if isinstance(act, H.Restart):
            self._unsync_all()
            h.restart(reconnects=False)  # every worker is out of sync until the campaign lets it say hello
            return None
        if isinstance(act, H.Outside):
            take_outside(self.outside, self.machine, act)
            self._write_ceiling()
            return h.op("outside", act.delta)
        if isinstance(act, H.Reclaim):
            return h.op("reclaim", act.target, act.nbytes)
        if isinstance(act, H.Answer):
            t = open_ticket(snap["tickets"], act, self._running)
            return h.wop(t["target"], "answer", act.ticket, act.nbytes)
        if isinstance(act, H.Arbitrate):
            granted = tuple(h.op("arbitrate"))
            for iid in granted:
                i = snap["intents"][iid]
                if self._proc(i["worker"]) == "stopped" and self.cache.get(i["worker"], {}).get("synced", True):
                    self.pending[i["worker"]] = self.pending.get(i["worker"], 0) + i["nbytes"]
            return granted
        raise InvalidArgument(f"not a hierarchy action: {act!r}")

    def _hello(self, act: H.Hello, snap: dict[str, Any]) -> None:
        self._running(act.worker)  # the environment: only a running process says hello
        w = snap["workers"][act.worker]
        if act.authentic is not True:  # a real connection claiming to be the worker, with a key not its own
            self.h.forged_hello(act.worker, b"forged-" + bytes(8))
            return None
        if w["state"] == "spawned":
            self.h.hello(act.worker)
        else:
            self.h.wop(act.worker, "reconnect")  # a reconnect: a new epoch, resynchronised (refused once fenced)
        self._refresh(act.worker)
        return None

    def _running(self, wid: int) -> None:
        state = self._proc(wid)
        if state != "running":
            raise InvalidTransition(f"worker {wid} is {state}: it cannot act")

    def _own(self, act: Any, snap: dict[str, Any]) -> bool:
        """The spec's `own_call`, read from the real figures: the worker process sends this message itself."""
        w, mine = snap["workers"].get(act.worker), self.cache.get(act.worker, {})
        return (w is not None and act.authentic is True and w["state"] != "spawned" and act.seq == w["seq"] + 1
                and act.epoch == mine.get("known_epoch") and mine.get("synced") and not mine.get("dead")
                and self._proc(act.worker) == "running")

    def _message(self, act: Any, snap: dict[str, Any]) -> Any:
        if self._own(act, snap):  # the worker process sends it itself
            if isinstance(act, H.Request):
                got = self.h.wop(act.worker, "request", act.nbytes, act.priority)
                return tuple(got) if isinstance(got, list) else got
            return self.h.wop(act.worker, "return", act.nbytes)
        result = self.h.op("inject", injected(self.h.cfg.master, act))
        return tuple(result) if isinstance(result, list) else result

    def _fault(self, act: Lose | Crash, snap: dict[str, Any]) -> None:
        """A worker's own call (or an arbitration round) meeting a dropped connection or a coordinator crash."""
        inner, h = act.act, self.h
        if isinstance(inner, H.Hello):
            return self._hello_fault(act, snap)
        if isinstance(inner, (H.Request, H.Return)) and not self._own(inner, snap):
            raise InvalidArgument(f"{inner!r}: only a worker's own call can lose its reply")
        if isinstance(inner, H.Answer):
            open_ticket(snap["tickets"], inner, self._running)
        elif isinstance(inner, (H.Request, H.Return, H.Free)):
            self._running(inner.worker)
        h.op("arm", FAULT_OF[(type(act), act.fate)])
        try:
            if isinstance(inner, H.Arbitrate):
                try:
                    granted = h.op("arbitrate")
                except (OSError, EOFError):
                    granted = None  # it crashed before its answer
                if granted:
                    for iid in granted:  # the grant pushes were lost with the connections: out of sync
                        wid = snap["intents"][iid]["worker"]
                        self.cache.setdefault(wid, {})["synced"] = False
            elif isinstance(inner, H.Request):
                h.wop(inner.worker, "request", inner.nbytes, inner.priority)
            elif isinstance(inner, H.Return):
                h.wop(inner.worker, "return", inner.nbytes)
            elif isinstance(inner, H.Free):
                h.wop(inner.worker, "free", inner.nbytes)
            elif isinstance(inner, H.Answer):
                h.wop(snap["tickets"][inner.ticket]["target"], "answer", inner.ticket, inner.nbytes)
            else:
                raise InvalidArgument(f"{inner!r} carries no message that can be lost")
        except GovernorError:  # refused before anything was sent: the fault never fired
            h.op("arm", None)
            raise
        if isinstance(act, Crash):
            self._unsync_all()
            if h.ctl is not None and h.proc is not None and proc_state(h.proc.pid) != "dead":
                try:
                    h.op("arm", None)  # the call sent nothing that could crash it: the crash is ours
                except (OSError, EOFError):
                    pass
            h.restart(reconnects=False)
        else:
            h.op("arm", None)
        return None

    def _hello_fault(self, act: Lose | Crash, snap: dict[str, Any]) -> None:
        """A live worker's reconnect meeting a coordinator crash before or after it journaled the hello."""
        inner, h = act.act, self.h
        self._running(inner.worker)
        if not isinstance(act, Crash) or inner.authentic is not True or snap["workers"][inner.worker]["state"] != "active":
            raise InvalidArgument(f"{act!r:.80}: the campaign crashes only a live worker's own reconnect")
        h.op("arm", FAULT_OF[(Crash, act.fate)])
        h.wop(inner.worker, "reconnect", True)  # one attempt: the coordinator dies in the middle of it
        self._unsync_all()
        h.restart(reconnects=False)
        return None

    # --- the refinement mapping ------------------------------------------------------------

    def abstract(self) -> H.HierarchyState:
        s = self._coord()
        workers = {}
        for wid, w in s["workers"].items():
            proc = _PROC["dead" if w["state"] == "exited" else proc_state(w["pid"])]
            if proc is H.ProcState.RUNNING:
                self._refresh(wid)
            mine = self.cache.get(wid, {})
            exited = w["state"] == "exited" or mine.get("dead")
            slice_ = 0 if w["state"] == "exited" else mine.get("slice", 0) + self.pending.get(wid, 0)
            synced = bool(mine.get("synced", False))
            workers[wid] = H.Worker(H.WorkerState(w["state"]), proc, w["epoch"], mine.get("known_epoch", 0), w["seq"],
                                    w["quota"], slice_, 0 if exited else mine.get("committed", 0),
                                    0 if exited else mine.get("reserved", 0), w["returned"], synced)
        return hierarchy_state(s.__getitem__, self.machine, workers, self.outside)

    def close(self) -> None:
        try:
            self.h.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

