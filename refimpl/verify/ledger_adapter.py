"""Adapter from spec actions to `ProcessMemoryManager` calls (for the stateful checker).

Method names are the actions' names in snake case and keyword names are the
actions' field names, so the mapping is mechanical and cannot hide logic.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import State

__all__ = ["RefimplAdapter", "method_name"]


def method_name(action: Any) -> str:
    """`ReserveGrowth` -> `reserve_growth`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(action).__name__).lower()


class RefimplAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)

    def execute(self, action: Any) -> Any:
        return getattr(self.pmm, method_name(action))(**attrs.asdict(action, recurse=False))

    def abstract(self) -> State:
        return abstract_ledger(self.pmm)

    def snapshot(self, authority: int) -> Any:
        return self.pmm.snapshot(authority)
