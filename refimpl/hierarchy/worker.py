"""A worker process: `refimpl.hierarchy.worker_core` over sockets, real ORT models, the operator's control socket.

Forked by `refimpl.hierarchy.zygote` with its own two keys only (its key for
the coordinator, its control key for the operator). Every call to the
coordinator goes on its authenticated connection (`refimpl.hierarchy.transport`)
and ends in exactly one of: a reply (applied), a typed refusal (nothing
changes), or no reply (the connection broke or timed out: the core assumes
the worst, the connection is closed, and the call returns None). A worker out
of sync redials in its loop, at most every `REDIAL_S`, serving its control
socket meanwhile; a local action first tries one redial and refuses (typed)
if it cannot resynchronise. A refused hello (the worker was fenced or has
exited in the coordinator's books) is remembered: it stays reachable for
control and retries rarely. Heartbeats go out every `heartbeat_interval`.

Real models (`ortmem serve`): `load` measures a small ONNX model (referenced
weight bytes and one run's transient peak), checks them against the budget,
reserves and commits both in the manager (holder "models") and only then
builds the ORT session over the leased bytes (`refimpl.ort.served`); a load
that does not fit is refused with `CapacityDenied` and charges nothing, a
session that fails to build gives its charge back. ORT is imported only
when a model is loaded, so the campaign's workers never load it.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import wait
from typing import Any

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy import transport as T
from refimpl.hierarchy.osceiling import FileCeiling, OsCeiling
from refimpl.hierarchy.worker_core import WorkerCore
from spec.errors import AuthenticationFailed, CapacityDenied, GovernorError, InvalidArgument, InvalidTransition
from spec.guards import GuardSet
from spec.types import AllocState, Role, Tier

__all__ = ["worker_main", "Worker", "REDIAL_S"]

#: Seconds between redial attempts while out of sync (a coordinator that is down costs a refused connect).
REDIAL_S = 0.02
#: Seconds between redials once the coordinator refused our hello (we were fenced, or exited in its books).
REFUSED_REDIAL_S = 0.5


class Worker:
    def __init__(self, spec: dict[str, Any], key: bytes, control_key: bytes) -> None:
        self.wid, self.dir = int(spec["wid"]), str(spec["dir"])
        self.key, self.control_key = key, control_key
        #: True iff the operator holds this worker back from authenticating (it waits for a "hello" command):
        #: the campaign's window in which a spawned, unauthenticated worker exists (C10).
        self.held = bool(spec.get("held", False))
        #: True iff a lost connection is redialled only when the operator says so ("reconnect"): the campaign's
        #: environment decides how long the worker stays out of sync.
        self.manual = bool(spec.get("manual_redial", False))
        self.interval = float(spec.get("heartbeat_interval", 0.05))
        ceiling = spec.get("ceiling") or ["os"]
        self.core = WorkerCore(self.wid, int(spec["serving_quota"]), GuardSet(frozenset(spec.get("guards", ()))),
                               FileCeiling(ceiling[1]) if ceiling[0] == "file" else OsCeiling())
        self.address = os.path.join(self.dir, "coord.sock")
        self.ctl = T.listen(os.path.join(self.dir, f"w{self.wid}.sock"))
        self.controls: list[T.Channel] = []
        self.coord: T.Channel | None = None
        self.stop = False
        self.last_beat = self.next_dial = 0.0
        self.refused: GovernorError | None = None  # the coordinator's answer to our last hello, if a refusal

    # --- coordinator connection ----------------------------------------------------------

    def _drop_coord(self) -> None:
        if self.coord is not None:
            self.coord.close()
            self.coord = None
        self.core.disconnected()

    def try_connect(self) -> bool:
        """One dial and hello: resynchronised (True), or not now (the coordinator is down, or refused us)."""
        self.next_dial = time.monotonic() + (REFUSED_REDIAL_S if self.refused is not None else REDIAL_S)
        ch: T.Channel | None = None
        try:
            ch = T.dial(self.address, "worker", self.wid, self.key)
            ch.send(self.core.hello_view())
            if not ch.poll(T.DIAL_TIMEOUT):  # a safety net: the answer follows the handshake at once
                raise TimeoutError("no answer to our hello")
            reply = ch.recv()
            P.raise_refusal(reply)
            self.core.hello_done(reply.get("ok"))
        except GovernorError as e:  # (before OSError: AuthenticationFailed and WorkerNotLive are PermissionErrors)
            if ch is not None:
                ch.close()
            if not isinstance(e, (AuthenticationFailed, InvalidArgument)):
                self.refused = e  # a typed refusal (fenced, exited): remember it, stay reachable for control
            return False
        except (OSError, EOFError, TimeoutError):  # the coordinator is down or dropped us: not now
            if ch is not None:
                ch.close()
            return False
        old, self.coord, self.refused = self.coord, ch, None
        if old is not None:  # a reconnect: the coordinator dropped the previous connection (its epoch is over)
            old.close()
        return True

    def _waits_for_operator(self) -> bool:
        """With `manual_redial`, a worker that said hello once redials only on the operator's "reconnect"."""
        return self.manual and self.core.epoch > 0

    def _sync(self) -> None:
        """Before a local action: resynchronise if out of sync (one attempt); the core then refuses to act while
        still out of sync (`InvalidTransition`)."""
        self._drain()
        if not self.core.synced and not self.held and not self._waits_for_operator() and self.coord is None:
            self.try_connect()

    def _call(self, msg: dict[str, Any]) -> Any:
        """Send `msg`; its result, a typed refusal raised, or None when the reply never came (`core.lost`)."""
        if self.coord is None:
            raise InvalidTransition(f"worker {self.wid} is not connected to the coordinator")
        try:
            self.coord.send(msg)
            deadline = time.monotonic() + T.DIAL_TIMEOUT  # a safety net: a loaded coordinator may take seconds
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not self.coord.poll(left):
                    raise TimeoutError(f"worker {self.wid}: no reply to {msg['kind']}")
                reply = self.coord.recv()
                if isinstance(reply, dict) and "push" in reply:
                    self.core.push(reply)
                    continue
                break
        except (OSError, EOFError, TimeoutError, GovernorError):  # gone, timed out, a frame failing its tag
            self._drop_coord()
            self.core.lost(msg)  # the worst case: nothing above what we committed, nothing we sent back
            return None
        P.raise_refusal(reply)
        return self.core.done(msg, reply.get("ok"))

    def _drain(self) -> None:
        """Apply pushes waiting in the socket; a connection found dead leaves us out of sync."""
        try:
            while self.coord is not None and self.coord.poll(0):
                self.core.push(self.coord.recv())
        except (EOFError, OSError, GovernorError):
            self._drop_coord()

    def hello(self) -> None:
        """Authenticate now (a held worker): dial the coordinator and pass its challenge with our own key."""
        if not self.held:
            raise InvalidTransition(f"worker {self.wid} is not held back: it authenticated at start")
        self.held = False
        self._dial()

    def reconnect(self, once: bool = False) -> None:
        """Say hello again on a new connection (a new epoch; resynchronised); refused, keep the one we had.
        `once`: one attempt, whatever comes of it (the campaign crashes the coordinator in the middle of it)."""
        self.refused = None
        if once is True:
            self.try_connect()
            return
        self._dial()

    def _dial(self) -> None:
        """Redial every `REDIAL_S` until connected or refused, for at most `DIAL_TIMEOUT`; a refusal is raised."""
        deadline = time.monotonic() + T.DIAL_TIMEOUT
        while not self.try_connect() and self.refused is None and time.monotonic() < deadline:
            time.sleep(REDIAL_S)
        if self.refused is not None:
            raise self.refused

    # --- the operator's commands ---------------------------------------------------------------

    def request(self, nbytes: object, priority: object = 0) -> Any:
        self._sync()
        return self._call(self.core.request(nbytes, priority))

    def give_back(self, nbytes: object) -> None:
        self._sync()
        self._call(self.core.give_back(nbytes))

    def answer(self, ticket: object, nbytes: object) -> Any:
        self._sync()
        return self._call(self.core.answer(ticket, nbytes))

    def reserve(self, nbytes: object) -> None:
        self._sync()
        self.core.reserve(nbytes)

    def commit(self) -> None:
        self._sync()
        self.core.commit()

    def free(self, nbytes: object) -> None:
        self._sync()
        msg = self.core.free(nbytes)
        if msg is not None:
            self._call(msg)

    def snapshot(self) -> dict[str, Any]:
        self._drain()
        return {**self.core.snapshot(), "pid": os.getpid(), "connected": self.coord is not None,
                "refused": type(self.refused).__name__ if self.refused else None}

    # --- real ORT models --------------------------------------------------------------------

    def cost(self, path: str) -> dict[str, int]:
        """Units a load of `path` would charge: its referenced weights and one run's transient peak."""
        from refimpl.ort.served import needs  # ORT only in workers that serve models
        need = needs(path)
        return {"weights": -(-need.weights // P.UNIT), "arena": -(-need.peak // P.UNIT)}

    def load(self, name: str, path: str) -> dict[str, int]:
        """Charge weights and peak (reserve, commit), then build the session over the leased bytes."""
        from refimpl.ort.served import needs, open_served
        c = self.core
        if type(name) is not str or not name:
            raise InvalidArgument(f"model name must be a non-empty str, got {name!r:.40}")
        if name in c.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r} is already loaded")
        need = needs(path)  # typed ModelFileInvalid before anything is charged
        units = {"weights": -(-need.weights // P.UNIT), "arena": -(-need.peak // P.UNIT)}
        total = units["weights"] + units["arena"]
        budget = c.budget()
        if c._in_use() + total > budget:  # C10: the load waits for quota; nothing is charged
            raise CapacityDenied(f"worker {self.wid}: model {name!r} needs {total} units, budget {budget}, "
                                 f"{c._in_use()} in use")
        c._bound(budget)
        taken: list[int] = []
        try:
            for role, n in ((Role.WEIGHTS, units["weights"]), (Role.ARENA, units["arena"])):
                if n:
                    taken.append(c.pmm.reserve(c.model_holder, c.auth, Tier.HOST, n * P.UNIT, role))
            for aid, n in zip(taken, [n for n in units.values() if n]):
                c.pmm.commit(c.model_holder, aid, n * P.UNIT)  # charged before the session exists (I2)
        except CapacityDenied:
            self._drop(taken)
            c._bound(c.slice)
            raise CapacityDenied(f"worker {self.wid}: model {name!r} needs {total} units, budget "
                                 f"{c.budget()}, {c._in_use()} in use") from None
        try:
            served = open_served(need, units["weights"] * P.UNIT)
        except BaseException:
            self._drop(taken)  # a session that failed to build keeps nothing charged
            c._bound(c.slice)
            raise
        c.models[name] = (tuple(taken), total, served)
        c._bound(c.slice)
        return units

    def _drop(self, aids: list[int] | tuple[int, ...]) -> None:
        c = self.core
        state = {a.id: a.state for a in c.pmm.leases(c.model_holder)}
        for aid in aids:
            if state[aid] is AllocState.PROVISIONAL:
                c.pmm.cancel(c.model_holder, aid)
            else:
                c.pmm.release(c.model_holder, aid)

    def infer(self, name: str, rids: list[int]) -> dict[str, str]:
        """Run request `rid` for each of `rids` on model `name`; the outputs' digests."""
        from refimpl.ort.served import digest
        if type(name) is not str or name not in self.core.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r:.40} is not loaded")
        if type(rids) is not list or not rids or not all(type(r) is int and r >= 0 for r in rids):
            raise InvalidArgument(f"rids must be a non-empty list of non-negative ints, got {rids!r:.80}")
        served = self.core.models[name][2]
        return {str(rid): digest(served.run(rid)) for rid in rids}

    def unload(self, name: str) -> int:
        """Close the session, then give its charge back; returns the units released."""
        c = self.core
        if type(name) is not str or name not in c.models:
            raise InvalidTransition(f"worker {self.wid}: model {name!r:.40} is not loaded")
        aids, units, served = c.models.pop(name)
        served.close()
        self._drop(aids)
        c._bound(c.slice)
        return units

    def ledger(self) -> dict[str, int]:
        """The manager's own figures in bytes: what the workload holds, and the authority's use and capacity."""
        c = self.core
        mine = sum(a.charge for h in (c.work, c.model_holder) for a in c.pmm.leases(h))
        return {"workload": mine, "slice": c.slice * P.UNIT, "used": c.pmm.snapshot(c.auth).used,
                "capacity": c.q * P.UNIT}

    # --- loop ------------------------------------------------------------------------------

    _OPS = {"request": "request", "return": "give_back", "reserve": "reserve", "commit": "commit",
            "free": "free", "answer": "answer", "snapshot": "snapshot", "cost": "cost", "load": "load",
            "infer": "infer", "unload": "unload", "ledger": "ledger", "hello": "hello", "reconnect": "reconnect"}

    def _reply(self, ch: T.Channel, body: Any) -> None:
        try:
            ch.send(body)
        except OSError:  # the operator went away before reading: that connection only
            self._close_control(ch)

    def _close_control(self, ch: T.Channel) -> None:
        self.controls.remove(ch)  # only ever a control connection (`_serve_ready` skips stale ones)
        ch.close()

    def _control(self, ch: T.Channel) -> None:
        try:
            cmd = ch.recv()
        except InvalidArgument as e:  # an authentic frame whose body does not parse: a typed refusal
            self._reply(ch, P.refusal(e))
            return
        except (EOFError, OSError, GovernorError):  # gone, or a frame failing its tag: that connection only
            self._close_control(ch)
            return
        try:
            if not isinstance(cmd, dict) or cmd.get("op") not in self._OPS or not isinstance(cmd.get("args", []), list):
                raise InvalidArgument(f"a control op is {{op, args}} with op one of {sorted(self._OPS)}")
            result = getattr(self, self._OPS[cmd["op"]])(*cmd.get("args", []))
            self._reply(ch, {"ok": result})
        except GovernorError as e:
            self._reply(ch, P.refusal(e))
        except TypeError as e:
            self._reply(ch, P.refusal(InvalidArgument(f"{str(cmd)[:80]}: {e}")))

    def _accept_control(self) -> None:
        conn = T.accept(self.ctl)
        if conn is None:
            return
        try:
            def key_for(role: str, wid: int) -> bytes:
                if role != "control" or wid != self.wid:
                    raise AuthenticationFailed(f"worker {self.wid}'s control socket takes only its operator")
                return self.control_key
            _, _, ch = T.server_handshake(conn, key_for)
            ch.send(P.READY)
            T.handshake_done(conn)
            self.controls.append(ch)
        except (OSError, EOFError, GovernorError):  # a failed handshake closes that connection only
            conn.close()

    def run(self) -> None:
        while not self.stop:
            now = time.monotonic()
            if self.coord is not None and now - self.last_beat >= self.interval:
                try:
                    self.coord.send({"kind": "heartbeat", "worker": self.wid, "epoch": self.core.epoch})
                except OSError:
                    self._drop_coord()
                self.last_beat = now
            if self.coord is None and not self.held and not self._waits_for_operator() and now >= self.next_dial:
                self.try_connect()  # out of sync (a lost reply, a restarted coordinator): redial
            watch: list[Any] = [self.ctl, *self.controls] + ([self.coord] if self.coord is not None else [])
            self._serve_ready(wait(watch, timeout=self.interval))

    def _serve_ready(self, ready: list[Any]) -> None:
        """Serve the connections `wait` found readable, in order.

        A command served earlier in the same round may replace or drop the coordinator connection
        (a redial, a fence): a ready connection that is no longer `self.coord`, the listener or one of
        `self.controls` is stale and is skipped (it was once handed to `_control`, whose EOF handling
        then failed on it, and the worker died)."""
        for r in ready:
            if r is self.ctl:
                self._accept_control()
            elif any(r is c for c in self.controls):
                self._control(r)
            elif r is self.coord and self.coord is not None:
                self._drain()


def worker_main(spec: dict[str, Any], key: bytes, control_key: bytes) -> None:
    """Entry point of a worker process (forked by the zygote)."""
    faulthandler.enable()  # a crash in native code (ORT) says where
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck worker says where: kill -USR1 <pid>
    code = 0
    try:
        w = Worker(spec, key, control_key)

        def _stop(signum: int, frame: object) -> None:
            w.stop = True

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        w.run()
        for name in list(w.core.models):  # a clean exit gives every model's charge back
            w.unload(name)
    except BaseException:  # noqa: BLE001 - a crashed worker says why (its peers see only a reset connection)
        code = 1
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"ortmem worker {spec.get('wid')}: stopped by the error above\n")
        sys.stderr.flush()
    finally:
        os._exit(code)

