"""The coordinator's ledger and rules (C10, I11): refimpl's own, journaled, no sockets, no processes.

Owns the serving quota's ledger (`free` + one `quota` per worker), each
worker's lifecycle (spawned -> active -> fenced -> exited), epochs (one per
connection: a reconnect starts a new one; fencing and exit end the last), the
last accepted sequence number, deferred intents with their own arbitration
order, and reclaim tickets. Every accepted step is committed to the journal
before it is answered, so a restarted coordinator resumes exactly here; a
journal write that fails is fatal (the caller stops without answering:
nothing unjournaled is ever told).

Every figure a peer sends is checked against its bound before anything
changes (`refimpl.hierarchy.protocol`), so a refusal is typed and changes
nothing. The guards are the same names as `spec.guards` and are switched off
only through the `GuardSet` value (negative controls). Must not touch:
sockets, processes, the clock (`refimpl.hierarchy.service` does).
"""

from __future__ import annotations

from typing import Any

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.journal import Journal
from spec.errors import (
    AuthenticationFailed,
    CapacityDenied,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    NotAParticipant,
    ReplayedMessage,
    StaleEpoch,
    UnknownTicket,
    UnknownWorker,
    WorkerNotLive,
)
from spec.guards import ALL_ON, GuardSet
from spec.hierarchy_actions import MAX_QUOTA

__all__ = ["Core", "SPAWNED", "ACTIVE", "FENCED", "EXITED"]

SPAWNED, ACTIVE, FENCED, EXITED = "spawned", "active", "fenced", "exited"


