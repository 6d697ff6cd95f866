"""The cooperative hierarchy (C10, I11): a serving coordinator, its workers, delegated quotas.

Theory of operation (DESIGN-FACTS sections 4, 6, 7). A `ServingMemoryCoordinator`
owns a serving quota Q and delegates slices of it to worker processes it spawned.
The coordinator's ledger is `free` plus one `quota` per worker (their sum is Q);
each worker's own authority is bounded by its `slice` (what it is sure it was
given). Delegation is linked attribution (I1): the coordinator's charge and the
worker's slice are the same units, so a worker never uses a unit its quota does
not cover, and once its view is current (`synced`) the two are equal.

Messages from a worker (`Request`, `Return`, `Answer`, a return while it
waits) carry its epoch and a sequence number and are authenticated; a forged,
replayed or stale-epoch message, or one in the name of a worker that is not
live (never spawned, spawned but silent, fenced, exited), gets a typed refusal
and changes nothing. Fencing is the epoch: a missed heartbeat bumps it but
returns nothing; only an observed exit returns the worker's quota, exactly
once, even when a restarted coordinator observes the same exit again. A worker
that cannot get quota defers: it drops its open reservation, returns what it
has not committed, and leaves at the coordinator a zero-byte intent with its
submit sequence, priority and bounded age (I13 at coordinator scope). A worker
reserves within min(slice, OS ceiling); outside programs only lower the
ceiling (I11): they hold no quota and are never reclaim targets.

The environment's freedom is in the model (FoundationDB style): any message
from any identity with any epoch and sequence; a reply lost (`fate`
REPLY_LOST: applied and journaled, the sender learns nothing; MESSAGE_LOST:
never applied); the coordinator crashing between its journal write and its
reply (a lost reply, then `Restart` from the journal); worker processes
stopped, continued or killed at any point; heartbeats missed by a live,
stopped or dead worker; outside programs allocating at will; a reclaimed
worker answering any amount from 0 to what it can give. The design's rules
decide: a worker whose call goes unanswered assumes the worst (it drops its
open reservation and every unit the call may have given back) and, until it
says `Hello` again (a reconnect, which resynchronises it from the journal),
does nothing else.

Pure: frozen states, `step(state, action, guards) -> (state, result)`, lifecycles
as tables through `spec.lifecycle.lookup`. No I/O, no clock, no processes.
`refimpl.hierarchy` is the independent implementation with real processes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import immutables

from spec.arith import arbitration_key
from spec.errors import (
    AuthenticationFailed,
    CapacityDenied,
    GovernorError,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    NotAParticipant,
    UnknownTicket,
    WorkerNotLive,
)
from spec.guards import ALL_ON, GuardSet
from spec.hierarchy_actions import (
    DEFERRED, DELIVERED, FATES, GRANTED, MAX_COUNTER, MAX_PRIORITY, MAX_QUOTA, MESSAGE_LOST, REPLY_LOST,
    Answer, Arbitrate, Commit, Cont, Free, Hello, Kill, MissHeartbeat, ObserveExit, Outside, Reclaim, Request,
    Reserve, Restart, Return, Spawn, Stop,
)
from spec.hierarchy_state import (
    HierarchyState, Intent, Ticket, Worker, budget, ceiling, check_bytes, check_current, check_fate,
    check_message, check_running, drop_for, known_worker, new_hierarchy, os_free, own_call, put, request_args,
    waiting,
)
from spec.hierarchy_lifecycle import PROC_TABLE, WORKER_TABLE, ProcEvent, ProcState, WorkerEvent, WorkerState
from spec.lifecycle import lookup

_W, _WE, _P, _PE = WorkerState, WorkerEvent, ProcState, ProcEvent

__all__ = [
    "WorkerState", "WorkerEvent", "ProcState", "ProcEvent", "WORKER_TABLE", "PROC_TABLE",
    "Worker", "Intent", "Ticket", "HierarchyState", "new_hierarchy",
    "Spawn", "Hello", "Request", "Return", "Reserve", "Commit", "Free", "Stop", "Cont", "Kill",
    "MissHeartbeat", "ObserveExit", "Restart", "Outside", "Reclaim", "Answer", "Arbitrate",
    "step", "os_free", "ceiling", "budget", "own_call", "GRANTED", "DEFERRED",
    "DELIVERED", "REPLY_LOST", "MESSAGE_LOST", "FATES", "MAX_QUOTA", "MAX_PRIORITY", "MAX_COUNTER",
]


# --- lost replies ----------------------------------------------------------------------


def _lost(s: HierarchyState, act: Any, g: GuardSet, wid: int, apply: Callable[[], tuple[HierarchyState, Any]],
          give_back: int) -> tuple[HierarchyState, Any]:
    """A call whose reply never reached the worker: the coordinator applied it (REPLY_LOST, refusals
    included) or never saw it (MESSAGE_LOST); the worker, knowing neither, assumes the worst: `give_back`
    units of its slice (and, for a request that may have been deferred, its open reservation) are gone."""
    w = s.workers[wid]
    t = s
    if act.fate == REPLY_LOST:
        try:
            t, _ = apply()
        except GovernorError:
            t = s  # refused: nothing changed at the coordinator, and the worker cannot tell
    now = t.workers[wid]
    if g.on("lost_reply_assumes_worst"):
        reserved = 0 if isinstance(act, Request) else w.reserved
        now = attrs.evolve(now, slice=w.slice - give_back, reserved=reserved, committed=w.committed)
    else:  # the bug: the worker keeps the slice and reservation it had before the call
        now = attrs.evolve(now, slice=w.slice, reserved=w.reserved, committed=w.committed)
    return put(t, wid, attrs.evolve(now, synced=False)), None


# --- step -------------------------------------------------------------------------


def step(s: HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> tuple[HierarchyState, Any]:
    """One action; a rejection raises a typed `GovernorError` and changes nothing."""
    g = guards
    if isinstance(act, Spawn):
        wid = s.next_worker
        w = Worker(_W.SPAWNED, _P.RUNNING, 1, 0, 0, 0, 0, 0, 0, synced=False)  # not connected until its hello
        return put(s, wid, w, next_worker=wid + 1), wid
    if isinstance(act, Hello):
        return _hello(s, act, g)
    if isinstance(act, Request):
        return _request(s, act, g)
    if isinstance(act, Return):
        return _return(s, act, g)
    if isinstance(act, Reserve):
        w = known_worker(s, act.worker)
        check_running(w, act.worker, "reserve")
        check_current(w, act.worker)
        n = check_bytes(act.nbytes, "nbytes")
        # Verify the budget: min(slice, OS ceiling) (C10); the slice alone ignores the machine.
        limit = budget(s, act.worker) if g.on("budget_min_ceiling") else w.slice
        if w.committed + w.reserved + n > limit:
            raise CapacityDenied(f"worker {act.worker}: {n} units asked, budget {limit}, "
                                 f"{w.committed + w.reserved} in use")
        return put(s, act.worker, attrs.evolve(w, reserved=w.reserved + n)), None
    if isinstance(act, Commit):
        w = known_worker(s, act.worker)
        check_running(w, act.worker, "commit")
        check_current(w, act.worker)
        if not w.reserved:
            raise InvalidTransition(f"worker {act.worker} has no open reservation to commit")
        if w.committed + w.reserved > w.slice:  # C10: never commit past what the coordinator charges
            raise CapacityDenied(f"worker {act.worker}: committing {w.reserved} would hold "
                                 f"{w.committed + w.reserved} units of a {w.slice}-unit slice")
        return put(s, act.worker, attrs.evolve(w, committed=w.committed + w.reserved, reserved=0)), None
    if isinstance(act, Free):
        return _free(s, act, g)
    if isinstance(act, (Stop, Cont, Kill)):
        w = known_worker(s, act.worker)
        ev = {Stop: _PE.STOP, Cont: _PE.CONT, Kill: _PE.KILL}[type(act)]
        proc = lookup(PROC_TABLE, w.proc, ev, f"worker {act.worker} process")
        if proc is _P.DEAD:  # the OS takes back the process's memory; the coordinator does not know yet
            w = attrs.evolve(w, committed=0, reserved=0)
        return put(s, act.worker, attrs.evolve(w, proc=proc)), None
    if isinstance(act, MissHeartbeat):
        w = known_worker(s, act.worker)
        state = lookup(WORKER_TABLE, w.state, _WE.FENCE, f"worker {act.worker}")
        intents, tickets = drop_for(s, act.worker)
        w = attrs.evolve(w, state=state, epoch=w.epoch + 1)
        free = s.free
        if not g.on("charge_until_exit"):  # the bug: a missed heartbeat treated as an exit
            free, w = free + w.quota, attrs.evolve(w, quota=0)
        return put(s, act.worker, w, free=free, intents=intents, tickets=tickets), None
    if isinstance(act, ObserveExit):
        return _observe_exit(s, act, g)
    if isinstance(act, Restart):
        # The journal is the state: a restarted coordinator recovers every figure. Every connection is lost: a
        # worker notices at its next call or heartbeat and says hello again before it acts.
        workers = immutables.Map({i: attrs.evolve(w, synced=False) for i, w in s.workers.items()})
        return attrs.evolve(s, incarnation=s.incarnation + 1, workers=workers), None
    if isinstance(act, Outside):
        if type(act.name) is not str or not act.name or type(act.delta) is not int or act.delta == 0:
            raise InvalidArgument(f"{act!r:.80}: a non-empty name and a non-zero int delta")
        used = s.outside.get(act.name, 0) + act.delta
        if used < 0 or sum(s.outside.values()) + act.delta > s.machine:
            raise InvalidBytes(f"outside program {act.name!r} cannot use {used} units of a {s.machine}-unit machine")
        free = s.free
        if act.delta > 0 and not g.on("outside_is_ceiling"):  # the bug: an outsider booked as a holder
            free -= min(free, act.delta)
        return attrs.evolve(s, outside=s.outside.set(act.name, used), free=free), None
    if isinstance(act, Reclaim):
        n = check_bytes(act.nbytes, "nbytes")
        if isinstance(act.target, str):
            # Verify the target participates (I11): an outside program is OS pressure, never a holder.
            if g.on("participants_only"):
                raise NotAParticipant(f"{act.target!r:.40} is outside the hierarchy: it only lowers the OS ceiling")
        else:
            w = known_worker(s, act.target)
            if w.state is not _W.ACTIVE:
                raise InvalidTransition(f"worker {act.target} is {w.state.value}: it cannot be reclaimed from")
        tid = s.next_ticket
        return attrs.evolve(s, tickets=s.tickets.set(tid, Ticket(act.target, n)), next_ticket=tid + 1), tid
    if isinstance(act, Answer):
        return _answer(s, act, g)
    if isinstance(act, Arbitrate):
        return _arbitrate(s, act, g)
    raise InvalidArgument(f"not a hierarchy action: {act!r:.80}")


def _hello(s: HierarchyState, act: Hello, g: GuardSet) -> tuple[HierarchyState, Any]:
    """A connection: the first authentication, or a reconnect that resynchronises the worker from the journal.

    With a fate but DELIVERED (the coordinator crashed before or after journaling it), the worker learns
    nothing and keeps the view it had."""
    w = known_worker(s, act.worker)
    fate = check_fate(act)
    if type(act.authentic) is not bool:
        raise InvalidArgument(f"{act!r:.80}: authentic must be a bool")
    check_running(w, act.worker, "authenticate")  # a stopped or dead process dials nobody
    if not act.authentic:
        raise AuthenticationFailed(f"worker {act.worker}: challenge failed")
    if fate == MESSAGE_LOST:
        return s, None
    try:
        t = _hello_applied(s, act, g)
    except WorkerNotLive:
        if fate == DELIVERED:
            raise
        return s, None
    if fate == DELIVERED:
        return t, None
    n = t.workers[act.worker]  # journaled; the reply lost: the worker keeps what it had, out of sync
    return put(t, act.worker, attrs.evolve(n, known_epoch=w.known_epoch, slice=w.slice, reserved=w.reserved,
                                           synced=False)), None


def _hello_applied(s: HierarchyState, act: Hello, g: GuardSet) -> HierarchyState:
    w = s.workers[act.worker]
    if w.state in (_W.FENCED, _W.EXITED):
        raise WorkerNotLive(f"worker {act.worker} is {w.state.value}: its epoch is over, it cannot authenticate again")
    state = lookup(WORKER_TABLE, w.state, _WE.HELLO, f"worker {act.worker}")
    quota, free, reserved = w.quota, s.free, w.reserved
    if waiting(s, act.worker) and g.on("defer_returns_uncommitted"):
        # The hello carries what the worker has committed: a waiting worker keeps nothing above it (C10).
        back = max(0, quota - w.committed)
        quota, free, reserved = quota - back, free + back, 0
    if g.on("lost_reply_assumes_worst"):  # the slice is the journal's quota: what does not fit is dropped
        reserved = min(reserved, max(0, quota - w.committed))
    # A reconnect starts a new epoch: what the previous connection still carries is stale from now on (a message
    # delayed past the worker's resynchronisation must not change what it was just told).
    epoch = w.epoch + 1 if w.state is _W.ACTIVE else w.epoch
    w = attrs.evolve(w, state=state, epoch=epoch, known_epoch=epoch, quota=quota, slice=quota, reserved=reserved,
                     synced=True)
    return put(s, act.worker, w, free=free)


def _request(s: HierarchyState, act: Request, g: GuardSet) -> tuple[HierarchyState, Any]:
    if check_fate(act) != DELIVERED:
        if not own_call(s, act):
            raise InvalidArgument(f"{act!r:.80}: only a worker's own call can lose its reply")
        request_args(s, act)  # the worker checks its own arguments before it sends anything
        w = s.workers[act.worker]
        return _lost(s, act, g, act.worker, lambda: _request_delivered(s, act, g), w.slice - w.committed)
    return _request_delivered(s, act, g)


def _request_delivered(s: HierarchyState, act: Request, g: GuardSet) -> tuple[HierarchyState, Any]:
    known_worker(s, act.worker)
    if own_call(s, act):
        request_args(s, act)
    w, sent = check_message(s, act, g)
    # A reply to a dead process is lost in transit: only the coordinator side acts on a delayed request.
    genuine = sent and w.proc is not _P.DEAD
    n = request_args(s, act)
    if waiting(s, act.worker):
        raise InvalidTransition(f"worker {act.worker} already awaits quota")
    seq = max(w.seq, act.seq)
    if n <= s.free:
        w = attrs.evolve(w, quota=w.quota + n, seq=seq, slice=w.slice + n if genuine else w.slice)
        return put(s, act.worker, w, free=s.free - n), (GRANTED, n)
    # Defer: leave a zero-byte intent; the worker waits holding nothing it has not committed (C10).
    iid = s.next_intent
    intents = s.intents.set(iid, Intent(act.worker, n, act.priority, iid, 0))
    free = s.free
    w = attrs.evolve(w, seq=seq)
    if genuine and g.on("defer_returns_uncommitted"):
        back = min(w.slice - w.committed, w.quota)
        w = attrs.evolve(w, reserved=0, slice=w.slice - back, quota=w.quota - back)
        free += back
    return put(s, act.worker, w, free=free, intents=intents, next_intent=iid + 1), (DEFERRED, iid)


def _return(s: HierarchyState, act: Return, g: GuardSet) -> tuple[HierarchyState, Any]:
    fate = check_fate(act)
    if fate != DELIVERED and not own_call(s, act):
        raise InvalidArgument(f"{act!r:.80}: only a worker's own call can lose its reply")
    if own_call(s, act):  # the worker checks its own arguments before it sends anything
        w = s.workers[act.worker]
        n = check_bytes(act.nbytes, "nbytes")
        if n > w.slice - w.committed - w.reserved:
            raise InvalidBytes(f"worker {act.worker}: cannot return {n} units (slice {w.slice}, committed "
                               f"{w.committed}, reserved {w.reserved})")
        if fate != DELIVERED:
            return _lost(s, act, g, act.worker, lambda: _return_delivered(s, act, g), n)
    return _return_delivered(s, act, g)


def _return_delivered(s: HierarchyState, act: Return, g: GuardSet) -> tuple[HierarchyState, Any]:
    w, sent = check_message(s, act, g)
    n = check_bytes(act.nbytes, "nbytes")
    if n > w.quota or (sent and n > w.slice - w.committed - w.reserved):
        raise InvalidBytes(f"worker {act.worker}: cannot return {n} units (quota {w.quota}, slice {w.slice}, "
                           f"committed {w.committed}, reserved {w.reserved})")
    w = attrs.evolve(w, quota=w.quota - n, seq=max(w.seq, act.seq), slice=w.slice - n if sent else w.slice)
    return put(s, act.worker, w, free=s.free + n), None


def _free(s: HierarchyState, act: Free, g: GuardSet) -> tuple[HierarchyState, Any]:
    w = known_worker(s, act.worker)
    fate = check_fate(act)
    check_running(w, act.worker, "free")
    check_current(w, act.worker)
    n = check_bytes(act.nbytes, "nbytes")
    if n > w.committed:
        raise InvalidBytes(f"worker {act.worker}: {n} units to free, {w.committed} committed")
    w = attrs.evolve(w, committed=w.committed - n)
    if not (waiting(s, act.worker) and g.on("defer_returns_uncommitted")):
        return put(s, act.worker, w), None
    # C10: a waiting worker keeps no uncommitted quota; the freed units go back in a sequenced return.
    back = min(n, w.quota)
    applied = attrs.evolve(w, slice=w.slice - back, quota=w.quota - back, seq=w.seq + 1)
    if fate == DELIVERED:
        return put(s, act.worker, applied, free=s.free + back), None
    worst = w.slice - back if g.on("lost_reply_assumes_worst") else w.slice
    if fate == REPLY_LOST:
        return put(s, act.worker, attrs.evolve(applied, slice=worst, synced=False), free=s.free + back), None
    return put(s, act.worker, attrs.evolve(w, slice=worst, synced=False)), None


def _answer(s: HierarchyState, act: Answer, g: GuardSet) -> tuple[HierarchyState, Any]:
    fate = check_fate(act)
    t = s.tickets.get(act.ticket) if type(act.ticket) is int else None
    if t is None:
        raise UnknownTicket(f"reclaim ticket {act.ticket!r:.40} is not open")
    if isinstance(t.target, str):
        raise NotAParticipant(f"{t.target!r:.40} is outside the hierarchy: it never answers")
    wid = t.target
    w = s.workers[wid]
    check_running(w, wid, "answer")
    check_current(w, wid)
    k = check_bytes(act.nbytes, "nbytes", zero_ok=True)
    if k > min(t.nbytes, w.slice - w.committed - w.reserved, w.quota):
        raise InvalidBytes(f"worker {wid}: cannot give back {k} units of a {t.nbytes}-unit ticket "
                           f"(slice {w.slice}, committed {w.committed}, reserved {w.reserved})")

    def apply() -> tuple[HierarchyState, Any]:
        got = attrs.evolve(w, slice=w.slice - k, quota=w.quota - k, seq=w.seq + 1)  # a sequenced answer
        return put(s, wid, got, free=s.free + k, tickets=s.tickets.delete(act.ticket)), k

    return apply() if fate == DELIVERED else _lost(s, act, g, wid, apply, k)


def _observe_exit(s: HierarchyState, act: ObserveExit, g: GuardSet) -> tuple[HierarchyState, Any]:
    w = known_worker(s, act.worker)
    # Verify the process is gone (sentinel / waitpid), never assumed from silence.
    if w.proc is not _P.DEAD:
        raise InvalidTransition(f"worker {act.worker} is {w.proc.value}: no exit to observe")
    again = w.state is _W.EXITED
    state = lookup(WORKER_TABLE, w.state, _WE.OBSERVE_EXIT, f"worker {act.worker}")
    if again:
        if g.on("return_once"):  # C10: returned once, idempotent across restarts
            return s, 0
        return attrs.evolve(s, free=s.free + w.returned), w.returned  # the bug: the journal replayed
    intents, tickets = drop_for(s, act.worker)
    credit = w.quota
    # The exit also fences: a delayed message of the dead process is of an old epoch from now on.
    w = attrs.evolve(w, state=state, quota=0, slice=0, returned=credit, epoch=w.epoch + 1)
    return put(s, act.worker, w, free=s.free + credit, intents=intents, tickets=tickets), credit


def _arbitrate(s: HierarchyState, act: Arbitrate, g: GuardSet) -> tuple[HierarchyState, Any]:
    """One round: age every intent, then grant greedily in arbitration order; push each grant to its worker."""
    fate = check_fate(act)
    if fate == MESSAGE_LOST:
        raise InvalidArgument("an arbitration round is journaled or not run: its pushes can be lost, not the round")
    cap = s.aging_cap
    aged = [attrs.evolve(i, age=min(i.age + 1, cap)) for i in s.intents.values()]
    aged.sort(key=lambda i: arbitration_key(i.age >= cap, i.priority, i.seq))
    free, workers, granted, left = s.free, s.workers, [], []
    stopped = False
    for i in aged:
        if not stopped and i.nbytes <= free:
            w = workers[i.worker]
            # A push reaches a worker whose process lives and whose connection is up; otherwise the grant
            # is charged and the worker learns it at its next hello (or it is returned at its exit).
            pushed = fate == DELIVERED and w.proc is not _P.DEAD and w.synced
            w = attrs.evolve(w, quota=w.quota + i.nbytes, slice=w.slice + i.nbytes if pushed else w.slice,
                             synced=w.synced and fate == DELIVERED)
            workers = workers.set(i.worker, w)
            free -= i.nbytes
            granted.append(i.seq)
            continue
        if i.age >= cap and g.on("coordinator_aging"):  # I13: capacity accumulates for a matured intent
            stopped = True
        left.append(i)
    intents = immutables.Map({i.seq: i for i in left})
    nxt = attrs.evolve(s, free=free, workers=workers, intents=intents)
    return nxt, (tuple(granted) if fate == DELIVERED else None)
