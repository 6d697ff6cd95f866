"""The contract switch: whether governor operations check invariants as they run.

One flag (attrs `_config` style). It starts on when `__debug__` is true,
unless the environment variable ORTMEM_CONTRACTS is "0"; under `python -O`
it starts off (ORTMEM_CONTRACTS=1 turns it back on). `enable()`/`disable()`
set it, `contracts(on)` is a nestable context manager, `reset()` restores the
start value (the test suite's autouse fixture calls it). Off costs one
attribute read per governor operation.

Level (when on): "local" (the default) checks the harms on the records an
operation touched, on the concrete records (`refimpl.manager.local_contract`,
for the hot ledger and ticket operations); "full" builds the frozen partial
spec views and runs the catalog's predicates on them for every operation
(`refimpl.manager.views`). ORTMEM_CONTRACTS_LEVEL=full|local sets the start
level; `set_level()` and `contracts(on, level=...)` change it.

Level "local" keeps books of its own across operations
(`refimpl.manager.contract_books`), valid only while every operation is
checked at that level: each manager's books are watched (`SWITCH.watch`), and
every change of (on, level) makes them `forget()` what they hold.

This is the only module-level mutable state in the project.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from typing import Any
from contextlib import contextmanager

__all__ = ["enabled", "enable", "disable", "contracts", "reset", "default", "level", "set_level", "LEVELS"]

LEVELS = ("local", "full")


def default() -> bool:
    """The start value: __debug__, overridden by ORTMEM_CONTRACTS=0/1."""
    env = os.environ.get("ORTMEM_CONTRACTS")
    if env is not None and env.strip() in {"0", "1"}:
        return env.strip() == "1"
    return __debug__


def default_level() -> str:
    """The start level: "local", or ORTMEM_CONTRACTS_LEVEL when it names a level."""
    env = (os.environ.get("ORTMEM_CONTRACTS_LEVEL") or "").strip()
    return env if env in LEVELS else "local"


class _Switch:
    __slots__ = ("on", "full", "watchers")

    def __init__(self) -> None:
        self.on = default()
        self.full = default_level() == "full"  # read on the hot path: a bool, not a string compare
        self.watchers: weakref.WeakSet[Any] = weakref.WeakSet()

    def set(self, on: bool, full: bool) -> None:
        if (on, full) != (self.on, self.full):
            self.on, self.full = on, full
            for w in list(self.watchers):
                w.forget()

    def watch(self, obj: Any) -> None:
        """Call `obj.forget()` at every change of (on, level), for as long as `obj` lives: what a contract keeps
        across operations holds only while every operation was checked at one level."""
        self.watchers.add(obj)


SWITCH = _Switch()


def enabled() -> bool:
    """True iff contract checks run on every governor operation."""
    return SWITCH.on


def enable() -> None:
    SWITCH.set(True, SWITCH.full)


def disable() -> None:
    SWITCH.set(False, SWITCH.full)


def level() -> str:
    """"local" or "full": how much an operation checks when contracts are on."""
    return "full" if SWITCH.full else "local"


def set_level(name: str) -> None:
    if name not in LEVELS:
        raise ValueError(f"contracts level must be one of {LEVELS}, got {name!r}")
    SWITCH.set(SWITCH.on, name == "full")


def reset() -> None:
    SWITCH.set(default(), default_level() == "full")


@contextmanager
def contracts(on: bool = True, level: str | None = None) -> Iterator[None]:
    """Run the block with contracts switched `on` (or off), at `level` if given; nests and restores."""
    before, full = SWITCH.on, SWITCH.full
    if level is not None:
        set_level(level)
    SWITCH.set(on, SWITCH.full)
    try:
        yield
    finally:
        SWITCH.set(before, full)
