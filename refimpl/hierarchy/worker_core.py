"""A worker's figures and rules (C10): one `ProcessMemoryManager` bounded by the delegated slice. Sans-I/O.

The worker's host authority is registered at the serving quota's size; the
part it may not use (serving quota - min(slice, OS ceiling)) is held by a
"withheld" holder as committed leases, so the manager's own limit check is
what bounds the workload (linked attribution, I1: the slice is not a second
grantable copy, it is the only room the workload's reservations can take).
Moving the bound is prepare -> commit on the manager (reserve, then commit the
withheld delta; raising releases withheld leases); it never takes a workload
lease (I6): it can lower the bound only down to what is in use.

A call to the coordinator is three steps the transport drives: `call(...)`
checks the worker's own arguments and returns the message (its epoch, the
next sequence number); then exactly one of `done(msg, result)` (the reply
came), a typed refusal (nothing changes), or `lost(msg)` (no reply). What
`lost` assumes and how `hello_done` resynchronises: docs/hierarchy.md, "Lost
replies". `refimpl.hierarchy.worker` runs this in a process over sockets,
`refimpl.verify.hierarchy_sim` in memory.
"""

from __future__ import annotations

from typing import Any, Protocol

from refimpl.manager import ProcessMemoryManager
from refimpl.hierarchy import protocol as P
from spec.errors import CapacityDenied, InvalidArgument, InvalidBytes, InvalidTransition, UnknownTicket
from spec.guards import GuardSet
from spec.types import AllocState, Role, Tier

__all__ = ["WorkerCore", "CeilingSource"]


class CeilingSource(Protocol):
    def free(self) -> int:
        """Bytes the OS can still give (MemAvailable, or what a cgroup has left)."""


