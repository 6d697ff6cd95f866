"""The ledger lock of a governor, which knows its owner thread (I7 instrumentation).

`LedgerLock` is the C re-entrant lock with the owner queries the I7 checks
need: taking and releasing it costs what a bare `threading.Lock` costs (the
manager's hot path is a lock, a few dict operations and an unlock). The lock
is held only for the bookkeeping of one operation: never across a wait, a
holder callback, an allocator or ORT. Re-entry by the owner is allowed (the
trace recorder holds it across a whole ledger operation, and a holder
callback wrongly run under it must not deadlock its own thread); a call-out
or wait site under the lock is caught where it happens: every such site
checks `held_by_me()` and raises `InvariantViolation("I7")` with contracts
on, and an outside observer sees it with `probe` from another thread.
"""

from __future__ import annotations

import _thread

__all__ = ["LedgerLock"]


class LedgerLock(_thread.RLock):
    """The composed manager's ledger lock: a C re-entrant lock that says whether the caller holds it."""

    __slots__ = ()

    def held_by_me(self) -> bool:
        """True iff the calling thread holds the lock."""
        return self._is_owned()

    def allow_reentry(self) -> None:
        """Re-entry by the owner is always allowed (kept for the recorder's protocol)."""

    def probe(self, timeout: float) -> bool:
        """From another thread: take and at once release the lock within `timeout` s; True iff it was taken."""
        if not self.acquire(timeout=timeout):
            return False
        self.release()
        return True
