"""Trace hooks of the focused front ends of `ProcessMemoryManager` (a mixin; `refimpl.tracing` does the I/O).

The focused transactions (`refimpl.manager.tx_view`, `_run_tx`) emit one event
per operation when a trace recorder is attached, in their own revision
(`invariants.focused_trace`: `ortmem-tx/1`), numbered under
the ledger lock in the same sequence as every other event and delivered
after it is released (I7). What an event observes is read here, from the
records the operation ran on: `used` of every canonical authority. Off (no
recorder), nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from spec.errors import GovernorError

__all__ = ["FocusedTracing"]

R = TypeVar("R")


class FocusedTracing:
    """`_run_tx_traced` for `_run_tx`."""

    def _run_tx_traced(self, rec: Any, action: Any, body: Callable[..., R], args: tuple[Any, ...]) -> R:
        """`_run_tx` (its contracts unchanged), then one `ortmem-tx/1` event."""
        from invariants.focused_trace import tx_kind
        from refimpl.tracing import finish, record_focused

        error: GovernorError | None = None
        result: Any = None
        kind = tx_kind(action)
        extra = {"holder": args[0]} if kind == "tx_plan" else {}
        with self._lock:  # re-entrant: held from the body to the event's number, so the trace is lock order
            try:
                result = self._run_tx_checked(action, body, args)
            except GovernorError as e:
                error = e
            used = {a.id: a.used for a in self._auths.values() if a.alias_of is None}
            seq = record_focused(rec, "ortmem-tx/1", kind, action, extra, result, error, {"used": used})
        self.wake_waiters()  # the waiters its credits granted, now that the lock is released (I7)
        return finish(rec, seq, type(action).__name__, result, error)
