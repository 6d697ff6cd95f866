"""Argument checks of `refimpl.manager` that need no ledger state.

Wait timeouts and holder callbacks are validated here, before anything is
recorded, so a hostile value (bool, float, NaN,
inf, numpy scalar, huge int, non-callable) is refused with a typed error and
never reaches `threading` (whose OverflowError / TypeError would escape
untyped, after a ticket was already submitted: issue #14, findings 1 and 5).
"""

from __future__ import annotations

import math
import threading
from typing import Any

from spec.errors import InvalidArgument

__all__ = ["check_timeout", "check_callback", "check_priority", "check_time"]

#: Priorities and points in time are 64-bit ints, as in the spec: a trace then carries every accepted value exactly.
_INT64 = (-(1 << 63), (1 << 63) - 1)


def check_priority(priority: object) -> int:
    if type(priority) is not int or not _INT64[0] <= priority <= _INT64[1]:
        raise InvalidArgument(f"priority must be an int in [-2**63, 2**63-1], got {priority!r:.80}")
    return priority


def check_time(t: object, what: str, optional: bool = False) -> int | None:
    """A point in time (C5 deadlines, `now`): an int in [0, 2**63-1], or None where `optional`."""
    if (t is None and optional) or (type(t) is int and 0 <= t <= _INT64[1]):
        return t  # type: ignore[return-value]
    raise InvalidArgument(f"{what} must be {'None or ' if optional else ''}an int in [0, 2**63-1], got {t!r:.80}")


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