class Core:
    def __init__(self, journal: Journal, guards: GuardSet = ALL_ON) -> None:
        """Resume from `journal` (already opened and audited: `Journal.open` / `Journal.create`)."""
        self.guards, self.journal = guards, journal
        self.events: list[dict[str, Any]] = []
        saved = journal.load()
        for k in ("serving_quota", "aging_cap", "free", "next_worker", "next_intent", "next_ticket"):
            setattr(self, k, saved[k])
        self.incarnation = saved["incarnation"] + 1
        self.workers: dict[int, dict[str, Any]] = saved["workers"]
        self.intents: dict[int, dict[str, Any]] = saved["intents"]
        self.tickets: dict[int, dict[str, Any]] = saved["tickets"]
        self._commit()

    # --- journal ------------------------------------------------------------------

    def _commit(self) -> None:
        meta = {k: getattr(self, k) for k in ("serving_quota", "aging_cap", "free", "next_worker", "next_intent",
                                               "next_ticket", "incarnation")}
        self.journal.commit(meta, list(self.workers.values()), list(self.intents.values()),
                            [(t, x["target"], x["nbytes"]) for t, x in self.tickets.items()])

    def _event(self, kind: str, **fields: Any) -> None:
        self.events.append({"event": kind, "incarnation": self.incarnation, **fields})

    def _worker(self, wid: object) -> dict[str, Any]:
        w = self.workers.get(wid) if type(wid) is int else None
        if w is None:
            raise UnknownWorker(f"worker {wid!r:.40} was never spawned by this coordinator")
        return w

    def _drop_for(self, wid: int) -> None:
        self.intents = {k: i for k, i in self.intents.items() if i["worker"] != wid}
        self.tickets = {k: t for k, t in self.tickets.items() if t["target"] != wid}

    def _waiting(self, wid: int) -> int | None:
        return next((k for k, i in self.intents.items() if i["worker"] == wid), None)

    # --- lifecycle ----------------------------------------------------------------

    def spawn(self) -> int:
        """Journal a new worker before its process exists (so a crash mid-spawn leaves no unknown process)."""
        wid = self.next_worker
        self.next_worker += 1
        self.workers[wid] = {"id": wid, "pid": 0, "starttime": 0, "state": SPAWNED, "epoch": 1,
                             "seq": 0, "quota": 0, "returned": 0}
        self._commit()
        return wid

    def started(self, wid: int, pid: int, starttime: int) -> None:
        """The process of spawned worker `wid` exists: journal how to recognise it after a restart."""
        w = self._worker(wid)
        w["pid"], w["starttime"] = pid, starttime
        self._commit()
        self._event("spawn", worker=wid, pid=pid)

    def hello(self, wid: int, committed: object) -> dict[str, Any]:
        """An authenticated connection of worker `wid` (its first, or a reconnect); `committed`: the units its
        leases hold, as it reports them. Returns what the worker resynchronises from."""
        w = self._worker(wid)
        keep = P.units(committed, "committed", zero_ok=True)
        if w["state"] in (FENCED, EXITED):  # its epoch is over
            raise WorkerNotLive(f"worker {wid} is {w['state']} (epoch {w['epoch']}): it cannot authenticate again")
        if w["state"] == ACTIVE:
            w["epoch"] += 1  # a reconnect: what the previous connection still carries is stale from now on
        w["state"] = ACTIVE
        intent = self._waiting(wid)
        if intent is not None and self.guards.on("defer_returns_uncommitted"):  # C10: waiting keeps only committed
            back = w["quota"] - min(keep, w["quota"])
            w["quota"] -= back
            self.free += back
        self._commit()
        self._event("hello", worker=wid, epoch=w["epoch"])
        return {"epoch": w["epoch"], "seq": w["seq"], "quota": w["quota"], "intent": intent,
                "tickets": [[t, x["nbytes"]] for t, x in self.tickets.items() if x["target"] == wid]}

    def fence(self, wid: int) -> None:
        """Heartbeat lost: bump the epoch; the quota stays charged until the exit is observed."""
        w = self._worker(wid)
        if w["state"] not in (SPAWNED, ACTIVE):
            raise InvalidTransition(f"worker {wid} is {w['state']}: nothing to fence")
        w["state"], w["epoch"] = FENCED, w["epoch"] + 1
        self._drop_for(wid)
        if not self.guards.on("charge_until_exit"):
            self.free, w["quota"] = self.free + w["quota"], 0
        self._commit()
        self._event("fence", worker=wid, epoch=w["epoch"], quota=w["quota"])

    def exit_observed(self, wid: int) -> int:
        """The process is gone (pidfd): return its quota, once. Returns the units credited."""
        w = self._worker(wid)
        if w["state"] == EXITED:
            if self.guards.on("return_once"):
                return 0
            self.free += w["returned"]
            self._commit()
            return w["returned"]
        credit = w["quota"]
        w.update(state=EXITED, quota=0, returned=credit, epoch=w["epoch"] + 1)
        self.free += credit
        self._drop_for(wid)
        self._commit()
        self._event("exit", worker=wid, returned=credit)
        return credit

    # --- worker messages ----------------------------------------------------------

    def handle(self, msg: Any, authentic: bool) -> Any:
        """One worker message (`authentic`: it came on the worker's own authenticated connection, or its MAC
        verified); raises a typed refusal, changing nothing."""
        if not isinstance(msg, dict):
            raise InvalidArgument(f"a message is an object, got {type(msg).__name__}")
        w = self._worker(msg.get("worker"))
        seq, epoch = P.counter(msg.get("seq"), "seq"), P.counter(msg.get("epoch"), "epoch")
        if not authentic and self.guards.on("authenticated_only"):  # C10
            raise AuthenticationFailed(f"worker {w['id']}: message failed authentication")
        if seq <= w["seq"] and self.guards.on("sequence_check"):  # C10: replay
            raise ReplayedMessage(f"worker {w['id']}: sequence {seq} <= last accepted {w['seq']}")
        if epoch != w["epoch"] and self.guards.on("epoch_fencing"):  # C10: fenced, or an earlier connection
            raise StaleEpoch(f"worker {w['id']}: epoch {epoch}, current {w['epoch']}")
        if w["state"] != ACTIVE and self.guards.on("live_workers_only"):  # C10: quota only to live workers
            raise WorkerNotLive(f"worker {w['id']} is {w['state']}: quota goes only to live, authenticated workers")
        kind = msg.get("kind")
        if kind == "request":
            result = self._request(w, msg)
        elif kind == "return":
            n = P.units(msg.get("nbytes"))
            if n > w["quota"]:
                raise InvalidBytes(f"worker {w['id']}: cannot return {n} of a {w['quota']} quota")
            w["quota"] -= n
            self.free += n
            result = None
        elif kind == "answer":
            result = self._answer(w, msg)
        else:
            raise InvalidArgument(f"unknown message kind {str(kind)[:40]!r}")
        w["seq"] = max(w["seq"], seq)
        self._commit()
        self._event(kind, worker=w["id"], seq=seq, nbytes=msg.get("nbytes"), result=result)
        return result

    def _request(self, w: dict[str, Any], msg: dict[str, Any]) -> Any:
        n = P.units(msg.get("nbytes"))
        prio = P.priority(msg.get("priority", 0))
        keep = P.units(msg.get("keep", 0), "keep", zero_ok=True)
        if n > self.serving_quota:
            raise CapacityDenied(f"worker {w['id']} asks {n} units of a {self.serving_quota}-unit serving quota: "
                                 "it could never be granted")
        if self._waiting(w["id"]) is not None:
            raise InvalidTransition(f"worker {w['id']} already awaits quota")
        if n <= self.free:
            w["quota"] += n
            self.free -= n
            return ["granted", n]
        # Defer: the worker keeps only what it has committed; a zero-byte intent keeps its place.
        back = max(0, w["quota"] - keep)
        w["quota"] -= back
        self.free += back
        iid = self.next_intent
        self.next_intent += 1
        self.intents[iid] = {"seq": iid, "worker": w["id"], "nbytes": n, "priority": prio, "age": 0}
        return ["deferred", iid]

    def _answer(self, w: dict[str, Any], msg: dict[str, Any]) -> int:
        tid = msg.get("ticket")
        t = self.tickets.get(tid) if type(tid) is int else None
        if t is None or t["target"] != w["id"]:
            raise UnknownTicket(f"worker {w['id']}: no open reclaim ticket {tid!r:.40}")
        k = P.units(msg.get("nbytes"), zero_ok=True)
        if k > min(t["nbytes"], w["quota"]):
            raise InvalidBytes(f"worker {w['id']}: cannot give back {k} of a {t['nbytes']} ticket")
        w["quota"] -= k
        self.free += k
        del self.tickets[tid]
        return k

    # --- coordinator decisions -------------------------------------------------------

    def arbitrate(self) -> list[tuple[int, int, int]]:
        """Age every intent, then grant in order: matured first (FIFO), then priority, then FIFO.

        Returns (intent, worker, units) per grant; the caller pushes each to its worker.
        """
        cap = self.aging_cap
        for i in self.intents.values():
            i["age"] = min(i["age"] + 1, cap)
        order = sorted(self.intents.values(),
                       key=lambda i: (0, 0, i["seq"]) if i["age"] >= cap else (1, -i["priority"], i["seq"]))
        grants, blocked = [], False
        for i in order:
            if not blocked and i["nbytes"] <= self.free:
                self.free -= i["nbytes"]
                self.workers[i["worker"]]["quota"] += i["nbytes"]
                grants.append((i["seq"], i["worker"], i["nbytes"]))
                del self.intents[i["seq"]]
            elif i["age"] >= cap and self.guards.on("coordinator_aging"):  # I13: let capacity accumulate
                blocked = True
        self._commit()
        self._event("arbitrate", granted=[g[0] for g in grants])
        return grants

    def reclaim(self, target: object, n: object) -> int:
        """Open a reclaim ticket on a worker (I11: never on an outside program)."""
        units = P.units(n)
        if isinstance(target, str):
            if self.guards.on("participants_only"):  # I11
                raise NotAParticipant(f"{target[:40]!r} is outside the hierarchy: it only lowers the OS ceiling")
        else:
            w = self._worker(target)
            if w["state"] != ACTIVE:
                raise InvalidTransition(f"worker {target} is {w['state']}: it cannot be reclaimed from")
        tid = self.next_ticket
        self.next_ticket += 1
        self.tickets[tid] = {"target": target, "nbytes": units}
        self._commit()
        self._event("reclaim", ticket=tid, target=target, nbytes=units)
        return tid

    def outside(self, delta: object) -> None:
        """The OS ceiling moved because outside programs allocated (> 0) or freed (< 0)."""
        if type(delta) is not int or delta == 0 or abs(delta) > MAX_QUOTA:
            raise InvalidArgument(f"outside delta must be a non-zero int, got {delta!r:.40}")
        if delta > 0 and not self.guards.on("outside_is_ceiling"):  # the bug: an outsider booked as a holder
            self.free -= min(self.free, delta)
            self._commit()
        self._event("ceiling", outside_delta=delta)

    def snapshot(self) -> dict[str, Any]:
        return {"serving_quota": self.serving_quota, "aging_cap": self.aging_cap, "free": self.free,
                "next_worker": self.next_worker, "next_intent": self.next_intent, "next_ticket": self.next_ticket,
                "incarnation": self.incarnation, "workers": {k: dict(v) for k, v in self.workers.items()},
                "intents": {k: dict(v) for k, v in self.intents.items()},
                "tickets": {k: dict(v) for k, v in self.tickets.items()}}
