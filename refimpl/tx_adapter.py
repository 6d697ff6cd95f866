"""Adapter from `spec.tx_actions` to `CapacityTransactionCoordinator` calls.

Method names are the actions' names in snake case, keywords the actions'
field names, so the mapping is mechanical and cannot hide logic.
"""

from __future__ import annotations

from typing import Any

import attrs

from refimpl.adapter import method_name
from refimpl.transactions import CapacityTransactionCoordinator
from spec.guards import ALL_ON, GuardSet
from spec.transactions import TxState

__all__ = ["TxRefimplAdapter"]


class TxRefimplAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.coord = CapacityTransactionCoordinator(guards=guards)

    def execute(self, action: Any) -> Any:
        return getattr(self.coord, method_name(action))(**attrs.asdict(action, recurse=False))

    def abstract(self) -> TxState:
        return self.coord.abstract()
