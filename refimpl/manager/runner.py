"""The one contract runner of the manager's checked operations: a view before, G4, then step and state.

`contracted` runs one operation's body while its caller holds the ledger
lock and contracts are on. Its callers (`Views._run_full`, the frozen view;
`contract_books.contracted_partial`, the partial views of level "local") differ
only in what they view and which predicates they run on it, and pass both in.

The lock, the wake-ups after it and (in `_run_full`) the trace event stay
with the callers. Refimpl's own code: it imports no spec transition module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from invariants._violation import InvariantViolation
from spec.errors import GovernorError

__all__ = ["contracted"]

T = TypeVar("T")
V = TypeVar("V")


def contracted(view: Callable[[], V], step: Callable[[V, Any, V, Any], None] | None,
               state: Callable[[V], None] | None, act: Callable[[], Any], what: str,
               body: Callable[..., T], args: tuple[Any, ...], after: Callable[[], V] | None = None) -> T:
    """`body(*args)` as a checked step (the caller holds the ledger lock).

    `view()` is taken before the body. A refusal (a `GovernorError`) must leave `view()` equal to it
    (G4: a refused operation changes nothing) and is re-raised; otherwise `InvariantViolation("G4")`.
    After an accepted body, with `after()` (default `view`) as the state after it:
    `step(before, action, after, result)`, then `state(after)`; either may be None (nothing to check).
    `act()` makes the action, only when it is needed (a check or a G4 report), so a bad argument
    reaches the body's typed error first."""
    before = view()
    try:
        result = body(*args)
    except GovernorError:
        if view() != before:
            raise InvariantViolation("G4", f"{act()!r} was refused but changed the {what}") from None
        raise
    if step is not None or state is not None:
        now = view() if after is None else after()
        if step is not None:
            step(before, act(), now, result)
        if state is not None:
            state(now)
    return result