class WorkerCore:
    def __init__(self, wid: int, serving_quota: int, guards: GuardSet, ceiling: CeilingSource) -> None:
        self.wid, self.q, self.guards, self.ceiling = wid, serving_quota, guards, ceiling
        self.pmm = ProcessMemoryManager()
        self.auth = self.pmm.register_authority("host", Tier.HOST, self.q * P.UNIT)
        self.work = self.pmm.register_holder("work")
        self.hold = self.pmm.register_holder("withheld")
        self.model_holder = self.pmm.register_holder("models")
        self.models: dict[str, tuple[tuple[int, ...], int, Any]] = {}  # name -> (leases, units, served model)
        self.withheld: list[tuple[int, int]] = []  # (allocation, units)
        self.provisional: list[int] = []
        self.leases: list[int] = []
        self.slice = self.epoch = self.seq = 0
        self.waiting: int | None = None
        self.tickets: dict[int, int] = {}
        #: True iff the last hello's figures are current: no call went unanswered since (and the connection is
        #: up). False from a `lost` call or a dropped connection until the next `hello_done`.
        self.synced = False
        self.events: list[dict[str, Any]] = []
        self._bound(0)

    # --- the authority's bound (prepare -> commit on the manager) --------------------

    def _committed(self) -> int:
        return len(self.leases) + sum(u for _, u, _ in self.models.values())

    def _in_use(self) -> int:
        return self._committed() + len(self.provisional)

    def _bound(self, limit: int) -> None:
        """Let the workload use at most `limit` units (never below what it already uses)."""
        target = self.q - max(min(limit, self.q), self._in_use())
        have = sum(u for _, u in self.withheld)
        while have > target and self.withheld:
            aid, u = self.withheld.pop()
            self.pmm.release(self.hold, aid)
            have -= u
        if target > have:
            n = target - have
            aid = self.pmm.reserve(self.hold, self.auth, Tier.HOST, n * P.UNIT, Role.STAGING)  # prepare
            self.pmm.commit(self.hold, aid, n * P.UNIT)  # commit
            self.withheld.append((aid, n))

    def _drop_reservations(self, keep: int) -> None:
        """Cancel open reservations (newest first) until at most `keep` units stay reserved."""
        while len(self.provisional) > max(0, keep):
            self.pmm.cancel(self.work, self.provisional.pop())

    def budget(self) -> int:
        """min(slice, OS ceiling) in units; the ceiling is this worker's own charge plus what the OS has left."""
        ceiling = self._in_use() + self.ceiling.free() // P.UNIT
        return min(self.slice, ceiling) if self.guards.on("budget_min_ceiling") else self.slice

    def figures(self) -> dict[str, int]:
        """Committed and reserved units, read from the manager's own ledger."""
        mine = [a for h in (self.work, self.model_holder) for a in self.pmm.leases(h)]
        return {"committed": sum(a.charge for a in mine if a.state is AllocState.LIVE) // P.UNIT,
                "reserved": sum(a.charge for a in mine if a.state is AllocState.PROVISIONAL) // P.UNIT}

    def _need_current(self) -> None:
        if not self.synced:
            raise InvalidTransition(f"worker {self.wid} is out of sync with the coordinator (a reply was lost or "
                                    "the connection dropped): it says hello again before it acts")

    # --- hello: the first authentication, or a reconnect that resynchronises -------------

    def hello_view(self) -> dict[str, int]:
        """What the worker tells the coordinator when it connects: its committed units and last accepted seq."""
        return {"committed": self._committed(), "seq": self.seq}

    def hello_done(self, reply: Any) -> None:
        """Resynchronise from the journal's figures (the coordinator's answer to our hello)."""
        if not isinstance(reply, dict):
            raise InvalidArgument(f"a hello reply is an object, got {type(reply).__name__}")
        epoch, seq = P.counter(reply.get("epoch"), "epoch"), P.counter(reply.get("seq"), "seq")
        quota = P.units(reply.get("quota"), "quota", zero_ok=True)
        intent = reply.get("intent")
        if intent is not None:
            P.counter(intent, "intent")
        tickets = reply.get("tickets")
        if not isinstance(tickets, list) or not all(isinstance(t, list) and len(t) == 2 for t in tickets):
            raise InvalidArgument("hello reply: tickets is a list of [ticket, units]")
        self.tickets = {P.counter(t, "ticket"): P.units(n) for t, n in tickets}
        self.epoch, self.seq, self.slice, self.waiting = epoch, max(self.seq, seq), quota, intent
        if intent is not None and self.guards.on("defer_returns_uncommitted"):
            self._drop_reservations(0)  # C10: no local reservation while awaiting quota
        if self.guards.on("lost_reply_assumes_worst"):  # C10: what the journal does not charge is not ours
            self._drop_reservations(self.slice - self._committed())
        self.synced = True
        self._bound(self.slice)

    def disconnected(self) -> None:
        """The connection dropped (no call in flight): figures stand, but nothing is done until the next hello."""
        self.synced = False

    # --- calls to the coordinator ----------------------------------------------------------

    def _message(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"kind": kind, "worker": self.wid, "epoch": self.epoch, "seq": self.seq + 1, **fields}

    def request(self, nbytes: object, priority: object = 0) -> dict[str, Any]:
        n, prio = P.units(nbytes), P.priority(priority)
        if n > self.q:
            raise CapacityDenied(f"worker {self.wid} asks {n} units of a {self.q}-unit serving quota: it could "
                                 "never be granted")
        self._need_current()
        # No local "already waiting" check: the coordinator is the authority (we may have been fenced).
        keep = self._committed() if self.guards.on("defer_returns_uncommitted") else self.slice
        return self._message("request", nbytes=n, priority=prio, keep=keep)

    def give_back(self, nbytes: object) -> dict[str, Any]:
        n = P.units(nbytes)
        self._need_current()
        if n > self.slice - self._in_use():
            raise InvalidBytes(f"worker {self.wid}: cannot return {n} of {self.slice - self._in_use()} free")
        return self._message("return", nbytes=n)

    def answer(self, ticket: object, nbytes: object) -> dict[str, Any]:
        if type(ticket) is not int or ticket not in self.tickets:
            raise UnknownTicket(f"worker {self.wid}: no reclaim ticket {ticket!r:.40}")
        self._need_current()
        room = min(self.tickets[ticket], self.slice - self._in_use())
        if type(nbytes) is not int or nbytes < 0 or nbytes > room:
            raise InvalidBytes(f"worker {self.wid}: cannot give back {nbytes!r:.40} of {room}")
        return self._message("answer", ticket=ticket, nbytes=nbytes)

    def done(self, msg: dict[str, Any], result: Any) -> Any:
        """The coordinator accepted `msg` with `result`: apply it here."""
        self.seq = msg["seq"]
        kind = msg["kind"]
        if kind == "request":
            self._requested(result)
        elif kind == "return":
            self.slice -= msg["nbytes"]
        elif kind == "answer":
            k = P.units(result, zero_ok=True)
            del self.tickets[msg["ticket"]]
            self.slice -= k
        self._bound(self.slice)
        return result

    def _requested(self, result: Any) -> None:
        if not (isinstance(result, list) and len(result) == 2 and result[0] in ("granted", "deferred")):
            raise InvalidArgument(f"a request's result is [granted|deferred, n], got {str(result)[:60]}")
        if result[0] == "granted":
            self.slice += P.units(result[1])
        elif self.guards.on("defer_returns_uncommitted"):
            for aid in self.provisional:  # no local reservation while awaiting quota
                self.pmm.cancel(self.work, aid)
            self.provisional.clear()
            self.slice = self._committed()
            self.waiting = P.counter(result[1], "intent")
        else:
            self.waiting = P.counter(result[1], "intent")

    def lost(self, msg: dict[str, Any]) -> None:
        """No reply to `msg`: whether it was applied is unknown, so assume the worst and wait for a hello."""
        self.synced = False
        if self.guards.on("lost_reply_assumes_worst"):
            if msg["kind"] == "request":  # it may have been deferred: nothing above what we committed is ours
                self._drop_reservations(0)
                self.slice = self._committed()
            else:  # a return or an answer may have been applied
                self.slice -= msg["nbytes"]
                self.tickets.pop(msg.get("ticket"), None)
        self.events.append({"lost": msg["kind"], "seq": msg["seq"]})
        self._bound(self.slice)

    def push(self, msg: Any) -> None:
        """A grant or a reclaim ticket the coordinator pushed on our connection."""
        if not isinstance(msg, dict):
            raise InvalidArgument(f"a push is an object, got {type(msg).__name__}")
        if msg.get("push") == "grant":
            self.slice += P.units(msg.get("nbytes"))
            self.waiting = None
            self._bound(self.slice)
        elif msg.get("push") == "reclaim":
            self.tickets[P.counter(msg.get("ticket"), "ticket")] = P.units(msg.get("nbytes"))
        else:
            raise InvalidArgument(f"unknown push {str(msg.get('push'))[:40]!r}")
        self.events.append(msg)

    # --- local actions -----------------------------------------------------------------------

    def reserve(self, nbytes: object) -> None:
        self._need_current()
        n = P.units(nbytes)
        budget = self.budget()
        if self._in_use() + n > budget:  # C10: budget = min(slice, OS ceiling)
            raise CapacityDenied(f"worker {self.wid}: {n} units asked, budget {budget}, {self._in_use()} in use")
        self._bound(budget)  # and the manager's own limit check enforces it too
        taken = []
        try:
            for _ in range(n):
                taken.append(self.pmm.reserve(self.work, self.auth, Tier.HOST, P.UNIT, Role.KV))
        except CapacityDenied:
            for aid in taken:
                self.pmm.cancel(self.work, aid)
            self._bound(self.slice)
            raise CapacityDenied(f"worker {self.wid}: {n} units asked, budget {self.budget()}, "
                                 f"{self._in_use()} in use") from None
        self.provisional += taken
        self._bound(self.slice)

    def commit(self) -> None:
        self._need_current()
        if not self.provisional:
            raise InvalidTransition(f"worker {self.wid} has no open reservation to commit")
        if self._in_use() > self.slice:  # C10: never commit past what the coordinator charges us
            raise CapacityDenied(f"worker {self.wid}: committing {len(self.provisional)} would hold "
                                 f"{self._in_use()} units of a {self.slice}-unit slice")
        for aid in self.provisional:
            self.pmm.commit(self.work, aid, P.UNIT)
        self.leases += self.provisional
        self.provisional.clear()

    def free(self, nbytes: object) -> dict[str, Any] | None:
        """Release committed units; while waiting for quota returns the return message to send (C10)."""
        self._need_current()
        n = nbytes
        if type(n) is not int or n <= 0 or n > len(self.leases):
            raise InvalidBytes(f"worker {self.wid}: {n!r:.40} units to free, {len(self.leases)} committed")
        for _ in range(n):
            self.pmm.release(self.work, self.leases.pop())
        self._bound(self.slice)
        if self.waiting is not None and self.guards.on("defer_returns_uncommitted"):
            return self._message("return", nbytes=min(n, self.slice))  # a waiting worker keeps no uncommitted quota
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"worker": self.wid, "slice": self.slice, **self.figures(), "known_epoch": self.epoch,
                "seq": self.seq, "waiting": self.waiting, "synced": self.synced,
                "tickets": [[t, n] for t, n in self.tickets.items()], "budget": self.budget(),
                "models": {name: units for name, (_, units, _) in self.models.items()}}
