"""Harm clause of the requester-ticket table (I1: one credit per grant; DESIGN-FACTS section 6, "Requester-side
tickets (one-shot)").

A ticket is one-shot: once it is retired (claimed, cancelled, timed out, failed by a reconfigure) it leaves the
manager's ticket table, whose records are the live tickets only, pending or granted (`spec.manager_actions.Manager`
`tickets`). A retired ticket kept there is still visible to its holder and to the parts: it can be cancelled or
claimed a second time, crediting or taking the bytes of a grant that was already returned (I1, I7: at most one
credit per grant), and its record names an allocation that is gone. The clause reads the ticket table only; it
states the harm on the state the holder sees, before a second retirement could act on it.
Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from invariants.clauses import clause
from spec import manager_actions as M
from spec.tickets import TicketState

__all__ = ["state_I1_tickets"]

_LIVE = (TicketState.PENDING, TicketState.GRANTED)

_I1_RETIRED = clause("I1", "state_I1_tickets", "retired_ticket_gone",
                     "the ticket table holds live tickets only (pending or granted): a retired ticket (claimed, "
                     "cancelled, timed out, failed) kept there can be cancelled or claimed again, crediting or taking "
                     "a grant that was already returned")


def state_I1_tickets(m: M.Manager) -> None:
    _I1_RETIRED.case(bool(m.tickets))
    for t in m.tickets.values():
        if t.state not in _LIVE:
            _I1_RETIRED.fail(f"ticket {t.id} (holder {t.holder}, authority {t.authority}) is {t.state.value} but "
                             f"still in the ticket table")
