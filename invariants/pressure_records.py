"""What the pressure predicates read besides pool states (`invariants.pressure`): observations and trace memory.

`Delivery` and `Parked` are what a checker observes from outside the governor
(a holder callback, a parked requester thread); `TraceMemory` is what the
trace predicates remember of a run, so a run can be judged one step at a time.
"""

from __future__ import annotations

import attrs

__all__ = ["Delivery", "Parked", "TraceMemory"]


@attrs.frozen
class Delivery:
    """One holder callback as a checker observed it from outside the governor (I7)."""

    holder: int
    pressure: int
    target: int
    #: True iff another thread took the ledger lock (try-acquire with a timeout) while the callback ran.
    lock_free: bool


@attrs.frozen
class Parked:
    """A requester thread the checker parked in `wait` on a pending ticket, seen after a step that resolved
    the ticket (granted it, or retired it: cancel, timeout, reconfigure) (I13)."""

    ticket: int
    resolved: str  # what became of the ticket: "granted", "claimed" or "retired"
    #: True iff the thread was still parked a grace period after the step returned.
    still_parked: bool


@attrs.frozen
class TraceMemory:
    """What the trace predicates remember of a run so far, so a run can be checked one step at a time.

    `trace_I7` folds `step_trace_I7` over a whole trace; the bounded-exhaustive explorer carries the
    memory in its state instead, so the same clauses judge its steps.
    """

    charged: frozenset[int] = frozenset()
    credited: frozenset[int] = frozenset()
    allocator: frozenset[int] = frozenset()  # tickets an allocator-path call (TryReserve) created
    overtaken: tuple[tuple[int, int], ...] = ()  # (ticket, rounds in which it was overtaken), by ticket
