"""A grant as an action: `GrantTicket(ticket)`, the one rule that decides which pending ticket may be granted.

Theory of operation. A pending ticket holds no bytes; a grant books its
ledger Reserve (charged before any waiter can see it, I1, I2, I7). Which
ticket may be granted now is decided here and nowhere else:

  a pending ticket on authority `a` is *grant-enabled* iff it fits
  `spec.quota.headroom` (`a.limit - a.used`, and what the tier's process
  quota leaves) and no pending ticket on `a` ahead of it in the
  design's arbitration order (`spec.arith.arbitration_key`: matured first,
  then priority, then submit sequence) fits or is a matured misfit.

That is the round's greedy grant and its stop rule (I13), one ticket at a
time: `spec.manager._round` ages the pending tickets and then applies
`GrantTicket` to `next_grant` until none is enabled, so the composed
spec's rounds and an explicit grant event (trace revision
`ortmem-manager/2`, where a governor may grant at any later event while the
grant is still enabled) are decided by the same rule.

A refused grant changes nothing and names why: UnknownTicket (never
issued), InvalidTransition (not pending: granted, claimed or retired),
CapacityDenied (does not fit its authority's headroom, I2), GrantOutOfOrder
(a ticket ahead of it in arbitration order must be granted first, or is a
matured misfit the freed bytes accumulate for, I13).

No I/O, no clock, no threads, no numpy.
"""

from __future__ import annotations

from typing import Any

import attrs

from spec import ledger_actions as A
from spec import ledger as machine
from spec import manager_actions as M
from spec.arith import arbitration_key
from spec.errors import CapacityDenied, GrantOutOfOrder, InvalidTransition, UnknownTicket
from spec.guards import GuardSet
from spec.quota import headroom
from spec.records import evolve
from spec.tickets import TicketEvent, TicketState, next_ticket_state

__all__ = ["GrantTicket", "next_grant", "enabled_grants", "grant", "grant_all", "GRANT_HANDLERS"]

_PENDING = TicketState.PENDING


@attrs.frozen
class GrantTicket:
    """Grant pending ticket `ticket`: a ledger Reserve of its bytes on its authority. Result: the allocation."""

    ticket: int


def _in_order(tickets: Any, aid: int, bound: int) -> list[M.Ticket]:
    pending = [t for t in tickets.values() if t.authority == aid and t.state is _PENDING]
    pending.sort(key=lambda t: arbitration_key(t.age >= bound, t.priority, t.id))
    return pending


def _first(ledger: Any, ordered: list[M.Ticket], bound: int, guards: GuardSet,
           quotas: Any) -> tuple[M.Ticket | None, M.Ticket | None]:
    """(the grant-enabled ticket, None) or (None, the matured misfit that ends the round) or (None, None)."""
    a = ledger.authorities.get(ordered[0].authority) if ordered else None
    if a is None:
        return None, None  # removed under its waiters: no ledger to grant from
    free = headroom(quotas, ledger, a)
    for t in ordered:
        if t.nbytes <= free:
            return t, None
        if t.age >= bound and guards.on("aging"):
            return None, t
    return None, None


def next_grant(m: M.Manager, aid: int, guards: GuardSet) -> M.Ticket | None:
    """The pending ticket on authority `aid` a grant may go to now (at most one), or None."""
    return _first(m.ledger, _in_order(m.tickets, aid, m.aging_bound), m.aging_bound, guards, m.quotas)[0]


def enabled_grants(m: M.Manager, guards: GuardSet) -> dict[int, int]:
    """Authority id -> the ticket a grant is owed to now, for every authority with one (fast when none waits)."""
    auths = {t.authority for t in m.tickets.values() if t.state is _PENDING}
    out = {}
    for aid in sorted(auths):
        t = next_grant(m, aid, guards)
        if t is not None:
            out[aid] = t.id
    return out


