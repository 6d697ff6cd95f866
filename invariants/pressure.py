"""Predicates of the pressure protocol (C5, I6, I7, I13) over `spec.pressure.Pool`.

State predicates `state_<ID>(pool)` hold in every reachable pool; step
predicates `step_<ID>(prev, action, next)` hold for every accepted action;
trace predicates `trace_<ID>(trace)` hold over a whole run, given as
(prev, action, next) triples of accepted actions: exactly-once credit (I7)
and bounded overtaking (I13). All raise `InvariantViolation` naming the ID.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from spec import pressure as P
from spec.tickets import HOLDING, PressureState, TicketState

from invariants._violation import InvariantViolation

__all__ = [
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "TRACE_PREDICATES",
    "check_all",
    "check_step",
    "check_trace",
    "overtakes",
]

Triple = tuple[P.Pool, Any, P.Pool]
_T = TicketState


def _fail(id: str, message: str) -> None:
    raise InvariantViolation(id, message)


# --- I7: conservation, waiters hold nothing, no lock across a call-out ---------


def state_I7_conservation(p: P.Pool) -> None:
    """capacity == fixed + free + reclaimable + granted + claimed, every bucket >= 0."""
    b = P.buckets(p)
    if any(v < 0 for v in b.values()):
        _fail("I7", f"a bucket is negative: {b}")
    if sum(b.values()) != p.capacity:
        _fail("I7", f"conservation: {b} sums to {sum(b.values())} B, capacity is {p.capacity} B")


def state_I7(p: P.Pool) -> None:
    """Waiters hold no grant; live tickets fit the mailbox; no holder was called under the lock."""
    live = 0
    for t in p.tickets.values():
        if t.state is _T.PENDING and t.grant is not None:
            _fail("I7", f"pending ticket {t.id} holds grant {t.grant}")
        if t.state in HOLDING and t.grant is None:
            _fail("I7", f"ticket {t.id} is {t.state.value} without a grant id")
        if t.state not in (_T.PENDING, _T.GRANTED, _T.CLAIMED):
            _fail("I7", f"ticket {t.id} kept in state {t.state.value}")
        live += t.state in (_T.PENDING, _T.GRANTED)
    if live > p.mailbox:
        _fail("I7", f"{live} live tickets but only {p.mailbox} cancellation-mailbox slots")
    for r in p.pressures.values():
        if r.locked:
            _fail("I7", f"pressure ticket {r.id} was delivered to holder {r.holder} with the ledger lock held")


def step_I7(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    """The allocator path never yields a pending ticket; a grant id is fresh and charged."""
    if isinstance(act, P.TryReserve):
        new = [t for tid, t in nxt.tickets.items() if tid not in prev.tickets]
        if len(new) != 1 or new[0].state is not _T.CLAIMED:
            _fail("I7", f"{act!r}: the allocator path got {[t.state.value for t in new]}, not one claimed lease")
    grants = [t.grant for t in nxt.tickets.values() if t.grant is not None]
    if len(grants) != len(set(grants)) or any(g >= nxt.next_grant for g in grants):
        _fail("I7", f"{act!r}: grant ids are not fresh: {sorted(grants)} (next {nxt.next_grant})")


def trace_I7(trace: Sequence[Triple]) -> None:
    """Exactly-once credit: each ticket is charged at most once and credited at most once,
    and each step moves `free` by exactly its credits minus its charges."""
    charged: set[int] = set()
    credited: set[int] = set()
    for prev, act, nxt in trace:
        delta = 0
        for tid in set(prev.tickets.keys()) | set(nxt.tickets.keys()):
            a, b = prev.tickets.get(tid), nxt.tickets.get(tid)
            held_a = a is not None and a.state in HOLDING
            held_b = b is not None and b.state in HOLDING
            if held_b and not held_a:
                if tid in charged:
                    _fail("I7", f"{act!r}: ticket {tid} charged a second time")
                charged.add(tid)
                delta -= b.nbytes
            elif held_a and not held_b:
                if tid in credited:
                    _fail("I7", f"{act!r}: ticket {tid} credited a second time")
                credited.add(tid)
                delta += a.nbytes
        if nxt.free - prev.free != delta:
            _fail("I7", f"{act!r}: free moved {nxt.free - prev.free} B, tickets account for {delta} B")


# --- C5: pressure is a request, answered only while open ----------------------


def step_C5(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    """Press changes no bytes; an accepted answer was to an open, current, unexpired ticket,
    and credits exactly the victims' bytes (>= 0)."""
    if isinstance(act, P.Press):
        if nxt.free != prev.free or nxt.tickets != prev.tickets:
            _fail("C5", f"{act!r}: opening a pressure ticket moved bytes")
    if isinstance(act, P.Answer):
        r, after = prev.pressures.get(act.pressure), nxt.pressures.get(act.pressure)
        if r is None or r.state is not PressureState.OPEN:
            _fail("C5", f"{act!r}: answer to a {r.state.value if r else 'missing'} ticket was credited")
        if r.generation != prev.generation:
            _fail("C5", f"{act!r}: answer to generation {r.generation} credited at generation {prev.generation}")
        if act.now > r.deadline:
            _fail("C5", f"{act!r}: answer after the deadline {r.deadline} was credited")
        gone = sum(prev.tickets[v].nbytes for v in act.victims if v in prev.tickets)
        if after is None or after.released != gone or after.released < 0:
            _fail("C5", f"{act!r}: released {after.released if after else None} B, victims held {gone} B")


