"""The abstract pressure protocol of one governed pool: requester tickets, arbitration, holder pressure.

Theory of operation (DESIGN-FACTS section 6, C5, I6, I7, I13). A pool has
`capacity` bytes, of which `fixed` are outside governance. Requesters submit
one-shot tickets; each arbitration round ages every pending ticket by one
(capped at `aging_bound`) and grants greedily in `arbitration_key` order
(matured first, FIFO; then priority descending, FIFO), skipping a
non-matured misfit and *stopping* at a matured one, so returned capacity
accumulates for it instead of being overtaken (I13). Cancelling or timing
out a pending ticket is not a round (D10): nobody ages, but a grant pass
follows, since the retired ticket may have been the matured misfit that
stopped the last round. A grant charges the
bytes and mints a fresh grant id before the waiter is woken; exactly one of
release, cancel-of-granted and timeout-of-granted credits them (I7).

Claimed tickets are the holders' leases; a holder flags them pinned or in
flight. Bytes fall in exactly one bucket, so capacity = fixed + free +
reclaimable (claimed, unpinned, idle) + granted + claimed (pinned or in
flight). The governor never takes bytes: it opens a pressure ticket (target,
priority, deadline, generation) and the holder answers with victims of its
own reclaimable bytes, zero being legal (C5, I6). The spec has no lock and
calls no one, so whether a holder's callback runs under the ledger lock (I7,
guard `unlock_before_callback`) is not a fact of this model: a checker
observes it on the implementation, from another thread (see
`invariants.pressure.observed_I7_callbacks`).

Validation order (first failing check decides the typed error):
argument shape -> holder -> ticket -> ownership -> generation -> lifecycle
table -> byte bounds -> policy (quota, mailbox, would-block). A rejected
action changes nothing. Time is an argument (`now`), never a clock.
No I/O, no clock, no threads, no ORT, no numpy.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve as _evolve

from spec.arith import arbitration_key
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    UnknownHolder,
    UnknownTicket,
)
from spec.guards import ALL_ON, GuardSet
from spec.ledger import check_bytes
from spec.tickets import (
    PressureEvent,
    PressureState,
    TicketEvent,
    TicketState,
    next_pressure_state,
    next_ticket_state,
)
from spec.pressure_state import (  # noqa: F401  (the records, re-exported: `spec.pressure` names them too)
    Ticket, Pressure, Pool, initial, buckets, Submit, TryReserve, Claim, Release, Cancel, Timeout, Reconfigure,
    SetUse, Press, Answer, CancelPressure, ExpirePressure, PressureAction,
)

__all__ = [
    "Ticket", "Pressure", "Pool", "initial",
    "Submit", "TryReserve", "Claim", "Release", "Cancel", "Timeout", "Reconfigure", "SetUse",
    "Press", "Answer", "CancelPressure", "ExpirePressure", "PressureAction",
    "step", "buckets",
]

_T = TicketState


def step(p: Pool, act: Any, guards: GuardSet = ALL_ON) -> tuple[Pool, Any]:
    """The next pool and the action's result, or a typed rejection (pool unchanged)."""
    try:
        handler = _HANDLERS[type(act)]
    except KeyError:
        raise InvalidArgument(f"not a pressure action: {act!r}") from None
    return handler(p, act, guards)


# --- validation helpers ------------------------------------------------------


def _int(v: object, what: str, low: int = 0) -> int:
    if type(v) is not int or v < low:
        raise InvalidArgument(f"{what} must be an int >= {low}, got {v!r}")
    return v


def _holder(p: Pool, h: object) -> int:
    if type(h) is not int or not 1 <= h <= p.holders:
        raise UnknownHolder(f"holder {h!r} is not registered")
    return h


def _ticket(p: Pool, tid: object) -> Ticket | None:
    """The live ticket, None for a retired one; UnknownTicket if never issued."""
    t = p.tickets.get(tid) if type(tid) is int else None
    if t is None and not (type(tid) is int and 1 <= tid < p.next_ticket):
        raise UnknownTicket(f"ticket {tid!r} was never issued")
    return t


