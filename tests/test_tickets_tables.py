"""spec/tickets.py: both ticket tables through their lookups, the default names in a miss.

Every (state, event) pair of the requester-ticket and pressure-ticket
lifecycles either yields the documented next state or raises
InvalidTransition whose whole message names record, event and state.
"""

from __future__ import annotations

import itertools

import pytest

from spec.errors import InvalidTransition
from spec.tickets import (
    PRESSURE_TABLE,
    TICKET_TABLE,
    PressureEvent,
    PressureState,
    TicketEvent,
    TicketState,
    next_pressure_state,
    next_ticket_state,
)

_PS, _PE = PressureState, PressureEvent

#: The pressure-ticket lifecycle as DESIGN-FACTS section 6 states it: open -> answered | cancelled | expired.
PRESSURE_LIFECYCLE = {
    (_PS.OPEN, _PE.ANSWER): _PS.ANSWERED,
    (_PS.OPEN, _PE.CANCEL): _PS.CANCELLED,
    (_PS.OPEN, _PE.EXPIRE): _PS.EXPIRED,
}

PRESSURE_PAIRS = list(itertools.product(PressureState, PressureEvent))
TICKET_PAIRS = list(itertools.product(TicketState, TicketEvent))


def _pid(pair) -> str:
    return f"{pair[0].value}+{pair[1].value}"


def test_pressure_table_is_the_documented_lifecycle() -> None:
    assert dict(PRESSURE_TABLE) == PRESSURE_LIFECYCLE


@pytest.mark.parametrize("pair", [p for p in PRESSURE_PAIRS if p in PRESSURE_LIFECYCLE], ids=_pid)
def test_pressure_transition(pair) -> None:
    assert next_pressure_state(*pair) is PRESSURE_LIFECYCLE[pair]


@pytest.mark.parametrize("pair", [p for p in PRESSURE_PAIRS if p not in PRESSURE_LIFECYCLE], ids=_pid)
def test_invalid_pressure_transition(pair) -> None:
    state, event = pair
    msg = rf"^pressure ticket: no transition for event '{event.value}' in state '{state.value}'$"
    with pytest.raises(InvalidTransition, match=msg):
        next_pressure_state(state, event)


def test_invalid_pressure_transition_names_the_record() -> None:
    with pytest.raises(InvalidTransition, match=r"^pressure 4: no transition for event 'answer' in state 'expired'$"):
        next_pressure_state(_PS.EXPIRED, _PE.ANSWER, "pressure 4")


@pytest.mark.parametrize("pair", [p for p in TICKET_PAIRS if p in TICKET_TABLE], ids=_pid)
def test_ticket_transition(pair) -> None:
    assert next_ticket_state(*pair) is TICKET_TABLE[pair]


@pytest.mark.parametrize("pair", [p for p in TICKET_PAIRS if p not in TICKET_TABLE], ids=_pid)
def test_invalid_ticket_transition(pair) -> None:
    state, event = pair
    with pytest.raises(InvalidTransition, match=rf"^ticket: no transition for event '{event.value}' in state '{state.value}'$"):
        next_ticket_state(state, event)
