"""The cooperative hierarchy (C10, I11): a serving coordinator, its workers, delegated quotas.

Theory of operation (DESIGN-FACTS sections 4, 6, 7). A `ServingMemoryCoordinator`
owns a serving quota Q and delegates slices of it to worker processes it spawned.
The coordinator's ledger is `free` plus one `quota` per worker (their sum is Q);
each worker's own authority is bounded by its `slice` (what it believes it was
given). Delegation is linked attribution (I1): the coordinator's charge and the
worker's slice are the same bytes, so for every worker whose exit has not been
observed `quota == slice`, never two grantable copies.

Messages from a worker (`Request`, `Return`) carry its epoch and a sequence
number and are authenticated; a forged, replayed or stale-epoch message gets a
typed refusal and changes nothing. Fencing is the epoch: a missed heartbeat
bumps it (the fenced worker's old-epoch messages are refused from then on) but
returns nothing; only an observed exit (the process is dead: sentinel /
waitpid) returns the worker's quota, exactly once, even when a restarted
coordinator observes the same exit again. A worker that cannot get quota
defers: it drops its open reservation, returns what it has not committed, and
leaves at the coordinator a zero-byte intent with its submit sequence,
priority and bounded age (I13 at coordinator scope). A worker reserves within
min(slice, OS ceiling); outside programs only lower the ceiling (I11): they
hold no quota and are never reclaim targets.

The environment's freedom is in the model: a worker process can be stopped
(SIGSTOP), continued, killed at any point; heartbeats can be missed by a live,
stopped or dead worker; an impostor can forge or replay messages; the
coordinator can restart; outside programs allocate and free at will; a
reclaimed worker answers any amount from 0 to what it can give.

Pure: frozen states, `step(state, action, guards) -> (state, result)`, lifecycles
as tables through `spec.lifecycle.lookup`. No I/O, no clock, no processes.
`refimpl.hierarchy` is the independent implementation with real processes.
"""

from __future__ import annotations

from typing import Any

import attrs
import immutables

from spec.arith import arbitration_key
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
)
from spec.guards import ALL_ON, GuardSet
from spec.hierarchy_lifecycle import PROC_TABLE, WORKER_TABLE, ProcEvent, ProcState, WorkerEvent, WorkerState
from spec.lifecycle import lookup

_W, _WE, _P, _PE = WorkerState, WorkerEvent, ProcState, ProcEvent

__all__ = [
    "WorkerState", "WorkerEvent", "ProcState", "ProcEvent", "WORKER_TABLE", "PROC_TABLE",
    "Worker", "Intent", "Ticket", "HierarchyState", "new_hierarchy",
    "Spawn", "Hello", "Request", "Return", "Reserve", "Commit", "Free", "Stop", "Cont", "Kill",
    "MissHeartbeat", "ObserveExit", "Restart", "Outside", "Reclaim", "Answer", "Arbitrate",
    "step", "os_free", "ceiling", "budget", "GRANTED", "DEFERRED",
]


GRANTED, DEFERRED = "granted", "deferred"


@attrs.frozen
class Worker:
    state: WorkerState
    proc: ProcState
    epoch: int  # the coordinator's current epoch for this worker (the fence)
    known_epoch: int  # the epoch the worker process was told at its last hello (0: none)
    seq: int  # last accepted message sequence number
    quota: int  # coordinator side: bytes charged to this worker
    slice: int  # worker side: the bound of its own authority
    committed: int  # worker side: bytes its leases hold
    reserved: int  # worker side: open local reservation, not yet committed
    returned: int = 0  # bytes credited when its exit was observed (the journal's return record)


@attrs.frozen
class Intent:
    """Zero-byte record of deferred work (I13 at coordinator scope)."""

    worker: int
    nbytes: int
    priority: int
    seq: int  # submit sequence: the intent's identity and its FIFO place
    age: int  # arbitration rounds waited, capped at the aging bound


@attrs.frozen
class Ticket:
    target: int | str  # a worker id, or (only with participants_only off) an outside program
    nbytes: int