def _grant(ledger: Any, tickets: Any, t: M.Ticket, guards: GuardSet) -> tuple[Any, Any, int | None]:
    state, alloc = next_ticket_state(t.state, TicketEvent.GRANT, f"ticket {t.id}"), None
    # Verify a grant is a ledger reservation, charged before any waiter can see it (I1, I2).
    if guards.on("grant_charges_ledger"):
        a = ledger.authorities[t.authority]
        ledger, alloc = machine.step(ledger, A.Reserve(t.holder, t.authority, a.tier, t.nbytes, t.role), guards)
    return ledger, tickets.set(t.id, evolve(t, state=state, allocation=alloc)), alloc


def grant(m: M.Manager, t: M.Ticket, guards: GuardSet) -> tuple[M.Manager, int | None]:
    """Grant pending ticket `t` (enabled: the caller checked): its ledger Reserve, the ticket GRANTED."""
    ledger, tickets, alloc = _grant(m.ledger, m.tickets, t, guards)
    return evolve(m, ledger=ledger, tickets=tickets), alloc


def grant_all(m: M.Manager, aid: int, guards: GuardSet, tickets: Any = None) -> M.Manager:
    """`m` with every grant on authority `aid` made, one enabled ticket at a time: a round's grant pass (I13).

    `tickets`: `m.tickets` as the round just aged them (the new manager is built once). The order is sorted
    once: a grant changes no age or priority, only which tickets still wait."""
    tickets = m.tickets if tickets is None else tickets
    ledger, bound = m.ledger, m.aging_bound
    ordered = _in_order(tickets, aid, bound)
    while ordered:
        t = _first(ledger, ordered, bound, guards, m.quotas)[0]
        if t is None:
            break
        ledger, tickets = _grant(ledger, tickets, t, guards)[:2]
        ordered.remove(t)
    if ledger is m.ledger and tickets is m.tickets:
        return m
    return evolve(m, ledger=ledger, tickets=tickets)


def _grant_ticket(m: M.Manager, act: GrantTicket, guards: GuardSet) -> tuple[M.Manager, int | None]:
    tid = act.ticket
    t = m.tickets.get(tid) if type(tid) is int else None
    if t is None and not (type(tid) is int and 1 <= tid < m.next_ticket):
        raise UnknownTicket(f"ticket {tid!r} was never issued")
    if t is None or t.state is not _PENDING:
        raise InvalidTransition(f"ticket {tid} is not pending ({'retired' if t is None else t.state.value}): "
                                "only a pending ticket is granted")
    a = m.ledger.authorities.get(t.authority)
    # Verify the grant fits its authority's headroom: a grant past the limit (I2) or the tier's quota (I1) is an
    # over-grant.
    if a is None or t.nbytes > (free := headroom(m.quotas, m.ledger, a)):
        free = 0 if a is None else max(0, free)
        raise CapacityDenied(f"grant of ticket {tid}: {t.nbytes} B asked, {free} B free on authority "
                             f"{t.authority} (I2; with the tier's quota, I1)")
    _in_turn(m, t, guards)
    return grant(m, t, guards)


def _in_turn(m: M.Manager, t: M.Ticket, guards: GuardSet) -> None:
    """GrantOutOfOrder unless `t` (pending, fitting) is the ticket a grant may go to now."""
    first, stop = _first(m.ledger, _in_order(m.tickets, t.authority, m.aging_bound), m.aging_bound, guards,
                         m.quotas)
    # Verify no ticket ahead in arbitration order is owed the bytes first or is a matured misfit (I13).
    if first is not t:
        ahead = stop if first is None else first
        why = "is a matured misfit the freed bytes accumulate for" if first is None else "fits and comes first"
        raise GrantOutOfOrder(f"grant of ticket {t.id} out of arbitration order: ticket {ahead.id} {why} (I13)")


GRANT_HANDLERS: dict[type, Any] = {GrantTicket: _grant_ticket}
