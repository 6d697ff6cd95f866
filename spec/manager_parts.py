"""The composed manager's parts: requester tickets, holder pressure, limit changes, lifetimes, lease shrink and grow.

Each handler validates in the order `spec.manager_actions` states (the first
failing check decides the typed error) and raises before building a state,
so a rejected action changes nothing. Every byte moves through the ledger:
each handler ends in `spec.ledger.step` calls (Reserve, Commit, Cancel,
Release) on `Manager.ledger`; the parts keep only ids, order and phase.
Arbitration rounds and the ledger's own actions live in `spec.manager`.

The ledger's lookups (`_holder`, `_authority`, `_allocation`, `_active`) are
reused from `spec.ledger`, so a part's refusal reads like the ledger's.
No I/O, no clock, no threads, no numpy.
"""

from __future__ import annotations

from typing import Any

from spec.records import evolve

from spec import ledger_actions as A
from spec import ledger as machine
from spec import manager_actions as M
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    PinnedVictim,
    HolderInUse,
    ProviderPinned,
    StaleAnswer,
    StaleGeneration,
    UnknownTicket,
)
from spec.guards import ALL_ON, GuardSet
from spec.ledger import (_active, _allocation, _authority, _enum, _holder, _holder_allocation, _settle, _transition,
                         check_bytes)
from spec.ledger_state import Authority
from spec.quota import headroom, tier_charged
from spec.tickets import PressureEvent, PressureState, TicketEvent, TicketState, next_pressure_state, next_ticket_state
from spec.types import MAX_BYTES, AllocEvent, AllocState, Role, Tier

__all__ = ["PART_HANDLERS", "referenced", "canonical", "without_limit_check", "pins", "check_priority"]

_T = TicketState


def canonical(m: M.Manager, aid: object, guards: GuardSet = ALL_ON) -> Authority:
    """A known, canonical authority: the parts act on ledgers, never on alias views."""
    a = _authority(m.ledger, aid)
    if a.alias_of is not None:
        guards.refuse("alias", InvalidArgument(f"authority {a.id} is an alias of authority {a.alias_of}: the manager's "
                                               f"parts act on canonical authorities"))
    return a


def referenced(m: M.Manager) -> dict[int, str]:
    """Allocation id -> the part that holds it (a granted ticket, a transaction, or a view over a lease)."""
    # A view pins the bytes it is over until DropView: no release under an execution's reads (C6).
    out: dict[int, str] = {v.allocation: f"view {v.id}" for v in m.views.values() if v.allocation is not None}
    for t in m.tickets.values():
        if t.allocation is not None:
            out[t.allocation] = f"ticket {t.id}"
    for x in m.txs.values():
        for alloc in x.held:
            out[alloc] = f"transaction {x.id}"
    return out


def without_limit_check(guards: GuardSet) -> GuardSet:
    """The ledger's guards with its limit check off too (what a switched-off part guard lets through); the sites
    waived stay waived, so `spec.refusals.every_refusal` sees each refusal once."""
    return GuardSet(guards.off | {"limit_check"}, guards.waived)


def _ticket(m: M.Manager, tid: object) -> M.Ticket | None:
    """The live ticket, None if retired, UnknownTicket if never issued."""
    t = m.tickets.get(tid) if type(tid) is int else None
    if t is None:
        if type(tid) is int and 1 <= tid < m.next_ticket:
            return None
        raise UnknownTicket(f"ticket {tid!r} was never issued")
    return t


def _pressure(m: M.Manager, pid: object, retired: type = InvalidTransition) -> M.Pressure:
    p = m.pressures.get(pid) if type(pid) is int else None
    if p is None:
        if type(pid) is int and 1 <= pid < m.next_pressure:
            raise retired(f"pressure {pid} is already retired")
        raise UnknownTicket(f"pressure {pid!r} was never issued")
    return p


def _time(v: object, what: str, optional: bool = False) -> int | None:
    """A point in time: an int in [0, 2**63-1] (None too where `optional`); the spec has no clock (C5 deadlines).

    Times and priorities are 64-bit, as bytes are: a trace carries every accepted value exactly."""
    if (v is None and optional) or (type(v) is int and 0 <= v <= MAX_BYTES):
        return v  # type: ignore[return-value]
    raise InvalidArgument(f"{what} must be {'None or ' if optional else ''}an int in [0, 2**63-1], got {v!r:.80}")


