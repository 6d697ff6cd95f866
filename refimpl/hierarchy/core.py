"""The coordinator's ledger and rules (C10, I11): refimpl's own, journaled, no sockets, no processes.

Owns the serving quota's ledger (`free` + one `quota` per worker), each
worker's lifecycle (spawned -> active -> fenced -> exited), epochs, the last
accepted sequence number, deferred intents with their own arbitration order,
and reclaim tickets. Every accepted step is committed to the sqlite journal
before it is answered, so a restarted coordinator resumes exactly here.

The guards are the same names as `spec.guards` and are switched off only
through the `GuardSet` value (negative controls). Must not touch: sockets,
processes, the clock (the loop in `refimpl.hierarchy.coordinator` does).
"""

from __future__ import annotations

from typing import Any

from refimpl.hierarchy.journal import Journal
from spec.errors import (
    AuthenticationFailed,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    NotAParticipant,
    ReplayedMessage,
    StaleEpoch,
    UnknownTicket,
    UnknownWorker,
)
from spec.guards import ALL_ON, GuardSet

__all__ = ["Core"]

SPAWNED, ACTIVE, FENCED, EXITED = "spawned", "active", "fenced", "exited"


class Core:
    def __init__(self, serving_quota: int, aging_cap: int, journal: Journal, guards: GuardSet = ALL_ON) -> None:
        self.guards, self.journal = guards, journal
        self.events: list[dict[str, Any]] = []
        saved = journal.load()
        if saved is None:
            self.serving_quota, self.aging_cap, self.free = serving_quota, aging_cap, serving_quota
            self.next_worker = self.next_intent = self.next_ticket = self.incarnation = 1
            self.workers: dict[int, dict[str, Any]] = {}
            self.intents: dict[int, dict[str, Any]] = {}
            self.tickets: dict[int, dict[str, Any]] = {}
        else:
            for k in ("serving_quota", "aging_cap", "free", "next_worker", "next_intent", "next_ticket"):
                setattr(self, k, saved[k])
            self.incarnation = saved["incarnation"] + 1
            self.workers, self.intents, self.tickets = saved["workers"], saved["intents"], saved["tickets"]
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
            raise UnknownWorker(f"worker {wid!r} was never spawned by this coordinator")
        return w

    def _drop_for(self, wid: int) -> None:
        self.intents = {k: i for k, i in self.intents.items() if i["worker"] != wid}
        self.tickets = {k: t for k, t in self.tickets.items() if t["target"] != wid}

    # --- lifecycle ----------------------------------------------------------------

    def spawn(self, pid: int, starttime: int) -> int:
        wid = self.next_worker
        self.next_worker += 1
        self.workers[wid] = {"id": wid, "pid": pid, "starttime": starttime, "state": SPAWNED, "epoch": 1,
                             "seq": 0, "quota": 0, "returned": 0}
        self._commit()
        self._event("spawn", worker=wid, pid=pid)
        return wid

    def hello(self, wid: int) -> tuple[int, int]:
        """An authenticated worker connection: (epoch, last accepted seq). A reconnect keeps both."""
        w = self._worker(wid)
        if w["state"] == SPAWNED:
            w["state"] = ACTIVE
            self._commit()
        elif w["state"] != ACTIVE:  # fenced or exited: its epoch is over
            raise StaleEpoch(f"worker {wid} is {w['state']} (epoch {w['epoch']}): it cannot authenticate again")
        self._event("hello", worker=wid, epoch=w["epoch"])
        return w["epoch"], w["seq"]

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
        """The process is gone (sentinel / pidfd): return its quota, once. Returns the bytes credited."""
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

    def handle(self, msg: dict[str, Any], authentic: bool) -> Any:
        """One worker message (already MAC-checked: `authentic`); raises a typed refusal, changing nothing."""
        w = self._worker(msg.get("worker"))
        seq, epoch = msg.get("seq"), msg.get("epoch")
        if type(seq) is not int or type(epoch) is not int:
            raise InvalidArgument(f"message {msg!r}: epoch and seq must be ints")
        if not authentic and self.guards.on("authenticated_only"):  # C10
            raise AuthenticationFailed(f"worker {w['id']}: message failed authentication")
        if seq <= w["seq"] and self.guards.on("sequence_check"):  # C10: replay
            raise ReplayedMessage(f"worker {w['id']}: sequence {seq} <= last accepted {w['seq']}")
        if epoch != w["epoch"] and self.guards.on("epoch_fencing"):  # C10: fenced
            raise StaleEpoch(f"worker {w['id']}: epoch {epoch}, current {w['epoch']}")
        kind = msg.get("kind")
        if kind == "request":
            result = self._request(w, msg)
        elif kind == "return":
            n = _units(msg.get("nbytes"))
            if n > w["quota"]:
                raise InvalidBytes(f"worker {w['id']}: cannot return {n} of a {w['quota']} quota")
            w["quota"] -= n
            self.free += n
            result = None
        elif kind == "answer":
            result = self._answer(w, msg)
        else:
            raise InvalidArgument(f"unknown message kind {kind!r}")
        w["seq"] = max(w["seq"], seq)
        self._commit()
        self._event(kind, worker=w["id"], seq=seq, nbytes=msg.get("nbytes"), result=result)
        return result

    def _request(self, w: dict[str, Any], msg: dict[str, Any]) -> Any:
        n = _units(msg.get("nbytes"))
        prio, keep = msg.get("priority", 0), msg.get("keep", 0)
        if type(prio) is not int or type(keep) is not int or keep < 0:
            raise InvalidArgument(f"priority and keep must be ints, got {prio!r}, {keep!r}")
        if any(i["worker"] == w["id"] for i in self.intents.values()):
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
        t = self.tickets.get(msg.get("ticket"))
        if t is None or t["target"] != w["id"]:
            raise UnknownTicket(f"worker {w['id']}: no open reclaim ticket {msg.get('ticket')!r}")
        k = msg.get("nbytes")
        if type(k) is not int or k < 0 or k > min(t["nbytes"], w["quota"]):
            raise InvalidBytes(f"worker {w['id']}: cannot give back {k!r} of a {t['nbytes']} ticket")
        w["quota"] -= k
        self.free += k
        del self.tickets[msg["ticket"]]
        return k

    # --- coordinator decisions -------------------------------------------------------

    def arbitrate(self) -> list[tuple[int, int, int]]:
        """Age every intent, then grant in order: matured first (FIFO), then priority, then FIFO.

        Returns (intent, worker, units) per grant; the loop pushes each to its worker.
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
        units = _units(n)
        if isinstance(target, str):
            if self.guards.on("participants_only"):  # I11
                raise NotAParticipant(f"{target!r} is outside the hierarchy: it only lowers the OS ceiling")
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

    def outside(self, delta: int) -> None:
        """The OS ceiling moved because outside programs allocated (> 0) or freed (< 0)."""
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


def _units(n: object) -> int:
    if type(n) is not int or n <= 0:
        raise InvalidBytes(f"nbytes must be a positive int, got {n!r}")
    return n