def _owned(t: Ticket, holder: int) -> Ticket:
    if t.holder != holder:
        raise ForeignHolder(f"ticket {t.id} belongs to holder {t.holder}, not {holder}")
    return t


def _pressure(p: Pool, pid: object) -> Pressure:
    r = p.pressures.get(pid) if type(pid) is int else None
    if r is None:
        raise UnknownTicket(f"pressure ticket {pid!r} was never issued")
    return r


def _live(p: Pool) -> int:
    return sum(1 for t in p.tickets.values() if t.state in (_T.PENDING, _T.GRANTED))


# --- arbitration (I13) -------------------------------------------------------


def _arbitrate(p: Pool, guards: GuardSet, age: bool = True) -> Pool:
    """One round: age every pending ticket, then grant greedily in arbitration order.

    `age=False`: the grant pass alone, ageing nobody (D10: retiring a pending ticket is not a round)."""
    pending = [_evolve(t, age=min(t.age + 1, p.aging_bound)) if age else t for t in p.tickets.values()
               if t.state is _T.PENDING]
    if not pending:
        return p
    bound = p.aging_bound
    pending.sort(key=lambda t: arbitration_key(t.age >= bound, t.priority, t.id))
    tickets, free, grant = p.tickets, p.free, p.next_grant
    for i, t in enumerate(pending):
        if t.nbytes <= free:
            # Verify the grant is charged before the waiter can see it (I7: charge before wake-up).
            if guards.on("grant_charges_ledger"):
                free -= t.nbytes
            t = _evolve(t, state=next_ticket_state(t.state, TicketEvent.GRANT), grant=grant)
            grant += 1
        elif t.age >= bound and guards.on("aging"):
            # Verify a matured misfit is not overtaken: capacity accumulates for it (I13).
            for rest in pending[i:]:
                tickets = tickets.set(rest.id, rest)
            break
        tickets = tickets.set(t.id, t)
    return _evolve(p, tickets=tickets, free=free, next_grant=grant)


def _retire(p: Pool, t: Ticket, event: TicketEvent, guards: GuardSet) -> tuple[Pool, int]:
    """Move `t` out of the table; credit its bytes iff it held them; arbitrate.

    A pending ticket's retirement is not a round (D10): a grant pass that ages nobody, since `t` may have been
    the matured misfit that ended the last round (I13)."""
    next_ticket_state(t.state, event, f"ticket {t.id}")
    credit = t.nbytes if t.state in (_T.GRANTED, _T.CLAIMED) else 0
    p = _evolve(p, tickets=p.tickets.delete(t.id), free=p.free + credit)
    return _arbitrate(p, guards, age=t.state is not _T.PENDING), credit


# --- requester tickets -------------------------------------------------------


def _request(p: Pool, act: Submit | TryReserve) -> tuple[int, int, int]:
    nbytes = check_bytes(act.nbytes, "nbytes")
    if type(act.priority) is not int:
        raise InvalidArgument(f"priority must be an int, got {act.priority!r}")
    holder = _holder(p, act.holder)
    # Verify the request can ever fit: bytes > capacity - fixed is denied outright.
    if nbytes > p.capacity - p.fixed:
        raise CapacityDenied(f"{nbytes} B asked of a pool that governs {p.capacity - p.fixed} B")
    return holder, nbytes, act.priority


def _submit(p: Pool, act: Submit, guards: GuardSet) -> tuple[Pool, int]:
    holder, nbytes, priority = _request(p, act)
    # Verify a cancellation-mailbox slot is free for this ticket (back-pressure).
    if _live(p) >= p.mailbox:
        raise MailboxFull(f"all {p.mailbox} cancellation-mailbox slots are reserved by live tickets")
    tid = p.next_ticket
    t = Ticket(tid, holder, nbytes, priority, p.generation, next_ticket_state(_T.IDLE, TicketEvent.SUBMIT), 0, None)
    return _arbitrate(_evolve(p, tickets=p.tickets.set(tid, t), next_ticket=tid + 1), guards), tid


