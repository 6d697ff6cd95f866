"""The real hierarchy as a checked-machine adapter: spec actions in, the refinement mapping out.

`HierarchyAdapter(config, guards)` starts a real coordinator (its guards
switched through the `GuardSet`) and plays the environment: it spawns, stops,
continues and kills worker processes, restarts the coordinator, injects
forged / replayed / stale messages on an inject path (the network), and
emulates the OS for the workers' ceiling (`FileCeiling`: machine - outside
programs - the live workers' own charge, their figures read from their
managers). Genuine messages are sent by the worker processes themselves.

`abstract()` is the refinement mapping to `spec.hierarchy.HierarchyState`:
the coordinator's journaled ledger, each worker's own figures (read from
its `ProcessMemoryManager`), process states from /proc. A stopped worker
cannot be asked; its last figures stand, plus the grants pushed to it while
stopped (they wait in its socket and are applied when it continues).

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

from multiprocessing import AuthenticationError

from invariants.hierarchy_machine import SpawnHeld
from invariants.hierarchy_trace import configure_event, encode_event
from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.coordinator import proc_state
from refimpl.hierarchy.core import Core
from refimpl.hierarchy.driver import Hierarchy
from spec import hierarchy as H
from spec.errors import (AuthenticationFailed, GovernorError, InvalidArgument, InvalidBytes, InvalidTransition,
                         NotAParticipant, UnknownTicket)
from spec.guards import GuardSet

__all__ = ["HierarchyAdapter"]

_PROC = {"running": H.ProcState.RUNNING, "stopped": H.ProcState.STOPPED, "dead": H.ProcState.DEAD}


class HierarchyAdapter:
    def __init__(self, config: tuple[int, int, int], guards: GuardSet,
                 trace: Callable[[dict[str, Any]], None] | None = None, core: type = Core) -> None:
        """`trace`: a sink for one `invariants.hierarchy_trace` event per action (JSONL-ready dicts)."""
        self.q, self.machine, cap = config
        self.trace, self.trace_seq = trace, 1
        if trace is not None:
            trace(configure_event("coordinator", config))
        self.dir = tempfile.mkdtemp(prefix="h12c-")
        self.ceiling_path = os.path.join(self.dir, "ceiling")
        self.outside: dict[str, int] = {}
        self.cache: dict[int, dict[str, Any]] = {}
        self.pending: dict[int, int] = {}  # grants pushed to a stopped worker, not yet applied
        self._write_ceiling({})
        self.h = Hierarchy(self.dir, self.q, guards=guards.off, aging_cap=cap, ceiling=("file", self.ceiling_path),
                           terminate_on_fence=False, core=core)
        self.h.start()

    # --- the emulated OS ---------------------------------------------------------------

    def _write_ceiling(self, snap: dict[int, Any]) -> None:
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

    def execute(self, act: Any) -> Any:
        snap = self._coord()
        for wid, w in snap["workers"].items():
            if w["state"] != "exited":
                self._refresh(wid)
        self._write_ceiling(snap)
        err: GovernorError | None = None
        result: Any = None
        try:
            result = self._execute(act, snap)
            return result
        except GovernorError as e:
            err = e
            raise
        finally:
            self._write_ceiling(snap)
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
            self._running(act.worker)  # the environment: only a running process says hello
            if act.authentic is True:
                w = snap["workers"][act.worker]
                if w["state"] != "spawned":
                    raise InvalidTransition(f"worker {act.worker} is {w['state']}: it authenticated already")
                h.hello(act.worker)
                self._refresh(act.worker)
                return None
            try:  # a real connection claiming to be the worker, with a key that is not its own
                h.forged_hello(act.worker, b"forged-" + bytes(8))
            except AuthenticationError as e:
                raise AuthenticationFailed(f"worker {act.worker}: challenge failed ({e})") from None
            return None
        if isinstance(act, (H.Request, H.Return)):
            return self._message(act, snap)
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
            h.restart()
            return None
        if isinstance(act, H.Outside):
            if type(act.name) is not str or not act.name or type(act.delta) is not int or act.delta == 0:
                raise InvalidArgument(f"{act!r}: a non-empty name and a non-zero int delta")
            used = self.outside.get(act.name, 0) + act.delta
            if used < 0 or sum(self.outside.values()) + act.delta > self.machine:
                raise InvalidBytes(f"outside program {act.name!r} cannot use {used} units")
            self.outside[act.name] = used
            self._write_ceiling(snap)
            return h.op("outside", act.delta)
        if isinstance(act, H.Reclaim):
            return h.op("reclaim", act.target, act.nbytes)
        if isinstance(act, H.Answer):
            t = snap["tickets"].get(act.ticket) if type(act.ticket) is int else None
            if t is None:
                raise UnknownTicket(f"reclaim ticket {act.ticket!r} is not open")
            if isinstance(t["target"], str):
                raise NotAParticipant(f"{t['target']!r} is outside the hierarchy: it never answers")
            self._running(t["target"])
            return h.wop(t["target"], "answer", act.ticket, act.nbytes)
        if isinstance(act, H.Arbitrate):
            granted = tuple(h.op("arbitrate"))
            for iid in granted:
                i = snap["intents"][iid]
                if self._proc(i["worker"]) == "stopped":
                    self.pending[i["worker"]] = self.pending.get(i["worker"], 0) + i["nbytes"]
            return granted
        raise InvalidArgument(f"not a hierarchy action: {act!r}")

    def _running(self, wid: int) -> None:
        state = self._proc(wid)
        if state != "running":
            raise InvalidTransition(f"worker {wid} is {state}: it cannot act")

    def _message(self, act: Any, snap: dict[str, Any]) -> Any:
        w = snap["workers"].get(act.worker)
        mine = self.cache.get(act.worker, {})
        genuine = (w is not None and act.authentic and act.seq == w["seq"] + 1 and not mine.get("dead")
                   and act.epoch == mine.get("known_epoch") and self._proc(act.worker) == "running")
        if genuine:  # the worker process sends it itself
            if isinstance(act, H.Request):
                return tuple(self.h.wop(act.worker, "request", act.nbytes, act.priority))
            return self.h.wop(act.worker, "return", act.nbytes)
        key = P.worker_key(self.h.cfg.master, act.worker) if act.authentic else b"forged"
        fields: dict[str, Any] = {"nbytes": act.nbytes}
        if isinstance(act, H.Request):
            fields.update(priority=act.priority, keep=0)
        msg = P.seal(key, kind="request" if isinstance(act, H.Request) else "return", worker=act.worker,
                     epoch=act.epoch, seq=act.seq, **fields)
        result = self.h.op("inject", msg)
        return tuple(result) if isinstance(result, list) else result

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
            workers[wid] = H.Worker(H.WorkerState(w["state"]), proc, w["epoch"], mine.get("known_epoch", 0), w["seq"],
                                    w["quota"], slice_, 0 if exited else mine.get("committed", 0),
                                    0 if exited else mine.get("reserved", 0), w["returned"])
        intents = {k: H.Intent(i["worker"], i["nbytes"], i["priority"], i["seq"], i["age"])
                   for k, i in s["intents"].items()}
        tickets = {k: H.Ticket(t["target"], t["nbytes"]) for k, t in s["tickets"].items()}
        return H.HierarchyState(s["serving_quota"], self.machine, s["aging_cap"], s["free"],
                                immutables.Map(workers), immutables.Map(intents), immutables.Map(tickets),
                                immutables.Map(self.outside), s["next_worker"], s["next_intent"],
                                s["next_ticket"], s["incarnation"])

    def close(self) -> None:
        try:
            self.h.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
