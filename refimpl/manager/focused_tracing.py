"""Trace hooks of the focused front ends of `ProcessMemoryManager` (a mixin; `refimpl.tracing` does the I/O).

The single-pool protocol (`refimpl.manager.leases`, `refimpl.manager.pool_view._run_pool`) and the
focused transactions (`refimpl.manager.tx_view`, `_run_tx`) emit one event
per operation when a trace recorder is attached, in their own revisions
(`invariants.focused_trace`: `ortmem-pool/1`, `ortmem-tx/1`), numbered under
the ledger lock in the same sequence as every other event and delivered
after it is released (I7). What an event observes is read here, from the
records the operation ran on: a pool event the free bytes and generation of
its ledger and the pool's constants; a transaction event `used` of every
canonical authority. Off (no recorder), nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from refimpl.manager.ledger import _Auth
from spec.errors import GovernorError

__all__ = ["FocusedTracing"]

R = TypeVar("R")


class FocusedTracing:
    """`_record_pool` for `_run_pool` and `_drain`; `_run_tx_traced` for `_run_tx`."""

    def _record_pool(self, rec: Any, action: Any, a: _Auth | None, args: tuple[Any, ...], result: Any,
                     error: GovernorError | None, kind: str | None = None) -> int:
        """Queue the `ortmem-pool/1` event of `action` on ledger `a` (caller holds the lock); its number."""
        from invariants.focused_trace import pool_kind
        from refimpl.tracing import record_focused

        kind = kind or pool_kind(action)
        extra: dict[str, Any] = {"authority": None if a is None else a.id}
        if kind == "pool_try_reserve":
            extra["role"] = args[4]
        observed = None if a is None else {"free": a.limit - a.used, "generation": a.generation,
                                           "aging_bound": self._bound, "mailbox": self._slots}
        return record_focused(rec, "ortmem-pool/1", kind, action, extra, result, error, observed)

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