# --- I6: the governor never takes bytes; victims are unpinned and idle --------


def step_I6_pressure(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    """A claimed lease leaves only by its owner's release or answer, and never pinned or in flight."""
    for tid, t in prev.tickets.items():
        if t.state is not _T.CLAIMED or tid in nxt.tickets:
            continue
        if getattr(act, "holder", None) != t.holder:
            _fail("I6", f"{act!r} took holder {t.holder}'s lease {tid}")
        if isinstance(act, P.Answer) and (t.pinned or t.in_flight):
            _fail("I6", f"{act!r} reclaimed lease {tid}, which is {'pinned' if t.pinned else 'in flight'}")
        if not isinstance(act, (P.Answer, P.Release)):
            _fail("I6", f"{act!r} removed claimed lease {tid}")


# --- I13: arbitration identity and bounded overtaking ---------------------------


def state_I13(p: P.Pool) -> None:
    """Pending tickets carry the current generation and an age within the bound."""
    for t in p.tickets.values():
        if t.state is _T.PENDING and (t.generation != p.generation or not 0 <= t.age <= p.aging_bound):
            _fail("I13", f"pending ticket {t.id}: generation {t.generation} (pool {p.generation}), age {t.age}")


def overtakes(trace: Sequence[Triple]) -> dict[int, int]:
    """Per ticket, the steps in which a later, equal-or-lower-priority ticket was granted while it waited."""
    count: dict[int, int] = {}
    for prev, act, nxt in trace:
        granted = [t for tid, t in nxt.tickets.items() if t.state in HOLDING
                   and (tid not in prev.tickets or prev.tickets[tid].state is _T.PENDING)]
        for tid, w in prev.tickets.items():
            still = nxt.tickets.get(tid)
            if w.state is not _T.PENDING or still is None or still.state is not _T.PENDING:
                continue
            if any(g.id > w.id and g.priority <= w.priority for g in granted):
                count[tid] = count.get(tid, 0) + 1
    return count


def trace_I13(trace: Sequence[Triple]) -> None:
    """A pending ticket is overtaken by later equal-or-lower-priority arrivals in at most `aging_bound` rounds.

    Every pending ticket fits after reclaim (submit denies bytes > capacity - fixed), so all are counted."""
    if not trace:
        return
    bound = trace[0][0].aging_bound
    for tid, n in overtakes(trace).items():
        if n > bound:
            _fail("I13", f"ticket {tid} was overtaken in {n} rounds; the aging bound is {bound}")


# --- registries --------------------------------------------------------------

STATE_PREDICATES: dict[str, tuple[Callable[[P.Pool], None], ...]] = {
    "I7": (state_I7_conservation, state_I7),
    "I13": (state_I13,),
}

STEP_PREDICATES: dict[str, tuple[Callable[[P.Pool, Any, P.Pool], None], ...]] = {
    "C5": (step_C5,),
    "I6": (step_I6_pressure,),
    "I7": (step_I7,),
}

TRACE_PREDICATES: dict[str, tuple[Callable[[Sequence[Triple]], None], ...]] = {
    "I7": (trace_I7,),
    "I13": (trace_I13,),
}


def check_all(p: P.Pool) -> None:
    for preds in STATE_PREDICATES.values():
        for f in preds:
            f(p)


def check_step(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    for preds in STEP_PREDICATES.values():
        for f in preds:
            f(prev, act, nxt)


def check_trace(trace: Sequence[Triple]) -> None:
    for preds in TRACE_PREDICATES.values():
        for f in preds:
            f(trace)
