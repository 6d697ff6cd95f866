"""`OwnedLock`: the one ledger lock of a governor, which knows its owner thread (I7 instrumentation).

The lock is held only for the bookkeeping of one operation: never across a
wait, a holder callback, an allocator or ORT. Re-entering it from the thread
that holds it means something was called under the lock, so by default that
raises `InvariantViolation("I7")` instead of deadlocking. A trace recorder
that must hold the lock across a whole ledger operation (to number events in
lock order) switches it to counted re-entry with `allow_reentry()`; nothing
else does.
"""

from __future__ import annotations

import threading

from invariants._violation import InvariantViolation

__all__ = ["OwnedLock"]

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