def check_priority(p: object, guards: GuardSet = ALL_ON) -> int:
    err = InvalidArgument(f"priority must be an int in [-2**63, 2**63-1], got {p!r:.80}")
    if type(p) is not int:
        raise err
    if not -MAX_BYTES - 1 <= p <= MAX_BYTES:
        guards.refuse("priority", err)
    return p


def _owner(record_holder: int, holder: int, what: str, guards: GuardSet) -> None:
    # Verify only the owning holder acts on its ticket or pressure (I6).
    if record_holder != holder:
        guards.refuse("owner", ForeignHolder(f"{what} belongs to holder {record_holder}, not holder {holder}"))


# --- requester tickets (I7, I13; bytes through the ledger) -----------------------


def _request(m: M.Manager, act: M.Submit | M.TryReserve, guards: GuardSet) -> tuple[int, Role, Any, Authority]:
    """Submit's and TryReserve's checks, in order: (nbytes, role, holder, authority)."""
    nbytes = check_bytes(act.nbytes, "nbytes", guards=guards)
    check_priority(act.priority, guards)
    role = _enum(act.role, Role, "role")
    h = _holder(m.ledger, act.holder, guards)
    a = canonical(m, act.authority, guards)
    _active(a, guards)
    machine.check_alignment(act.alignment, guards)
    # Verify the request can ever fit: a ticket that never fits would wait forever (I13).
    if nbytes > a.limit:
        guards.refuse("limit", CapacityDenied(f"authority {a.id}: {nbytes} B can never fit its {a.limit} B limit"))
    if nbytes > m.quotas.get(a.tier, nbytes):
        guards.refuse("quota", CapacityDenied(f"tier {a.tier.value}: {nbytes} B can never fit its "
                                              f"{m.quotas[a.tier]} B process quota (I1)"))
    return nbytes, role, h, a


def _submit(m: M.Manager, act: M.Submit, guards: GuardSet) -> tuple[M.Manager, int]:
    nbytes, role, h, a = _request(m, act, guards)
    state = next_ticket_state(_T.IDLE, TicketEvent.SUBMIT)
    t = M.Ticket(m.next_ticket, h.id, a.id, nbytes, act.priority, role, 0, state, None, m.generations.get(a.id, 0))
    return evolve(m, tickets=m.tickets.set(t.id, t), next_ticket=t.id + 1), t.id


def _try_only(m: M.Manager, a: Authority, nbytes: int, guards: GuardSet) -> None:
    """TryReserve's admission, GrowLease's too: `nbytes` more on `a` now, or CapacityDenied now."""
    waiting = any(t.authority == a.id and t.state is _T.PENDING for t in m.tickets.values())
    free = headroom(m.quotas, m.ledger, a)
    # Verify the allocator path is granted now or refused now, never pending, never ahead of a waiter (I7, I13).
    if (waiting or nbytes > free) and guards.on("try_only"):
        guards.refuse("room", CapacityDenied(f"try-only: {nbytes} B asked, {max(0, free)} B free"
                                             f"{', a ticket is waiting' if waiting else ''}"))


def _try_reserve(m: M.Manager, act: M.TryReserve, guards: GuardSet) -> tuple[M.Manager, int]:
    nbytes, role, h, a = _request(m, act, guards)
    _try_only(m, a, nbytes, guards)
    ledger, alloc = machine.step(m.ledger, A.Reserve(h.id, a.id, a.tier, nbytes, role), without_limit_check(guards))
    ledger = machine.step(ledger, A.Commit(h.id, alloc, nbytes), guards)[0]
    return evolve(m, ledger=ledger), alloc


def _set_use(m: M.Manager, act: M.SetUse, guards: GuardSet) -> tuple[M.Manager, None]:
    if type(act.pinned) is not bool or type(act.in_flight) is not bool:
        raise InvalidArgument(f"pinned and in_flight must be bools, got {act.pinned!r:.40}, {act.in_flight!r:.40}")
    h = _holder(m.ledger, act.holder, guards)
    r = _allocation(m.ledger, act.allocation)
    _owner(r.holder, h.id, f"allocation {r.id}", guards)
    refs = referenced(m)
    if r.state is not AllocState.LIVE or r.id in refs:
        held = f", held by {refs[r.id]}" if r.id in refs else ""
        guards.refuse("lifecycle", InvalidTransition(f"allocation {r.id} is {r.state.value}{held}: only a lease has "
                                                     "use flags"))
    uses = m.uses.set(r.id, (act.pinned, act.in_flight)) if act.pinned or act.in_flight else (
        m.uses.delete(r.id) if r.id in m.uses else m.uses)
    return evolve(m, uses=uses), None


