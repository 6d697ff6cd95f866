"""A worker process: one `ProcessMemoryManager` whose authority is bounded by its delegated slice (C10).

The worker's host authority is registered at the serving quota's size; the
part it may not use (serving quota - min(slice, OS ceiling)) is held by a
"withheld" holder as committed leases, so the manager's own limit check is
what bounds the workload (linked attribution, I1: the slice is not a second
grantable copy, it is the only room the workload's reservations can take).
Moving the bound is prepare -> commit on the manager (reserve, then commit the
withheld delta; raising releases withheld leases); it never takes a workload
lease (I6): it can lower the bound only down to what is in use.

Every message to the coordinator is sealed with this worker's key and carries
its epoch and the next sequence number (counted only when accepted). On
defer the worker cancels its open reservations and keeps only what it has
committed; while it waits, bytes it frees go back at once. Heartbeats go out
every `heartbeat_interval`. A lost coordinator connection is redialled (the
coordinator restarted) and the slice resynchronised from its journaled quota.

Real models (`ortmem serve`): `load` measures a small ONNX model (referenced
weight bytes and one run's transient peak), checks them against the budget,
reserves and commits both in the manager (holder "models") and only then
builds the ORT session over the leased bytes (`refimpl.ort.served`); a load
that does not fit is refused with `CapacityDenied` and charges nothing, a
session that fails to build gives its charge back. `infer` runs real
requests; `unload` (and the worker's exit) releases the charge. ORT is
imported only when a model is loaded, so the campaign's workers never load it.

Control: the driver (tests, campaign, `ortmem serve`) connects to this
worker's own socket with the control key and asks for local actions.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
import traceback
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, wait
from typing import Any

from refimpl.governor import ProcessMemoryManager
from refimpl.hierarchy import protocol as P
from refimpl.hierarchy.osceiling import FileCeiling, OsCeiling
from spec.errors import CapacityDenied, GovernorError, InvalidArgument, InvalidBytes, InvalidTransition, UnknownTicket
from spec.guards import GuardSet
from spec.types import AllocState, Role, Tier

__all__ = ["worker_main", "Worker"]


class Worker:
    def __init__(self, wid: int, cfg: Any, held: bool = False) -> None:
        self.wid, self.cfg = wid, cfg
        #: True iff the operator holds this worker back from authenticating (it waits for a "hello" command):
        #: the campaign's window in which a spawned, unauthenticated worker exists (C10).
        self.held = held
        self.guards = GuardSet(cfg.guards)
        self.key = P.worker_key(cfg.master, wid)
        self.ceiling = FileCeiling(cfg.ceiling[1]) if cfg.ceiling[0] == "file" else OsCeiling()
        self.q = cfg.serving_quota
        self.pmm = ProcessMemoryManager()
        self.auth = self.pmm.register_authority("host", Tier.HOST, self.q * P.UNIT)
        self.work = self.pmm.register_holder("work")
        self.hold = self.pmm.register_holder("withheld")
        self.model_holder = self.pmm.register_holder("models")
        self.models: dict[str, tuple[tuple[int, ...], int, Any]] = {}  # name -> (leases, units, ServedModel)
        self.withheld: list[tuple[int, int]] = []  # (allocation, units)
        self.provisional: list[int] = []
        self.leases: list[int] = []
        self.slice = self.epoch = self.seq = 0
        self.waiting: int | None = None
        self.tickets: dict[int, int] = {}
        self.events: list[dict[str, Any]] = []
        self._bound(0)
        self.ctl = P.listen(os.path.join(cfg.dir, f"w{wid}.sock"))
        self.controls: list[Connection] = []
        self.coord: Connection | None = None
        self.stop = False
        self.last_beat = self.next_dial = 0.0
        self.refused: GovernorError | None = None  # the coordinator's answer to our last hello, if a refusal

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

    def budget(self) -> int:
        """min(slice, OS ceiling) in units; the ceiling is this worker's own charge plus what the OS has left."""
        ceiling = self._in_use() + self.ceiling.free() // P.UNIT
        return min(self.slice, ceiling) if self.guards.on("budget_min_ceiling") else self.slice

    def figures(self) -> dict[str, int]:
        """Committed and reserved units, read from the manager's own ledger."""
        st = self.pmm.abstract()
        mine = [a for a in st.allocations.values() if a.holder in (self.work, self.model_holder)]
        return {"committed": sum(a.charge for a in mine if a.state is AllocState.LIVE) // P.UNIT,
                "reserved": sum(a.charge for a in mine if a.state is AllocState.PROVISIONAL) // P.UNIT}

    # --- coordinator connection ----------------------------------------------------------

    def connect(self, deadline: float) -> None:
        """Dial until connected (bounded); a refused hello (we were fenced) leaves us disconnected."""
        while not self._try_connect():
            if self.refused is not None:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.wid}: no coordinator")
            time.sleep(0.02)

    def _try_connect(self) -> bool:
        try:
            conn = P.dial(self.cfg.address, "worker", self.wid, self.key)
            if not conn.poll(P.DIAL_TIMEOUT):  # a safety net: READY came, the reply follows it at once
                raise TimeoutError("no hello reply")
            reply = conn.recv()
            P.raise_refusal(reply)
        except (OSError, EOFError, TimeoutError, AuthenticationError):
            return False
        except GovernorError as e:
            self.refused = e
            return False
        self.coord, self.refused = conn, None
        self.epoch, self.seq = reply["epoch"], max(self.seq, reply["seq"])
        self.slice = reply["quota"]  # resynchronise with the journaled quota (a grant may have been lost)
        self.waiting = reply.get("intent")
        self.tickets = {int(t): n for t, n in reply.get("tickets", {}).items()}
        self._bound(self.slice)
        return True

    def _send(self, kind: str, **fields: Any) -> Any:
        self.drain()  # a dead connection is noticed (and redialled) before we send on it
        if self.coord is None:
            if self.refused is not None:
                raise self.refused
            raise InvalidTransition(f"worker {self.wid} is not connected")
        msg = P.seal(self.key, kind=kind, worker=self.wid, epoch=self.epoch, seq=self.seq + 1, **fields)
        self.coord.send(msg)
        deadline = time.monotonic() + P.DIAL_TIMEOUT  # a safety net: a loaded coordinator may take seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.coord.poll(left):
                raise TimeoutError(f"worker {self.wid}: no reply to {kind}")
            reply = self.coord.recv()
            if "push" in reply:
                self._push(reply)
                continue
            P.raise_refusal(reply)
            self.seq += 1
            return reply.get("ok")

    def _push(self, msg: dict[str, Any]) -> None:
        if msg["push"] == "grant":
            self.slice += msg["nbytes"]
            self.waiting = None
            self._bound(self.slice)
        elif msg["push"] == "reclaim":
            self.tickets[msg["ticket"]] = msg["nbytes"]
        self.events.append(msg)

    def drain(self) -> None:
        """Apply pushes waiting in the socket; a connection found dead (the coordinator restarted) is redialled."""
        try:
            while self.coord is not None and self.coord.poll(0):
                self._push(self.coord.recv())
        except (EOFError, OSError):
            self.coord = None
        if self.coord is None and self.refused is None and not self.held:
            self.connect(time.monotonic() + 30.0)

    def hello(self) -> None:
        """Authenticate now (a held worker): dial the coordinator and pass its challenge with our own key."""
        if not self.held:
            raise InvalidTransition(f"worker {self.wid} is not held back: it authenticated at start")
        self.held = False
        self.connect(time.monotonic() + 60.0)  # a safety net under load, not a protocol deadline

    # --- local actions (the driver's commands) ---------------------------------------------

    def request(self, nbytes: int, priority: int = 0) -> Any:
        # No local "already waiting" check: the coordinator is the authority (we may have been fenced).
        keep = self._committed() if self.guards.on("defer_returns_uncommitted") else self.slice
        result = self._send("request", nbytes=nbytes, priority=priority, keep=keep)
        if result[0] == "granted":
            self.slice += nbytes
        elif self.guards.on("defer_returns_uncommitted"):
            for aid in self.provisional:  # no local reservation while awaiting quota
                self.pmm.cancel(self.work, aid)
            self.provisional.clear()
            self.slice = self._committed()
            self.waiting = result[1]
        else:
            self.waiting = result[1]
        self._bound(self.slice)
        return result

    def give_back(self, nbytes: int) -> None:
        if type(nbytes) is not int or nbytes <= 0 or nbytes > self.slice - self._in_use():
            raise InvalidBytes(f"worker {self.wid}: cannot return {nbytes!r} of {self.slice - self._in_use()} free")
        self._send("return", nbytes=nbytes)
        self.slice -= nbytes
        self._bound(self.slice)

    def reserve(self, nbytes: int) -> None:
        if type(nbytes) is not int or nbytes <= 0:
            raise InvalidBytes(f"nbytes must be a positive int, got {nbytes!r}")
        budget = self.budget()
        if self._in_use() + nbytes > budget:  # C10: budget = min(slice, OS ceiling)
            raise CapacityDenied(f"worker {self.wid}: {nbytes} units asked, budget {budget}, "
                                 f"{self._in_use()} in use")
        self._bound(budget)  # and the manager's own limit check enforces it too
        taken = []
        try:
            for _ in range(nbytes):
                taken.append(self.pmm.reserve(self.work, self.auth, Tier.HOST, P.UNIT, Role.KV))
        except CapacityDenied:
            for aid in taken:
                self.pmm.cancel(self.work, aid)
            self._bound(self.slice)
            raise CapacityDenied(f"worker {self.wid}: {nbytes} units asked, budget {self.budget()}, "
                                 f"{self._in_use()} in use") from None
        self.provisional += taken
        self._bound(self.slice)

    def commit(self) -> None:
        if not self.provisional:
            raise InvalidTransition(f"worker {self.wid} has no open reservation to commit")
        for aid in self.provisional:
            self.pmm.commit(self.work, aid, P.UNIT)
        self.leases += self.provisional
        self.provisional.clear()

    def free(self, nbytes: int) -> None:
        if type(nbytes) is not int or nbytes <= 0 or nbytes > len(self.leases):
            raise InvalidBytes(f"worker {self.wid}: {nbytes!r} units to free, {len(self.leases)} committed")
        for _ in range(nbytes):
            self.pmm.release(self.work, self.leases.pop())
        if self.waiting is not None and self.guards.on("defer_returns_uncommitted"):
            self._send("return", nbytes=nbytes)  # a waiting worker keeps no uncommitted quota
            self.slice -= nbytes
        self._bound(self.slice)

    def answer(self, ticket: int, nbytes: int) -> int:
        if ticket not in self.tickets:
            raise UnknownTicket(f"worker {self.wid}: no reclaim ticket {ticket!r}")
        room = min(self.tickets[ticket], self.slice - self._in_use())
        if type(nbytes) is not int or nbytes < 0 or nbytes > room:
            raise InvalidBytes(f"worker {self.wid}: cannot give back {nbytes!r} of {room}")
        k = self._send("answer", ticket=ticket, nbytes=nbytes)
        del self.tickets[ticket]
        self.slice -= k
        self._bound(self.slice)
        return k

    # --- real ORT models --------------------------------------------------------------------

    def cost(self, path: str) -> dict[str, int]:
        """Units a load of `path` would charge: its referenced weights and one run's transient peak."""
        from refimpl.ort.served import needs  # ORT only in workers that serve models
        need = needs(path)
        return {"weights": -(-need.weights // P.UNIT), "arena": -(-need.peak // P.UNIT)}

    def load(self, name: str, path: str) -> dict[str, int]:
        """Charge weights and peak (reserve, commit), then build the session over the leased bytes."""
        from refimpl.ort.served import needs, open_served
        if type(name) is not str or not name:
            raise InvalidArgument(f"model name must be a non-empty str, got {name!r}")
        if name in self.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r} is already loaded")
        need = needs(path)  # typed ModelFileInvalid before anything is charged
        units = {"weights": -(-need.weights // P.UNIT), "arena": -(-need.peak // P.UNIT)}
        total = units["weights"] + units["arena"]
        budget = self.budget()
        if self._in_use() + total > budget:  # C10: the load waits for quota; nothing is charged
            raise CapacityDenied(f"worker {self.wid}: model {name!r} needs {total} units, budget {budget}, "
                                 f"{self._in_use()} in use")
        self._bound(budget)
        taken: list[int] = []
        try:
            for role, n in ((Role.WEIGHTS, units["weights"]), (Role.ARENA, units["arena"])):
                if n:
                    taken.append(self.pmm.reserve(self.model_holder, self.auth, Tier.HOST, n * P.UNIT, role))
            for aid, n in zip(taken, [n for n in units.values() if n]):
                self.pmm.commit(self.model_holder, aid, n * P.UNIT)  # charged before the session exists (I2)
        except CapacityDenied:
            self._drop(taken)
            self._bound(self.slice)
            raise CapacityDenied(f"worker {self.wid}: model {name!r} needs {total} units, budget "
                                 f"{self.budget()}, {self._in_use()} in use") from None
        try:
            served = open_served(need, units["weights"] * P.UNIT)
        except BaseException:
            self._drop(taken)  # a session that failed to build keeps nothing charged
            self._bound(self.slice)
            raise
        self.models[name] = (tuple(taken), total, served)
        self._bound(self.slice)
        return units

    def _drop(self, aids: list[int] | tuple[int, ...]) -> None:
        allocs = self.pmm.abstract().allocations
        for aid in aids:
            if allocs[aid].state is AllocState.PROVISIONAL:
                self.pmm.cancel(self.model_holder, aid)
            else:
                self.pmm.release(self.model_holder, aid)

    def infer(self, name: str, rids: list[int]) -> dict[int, str]:
        """Run request `rid` for each of `rids` on model `name`; the outputs' digests."""
        from refimpl.ort.served import digest
        if type(name) is not str or name not in self.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r} is not loaded")
        if type(rids) not in (list, tuple) or not rids or not all(type(r) is int and r >= 0 for r in rids):
            raise InvalidArgument(f"rids must be a non-empty list of non-negative ints, got {rids!r:.80}")
        served = self.models[name][2]
        return {rid: digest(served.run(rid)) for rid in rids}

    def unload(self, name: str) -> int:
        """Close the session, then give its charge back; returns the units released."""
        if type(name) is not str or name not in self.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r} is not loaded")
        aids, units, served = self.models.pop(name)
        served.close()
        self._drop(aids)
        self._bound(self.slice)
        return units

    def loaded(self) -> dict[str, int]:
        return {name: units for name, (_, units, _) in self.models.items()}

    def ledger(self) -> dict[str, int]:
        """The manager's own figures in bytes: what the workload holds, and the authority's use and capacity."""
        st = self.pmm.abstract()
        mine = sum(a.charge for a in st.allocations.values() if a.holder in (self.work, self.model_holder))
        return {"workload": mine, "slice": self.slice * P.UNIT, "used": self.pmm.snapshot(self.auth).used,
                "capacity": self.q * P.UNIT}

    def snapshot(self) -> dict[str, Any]:
        self.drain()
        return {"worker": self.wid, "pid": os.getpid(), "slice": self.slice, **self.figures(),
                "known_epoch": self.epoch, "seq": self.seq, "waiting": self.waiting,
                "tickets": dict(self.tickets), "budget": self.budget(), "models": self.loaded()}

    # --- loop ------------------------------------------------------------------------------

    _OPS = {"request": "request", "return": "give_back", "reserve": "reserve", "commit": "commit",
            "free": "free", "answer": "answer", "snapshot": "snapshot", "cost": "cost", "load": "load",
            "infer": "infer", "unload": "unload", "ledger": "ledger", "hello": "hello"}

    def _control(self, conn: Connection) -> None:
        try:
            cmd = conn.recv()
        except (EOFError, OSError):
            self.controls.remove(conn)
            return
        try:
            op = self._OPS[cmd["op"]]
            conn.send({"ok": getattr(self, op)(*cmd.get("args", ()))})
        except GovernorError as e:
            conn.send(P.refusal(e))
        except (KeyError, TypeError) as e:
            conn.send({"refused": "InvalidArgument", "message": repr(e)})
        except (OSError, EOFError, TimeoutError) as e:  # the coordinator went away mid-call: stay alive, say so
            self.coord = None
            conn.send({"refused": "InvalidTransition", "message": f"coordinator unreachable: {e!r}"})

    def run(self) -> None:
        if not self.held:
            self.connect(time.monotonic() + 60.0)  # a safety net under load, not a protocol deadline
        while not self.stop:
            now = time.monotonic()
            if now - self.last_beat >= self.cfg.heartbeat_interval and self.coord is not None:
                try:
                    self.coord.send(P.seal(self.key, kind="heartbeat", worker=self.wid, epoch=self.epoch, seq=0))
                except OSError:
                    self.coord = None
                self.last_beat = now
            if self.held:
                pass  # not authenticated yet: no heartbeat, no dial until the operator says hello
            elif self.coord is None and self.refused is None:
                self.connect(time.monotonic() + 30.0)  # the coordinator restarted: redial
            elif self.coord is None and now >= self.next_dial:
                self.next_dial = now + 0.5  # fenced: stay reachable for control, retry rarely
                self._try_connect()
            watch = [self.ctl, *self.controls] + ([self.coord] if self.coord is not None else [])
            self._serve_ready(wait(watch, timeout=self.cfg.heartbeat_interval))

    def _serve_ready(self, ready: list[Any]) -> None:
        """Serve the connections `wait` found readable, in order.

        A command served earlier in the same round may replace or drop the coordinator connection
        (a redial, a fence): a ready connection that is no longer `self.coord`, the listener or one of
        `self.controls` is stale and is skipped (it was once handed to `_control`, whose EOF handling
        then failed on it, and the worker died)."""
        for r in ready:
            if r is self.ctl:
                conn = P.accept(self.ctl)
                if conn is not None:
                    try:
                        if not conn.poll(2.0) or conn.recv()[:2] != ("hello", "control"):
                            raise ValueError("expected a control hello")
                        P.challenge_server(conn, P.control_key(self.cfg.master))
                        P.handshake_done(conn)
                        self.controls.append(conn)
                    except Exception:  # noqa: BLE001 - a failed challenge closes that connection only
                        conn.close()
            elif any(r is c for c in self.controls):
                self._control(r)
            elif r is self.coord and self.coord is not None:
                try:
                    # An earlier ready control command may have drained this push already (snapshot
                    # drains): a blind recv would block the worker forever.
                    if self.coord.poll(0):
                        self._push(self.coord.recv())
                except (EOFError, OSError):
                    self.coord = None  # the coordinator went away: redial


def worker_main(wid: int, cfg: Any, close_fds: tuple[int, ...], held: bool = False) -> None:
    """Entry point of a forked worker process."""
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck worker says where: kill -USR1 <pid>
    w = Worker(wid, cfg, held)

    def _stop(signum: int, frame: object) -> None:
        w.stop = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    code = 0
    try:
        w.run()
        for name in list(w.models):  # a clean exit gives every model's charge back
            w.unload(name)
    except BaseException:  # noqa: BLE001 - a crashed worker says why (its peers see only a reset connection)
        code = 1
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
    finally:
        os._exit(code)
