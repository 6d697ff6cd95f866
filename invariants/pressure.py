"""Predicates of the pressure protocol (C5, I6, I7, I13) over `spec.pressure.Pool`, as named clauses.

State predicates `state_<ID>(pool)` hold in every reachable pool; step
predicates `step_<ID>(prev, action, next)` hold for every accepted action;
trace predicates `trace_<ID>(trace)` hold over a whole run, given as
(prev, action, next) triples of accepted actions: exactly-once credit and
owned allocator bytes (I7), bounded overtaking (I13). The observation
predicates read what a checker saw from outside the governor: whether another
thread could take the ledger lock while a holder's callback ran (I7), and
whether a requester thread parked on a ticket is still parked after its
ticket was granted or retired (I13); the spec has no lock and no threads, so
nothing in a pool can say either.

Each clause states a harm (bytes lost or doubled, a holder's bytes taken, a
request starved or passed over, a callback under the lock), never the guard
that prevents it, and counts the evaluations in which its case occurred
(`invariants.clauses`). The grant order is computed here from the tickets'
own fields, never with `spec.arith.arbitration_key`, so an order shared by
both layers cannot vouch for itself.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from spec import pressure as P
from spec.tickets import HOLDING, PressureState, TicketState

from invariants.clauses import clause, conjunction
from invariants.pressure_frame import unnamed, unnamed_changes
from invariants.pressure_records import Delivery, Parked, TraceMemory

__all__ = [
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "TRACE_PREDICATES",
    "OBSERVATION_PREDICATES",
    "Delivery",
    "Parked",
    "TraceMemory",
    "step_trace_I7",
    "step_trace_I13",
    "check_all",
    "check_step",
    "check_trace",
    "check_observations",
    "observed_I7_callbacks",
    "observed_I13_waiters",
    "overtakes",
    "served_before",
]

Triple = tuple[P.Pool, Any, P.Pool]
_T = TicketState


# --- I7: conservation, waiters hold nothing, no lock across a call-out ---------

_I7_BUCKETS = clause("I7", "state_I7_conservation", "buckets_nonnegative",
                     "no bucket of the pool (free, reclaimable, granted, claimed) holds a negative number of bytes")
_I7_CONSERVED = clause("I7", "state_I7_conservation", "capacity_conserved",
                       "capacity == fixed + free + reclaimable + granted + claimed: no byte is lost or doubled")


def state_I7_conservation(p: P.Pool) -> None:
    b = P.buckets(p)
    # Every pool is a non-empty byte budget, so the sum is about every state.
    _I7_BUCKETS.case(True)
    if any(v < 0 for v in b.values()):
        _I7_BUCKETS.fail(f"a bucket is negative: {b}")
    _I7_CONSERVED.case(True)
    if sum(b.values()) != p.capacity:
        _I7_CONSERVED.fail(f"conservation: {b} sums to {sum(b.values())} B, capacity is {p.capacity} B")


_I7_WAITER = clause("I7", "state_I7", "waiter_holds_nothing",
                    "a waiting (pending) ticket holds no grant: waits hold no reservation")
_I7_HOLDER_GRANT = clause("I7", "state_I7", "held_bytes_have_a_grant",
                          "bytes a ticket holds (granted or claimed) are charged under a grant id, so they can be "
                          "credited exactly once")
_I7_LIVE_STATE = clause("I7", "state_I7", "no_retired_ticket_kept",
                        "a completed, cancelled or failed ticket is not kept in the table (it would hold its bytes)")
_I7_MAILBOX = clause("I7", "state_I7", "mailbox_covers_live",
                     "every live (pending or granted) ticket has a cancellation-mailbox slot, so dropping its handle "
                     "can always post the cancel that credits it")


def state_I7(p: P.Pool) -> None:
    live = pending = holding = 0
    for t in p.tickets.values():
        if t.state is _T.PENDING:
            pending += 1
            if t.grant is not None:
                _I7_WAITER.fail(f"pending ticket {t.id} holds grant {t.grant}")
        if t.state in HOLDING:
            holding += 1
            if t.grant is None:
                _I7_HOLDER_GRANT.fail(f"ticket {t.id} is {t.state.value} without a grant id")
        if t.state not in (_T.PENDING, _T.GRANTED, _T.CLAIMED):
            _I7_LIVE_STATE.fail(f"ticket {t.id} kept in state {t.state.value}")
        live += t.state in (_T.PENDING, _T.GRANTED)
    _I7_WAITER.case(pending > 0)
    _I7_HOLDER_GRANT.case(holding > 0)
    _I7_LIVE_STATE.case(bool(p.tickets))
    _I7_MAILBOX.case(live > 0)
    if live > p.mailbox:
        _I7_MAILBOX.fail(f"{live} live tickets but only {p.mailbox} cancellation-mailbox slots")


_I7_FRESH_GRANT = clause("I7", "step_I7", "grant_ids_fresh",
                         "no two holdings share a grant id and none reuses an unissued one, so a credit by grant id "
                         "cannot land on the wrong bytes")


_I7_UNNAMED = clause("I7", "step_I7", "unnamed_tickets_untouched",
                     "a step leaves every ticket its action does not name in place, with the same holder, bytes, "
                     "priority, generation and use flags; the only changes are a round's grant of a waiter (pending "
                     "-> granted, its age) and a reconfigure's failing of the waiters: else a requester's ticket "
                     "vanishes (its waiter wakes to a cancel nobody made, or waits on) or its bytes move to another")

def step_I7(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    grants = [t.grant for t in nxt.tickets.values() if t.grant is not None]
    _I7_FRESH_GRANT.case(bool(grants))
    if len(grants) != len(set(grants)) or any(g >= nxt.next_grant for g in grants):
        _I7_FRESH_GRANT.fail(f"{act!r}: grant ids are not fresh: {sorted(grants)} (next {nxt.next_grant})")
    others = unnamed(prev, act)  # the case: the step ran with a ticket present that its action does not name
    _I7_UNNAMED.case(bool(others))
    for msg in unnamed_changes(others, act, nxt, isinstance(act, _ARBITRATING)):
        _I7_UNNAMED.fail(msg)


_I7_ONCE = clause("I7", "trace_I7", "credit_exactly_once",
                  "each ticket's bytes are charged at most once and credited at most once (release, "
                  "cancel-of-granted and timeout-of-granted credit a grant once between them)")
_I7_FREE_MOVES = clause("I7", "trace_I7", "free_moves_by_tickets",
                        "each step moves free by exactly the bytes of the tickets it credits minus those it charges: "
                        "no byte appears or vanishes")
_I7_ALLOCATOR = clause("I7", "trace_I7", "allocator_bytes_owned",
                       "no bytes are charged to an allocator-path request its caller does not own: the allocator "
                       "fails fast (it cannot wait or come back to claim; pending is a refusal), so bytes granted "
                       "to such a request and not claimed within the call are charged to no one")


def step_trace_I7(mem: TraceMemory, prev: P.Pool, act: Any, nxt: P.Pool) -> TraceMemory:
    """One step of `trace_I7`: check it against what the run remembers, return the new memory."""
    charged, credited, allocator = set(mem.charged), set(mem.credited), set(mem.allocator)
    delta = 0
    moved = False
    for tid in set(prev.tickets.keys()) | set(nxt.tickets.keys()):
        a, b = prev.tickets.get(tid), nxt.tickets.get(tid)
        held_a = a is not None and a.state in HOLDING
        held_b = b is not None and b.state in HOLDING
        if held_b and not held_a:
            moved = True
            if tid in charged:
                _I7_ONCE.fail(f"{act!r}: ticket {tid} charged a second time")
            charged.add(tid)
            delta -= b.nbytes
        elif held_a and not held_b:
            moved = True
            if tid in credited:
                _I7_ONCE.fail(f"{act!r}: ticket {tid} credited a second time")
            credited.add(tid)
            delta += a.nbytes
    _I7_ONCE.case(moved)
    _I7_FREE_MOVES.case(moved)
    if nxt.free - prev.free != delta:
        _I7_FREE_MOVES.fail(f"{act!r}: free moved {nxt.free - prev.free} B, tickets account for {delta} B")
    if isinstance(act, P.TryReserve):
        allocator.update(range(prev.next_ticket, nxt.next_ticket))
    live = [nxt.tickets[i] for i in allocator if i in nxt.tickets]
    _I7_ALLOCATOR.case(bool(live))
    for t in live:
        if t.state is _T.GRANTED:
            _I7_ALLOCATOR.fail(f"{act!r}: allocator-path ticket {t.id} holds {t.nbytes} B its caller never "
                               f"claimed (the allocator could not wait for it): charged to no one")
    return attrs.evolve(mem, charged=frozenset(charged), credited=frozenset(credited), allocator=frozenset(allocator))


def trace_I7(trace: Sequence[Triple]) -> None:
    mem = TraceMemory()
    for prev, act, nxt in trace:
        mem = step_trace_I7(mem, prev, act, nxt)


_I7_UNLOCKED = clause("I7", "observed_I7_callbacks", "callback_without_ledger_lock",
                      "no holder callback runs while the ledger lock is held: another thread can take the lock while "
                      "it runs (else a callback that re-enters the governor, to answer or release, deadlocks)")


def observed_I7_callbacks(observed: Sequence[Delivery | Parked]) -> None:
    """`observed`: what an outside probe saw during one step; the callbacks run are the `Delivery`s."""
    deliveries = [d for d in observed if isinstance(d, Delivery)]
    _I7_UNLOCKED.case(bool(deliveries))
    for d in deliveries:
        if not d.lock_free:
            _I7_UNLOCKED.fail(f"holder {d.holder}'s callback for pressure ticket {d.pressure} ran while another "
                              f"thread could not take the ledger lock")


# --- C5: pressure is a request, answered by the holder's own choice ----------

_C5_PRESS = clause("C5", "step_C5", "press_takes_nothing",
                   "opening a pressure ticket takes nothing from anyone: no byte and no ticket moves")
_C5_CHOICE = clause("C5", "step_C5", "answer_is_holders_choice",
                    "an answer gives back exactly the leases the holder chose: only its named victims leave, and "
                    "free and the ticket's credit grow by exactly their bytes (>= 0), never more")
_C5_ZERO = clause("C5", "step_C5", "zero_answer_takes_nothing",
                  "after a zero answer the holder keeps every lease and free does not grow: the requester fails or "
                  "defers, nothing is forced")
_C5_CLOSED = clause("C5", "step_C5", "closed_demand_takes_nothing",
                    "a holder loses no lease to a demand that is no longer open (answered, cancelled, expired or of "
                    "an older generation): its requester has already been answered, failed or deferred, so the "
                    "bytes would be taken for no one")


def step_C5(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    _C5_PRESS.case(isinstance(act, P.Press))
    if isinstance(act, P.Press):
        if nxt.free != prev.free or nxt.tickets != prev.tickets:
            _C5_PRESS.fail(f"{act!r}: opening a pressure ticket moved bytes")
    answer = isinstance(act, P.Answer)
    _C5_CHOICE.case(answer)
    _C5_ZERO.case(answer and not act.victims)
    if not answer:
        _C5_CLOSED.case(False)
        return
    r, after = prev.pressures.get(act.pressure), nxt.pressures.get(act.pressure)
    mine = {tid for tid, t in prev.tickets.items() if t.holder == act.holder and t.state is _T.CLAIMED}
    left = {tid for tid in mine if tid not in nxt.tickets}
    gone = sum(prev.tickets[v].nbytes for v in left)
    _C5_CLOSED.case(gone > 0)  # the case: a holder gave up bytes; was the demand still open?
    credit = (after.released if after else 0) - (r.released if r else 0)
    if left - set(act.victims):
        _C5_CHOICE.fail(f"{act!r}: lease(s) {sorted(left - set(act.victims))} left though the holder did not name them")
    if after is None or credit != gone or credit < 0:
        _C5_CHOICE.fail(f"{act!r}: the ticket's credit grew by {credit} B, the holder gave back {gone} B")
    if not act.victims and (left or nxt.free > prev.free):
        _C5_ZERO.fail(f"{act!r}: a zero answer took lease(s) {sorted(left)} / grew free {prev.free} -> {nxt.free} B")
    if r is not None and gone and (r.state is not PressureState.OPEN or r.generation != prev.generation
                                   or act.now > r.deadline):
        why = (r.state.value if r.state is not PressureState.OPEN else
               f"of generation {r.generation} (pool {prev.generation})" if r.generation != prev.generation else
               f"due at {r.deadline}, answered at {act.now}")
        _C5_CLOSED.fail(f"{act!r}: holder {act.holder} gave up {gone} B to pressure ticket {r.id}, which is {why}")


# --- I6: the governor never takes bytes; victims are unpinned and idle --------

_I6_OWNER = clause("I6", "step_I6_pressure", "governor_takes_nothing",
                   "a claimed lease leaves only by its owner's own release or answer: the governor takes no bytes")
_I6_LIVE = clause("I6", "step_I6_pressure", "live_state_never_reclaimed",
                  "pinned or in-flight bytes are never reclaimed")


def step_I6_pressure(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    left = [t for tid, t in prev.tickets.items() if t.state is _T.CLAIMED and tid not in nxt.tickets]
    _I6_OWNER.case(bool(left))
    _I6_LIVE.case(isinstance(act, P.Answer) and bool(left))
    for t in left:
        if getattr(act, "holder", None) != t.holder or not isinstance(act, (P.Answer, P.Release)):
            _I6_OWNER.fail(f"{act!r} took holder {t.holder}'s lease {t.id}")
        if isinstance(act, P.Answer) and (t.pinned or t.in_flight):
            _I6_LIVE.fail(f"{act!r} reclaimed lease {t.id}, which is {'pinned' if t.pinned else 'in flight'}")


# --- I13: arbitration order, matured tickets, bounded overtaking ---------------


def served_before(a: P.Ticket, b: P.Ticket, bound: int) -> bool:
    """True iff arbitration must consider `a` before `b` (section 6), from the tickets' own fields.

    Matured tickets (age at the aging bound) come first, oldest submission first; then the
    others, higher priority first, oldest submission first among equals. Ids are submit order.
    """
    am, bm = a.age >= bound, b.age >= bound
    if am != bm:
        return am
    if not am and a.priority != b.priority:
        return a.priority > b.priority
    return a.id < b.id


#: Actions after which the spec arbitrates (a grant can happen).
_ARBITRATING = (P.Submit, P.TryReserve, P.Release, P.Cancel, P.Timeout, P.Answer)


def _round(prev: P.Pool, act: Any, nxt: P.Pool) -> tuple[list[P.Ticket], set[int]]:
    """The tickets arbitration considered in this step (as aged in `nxt`) and which of them it granted."""
    if isinstance(act, P.TryReserve) and all(nxt.tickets[i].state is _T.CLAIMED
                                             for i in range(prev.next_ticket, nxt.next_ticket) if i in nxt.tickets):
        return [], set()  # the allocator path: claimed at once, no round
    considered, granted = [], set()
    for tid, t in nxt.tickets.items():
        was = prev.tickets.get(tid)
        waited = was.state is _T.PENDING if was is not None else tid >= prev.next_ticket
        if waited and t.state in (_T.PENDING, _T.GRANTED, _T.CLAIMED):
            considered.append(t)
            if t.state is not _T.PENDING:
                granted.add(tid)
    return considered, granted


_I13_GENERATION = clause("I13", "state_I13", "pending_current_generation",
                         "no ticket waits under a configuration that no longer exists (its generation is current)")


def state_I13(p: P.Pool) -> None:
    pending = [t for t in p.tickets.values() if t.state is _T.PENDING]
    _I13_GENERATION.case(bool(pending))
    for t in pending:
        if t.generation != p.generation:
            _I13_GENERATION.fail(f"pending ticket {t.id}: generation {t.generation}, pool {p.generation}")


_I13_ORDER = clause("I13", "step_I13", "grant_order",
                    "no waiting ticket that fits is passed over for one after it in grant order (matured tickets "
                    "first, oldest first; then higher priority first; then oldest first)")
_I13_MATURED = clause("I13", "step_I13", "matured_not_overtaken",
                      "once a ticket has matured (its age reached the aging bound), no later-submitted ticket of any "
                      "priority is granted ahead of it: returned capacity accumulates for it")
# The starvation harm of a lagging age, not the cap's comparison: an age past the bound ranks as one at it.
_I13_AGING = clause("I13", "step_I13", "passed_over_ages",
                    "no waiting ticket is passed over without moving toward maturity: its age never falls while it "
                    "waits, and a round that grants other tickets ages it by one up to the aging bound; a ticket "
                    "whose age lags never matures, and later tickets overtake it without end (starvation; retiring a "
                    "pending ticket is no round, D10: its grant pass ages nobody, each later ticket's submit did)")


def step_I13(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    considered, granted = _round(prev, act, nxt)
    bound = nxt.aging_bound
    waiting = [t for t in considered if t.id not in granted]
    # A round ran visibly when it granted; every ticket it passed over (new ones from age 0) must have aged.
    gone = prev.tickets.get(act.ticket) if isinstance(act, (P.Cancel, P.Timeout)) else None
    stayed = [(prev.tickets[t.id].age, t) for t in nxt.tickets.values()
              if t.state is _T.PENDING and t.id in prev.tickets and prev.tickets[t.id].state is _T.PENDING]
    _I13_AGING.case(bool(stayed) or bool(granted and waiting))
    for t in waiting if granted and getattr(gone, "state", None) is not _T.PENDING else ():
        was = prev.tickets[t.id].age if t.id in prev.tickets else 0
        if t.age < min(was + 1, bound):
            _I13_AGING.fail(f"{act!r}: ticket {t.id} (age {was}) was passed over by a round that granted "
                            f"{sorted(granted)} but is now aged {t.age}, not {min(was + 1, bound)} (bound {bound})")
    for was, t in stayed:
        if t.age < was:
            _I13_AGING.fail(f"{act!r}: waiting ticket {t.id}'s age fell {was} -> {t.age}")
    # The cases: a round chose among several tickets; a step that may grant ran while a matured ticket waited.
    _I13_ORDER.case(bool(granted) and len(considered) >= 2)
    _I13_MATURED.case(isinstance(act, _ARBITRATING) and any(w.age >= bound for w in waiting))
    if not granted:
        return
    # What the round could hand out: free before the step plus what the step credited before arbitrating.
    free = prev.free + sum(t.nbytes for tid, t in prev.tickets.items()
                           if t.state in HOLDING and (tid not in nxt.tickets or nxt.tickets[tid].state not in HOLDING))
    order = sorted(considered, key=_OrderKey.of(bound))
    for i, t in enumerate(order):
        if t.id in granted:
            free -= t.nbytes
            continue
        later = [g.id for g in order[i + 1:] if g.id in granted]
        if later and t.nbytes <= free:
            _I13_ORDER.fail(f"{act!r}: ticket {t.id} ({t.nbytes} B, priority {t.priority}, age {t.age}) fit in the "
                            f"{free} B left at its turn but waits, while ticket(s) {later} after it were granted")
    for w in waiting:
        if w.age < bound:
            continue
        ahead = sorted(g for g in granted if g > w.id)
        if ahead:
            _I13_MATURED.fail(f"{act!r}: matured ticket {w.id} ({w.nbytes} B, priority {w.priority}) waits while "
                              f"later ticket(s) {ahead} were granted ahead of it")


class _OrderKey:
    """A sort key wrapping `served_before` (a comparison, so the order is stated once)."""

    __slots__ = ("t", "bound")

    def __init__(self, t: P.Ticket, bound: int) -> None:
        self.t, self.bound = t, bound

    def __lt__(self, other: _OrderKey) -> bool:
        return served_before(self.t, other.t, self.bound)

    @staticmethod
    def of(bound: int) -> Callable[[P.Ticket], _OrderKey]:
        return lambda t: _OrderKey(t, bound)


def _overtaken_in(prev: P.Pool, nxt: P.Pool) -> list[int]:
    """The tickets that waited through this step while a later-submitted ticket (any priority) was granted."""
    granted = [t for tid, t in nxt.tickets.items() if t.state in HOLDING
               and (tid not in prev.tickets or prev.tickets[tid].state is _T.PENDING)]
    out = []
    for tid, w in prev.tickets.items():
        still = nxt.tickets.get(tid)
        if w.state is not _T.PENDING or still is None or still.state is not _T.PENDING:
            continue
        if any(g.id > w.id for g in granted):
            out.append(tid)
    return out


def overtakes(trace: Sequence[Triple]) -> dict[int, int]:
    """Per ticket, the steps in which a later-submitted ticket (any priority) was granted while it waited."""
    count: dict[int, int] = {}
    for prev, act, nxt in trace:
        for tid in _overtaken_in(prev, nxt):
            count[tid] = count.get(tid, 0) + 1
    return count


_I13_BOUNDED = clause("I13", "trace_I13", "bounded_overtaking",
                      "a waiting ticket (every one fits after reclaim) is overtaken by later submissions in at most "
                      "`aging_bound` rounds")


def trace_I13(trace: Sequence[Triple]) -> None:
    """Every pending ticket fits after reclaim (submit denies bytes > capacity - fixed), so all are counted."""
    counts = overtakes(trace)
    _I13_BOUNDED.case(bool(counts))
    if not trace:
        return
    bound = trace[0][0].aging_bound
    for tid, n in counts.items():
        if n > bound:
            _I13_BOUNDED.fail(f"ticket {tid} was overtaken in {n} rounds; the aging bound is {bound}")


_I13_PARKED = clause("I13", "observed_I13_waiters", "waiter_not_left_parked",
                     "no requester stays parked once its ticket is resolved: a waiter whose ticket was granted, or "
                     "retired by a cancel, timeout or reconfigure, is woken (one parked on a ticket that no longer "
                     "exists is a request that never finishes, or finishes only by its own timeout)")


def observed_I13_waiters(observed: Sequence[Delivery | Parked]) -> None:
    """`observed`: what an outside probe saw during one step; the resolved waiters are the `Parked`s."""
    parked = [w for w in observed if isinstance(w, Parked)]
    _I13_PARKED.case(bool(parked))
    for w in parked:
        if w.still_parked:
            _I13_PARKED.fail(f"ticket {w.ticket} was {w.resolved}, but the requester waiting on it is still parked")


def step_trace_I13(mem: TraceMemory, prev: P.Pool, act: Any, nxt: P.Pool) -> TraceMemory:
    """One step of `trace_I13`'s count, checked as it grows (the explorer's form of the trace clause)."""
    counts = dict(mem.overtaken)
    for tid in _overtaken_in(prev, nxt):
        counts[tid] = counts.get(tid, 0) + 1
    _I13_BOUNDED.case(bool(counts))
    for tid, n in counts.items():
        if n > prev.aging_bound:
            _I13_BOUNDED.fail(f"ticket {tid} was overtaken in {n} rounds; the aging bound is {prev.aging_bound}")
    return attrs.evolve(mem, overtaken=tuple(sorted(counts.items())))


# --- registries --------------------------------------------------------------

STATE_PREDICATES: dict[str, tuple[Callable[[P.Pool], None], ...]] = {
    "I7": (state_I7_conservation, state_I7),
    "I13": (state_I13,),
}

STEP_PREDICATES: dict[str, tuple[Callable[[P.Pool, Any, P.Pool], None], ...]] = {
    "C5": (step_C5,),
    "I6": (step_I6_pressure,),
    "I7": (step_I7,),
    "I13": (step_I13,),
}

TRACE_PREDICATES: dict[str, tuple[Callable[[Sequence[Triple]], None], ...]] = {
    "I7": (trace_I7,),
    "I13": (trace_I13,),
}

#: Predicates over what a checker observed from outside the governor during one step.
OBSERVATION_PREDICATES: dict[str, tuple[Callable[[Sequence[Delivery | Parked]], None], ...]] = {
    "I7": (observed_I7_callbacks,),
    "I13": (observed_I13_waiters,),
}


def check_all(p: P.Pool) -> None:
    conjunction(STATE_PREDICATES, p)


def check_step(prev: P.Pool, act: Any, nxt: P.Pool) -> None:
    conjunction(STEP_PREDICATES, prev, act, nxt)


def check_trace(trace: Sequence[Triple]) -> None:
    conjunction(TRACE_PREDICATES, trace)


def check_observations(deliveries: Sequence[Delivery | Parked]) -> None:
    conjunction(OBSERVATION_PREDICATES, deliveries)
