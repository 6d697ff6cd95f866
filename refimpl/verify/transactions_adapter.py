"""Adapter from `spec.transactions_actions` to `ProcessMemoryManager`'s focused transaction operations.

Method names are "tx_" + the actions' names in snake case, keywords the
actions' field names, so the mapping is mechanical and cannot hide logic.
The one addition: a transaction is planned for a holder (the ledger records
its reservations are), registered once when the adapter is made; holders are
not part of `spec.transactions.TxState`. `abstract()` reads the manager's
own records (`ProcessMemoryManager.abstract_tx`): there is no shadow state.
"""

from __future__ import annotations

from typing import Any

import attrs

from refimpl.verify.ledger_adapter import method_name
from refimpl.manager import ProcessMemoryManager
from spec import transactions_actions as T
from spec.guards import ALL_ON, GuardSet
from spec.transactions import TxState

__all__ = ["TxRefimplAdapter"]


class TxRefimplAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)
        self.holder = self.pmm.register_holder("transactions")

    def execute(self, action: Any) -> Any:
        kwargs = attrs.asdict(action, recurse=False)
        if type(action) is T.Plan:
            kwargs["holder"] = self.holder
        return getattr(self.pmm, "tx_" + method_name(action))(**kwargs)

    def abstract(self) -> TxState:
        return self.pmm.abstract_tx()