def _reconfigure(m: M.Manager, act: M.Reconfigure, guards: GuardSet) -> tuple[M.Manager, None]:
    a = canonical(m, act.authority, guards)
    _active(a, guards)
    tickets = m.tickets
    for t in m.tickets.values():
        if t.authority == a.id and t.state is _T.PENDING:
            next_ticket_state(t.state, TicketEvent.RECONFIGURE, f"ticket {t.id}")
            tickets = tickets.delete(t.id)  # an older pending ticket fails: it held nothing
    generations = m.generations.set(a.id, m.generations.get(a.id, 0) + 1)
    return evolve(m, tickets=tickets, generations=generations), None


def _claim(m: M.Manager, act: M.Claim, guards: GuardSet) -> tuple[M.Manager, int]:
    h = _holder(m.ledger, act.holder, guards)
    t = _ticket(m, act.ticket)
    if t is None:
        raise InvalidTransition(f"ticket {act.ticket} is already retired")
    _owner(t.holder, h.id, f"ticket {t.id}", guards)
    try:
        next_ticket_state(t.state, TicketEvent.CLAIM, f"ticket {t.id}")
    except InvalidTransition as e:
        guards.refuse("lifecycle", e)
    ledger, alloc = m.ledger, t.allocation
    if alloc is None:  # the grant charged nothing (grant_charges_ledger off): the bytes are taken only now
        tier = _authority(ledger, t.authority).tier
        ledger, alloc = machine.step(ledger, A.Reserve(t.holder, t.authority, tier, t.nbytes, t.role),
                                     without_limit_check(guards))
    ledger = machine.step(ledger, A.Commit(t.holder, alloc, t.nbytes), guards)[0]
    return evolve(m, ledger=ledger, tickets=m.tickets.delete(t.id)), alloc


def _retire_ticket(m: M.Manager, act: M.CancelTicket | M.TimeoutTicket, event: TicketEvent,
                   guards: GuardSet) -> tuple[M.Manager, int]:
    h = _holder(m.ledger, act.holder, guards)
    t = _ticket(m, act.ticket)
    if t is None:
        return m, 0  # already retired: nothing is credited a second time (I1, I7)
    _owner(t.holder, h.id, f"ticket {t.id}", guards)
    next_ticket_state(t.state, event, f"ticket {t.id}")
    tickets = m.tickets.delete(t.id)
    if t.state is _T.PENDING:
        return evolve(m, tickets=tickets), 0
    ledger = m.ledger
    if t.allocation is not None:
        ledger = machine.step(ledger, A.Cancel(t.holder, t.allocation), guards)[0]
    return evolve(m, ledger=ledger, tickets=tickets), t.nbytes


def _cancel_ticket(m: M.Manager, act: M.CancelTicket, guards: GuardSet) -> tuple[M.Manager, int]:
    return _retire_ticket(m, act, TicketEvent.CANCEL, guards)


def _timeout_ticket(m: M.Manager, act: M.TimeoutTicket, guards: GuardSet) -> tuple[M.Manager, int]:
    return _retire_ticket(m, act, TicketEvent.TIMEOUT, guards)


# --- holder pressure (C5, I6) ----------------------------------------------------


def _press(m: M.Manager, act: M.Press, guards: GuardSet) -> tuple[M.Manager, int]:
    target = check_bytes(act.target, "target", guards=guards)
    check_priority(act.priority, guards)
    deadline = _time(act.deadline, "deadline", optional=True)
    h = _holder(m.ledger, act.holder, guards)
    a = canonical(m, act.authority, guards)
    _active(a, guards)
    p = M.Pressure(m.next_pressure, h.id, a.id, target, False, act.priority, deadline, m.generations.get(a.id, 0))
    return evolve(m, pressures=m.pressures.set(p.id, p), next_pressure=p.id + 1), p.id


