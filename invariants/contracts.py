"""The contract switch: whether governor operations check invariants as they run.

One flag (attrs `_config` style). It starts on when `__debug__` is true,
unless the environment variable ORTMEM_CONTRACTS is "0"; under `python -O`
it starts off (ORTMEM_CONTRACTS=1 turns it back on). `enable()`/`disable()`
set it, `contracts(on)` is a nestable context manager, `reset()` restores the
start value (the test suite's autouse fixture calls it). Off costs one
attribute read per governor operation.

This is the only module-level mutable state in the project.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["enabled", "enable", "disable", "contracts", "reset", "default"]


def default() -> bool:
    """The start value: __debug__, overridden by ORTMEM_CONTRACTS=0/1."""
    env = os.environ.get("ORTMEM_CONTRACTS")
    if env is not None and env.strip() in {"0", "1"}:
        return env.strip() == "1"
    return __debug__


class _Switch:
    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = default()


SWITCH = _Switch()


def enabled() -> bool:
    """True iff contract checks run on every governor operation."""
    return SWITCH.on


def enable() -> None:
    SWITCH.on = True


def disable() -> None:
    SWITCH.on = False


def reset() -> None:
    SWITCH.on = default()


@contextmanager
def contracts(on: bool = True) -> Iterator[None]:
    """Run the block with contracts switched `on` (or off); nests and restores."""
    before = SWITCH.on
    SWITCH.on = on
    try:
        yield
    finally:
        SWITCH.on = before
