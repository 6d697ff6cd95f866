"""Adapter from the composed actions (`spec.ledger_actions`, `spec.manager_actions`) to `ProcessMemoryManager` calls.

Method names are the actions' names in snake case and keywords the actions'
field names, so the mapping is mechanical and cannot hide logic.

The pressure callback's path (issue #21): every holder the campaign registers
gets a callback that only records what it was handed, so each accepted
`Press` goes through refimpl's delivery. The adapter checks the harms C5 and I7
name: the new pressure ticket reached its own holder, once, with its target
(C5), while the caller held no ledger lock (I7,
`invariants.manager.observed_I7_manager`). The callback answers nothing, so
the spec's state is unchanged by it (refinement still compares every step).
"""

from __future__ import annotations

from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.manager import observed_I7_manager
from refimpl.verify.ledger_adapter import method_name
from refimpl.verify.manager_hooks import corrupt_ledger
from refimpl.manager import ProcessMemoryManager
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.guards import ALL_ON, GuardSet
from spec.manager_actions import Manager

__all__ = ["ManagerAdapter"]


class ManagerAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)
        self.delivered: list[tuple[int, int, int, bool]] = []  # (holder, pressure, target, lock held)

    def execute(self, action: Any) -> Any:
        self.delivered.clear()
        if isinstance(action, M.CorruptLedger):
            return corrupt_ledger(self.pmm)  # the environment's event: a test hook, no governor verb (I5)
        result = getattr(self.pmm, method_name(action))(**attrs.asdict(action, recurse=False))
        if isinstance(action, A.RegisterHolder):
            self.pmm.register_callback(result, lambda pmm, pid, target, h=result: self.delivered.append(
                (h, pid, target, pmm.lock_held_by_me())))
        elif isinstance(action, M.Press):
            observed_I7_manager(self.delivered)  # I7: the callback ran with the ledger lock released
            if [d[:3] for d in self.delivered] != [(action.holder, result, action.target)]:
                raise InvariantViolation("C5", f"{action!r} opened pressure {result}; its holder's callback was "
                                               f"handed {self.delivered} (holder, pressure, target, lock held), not "
                                               f"exactly [({action.holder}, {result}, {action.target}, _)]",
                                         clause="delivery.to_its_holder_once")
        return result

    def abstract(self) -> Manager:
        return self.pmm.abstract_manager()