@attrs.frozen
class HierarchyState:
    serving_quota: int
    machine: int  # physical bytes the OS has for everyone, participants and outsiders
    aging_cap: int
    free: int  # coordinator ledger: serving quota not delegated
    workers: immutables.Map  # id -> Worker
    intents: immutables.Map  # seq -> Intent
    tickets: immutables.Map  # id -> Ticket
    outside: immutables.Map  # program name -> bytes it uses
    next_worker: int = 1
    next_intent: int = 1
    next_ticket: int = 1
    incarnation: int = 1  # coordinator restarts


# --- actions --------------------------------------------------------------------


@attrs.frozen
class Spawn:
    pass


@attrs.frozen
class Hello:
    worker: int
    authentic: bool = True


@attrs.frozen
class Request:
    worker: int
    epoch: int
    seq: int
    nbytes: int
    priority: int = 0
    authentic: bool = True


@attrs.frozen
class Return:
    worker: int
    epoch: int
    seq: int
    nbytes: int
    authentic: bool = True


@attrs.frozen
class Reserve:
    worker: int
    nbytes: int


@attrs.frozen
class Commit:
    worker: int


@attrs.frozen
class Free:
    worker: int
    nbytes: int


@attrs.frozen
class Stop:
    worker: int


@attrs.frozen
class Cont:
    worker: int


@attrs.frozen
class Kill:
    worker: int


@attrs.frozen
class MissHeartbeat:
    worker: int


@attrs.frozen
class ObserveExit:
    worker: int


@attrs.frozen
class Restart:
    pass


@attrs.frozen
class Outside:
    name: str
    delta: int  # bytes the outside program allocates (> 0) or frees (< 0)


@attrs.frozen
class Reclaim:
    target: int | str
    nbytes: int


@attrs.frozen
class Answer:
    ticket: int
    nbytes: int


@attrs.frozen
class Arbitrate:
    pass


# --- derived figures --------------------------------------------------------------


def new_hierarchy(serving_quota: int, machine: int, aging_cap: int = 8) -> HierarchyState:
    for n, what in ((serving_quota, "serving quota"), (machine, "machine"), (aging_cap, "aging cap")):
        if type(n) is not int or n < 1:
            raise InvalidBytes(f"{what} must be a positive int, got {n!r}")
    e = immutables.Map()
    return HierarchyState(serving_quota, machine, aging_cap, serving_quota, e, e, e, e)


def os_free(s: HierarchyState) -> int:
    """What the OS has left: the machine minus outside usage minus every live worker's local charge."""
    used = sum(w.committed + w.reserved for w in s.workers.values() if w.proc is not _P.DEAD)
    return max(0, s.machine - sum(s.outside.values()) - used)


def ceiling(s: HierarchyState, wid: int) -> int:
    """The OS ceiling as the worker sees it (its own charge plus MemAvailable)."""
    w = s.workers[wid]
    return w.committed + w.reserved + os_free(s)


def budget(s: HierarchyState, wid: int) -> int:
    """A worker's budget: min(delegated slice, OS ceiling) (C10)."""
    return min(s.workers[wid].slice, ceiling(s, wid))


# --- step -------------------------------------------------------------------------


