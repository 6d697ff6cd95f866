"""spec/lifecycle.py as a public API: the default record names in a miss, and `lookup`'s own message.

tests/test_lifecycle.py checks each table pair and that a miss names state
and event; these pin the whole message, with the defaults a caller gets when
it passes no record name, and the `noun` the one lookup prints (h11: a miss
is a typed error that says what, which event, in which state).
"""

from __future__ import annotations

import pytest

from spec.errors import InvalidTransition
from spec.lifecycle import ALLOCATION_TABLE, CONTEXT_TABLE, lookup, next_alloc_state, next_context_state
from spec.types import AllocEvent, AllocState, ContextEvent, ContextState


def test_invalid_alloc_transition_default_name_is_allocation() -> None:
    with pytest.raises(InvalidTransition, match=r"^allocation: no transition for event 'commit' in state 'live'$"):
        next_alloc_state(AllocState.LIVE, AllocEvent.COMMIT)


def test_invalid_context_transition_default_name_is_context() -> None:
    with pytest.raises(InvalidTransition,
                       match=r"^context: no transition for event 'confirm-termination' in state 'active'$"):
        next_context_state(ContextState.ACTIVE, ContextEvent.CONFIRM_TERMINATION)


def test_invalid_context_transition_names_the_record() -> None:
    with pytest.raises(InvalidTransition, match=r"^authority 3: no transition for event 'confirm-termination'"):
        next_context_state(ContextState.ACTIVE, ContextEvent.CONFIRM_TERMINATION, "authority 3")


def test_lookup_names_the_noun() -> None:
    with pytest.raises(InvalidTransition, match=r"^thing: no transition for event 'commit' in phase 'released'$"):
        lookup(ALLOCATION_TABLE, AllocState.RELEASED, AllocEvent.COMMIT, "thing", noun="phase")


@pytest.mark.parametrize(("table", "state", "event", "expected"), [
    (ALLOCATION_TABLE, AllocState.PROVISIONAL, AllocEvent.COMMIT, AllocState.LIVE),
    (CONTEXT_TABLE, ContextState.LOST, ContextEvent.CONFIRM_TERMINATION, ContextState.TERMINATED),
])
def test_lookup_returns_the_table_entry(table, state, event, expected) -> None:
    assert lookup(table, state, event, "x") is expected
