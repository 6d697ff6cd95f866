"""Ticket lifecycles of the pressure protocol: requester tickets and holder pressure tickets.

Theory of operation (DESIGN-FACTS section 6). A *requester ticket* is a
one-shot, waitable capacity request: idle -> pending -> granted -> claimed ->
completed, plus cancelled and failed. A *pressure ticket* is the holder-side
demand (target bytes, priority, deadline, generation): open -> answered |
cancelled | expired. Both are transition tables looked up in one place; a
miss is an `InvalidTransition` naming state and event. Terminal requester
tickets leave the pool's table (their ids stay issued); pressure tickets keep
their terminal state, so a late answer is recognised as stale.

Enums and tables only; no behaviour beyond the lookup.
"""

from __future__ import annotations

from collections.abc import Mapping

from spec.lifecycle import lookup
from spec.types import _ShortRepr

__all__ = [
    "TicketState",
    "TicketEvent",
    "PressureState",
    "PressureEvent",
    "TICKET_TABLE",
    "PRESSURE_TABLE",
    "HOLDING",
    "TICKET_TERMINAL",
    "next_ticket_state",
    "next_pressure_state",
]


class TicketState(_ShortRepr):
    IDLE = "idle"
    PENDING = "pending"  # waiting: holds no bytes (I7, I12)
    GRANTED = "granted"  # charged before the waiter is woken
    CLAIMED = "claimed"  # owned by the requester (a holder lease)
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


class TicketEvent(_ShortRepr):
    SUBMIT = "submit"
    GRANT = "grant"
    CLAIM = "claim"
    RELEASE = "release"  # the owner releases its lease (or gives it up in a pressure answer)
    CANCEL = "cancel"
    TIMEOUT = "timeout"
    RECONFIGURE = "reconfigure"


class PressureState(_ShortRepr):
    OPEN = "open"
    ANSWERED = "answered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class PressureEvent(_ShortRepr):
    ANSWER = "answer"
    CANCEL = "cancel"
    EXPIRE = "expire"


_T, _E = TicketState, TicketEvent

TICKET_TABLE: Mapping[tuple[TicketState, TicketEvent], TicketState] = {
    (_T.IDLE, _E.SUBMIT): _T.PENDING,
    (_T.PENDING, _E.GRANT): _T.GRANTED,
    (_T.PENDING, _E.CANCEL): _T.CANCELLED,
    (_T.PENDING, _E.TIMEOUT): _T.FAILED,
    (_T.PENDING, _E.RECONFIGURE): _T.FAILED,
    (_T.GRANTED, _E.CLAIM): _T.CLAIMED,
    (_T.GRANTED, _E.CANCEL): _T.CANCELLED,  # exact credit; beats a later claim
    (_T.GRANTED, _E.TIMEOUT): _T.FAILED,  # exact credit
    (_T.CLAIMED, _E.RELEASE): _T.COMPLETED,
}

#: States whose ticket holds charged bytes (granted: charged, claimed: owned).
HOLDING = frozenset({_T.GRANTED, _T.CLAIMED})
#: States whose tickets leave the table.
TICKET_TERMINAL = frozenset({_T.COMPLETED, _T.CANCELLED, _T.FAILED})

PRESSURE_TABLE: Mapping[tuple[PressureState, PressureEvent], PressureState] = {
    (PressureState.OPEN, PressureEvent.ANSWER): PressureState.ANSWERED,
    (PressureState.OPEN, PressureEvent.CANCEL): PressureState.CANCELLED,
    (PressureState.OPEN, PressureEvent.EXPIRE): PressureState.EXPIRED,
}


def next_ticket_state(state: TicketState, event: TicketEvent, what: str = "ticket") -> TicketState:
    """Look up the requester-ticket table."""
    return lookup(TICKET_TABLE, state, event, what)


def next_pressure_state(state: PressureState, event: PressureEvent, what: str = "pressure ticket") -> PressureState:
    """Look up the pressure-ticket table."""
    return lookup(PRESSURE_TABLE, state, event, what)