def _bytes(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be a {'non-negative' if zero_ok else 'positive'} int, got {n!r}")
    return n


def _worker(s: HierarchyState, wid: object) -> Worker:
    w = s.workers.get(wid) if type(wid) is int else None
    if w is None:
        raise UnknownWorker(f"worker {wid!r} was never spawned by this coordinator")
    return w


def _running(w: Worker, wid: int, what: str) -> None:
    if w.proc is not _P.RUNNING:
        raise InvalidTransition(f"worker {wid} is {w.proc.value}: it cannot {what}")


def _put(s: HierarchyState, wid: int, w: Worker, **changes: Any) -> HierarchyState:
    return attrs.evolve(s, workers=s.workers.set(wid, w), **changes)


def _drop_for(s: HierarchyState, wid: int) -> tuple[immutables.Map, immutables.Map]:
    intents = immutables.Map({k: i for k, i in s.intents.items() if i.worker != wid})
    tickets = immutables.Map({k: t for k, t in s.tickets.items() if t.target != wid})
    return intents, tickets


def _message(s: HierarchyState, act: Any, g: GuardSet) -> tuple[Worker, bool]:
    """Validate a worker message; returns (worker, sent): sent iff the worker itself sent it (not forged, not replayed)."""
    w = _worker(s, act.worker)
    if type(act.epoch) is not int or type(act.seq) is not int or type(act.authentic) is not bool:
        raise InvalidArgument(f"{act!r}: epoch and seq must be ints, authentic a bool")
    # Verify the sender holds the worker's key (C10: quota only to authenticated workers).
    if not act.authentic and g.on("authenticated_only"):
        raise AuthenticationFailed(f"worker {act.worker}: message failed authentication")
    # Verify the message is new: a replayed or reordered one gets nothing.
    if act.seq <= w.seq and g.on("sequence_check"):
        raise ReplayedMessage(f"worker {act.worker}: sequence {act.seq} <= last accepted {w.seq}")
    # Verify the epoch: a fenced worker's messages are refused (C10: old-epoch claims rejected).
    if act.epoch != w.epoch and g.on("epoch_fencing"):
        raise StaleEpoch(f"worker {act.worker}: epoch {act.epoch}, current {w.epoch}")
    return w, act.authentic and act.seq > w.seq


def step(s: HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> tuple[HierarchyState, Any]:
    """One action; a rejection raises a typed `GovernorError` and changes nothing."""
    g = guards
    if isinstance(act, Spawn):
        wid = s.next_worker
        w = Worker(_W.SPAWNED, _P.RUNNING, 1, 0, 0, 0, 0, 0, 0)
        return _put(s, wid, w, next_worker=wid + 1), wid
    if isinstance(act, Hello):
        w = _worker(s, act.worker)
        _running(w, act.worker, "authenticate")
        if act.authentic is not True:
            raise AuthenticationFailed(f"worker {act.worker}: challenge failed")
        state = lookup(WORKER_TABLE, w.state, _WE.HELLO, f"worker {act.worker}")
        return _put(s, act.worker, attrs.evolve(w, state=state, known_epoch=w.epoch)), None
    if isinstance(act, Request):
        return _request(s, act, g)
    if isinstance(act, Return):
        w, genuine = _message(s, act, g)
        n = _bytes(act.nbytes, "nbytes")
        if n > w.quota or (genuine and n > w.slice - w.committed - w.reserved):
            raise InvalidBytes(f"worker {act.worker}: cannot return {n} B (quota {w.quota}, slice {w.slice}, "
                               f"committed {w.committed}, reserved {w.reserved})")
        w = attrs.evolve(w, quota=w.quota - n, seq=max(w.seq, act.seq),
                         slice=w.slice - n if genuine else w.slice)
        return _put(s, act.worker, w, free=s.free + n), None
    if isinstance(act, Reserve):
        w = _worker(s, act.worker)
        _running(w, act.worker, "reserve")
        n = _bytes(act.nbytes, "nbytes")
        # Verify the budget: min(slice, OS ceiling) (C10); the slice alone ignores the machine.
        limit = budget(s, act.worker) if g.on("budget_min_ceiling") else w.slice
        if w.committed + w.reserved + n > limit:
            raise CapacityDenied(f"worker {act.worker}: {n} B asked, budget {limit}, "
                                 f"{w.committed + w.reserved} B in use")
        return _put(s, act.worker, attrs.evolve(w, reserved=w.reserved + n)), None
    if isinstance(act, Commit):
        w = _worker(s, act.worker)
        _running(w, act.worker, "commit")
        if not w.reserved:
            raise InvalidTransition(f"worker {act.worker} has no open reservation to commit")
        return _put(s, act.worker, attrs.evolve(w, committed=w.committed + w.reserved, reserved=0)), None
    if isinstance(act, Free):
        w = _worker(s, act.worker)
        _running(w, act.worker, "free")
        n = _bytes(act.nbytes, "nbytes")
        if n > w.committed:
            raise InvalidBytes(f"worker {act.worker}: {n} B to free, {w.committed} B committed")
        w = attrs.evolve(w, committed=w.committed - n)
        waiting = any(i.worker == act.worker for i in s.intents.values())
        if waiting and g.on("defer_returns_uncommitted"):  # C10: a waiting worker keeps no uncommitted quota
            back = min(n, w.quota)  # sent as a sequenced return message
            w = attrs.evolve(w, slice=w.slice - back, quota=w.quota - back, seq=w.seq + 1)
            return _put(s, act.worker, w, free=s.free + back), None
        return _put(s, act.worker, w), None
    if isinstance(act, (Stop, Cont, Kill)):
        w = _worker(s, act.worker)
        ev = {Stop: _PE.STOP, Cont: _PE.CONT, Kill: _PE.KILL}[type(act)]
        proc = lookup(PROC_TABLE, w.proc, ev, f"worker {act.worker} process")
        if proc is _P.DEAD:  # the OS takes back the process's memory; the coordinator does not know yet
            w = attrs.evolve(w, committed=0, reserved=0)
        return _put(s, act.worker, attrs.evolve(w, proc=proc)), None
    if isinstance(act, MissHeartbeat):
        w = _worker(s, act.worker)
        state = lookup(WORKER_TABLE, w.state, _WE.FENCE, f"worker {act.worker}")
        intents, tickets = _drop_for(s, act.worker)
        w = attrs.evolve(w, state=state, epoch=w.epoch + 1)
        free = s.free
        if not g.on("charge_until_exit"):  # the bug: a missed heartbeat treated as an exit
            free, w = free + w.quota, attrs.evolve(w, quota=0)
        return _put(s, act.worker, w, free=free, intents=intents, tickets=tickets), None
    if isinstance(act, ObserveExit):
        return _observe_exit(s, act, g)
    if isinstance(act, Restart):
        # The journal is the state: a restarted coordinator recovers every figure; connections are lost.
        return attrs.evolve(s, incarnation=s.incarnation + 1), None
    if isinstance(act, Outside):
        if type(act.name) is not str or not act.name or type(act.delta) is not int or act.delta == 0:
            raise InvalidArgument(f"{act!r}: a non-empty name and a non-zero int delta")
        used = s.outside.get(act.name, 0) + act.delta
        if used < 0 or sum(s.outside.values()) + act.delta > s.machine:
            raise InvalidBytes(f"outside program {act.name!r} cannot use {used} B of a {s.machine} B machine")
        free = s.free
        if act.delta > 0 and not g.on("outside_is_ceiling"):  # the bug: an outsider booked as a holder
            free -= min(free, act.delta)
        return attrs.evolve(s, outside=s.outside.set(act.name, used), free=free), None
    if isinstance(act, Reclaim):
        n = _bytes(act.nbytes, "nbytes")
        if isinstance(act.target, str):
            # Verify the target participates (I11): an outside program is OS pressure, never a holder.
            if g.on("participants_only"):
                raise NotAParticipant(f"{act.target!r} is outside the hierarchy: it only lowers the OS ceiling")
        else:
            w = _worker(s, act.target)
            if w.state is not _W.ACTIVE:
                raise InvalidTransition(f"worker {act.target} is {w.state.value}: it cannot be reclaimed from")
        tid = s.next_ticket
        return attrs.evolve(s, tickets=s.tickets.set(tid, Ticket(act.target, n)), next_ticket=tid + 1), tid
    if isinstance(act, Answer):
        t = s.tickets.get(act.ticket) if type(act.ticket) is int else None
        if t is None:
            raise UnknownTicket(f"reclaim ticket {act.ticket!r} is not open")
        if isinstance(t.target, str):
            raise NotAParticipant(f"{t.target!r} is outside the hierarchy: it never answers")
        w = s.workers[t.target]
        _running(w, t.target, "answer")
        k = _bytes(act.nbytes, "nbytes", zero_ok=True)
        if k > min(t.nbytes, w.slice - w.committed - w.reserved, w.quota):
            raise InvalidBytes(f"worker {t.target}: cannot give back {k} B of a {t.nbytes} B ticket "
                               f"(slice {w.slice}, committed {w.committed}, reserved {w.reserved})")
        w = attrs.evolve(w, slice=w.slice - k, quota=w.quota - k, seq=w.seq + 1)  # a sequenced answer
        return _put(s, t.target, w, free=s.free + k, tickets=s.tickets.delete(act.ticket)), k
    if isinstance(act, Arbitrate):
        return _arbitrate(s, g)
    raise InvalidArgument(f"not a hierarchy action: {act!r}")


def _request(s: HierarchyState, act: Request, g: GuardSet) -> tuple[HierarchyState, Any]:
    w, sent = _message(s, act, g)
    # A reply to a dead process is lost in transit: only the coordinator side acts on a delayed request.
    genuine = sent and w.proc is not _P.DEAD
    n = _bytes(act.nbytes, "nbytes")
    if type(act.priority) is not int:
        raise InvalidArgument(f"priority must be an int, got {act.priority!r}")
    if any(i.worker == act.worker for i in s.intents.values()):
        raise InvalidTransition(f"worker {act.worker} already awaits quota")
    seq = max(w.seq, act.seq)
    if n <= s.free:
        w = attrs.evolve(w, quota=w.quota + n, seq=seq, slice=w.slice + n if genuine else w.slice)
        return _put(s, act.worker, w, free=s.free - n), (GRANTED, n)
    # Defer: leave a zero-byte intent; the worker waits holding nothing it has not committed (C10).
    iid = s.next_intent
    intents = s.intents.set(iid, Intent(act.worker, n, act.priority, iid, 0))
    free = s.free
    w = attrs.evolve(w, seq=seq)
    if genuine and g.on("defer_returns_uncommitted"):
        back = min(w.slice - w.committed, w.quota)
        w = attrs.evolve(w, reserved=0, slice=w.slice - back, quota=w.quota - back)
        free += back
    return _put(s, act.worker, w, free=free, intents=intents, next_intent=iid + 1), (DEFERRED, iid)


def _observe_exit(s: HierarchyState, act: ObserveExit, g: GuardSet) -> tuple[HierarchyState, Any]:
    w = _worker(s, act.worker)
    # Verify the process is gone (sentinel / waitpid), never assumed from silence.
    if w.proc is not _P.DEAD:
        raise InvalidTransition(f"worker {act.worker} is {w.proc.value}: no exit to observe")
    again = w.state is _W.EXITED
    state = lookup(WORKER_TABLE, w.state, _WE.OBSERVE_EXIT, f"worker {act.worker}")
    if again:
        if g.on("return_once"):  # C10: returned once, idempotent across restarts
            return s, 0
        return attrs.evolve(s, free=s.free + w.returned), w.returned  # the bug: the journal replayed
    intents, tickets = _drop_for(s, act.worker)
    credit = w.quota
    # The exit also fences: a delayed message of the dead process is of an old epoch from now on.
    w = attrs.evolve(w, state=state, quota=0, slice=0, returned=credit, epoch=w.epoch + 1)
    return _put(s, act.worker, w, free=s.free + credit, intents=intents, tickets=tickets), credit


def _arbitrate(s: HierarchyState, g: GuardSet) -> tuple[HierarchyState, Any]:
    """One round: age every intent, then grant greedily in arbitration order."""
    cap = s.aging_cap
    aged = [attrs.evolve(i, age=min(i.age + 1, cap)) for i in s.intents.values()]
    aged.sort(key=lambda i: arbitration_key(i.age >= cap, i.priority, i.seq))
    free, workers, granted, left = s.free, s.workers, [], []
    stopped = False
    for i in aged:
        if not stopped and i.nbytes <= free:
            w = workers[i.worker]
            # A grant to a dead process is lost in transit: charged until its exit is observed.
            grown = w.slice + i.nbytes if w.proc is not _P.DEAD else w.slice
            workers = workers.set(i.worker, attrs.evolve(w, quota=w.quota + i.nbytes, slice=grown))
            free -= i.nbytes
            granted.append(i.seq)
            continue
        if i.age >= cap and g.on("coordinator_aging"):  # I13: capacity accumulates for a matured intent
            stopped = True
        left.append(i)
    intents = immutables.Map({i.seq: i for i in left})
    return attrs.evolve(s, free=free, workers=workers, intents=intents), tuple(granted)