def _answer(m: M.Manager, act: M.Answer, guards: GuardSet) -> tuple[M.Manager, int]:
    victims = act.victims
    if (type(victims) is not tuple or any(type(v) is not int for v in victims)
            or len(set(victims)) != len(victims)):
        raise InvalidArgument(f"victims must be a tuple of distinct ints, got {victims!r:.80}")
    now = _time(act.now, "now", optional=True)
    h = _holder(m.ledger, act.holder, guards)
    # Verify a retired (answered, cancelled, expired) pressure's answer credits nothing (C5).
    p = _pressure(m, act.pressure, StaleAnswer)
    _owner(p.holder, h.id, f"pressure {p.id}", guards)
    if p.deadline is not None and now is None:
        guards.refuse("now", InvalidArgument(f"pressure {p.id} is due at {p.deadline}: its answer says when it was "
                                             "given (now)"))
    # Verify an answer to a pressure of an older generation credits nothing (C5: the topology changed).
    current = m.generations.get(p.authority, 0)
    if p.generation != current and guards.on("answer_open_only"):
        guards.refuse("generation", StaleGeneration(f"pressure {p.id} is of generation {p.generation}; authority "
                                                    f"{p.authority} is at {current}"))
    # Verify an answer past the pressure's deadline credits nothing (C5: the requester has moved on).
    if p.deadline is not None and now is not None and now > p.deadline and guards.on("answer_open_only"):
        guards.refuse("late", StaleAnswer(f"pressure {p.id} was due at {p.deadline}; answered at {now}, it credits "
                                          "nothing"))
    refs = referenced(m)
    for v in victims:
        r = _allocation(m.ledger, v)
        _owner(r.holder, h.id, f"allocation {v}", guards)
        if r.authority != p.authority:
            guards.refuse("victim", InvalidArgument(f"allocation {v} is on authority {r.authority}, not pressure "
                                                    f"{p.id}'s authority {p.authority}"))
        # Verify a holder gives back only its own free live leases, never bytes a part holds (C5, I6).
        if r.state is not AllocState.LIVE or v in refs:
            held = f", held by {refs[v]}" if v in refs else ""
            guards.refuse("lifecycle", InvalidTransition(f"allocation {v} is {r.state.value}{held}: only a free "
                                                         "live lease can be given back"))
        # Verify a pinned or in-flight lease is never reclaimed (I6).
        if v in m.uses and guards.on("victims_unpinned_idle"):
            guards.refuse("pinned", PinnedVictim(f"allocation {v} is {'pinned' if m.uses[v][0] else 'in flight'}; "
                                                 "never reclaimed"))
    next_pressure_state(PressureState.OPEN, PressureEvent.ANSWER, f"pressure {p.id}")
    ledger, released = m.ledger, 0
    for v in victims:
        released += ledger.allocations[v].charge
        ledger = machine.step(ledger, A.Release(h.id, v), guards)[0]
    changes = m.changes
    if p.change and p.authority in changes:
        ch = changes[p.authority]
        changes = changes.set(p.authority, evolve(ch, completed=ch.completed + ((p.id, released),)))
    return evolve(m, ledger=ledger, pressures=m.pressures.delete(p.id), changes=changes), released


def _cancel_pressure(m: M.Manager, act: M.CancelPressure, guards: GuardSet) -> tuple[M.Manager, None]:
    p = _pressure(m, act.pressure)
    next_pressure_state(PressureState.OPEN, PressureEvent.CANCEL, f"pressure {p.id}")
    return evolve(m, pressures=m.pressures.delete(p.id)), None


def _expire_pressure(m: M.Manager, act: M.ExpirePressure, guards: GuardSet) -> tuple[M.Manager, None]:
    now = _time(act.now, "now")
    p = _pressure(m, act.pressure)
    if p.deadline is None or now <= p.deadline:
        guards.refuse("due", InvalidTransition(f"pressure {p.id} is due at {p.deadline}; not expired at {now}"))
    next_pressure_state(PressureState.OPEN, PressureEvent.EXPIRE, f"pressure {p.id}")
    return evolve(m, pressures=m.pressures.delete(p.id)), None


# --- limits (C8, I2): prepare -> pressure -> commit, or keep the old limit --------------


def _prepare_limit(m: M.Manager, act: M.PrepareLimit, guards: GuardSet) -> tuple[M.Manager, tuple[int, ...]]:
    limit = check_bytes(act.limit, "limit", allow_zero=True, guards=guards)
    a = canonical(m, act.authority, guards)
    _active(a, guards)
    if limit > a.capacity:
        guards.refuse("capacity", InvalidBytes(f"limit {limit} B exceeds authority {a.id}'s capacity of "
                                               f"{a.capacity} B"))
    if a.id in m.changes:
        guards.refuse("pending", InvalidTransition(f"authority {a.id} already has a limit change pending (to "
                                                   f"{m.changes[a.id].target} B)"))
    pressures, pid, opened = m.pressures, m.next_pressure, []
    if a.used > limit:
        holders = sorted({r.holder for r in m.ledger.allocations.values()
                          if r.authority == a.id and r.state is AllocState.LIVE})
        for h in holders:
            pressures = pressures.set(pid, M.Pressure(pid, h, a.id, a.used - limit, True,
                                                      generation=m.generations.get(a.id, 0)))
            opened.append(pid)
            pid += 1
    changes = m.changes.set(a.id, M.LimitChange(a.id, limit))
    return evolve(m, pressures=pressures, next_pressure=pid, changes=changes), tuple(opened)


