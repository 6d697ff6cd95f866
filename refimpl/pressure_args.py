"""Argument checks for `refimpl.pressure.PressureGovernor` that need no ledger state.

Construction parameters, wait timeouts and holder callbacks are validated
here, before anything is recorded, so a hostile value (bool, float, NaN,
inf, numpy scalar, huge int, non-callable) is refused with a typed error and
never reaches `threading` (whose OverflowError / TypeError would escape
untyped, after a ticket was already submitted: issue #14, findings 1 and 5).
"""

from __future__ import annotations

import math
import threading
from typing import Any

from spec.errors import InvalidArgument, InvalidBytes
from spec.guards import GuardSet
from spec.types import MAX_BYTES

__all__ = ["check_params", "check_timeout", "check_callback"]


def _count(v: object, what: str, low: int) -> int:
    if type(v) is not int or not low <= v <= MAX_BYTES:
        raise InvalidArgument(f"{what} must be an int in [{low}, 2**63-1], got {v!r}")
    return v


def check_params(capacity: object, fixed: object, holders: object, aging_bound: object, mailbox: object,
                 guards: object) -> None:
    """Refuse a pool that cannot exist: every figure a plain int in range, fixed within capacity."""
    if type(capacity) is not int or not 1 <= capacity <= MAX_BYTES:
        raise InvalidBytes(f"capacity must be an int in [1, 2**63-1], got {capacity!r}")
    if type(fixed) is not int or not 0 <= fixed <= capacity:
        raise InvalidBytes(f"fixed must be an int in [0, capacity={capacity}], got {fixed!r}")
    _count(holders, "holders", 1)
    _count(aging_bound, "aging_bound", 1)
    _count(mailbox, "mailbox", 1)
    if not isinstance(guards, GuardSet):
        raise InvalidArgument(f"guards must be a GuardSet, got {guards!r}")


def check_timeout(timeout: object) -> float | None:
    """None (wait forever) or a finite int/float in [0, threading.TIMEOUT_MAX] seconds."""
    if timeout is None:
        return None
    if type(timeout) not in (int, float):
        raise InvalidArgument(f"timeout must be None or an int/float of seconds, got {timeout!r}")
    if not (math.isfinite(timeout) and 0 <= timeout <= threading.TIMEOUT_MAX):  # type: ignore[arg-type]
        raise InvalidArgument(f"timeout must be finite and in [0, {threading.TIMEOUT_MAX:.0f}] s, got {timeout!r}")
    return timeout  # type: ignore[return-value]


def check_callback(fn: Any) -> Any:
    if not callable(fn):
        raise InvalidArgument(f"a pressure callback must be callable, got {fn!r}")
    return fn
