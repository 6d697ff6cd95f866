"""The state of the cooperative hierarchy (C10, I11), its derived figures, and the checks every step shares.

Values and pure helpers only; the rules are `spec.hierarchy.step`. A `Worker`
holds both sides of one worker: the coordinator's record (state, epoch,
accepted sequence number, quota, what its exit returned) and the worker
process's own view (its process state, the epoch it was told, its slice,
committed and reserved units, whether its view is current).
"""

from __future__ import annotations

from typing import Any

import attrs
import immutables

from spec.errors import (
    AuthenticationFailed,
    CapacityDenied,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ReplayedMessage,
    StaleEpoch,
    UnknownWorker,
    WorkerNotLive,
)
from spec.guards import GuardSet
from spec.hierarchy_actions import FATES, MAX_COUNTER, MAX_PRIORITY, MAX_QUOTA, Request
from spec.hierarchy_lifecycle import ProcState, WorkerState

_W, _P = WorkerState, ProcState

__all__ = ["Worker", "Intent", "Ticket", "HierarchyState", "new_hierarchy", "os_free", "ceiling", "budget",
           "own_call", "check_bytes", "check_counter", "check_fate", "known_worker", "check_running",
           "check_current", "put", "drop_for", "waiting", "check_message", "request_args"]


@attrs.frozen
class Worker:
    state: WorkerState
    proc: ProcState
    epoch: int  # the coordinator's current epoch for this worker (the fence)
    known_epoch: int  # the epoch the worker process was told at its last hello (0: none)
    seq: int  # last accepted message sequence number
    quota: int  # coordinator side: units charged to this worker
    slice: int  # worker side: the bound of its own authority
    committed: int  # worker side: units its leases hold
    reserved: int  # worker side: open local reservation, not yet committed
    returned: int = 0  # units credited when its exit was observed (the journal's return record)
    #: Worker side: True iff its connection is up and its view current. False from a call whose reply it never
    #: got, or a coordinator restart (every connection lost), until its next hello; meanwhile it acts on nothing
    #: (after a lost reply it has already assumed the worst).
    synced: bool = True


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
    machine: int  # physical units the OS has for everyone, participants and outsiders
    aging_cap: int
    free: int  # coordinator ledger: serving quota not delegated
    workers: immutables.Map  # id -> Worker
    intents: immutables.Map  # seq -> Intent
    tickets: immutables.Map  # id -> Ticket
    outside: immutables.Map  # program name -> units it uses
    next_worker: int = 1
    next_intent: int = 1
    next_ticket: int = 1
    incarnation: int = 1  # coordinator restarts


# --- derived figures --------------------------------------------------------------


def new_hierarchy(serving_quota: int, machine: int, aging_cap: int = 8) -> HierarchyState:
    for n, what in ((serving_quota, "serving quota"), (machine, "machine"), (aging_cap, "aging cap")):
        if type(n) is not int or not 1 <= n <= MAX_QUOTA:
            raise InvalidBytes(f"{what} must be an int in [1, 2**40], got {n!r}")
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


def own_call(s: HierarchyState, act: Any) -> bool:
    """True iff `act` is the worker process's own next call: what it would send, knowing what it knows.

    Its key, the epoch it was told at its last hello, the sequence number after the last one accepted; sent
    by a running process whose view is current. Anything else naming it is the network, a delayed copy, an
    impostor, or a process that lies."""
    w = s.workers.get(act.worker) if type(getattr(act, "worker", None)) is int else None
    return (w is not None and act.authentic is True and w.state is not _W.SPAWNED and w.proc is _P.RUNNING
            and w.synced and type(act.epoch) is int and act.epoch == w.known_epoch
            and type(act.seq) is int and act.seq == w.seq + 1)


# --- checks every step shares -------------------------------------------------------------------------


def check_bytes(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok) or n > MAX_QUOTA:
        raise InvalidBytes(f"{what} must be an int in [{0 if zero_ok else 1}, 2**40], got {n!r:.40}")
    return n


