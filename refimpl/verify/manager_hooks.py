"""Test hooks: environment events that are no verb of `ProcessMemoryManager` (I5).

`corrupt_ledger(pmm)` is what a governor does when its own consistency check
finds the shared ledger corrupt: it poisons the whole manager for good
(`spec.manager_tx`, `CorruptLedger`). Every pending ticket fails (its waiter
wakes to find it gone) and from then on every operation that would grant new
charge is refused with ManagerPoisoned. A real governor reaches this state
only through a failed self-check, never through a caller, so it is a hook for
checkers and tests, not a public verb, and no trace event records it.
No ORT imports here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["corrupt_ledger"]


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
