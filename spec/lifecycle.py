"""Lifecycle transition tables: allocation (I4a) and device context (C3).

Theory of operation (h11 style): every lifecycle is a table
(state, event) -> next state, looked up in exactly one place. A miss is an
`InvalidTransition` that names the state and the event. Nothing else in the
project decides which transitions exist; docs diagrams are generated from
these tables (`mermaid()`).

Terminal allocation states (RELEASED, CONTEXT_TERMINATED) hold no charge and
are dropped from the ledger; their ids stay issued forever (I4a).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from spec.errors import InvalidTransition
from spec.types import AllocEvent, AllocState, ContextEvent, ContextState

__all__ = [
    "lookup",
    "ALLOCATION_TABLE",
    "CONTEXT_TABLE",
    "TERMINAL",
    "next_alloc_state",
    "next_context_state",
    "mermaid",
]

S = TypeVar("S")
E = TypeVar("E")

_A, _E = AllocState, AllocEvent

ALLOCATION_TABLE: Mapping[tuple[AllocState, AllocEvent], AllocState] = {
    (_A.PROVISIONAL, _E.COMMIT): _A.LIVE,
    (_A.PROVISIONAL, _E.CANCEL): _A.RELEASED,
    (_A.PROVISIONAL, _E.LOSE): _A.DEVICE_LOST,
    (_A.LIVE, _E.RELEASE): _A.RELEASED,
    (_A.LIVE, _E.QUARANTINE): _A.QUARANTINED,
    (_A.LIVE, _E.SHRINK): _A.LIVE,  # the self-loops: the lease's bytes fall (shrink) or rise (grow),
    (_A.LIVE, _E.GROW): _A.LIVE,  # nothing else of it changes
    (_A.LIVE, _E.LOSE): _A.DEVICE_LOST,
    (_A.QUARANTINED, _E.LOSE): _A.DEVICE_LOST,
    (_A.DEVICE_LOST, _E.TERMINATE): _A.CONTEXT_TERMINATED,
}

#: States whose records leave the ledger (charge 0, id retired forever).
TERMINAL = frozenset({_A.RELEASED, _A.CONTEXT_TERMINATED})

CONTEXT_TABLE: Mapping[tuple[ContextState, ContextEvent], ContextState] = {
    (ContextState.ACTIVE, ContextEvent.LOSE): ContextState.LOST,
    (ContextState.LOST, ContextEvent.LOSE): ContextState.LOST,
    (ContextState.LOST, ContextEvent.CONFIRM_TERMINATION): ContextState.TERMINATED,
    # Confirmation is idempotent: a second one is a no-op, never a second refund.
    (ContextState.TERMINATED, ContextEvent.CONFIRM_TERMINATION): ContextState.TERMINATED,
    (ContextState.TERMINATED, ContextEvent.LOSE): ContextState.TERMINATED,
}


def lookup(table: Mapping[tuple[S, E], S], state: S, event: E, what: str, noun: str = "state") -> S:
    """The one lookup of every lifecycle table; a miss is an InvalidTransition naming state and event."""
    try:
        return table[(state, event)]
    except KeyError:
        raise InvalidTransition(
            f"{what}: no transition for event {event.value!r} in {noun} {state.value!r}"  # type: ignore[attr-defined]
        ) from None


def next_alloc_state(state: AllocState, event: AllocEvent, what: str = "allocation") -> AllocState:
    """Look up the allocation table."""
    return lookup(ALLOCATION_TABLE, state, event, what)


def next_context_state(state: ContextState, event: ContextEvent, what: str = "context") -> ContextState:
    """Look up the context table."""
    return lookup(CONTEXT_TABLE, state, event, what)


def mermaid(table: Mapping[tuple[object, object], object]) -> str:
    """A Mermaid state diagram generated from a transition table."""
    lines = ["stateDiagram-v2"]
    for (src, event), dst in table.items():
        lines.append(f"    {_node(src)} --> {_node(dst)}: {event.value}")
    return "\n".join(lines)


def _node(state: object) -> str:
    return state.value.replace("-", "_")  # type: ignore[attr-defined]
