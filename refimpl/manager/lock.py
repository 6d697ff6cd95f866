"""The ledger lock of a governor, which knows its owner thread (I7 instrumentation).

`LedgerLock` (the composed manager's) is the C re-entrant lock with the
owner queries the I7 checks need: taking and releasing it costs what a bare
`threading.Lock` costs (the manager's hot path is a lock, a few dict
operations and an unlock). Re-entry by the owner is allowed (the trace
recorder holds it across a whole ledger operation); a call-out or wait site
under the lock is caught where it happens: every such site checks
`held_by_me()` and raises `InvariantViolation("I7")` with contracts on.

`OwnedLock` (the focused `refimpl.pressure.PressureGovernor`'s):

The lock is held only for the bookkeeping of one operation: never across a
wait, a holder callback, an allocator or ORT. Re-entering it from the thread
that holds it means something was called under the lock, so by default that
raises `InvariantViolation("I7")` instead of deadlocking. A trace recorder
that must hold the lock across a whole ledger operation (to number events in
lock order) switches it to counted re-entry with `allow_reentry()`; nothing
else does.
"""

from __future__ import annotations

import _thread
import threading

from invariants._violation import InvariantViolation

__all__ = ["OwnedLock", "LedgerLock"]

_ident = threading.get_ident


class OwnedLock:
    """A lock that records its owner thread; non-reentrant unless `allow_reentry()` was called."""

    __slots__ = ("_lock", "_owner", "_depth", "_reentrant")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self._reentrant = False

    def __enter__(self) -> OwnedLock:
        me = _ident()
        if self._owner == me:
            # Only the owner writes _owner == its ident, so this read is race-free for that case.
            if self._reentrant:
                self._depth += 1
                return self
            raise InvariantViolation("I7", "the ledger lock was re-entered by the thread holding it "
                                     "(a holder or callback was called under the lock)")
        self._lock.acquire()
        self._owner = me
        return self

    def __exit__(self, *exc: object) -> None:
        if self._depth:
            self._depth -= 1
            return
        self._owner = None
        self._lock.release()

    def allow_reentry(self) -> None:
        """Counted re-entry by the owner thread (for a trace recorder wrapping whole operations)."""
        self._reentrant = True

    def held_by_me(self) -> bool:
        """True iff the calling thread holds the lock."""
        return self._owner == _ident()

    def probe(self, timeout: float) -> bool:
        """Try to take and at once release the lock within `timeout` s; True iff it was taken.

        For an outside observer on another thread (I7): it never waits past `timeout`."""
        if not self._lock.acquire(timeout=timeout):
            return False
        self._lock.release()
        return True


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
