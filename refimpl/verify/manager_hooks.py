"""What checkers and tests need of a `ProcessMemoryManager` beyond its public verbs (issue #21 item 2).

The manager's public surface is its verbs, listed in one place (docs/guide.md, "The public verbs";
`tests/test_manager_surface.py` pins it). Its refinement mappings, its ledger lock, the wake-up of
waiters an outer frame kept and its trace recorder are no verbs a governor's caller uses: checkers and
tests reach them here, one function each, and nowhere else. (The trace recorder itself,
`refimpl.tracing`, uses the manager's private members directly.)

- `abstract_ledger(pmm)`: the ledger's refinement mapping, a `spec.ledger_state.State`;
- `abstract_manager(pmm)`: the composed refinement mapping, a `spec.manager_actions.Manager`;
- `ledger_lock(pmm)`: the one ledger lock (`LedgerLock`: `held_by_me()`, `probe(timeout)` from another
  thread, I7), which a test may hold across operations as the trace recorder does;
- `wake_waiters(pmm)`: wake the waiters operations granted while an outer frame held that lock;
- `trace_recorder(pmm)`: the recorder `refimpl.tracing.attach` wired in (None without a sink).

`corrupt_ledger(pmm)` is what a governor does when its own consistency check
finds the shared ledger corrupt: it poisons the whole manager for good
(`spec.manager_tx`, `CorruptLedger`). Every pending ticket fails (its waiter
wakes to find it gone) and from then on every operation that would grant new
charge is refused with ManagerPoisoned. A real governor reaches this state
only through a failed self-check, never through a caller, so it is a hook for
checkers and tests, not a public verb, and no trace event records it (I5).

The mappings themselves live with the records they read (`refimpl.manager.views`); only the entry is here.
No ORT imports here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["abstract_ledger", "abstract_manager", "corrupt_ledger", "ledger_lock", "trace_recorder", "wake_waiters"]


def abstract_ledger(pmm: Any) -> Any:
    """The ledger's refinement mapping: `pmm`'s ledger as a `spec.ledger_state.State`, read under its lock."""
    with pmm._lock:
        return pmm._view()


def abstract_manager(pmm: Any) -> Any:
    """The composed refinement mapping: every part of `pmm` as a `spec.manager_actions.Manager`, read under its lock."""
    with pmm._lock:
        return pmm._manager_view(None, None)


def ledger_lock(pmm: Any) -> Any:
    """`pmm`'s one ledger lock (`refimpl.manager.lock.LedgerLock`)."""
    return pmm._lock


def wake_waiters(pmm: Any) -> None:
    """Wake the waiters `pmm` granted while an outer frame held its ledger lock (call with the lock released)."""
    pmm._wake_waiters()


def trace_recorder(pmm: Any) -> Any:
    """The trace recorder of `pmm` (`refimpl.tracing`), or None when it was built without a sink."""
    return pmm._recorder


def corrupt_ledger(pmm: Any) -> None:
    """Poison `pmm` as if its ledger self-check had failed (idempotent)."""
    with pmm._lock:
        if pmm._poisoned:
            return
        pmm._poisoned = True
        for a in pmm._auths.values():
            for t in list(a.pending.values()):  # a waiter fails: it would be granted from a corrupt ledger
                del pmm._tickets[t.id]
                if t.event is not None:
                    pmm._wake.append(t.event)
            a.pending.clear()
        wake, pmm._wake = pmm._wake, []
    pmm._wake_up(wake)