def _try_reserve(p: Pool, act: TryReserve, guards: GuardSet) -> tuple[Pool, int]:
    holder, nbytes, priority = _request(p, act)
    waiting = any(t.state is _T.PENDING for t in p.tickets.values())
    if guards.on("try_only"):
        # Verify the allocator path never waits and never overtakes a waiter (I7, I13).
        if waiting or nbytes > p.free:
            raise CapacityDenied(f"try-only: {nbytes} B asked, {p.free} B free, "
                                 f"{'a ticket is waiting' if waiting else 'would block'}")
        tid = p.next_ticket
        t = Ticket(tid, holder, nbytes, priority, p.generation, _T.CLAIMED, 0, p.next_grant)
        return _evolve(p, tickets=p.tickets.set(tid, t), next_ticket=tid + 1, next_grant=p.next_grant + 1,
                       free=p.free - nbytes), tid
    return _submit(p, Submit(holder, nbytes, priority), guards)


def _claim(p: Pool, act: Claim, guards: GuardSet) -> tuple[Pool, int]:
    holder = _holder(p, act.holder)
    t = _ticket(p, act.ticket)
    if t is None:
        raise InvalidTransition(f"ticket {act.ticket} is already completed, cancelled or failed")
    _owned(t, holder)
    new = next_ticket_state(t.state, TicketEvent.CLAIM, f"ticket {t.id}")
    free = p.free if guards.on("grant_charges_ledger") else p.free - t.nbytes
    return _evolve(p, tickets=p.tickets.set(t.id, _evolve(t, state=new)), free=free), t.grant


def _release(p: Pool, act: Release, guards: GuardSet) -> tuple[Pool, None]:
    holder = _holder(p, act.holder)
    t = _ticket(p, act.ticket)
    if t is None:
        raise InvalidTransition(f"ticket {act.ticket} is already completed, cancelled or failed")
    _owned(t, holder)
    return _retire(p, t, TicketEvent.RELEASE, guards)[0], None


def _abandon(p: Pool, act: Cancel | Timeout, event: TicketEvent, guards: GuardSet) -> tuple[Pool, int]:
    holder = _holder(p, act.holder)
    t = _ticket(p, act.ticket)
    if t is None:
        return p, 0  # retired: a no-op, never a second credit
    _owned(t, holder)
    if t.state is _T.CLAIMED:
        return p, 0  # claim disarmed cancel and timeout
    if t.state is _T.GRANTED and not guards.on("grant_charges_ledger"):
        p = _evolve(p, free=p.free - t.nbytes)  # never charged under that ordering; undo the credit below
    return _retire(p, t, event, guards)


def _cancel(p: Pool, act: Cancel, guards: GuardSet) -> tuple[Pool, int]:
    return _abandon(p, act, TicketEvent.CANCEL, guards)


def _timeout(p: Pool, act: Timeout, guards: GuardSet) -> tuple[Pool, int]:
    return _abandon(p, act, TicketEvent.TIMEOUT, guards)


def _reconfigure(p: Pool, act: Reconfigure, guards: GuardSet) -> tuple[Pool, None]:
    tickets = p.tickets
    for t in p.tickets.values():
        if t.state is _T.PENDING:
            next_ticket_state(t.state, TicketEvent.RECONFIGURE)
            tickets = tickets.delete(t.id)
    return _evolve(p, tickets=tickets, generation=p.generation + 1), None


def _set_use(p: Pool, act: SetUse, guards: GuardSet) -> tuple[Pool, None]:
    if type(act.pinned) is not bool or type(act.in_flight) is not bool:
        raise InvalidArgument(f"pinned and in_flight must be bools, got {act.pinned!r}, {act.in_flight!r}")
    holder = _holder(p, act.holder)
    t = _ticket(p, act.ticket)
    if t is None:
        raise InvalidTransition(f"ticket {act.ticket} is already completed, cancelled or failed")
    _owned(t, holder)
    if t.state is not _T.CLAIMED:
        raise InvalidTransition(f"ticket {t.id} is {t.state.value}; only a claimed lease is pinned or in flight")
    return _evolve(p, tickets=p.tickets.set(t.id, _evolve(t, pinned=act.pinned, in_flight=act.in_flight))), None


# --- holder pressure (C5, I6) ------------------------------------------------