def _commit_limit(m: M.Manager, act: M.CommitLimit, guards: GuardSet) -> tuple[M.Manager, M.LimitOutcome]:
    a = _authority(m.ledger, act.authority)
    ch = m.changes.get(a.id)
    if ch is None:
        raise InvalidTransition(f"authority {a.id} has no limit change pending")
    pressures = m.pressures
    for pid, p in m.pressures.items():
        if p.change and p.authority == a.id:
            next_pressure_state(PressureState.OPEN, PressureEvent.CANCEL, f"pressure {pid}")
            pressures = pressures.delete(pid)
    ledger, committed = m.ledger, False
    # Verify the limit moves only once reclaim brought used under it; else the old limit stays (C8, I2).
    if a.used <= ch.target or not guards.on("limit_after_reclaim"):
        committed = True
        ledger = evolve(ledger, authorities=ledger.authorities.set(a.id, evolve(a, limit=ch.target)))
    outcome = M.LimitOutcome(committed, ledger.authorities[a.id].limit, ch.completed)
    return evolve(m, ledger=ledger, pressures=pressures, changes=m.changes.delete(a.id)), outcome


def _set_process_quota(m: M.Manager, act: M.SetProcessQuota, guards: GuardSet) -> tuple[M.Manager, None]:
    tier = _enum(act.tier, Tier, "tier")
    if act.nbytes is None:
        return (evolve(m, quotas=m.quotas.delete(tier)) if tier in m.quotas else m), None
    nbytes = check_bytes(act.nbytes, "nbytes", allow_zero=True)
    # Verify a quota is never set below what its tier already charges (C8: no bound below used; I1).
    if nbytes < (charged := tier_charged(m.ledger, tier)):
        raise CapacityDenied(f"tier {tier.value}: a {nbytes} B process quota is below the {charged} B it charges")
    return evolve(m, quotas=m.quotas.set(tier, nbytes)), None


# --- provider lifetime (C3) ------------------------------------------------------------------


def pins(m: M.Manager, aid: int) -> list[str]:
    """Everything that still references authority `aid`: charges, allowances, aliases, the parts' records."""
    refs = [f"allocation {r.id}" for r in m.ledger.allocations.values() if r.authority == aid]
    refs += [f"allowance {w.id}" for w in m.ledger.allowances.values() if w.authority == aid]
    refs += [f"alias {a.id}" for a in m.ledger.authorities.values() if a.alias_of == aid]
    refs += [f"ticket {t.id}" for t in m.tickets.values() if t.authority == aid]
    refs += [f"pressure {p.id}" for p in m.pressures.values() if p.authority == aid]
    refs += [f"limit change to {m.changes[aid].target} B"] if aid in m.changes else []
    refs += [f"transaction {x.id}" for x in m.txs.values() if any(n == aid for n, _ in x.needs)]
    return refs + [f"view {v.id}" for v in m.views.values() if v.authority == aid]


def _remove_authority(m: M.Manager, act: M.RemoveAuthority, guards: GuardSet) -> tuple[M.Manager, None]:
    a = _authority(m.ledger, act.authority)
    refs = pins(m, a.id)
    # Verify a provider stays registered while anything references it: its charge would lose its book (C3).
    if refs and guards.on("provider_pinned"):
        raise ProviderPinned(f"authority {a.id} is pinned by {', '.join(refs[:4])}")
    ledger = evolve(m.ledger, authorities=m.ledger.authorities.delete(a.id))
    gens = m.generations.delete(a.id) if a.id in m.generations else m.generations  # a removed id names nothing
    return evolve(m, ledger=ledger, generations=gens), None


def holder_refs(m: M.Manager, hid: int) -> list[str]:
    """Everything that still names holder `hid` and holds or may hold bytes: charges, allowances, the parts' records."""
    refs = [f"allocation {r.id}" for r in m.ledger.allocations.values() if r.holder == hid]
    refs += [f"allowance {w.id}" for w in m.ledger.allowances.values() if w.holder == hid]
    refs += [f"ticket {t.id}" for t in m.tickets.values() if t.holder == hid]
    refs += [f"pressure {p.id}" for p in m.pressures.values() if p.holder == hid]
    return refs + [f"transaction {x.id}" for x in m.txs.values() if x.holder == hid]