def check_counter(n: object, what: str) -> int:
    if type(n) is not int or not 0 <= n <= MAX_COUNTER:
        raise InvalidArgument(f"{what} must be an int in [0, 2**62-1], got {n!r:.40}")
    return n


def check_fate(act: Any) -> str:
    if act.fate not in FATES:
        raise InvalidArgument(f"fate must be one of {FATES}, got {act.fate!r:.40}")
    return act.fate


def known_worker(s: HierarchyState, wid: object) -> Worker:
    w = s.workers.get(wid) if type(wid) is int else None
    if w is None:
        raise UnknownWorker(f"worker {wid!r:.40} was never spawned by this coordinator")
    return w


def check_running(w: Worker, wid: int, what: str) -> None:
    if w.proc is not _P.RUNNING:
        raise InvalidTransition(f"worker {wid} is {w.proc.value}: it cannot {what}")


def check_current(w: Worker, wid: int) -> None:
    if not w.synced:
        raise InvalidTransition(f"worker {wid} lost a reply: it says hello again before it acts")


def put(s: HierarchyState, wid: int, w: Worker, **changes: Any) -> HierarchyState:
    return attrs.evolve(s, workers=s.workers.set(wid, w), **changes)


def drop_for(s: HierarchyState, wid: int) -> tuple[immutables.Map, immutables.Map]:
    intents = immutables.Map({k: i for k, i in s.intents.items() if i.worker != wid})
    tickets = immutables.Map({k: t for k, t in s.tickets.items() if t.target != wid})
    return intents, tickets


def waiting(s: HierarchyState, wid: int) -> bool:
    return any(i.worker == wid for i in s.intents.values())


def check_message(s: HierarchyState, act: Any, g: GuardSet) -> tuple[Worker, bool]:
    """Validate a worker message; returns (worker, sent): sent iff the worker itself sent it (not forged, not
    replayed, not a delayed copy of a call it has written off)."""
    w = known_worker(s, act.worker)
    check_counter(act.epoch, "epoch")
    check_counter(act.seq, "seq")
    if type(act.authentic) is not bool:
        raise InvalidArgument(f"{act!r:.80}: authentic must be a bool")
    # Verify the sender holds the worker's key (C10: quota only to authenticated workers).
    if not act.authentic and g.on("authenticated_only"):
        raise AuthenticationFailed(f"worker {act.worker}: message failed authentication")
    # Verify the message is new: a replayed or reordered one gets nothing.
    if act.seq <= w.seq and g.on("sequence_check"):
        raise ReplayedMessage(f"worker {act.worker}: sequence {act.seq} <= last accepted {w.seq}")
    # Verify the epoch: a fenced worker's messages are refused (C10: old-epoch claims rejected).
    if act.epoch != w.epoch and g.on("epoch_fencing"):
        raise StaleEpoch(f"worker {act.worker}: epoch {act.epoch}, current {w.epoch}")
    # Verify the worker is live: authenticated, neither fenced nor exited (C10: quota only to live workers).
    if w.state is not _W.ACTIVE and g.on("live_workers_only"):
        raise WorkerNotLive(f"worker {act.worker} is {w.state.value}: quota goes only to live, "
                            "authenticated workers")
    return w, act.authentic and act.seq > w.seq and w.synced and act.epoch == w.known_epoch


def request_args(s: HierarchyState, act: Request) -> int:
    n = check_bytes(act.nbytes, "nbytes")
    if type(act.priority) is not int or not 0 <= act.priority <= MAX_PRIORITY:
        raise InvalidArgument(f"priority must be an int in [0, 2**31-1], got {act.priority!r:.40}")
    if n > s.serving_quota:
        raise CapacityDenied(f"worker {act.worker} asks {n} units of a {s.serving_quota}-unit serving quota: "
                             "it could never be granted")
    return n