def _press(p: Pool, act: Press, guards: GuardSet) -> tuple[Pool, int]:
    target = check_bytes(act.target, "target")
    if type(act.priority) is not int:
        raise InvalidArgument(f"priority must be an int, got {act.priority!r}")
    deadline = _int(act.deadline, "deadline")
    holder = _holder(p, act.holder)
    pid = p.next_pressure
    r = Pressure(pid, holder, target, act.priority, deadline, p.generation, PressureState.OPEN, 0)
    return _evolve(p, pressures=p.pressures.set(pid, r), next_pressure=pid + 1), pid


def _answer(p: Pool, act: Answer, guards: GuardSet) -> tuple[Pool, int]:
    now = _int(act.now, "now")
    if type(act.victims) is not tuple or any(type(v) is not int for v in act.victims) \
            or len(set(act.victims)) != len(act.victims):
        raise InvalidArgument(f"victims must be a tuple of distinct ticket ids, got {act.victims!r}")
    holder = _holder(p, act.holder)
    r = _pressure(p, act.pressure)
    if r.holder != holder:
        raise ForeignHolder(f"pressure ticket {r.id} was sent to holder {r.holder}, not {holder}")
    # Verify only an open, current, unexpired ticket is answered: stale answers credit nothing (C5).
    if guards.on("answer_open_only"):
        if r.generation != p.generation:
            raise StaleGeneration(f"pressure ticket {r.id} is of generation {r.generation}, pool is at {p.generation}")
        if r.state is not PressureState.OPEN:
            raise StaleAnswer(f"pressure ticket {r.id} is {r.state.value}; its answer credits nothing")
        if now > r.deadline:
            raise StaleAnswer(f"pressure ticket {r.id} expired at {r.deadline}; answered at {now}")
    victims = []
    for v in act.victims:
        t = p.tickets.get(v)
        if t is None or t.holder != holder or t.state is not _T.CLAIMED:
            raise PinnedVictim(f"victim {v} is not a claimed lease of holder {holder}")
        # Verify the victim is neither pinned nor in flight (I6).
        if (t.pinned or t.in_flight) and guards.on("victims_unpinned_idle"):
            raise PinnedVictim(f"victim {v} is {'pinned' if t.pinned else 'in flight'}; it cannot be reclaimed")
        victims.append(t)
    released = sum(t.nbytes for t in victims)
    tickets = p.tickets
    for t in victims:
        next_ticket_state(t.state, TicketEvent.RELEASE)
        tickets = tickets.delete(t.id)
    state = PressureState.ANSWERED if r.state is PressureState.OPEN else r.state
    pressures = p.pressures.set(r.id, _evolve(r, state=state, released=r.released + released))
    p = _evolve(p, tickets=tickets, pressures=pressures, free=p.free + released)
    return _arbitrate(p, guards), released


def _cancel_pressure(p: Pool, act: CancelPressure, guards: GuardSet) -> tuple[Pool, None]:
    r = _pressure(p, act.pressure)
    new = next_pressure_state(r.state, PressureEvent.CANCEL, f"pressure ticket {r.id}")
    return _evolve(p, pressures=p.pressures.set(r.id, _evolve(r, state=new))), None


def _expire_pressure(p: Pool, act: ExpirePressure, guards: GuardSet) -> tuple[Pool, None]:
    now = _int(act.now, "now")
    r = _pressure(p, act.pressure)
    new = next_pressure_state(r.state, PressureEvent.EXPIRE, f"pressure ticket {r.id}")
    if now <= r.deadline:
        raise InvalidTransition(f"pressure ticket {r.id} is due at {r.deadline}; not expired at {now}")
    return _evolve(p, pressures=p.pressures.set(r.id, _evolve(r, state=new))), None


_HANDLERS: dict[type, Any] = {
    Submit: _submit,
    TryReserve: _try_reserve,
    Claim: _claim,
    Release: _release,
    Cancel: _cancel,
    Timeout: _timeout,
    Reconfigure: _reconfigure,
    SetUse: _set_use,
    Press: _press,
    Answer: _answer,
    CancelPressure: _cancel_pressure,
    ExpirePressure: _expire_pressure,
}
