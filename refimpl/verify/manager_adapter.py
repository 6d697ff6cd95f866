"""Adapter from the composed actions (`spec.ledger_actions`, `spec.manager_actions`) to `ProcessMemoryManager` calls.

Method names are the actions' names in snake case and keywords the actions'
field names, so the mapping is mechanical and cannot hide logic.
"""

from __future__ import annotations

from typing import Any

import attrs

from refimpl.verify.ledger_adapter import method_name
from refimpl.manager import ProcessMemoryManager
from spec.guards import ALL_ON, GuardSet
from spec.manager_actions import Manager

__all__ = ["ManagerAdapter"]


class ManagerAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)

    def execute(self, action: Any) -> Any:
        return getattr(self.pmm, method_name(action))(**attrs.asdict(action, recurse=False))

    def abstract(self) -> Manager:
        return self.pmm.abstract_manager()