def _unregister_holder(m: M.Manager, act: M.UnregisterHolder, guards: GuardSet) -> tuple[M.Manager, None]:
    h = _holder(m.ledger, act.holder)
    refs = holder_refs(m, h.id)
    # Verify a holder stays registered while anything names it: its bytes would belong to nobody (I4a).
    if refs and guards.on("holder_in_use"):
        raise HolderInUse(f"holder {h.id} is named by {', '.join(refs[:4])}")
    intents = m.intents
    for i in [i.id for i in intents.values() if i.holder == h.id]:  # zero-byte places only its own retry can take
        intents = intents.delete(i)
    return evolve(m, ledger=evolve(m.ledger, holders=m.ledger.holders.delete(h.id)), intents=intents), None


# --- lease shrink (I1, I13): part of an idle lease given back; lease grow (I1, I2, I13): a charge -----------


def _shrink_lease(m: M.Manager, act: M.ShrinkLease, guards: GuardSet) -> tuple[M.Manager, None]:
    nbytes = check_bytes(act.nbytes, "nbytes", guards=guards)
    rec = _holder_allocation(m.ledger, act, guards)
    refs = referenced(m)
    # Verify no one shrinks bytes a ticket, a transaction or a view holds: that part owns them (I1, C6).
    if rec.id in refs:
        guards.refuse("part", InvalidTransition(f"allocation {rec.id} is held by {refs[rec.id]}: settle it through "
                                                "that part"))
    new = _transition(rec, AllocEvent.SHRINK, AllocState.LIVE, guards)
    # Verify a pinned or in-flight lease keeps its bytes: they are in use (I6).
    if rec.id in m.uses:
        guards.refuse("pinned", PinnedVictim(f"allocation {rec.id} is "
                                             f"{'pinned' if m.uses[rec.id][0] else 'in flight'}; never shrunk"))
    if nbytes >= rec.nbytes:
        guards.refuse("shrink", InvalidBytes(f"allocation {rec.id}: shrinking {nbytes} B of its {rec.nbytes} B "
                                             "leaves nothing; release it instead"))
    ledger = _settle(m.ledger, rec, new, rec.charge - nbytes, nbytes=rec.nbytes - nbytes)
    return evolve(m, ledger=ledger), None


def _grow_lease(m: M.Manager, act: M.GrowLease, guards: GuardSet) -> tuple[M.Manager, None]:
    nbytes = check_bytes(act.nbytes, "nbytes", guards=guards)
    rec = _holder_allocation(m.ledger, act, guards)
    refs = referenced(m)
    # Verify no one grows bytes a ticket, a transaction or a view holds: that part owns them (I1, C6).
    if rec.id in refs:
        guards.refuse("part", InvalidTransition(f"allocation {rec.id} is held by {refs[rec.id]}: settle it through "
                                                "that part"))
    new = _transition(rec, AllocEvent.GROW, AllocState.LIVE, guards)
    a = m.ledger.authorities[rec.authority]
    _active(a, guards)
    _try_only(m, a, nbytes, guards)  # a grow is a charge: admitted as a TryReserve of its bytes (I2, I13)
    # The reservation rises only as far as the lease needs (C2): grow-shrink cycles leave it bounded.
    ledger = _settle(m.ledger, rec, new, rec.charge + nbytes, nbytes=rec.nbytes + nbytes,
                     reserved=max(rec.reserved, rec.nbytes + nbytes))
    return evolve(m, ledger=ledger), None


PART_HANDLERS: dict[type, Any] = {
    M.Submit: _submit,
    M.Claim: _claim,
    M.TryReserve: _try_reserve,
    M.SetUse: _set_use,
    M.Reconfigure: _reconfigure,
    M.CancelTicket: _cancel_ticket,
    M.TimeoutTicket: _timeout_ticket,
    M.Press: _press,
    M.Answer: _answer,
    M.CancelPressure: _cancel_pressure,
    M.ExpirePressure: _expire_pressure,
    M.PrepareLimit: _prepare_limit,
    M.SetProcessQuota: _set_process_quota,
    M.CommitLimit: _commit_limit,
    M.RemoveAuthority: _remove_authority,
    M.UnregisterHolder: _unregister_holder,
    M.ShrinkLease: _shrink_lease,
    M.GrowLease: _grow_lease,
}
