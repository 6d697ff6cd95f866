"""The frame of a pool step (`invariants.pressure`, clause `step_I7.unnamed_tickets_untouched`): what may happen
to the tickets its action does not name.

A step may grant a waiter it does not name (pending -> granted, in a step
that arbitrates) and a reconfigure may fail the waiters; nothing else may
retire another ticket or change its holder, bytes, priority, generation or
use flags. Pure helpers over spec values; the clause itself (its case and its
failures) is in `invariants.pressure`.
"""

from __future__ import annotations

from typing import Any

from spec import pressure as P
from spec.tickets import TicketState

__all__ = ["unnamed", "unnamed_changes"]

#: The fields of a ticket that no step changes unless its action names that ticket.
FIXED_FIELDS = ("holder", "nbytes", "priority", "generation", "pinned", "in_flight")


def _named(act: Any) -> frozenset[int]:
    """The ticket ids the action names (a new ticket's id is not in the previous pool at all)."""
    if isinstance(act, P.Answer):
        return frozenset(v for v in act.victims if type(v) is int)
    tid = getattr(act, "ticket", None)
    return frozenset((tid,)) if type(tid) is int else frozenset()


def unnamed(prev: P.Pool, act: Any) -> list[P.Ticket]:
    """The tickets of `prev` that `act` does not name."""
    named = _named(act)
    return [t for tid, t in prev.tickets.items() if tid not in named]


def unnamed_changes(others: list[P.Ticket], act: Any, nxt: P.Pool, arbitrates: bool) -> list[str]:
    """What happened to `others` (tickets `act` does not name) in `nxt` that the frame forbids, one message each."""
    out: list[str] = []
    for a in others:
        b = nxt.tickets.get(a.id)
        if b is None:
            if not (isinstance(act, P.Reconfigure) and a.state is TicketState.PENDING):
                out.append(f"{act!r}: holder {a.holder}'s {a.state.value} ticket {a.id} ({a.nbytes} B) was "
                           f"retired, though the action does not name it")
            continue
        moved = [f for f in FIXED_FIELDS if getattr(a, f) != getattr(b, f)]
        if moved:
            out.append(f"{act!r}: holder {a.holder}'s ticket {a.id}, not named by the action, changed "
                       + ", ".join(f"{f} {getattr(a, f)!r} -> {getattr(b, f)!r}" for f in moved))
        granted = a.state is TicketState.PENDING and b.state is TicketState.GRANTED and arbitrates
        if (a.state, a.grant) != (b.state, b.grant) and not granted:
            out.append(f"{act!r}: holder {a.holder}'s ticket {a.id}, not named by the action, went "
                       f"{a.state.value} (grant {a.grant}) -> {b.state.value} (grant {b.grant})")
    return out
