"""Adapter from `spec.transactions_actions` to `ProcessMemoryManager`'s focused transaction operations.

Method names are "tx_" + the actions' names in snake case, keywords the
actions' field names, so the mapping is mechanical and cannot hide logic.
Two additions: a transaction is planned for a holder (the ledger records
its reservations are), registered once when the adapter is made (holders are
not part of `spec.transactions.TxState`); and the actions the manager has one
composed verb for (`COMPOSED`: registering an authority, device loss, bundles, model views)
call that verb, an authority registered on the device tier. `abstract()` reads the manager's
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
from spec.types import Tier

__all__ = ["TxRefimplAdapter", "COMPOSED"]

#: The focused model's actions the manager runs with its composed verb (snake-case name, same keywords).
COMPOSED = (T.AddAuthority, T.LoseDevice, T.ConfirmTermination, T.OpenBundle, T.ReportMismatch, T.Publish,
            T.Execute, T.Remap)
#: The composed verb's name where it is not the action's (model views: `publish_view`, ...).
_VERBS = {T.Publish: "publish_view", T.Execute: "execute_view", T.Remap: "remap_view"}


class TxRefimplAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)
        self.holder = self.pmm.register_holder("transactions")

    def execute(self, action: Any) -> Any:
        kwargs = attrs.asdict(action, recurse=False)
        if type(action) is T.AddAuthority:
            return self.pmm.register_authority(action.name, Tier.DEVICE, action.capacity)
        if type(action) in COMPOSED:
            return getattr(self.pmm, _VERBS.get(type(action)) or method_name(action))(**kwargs)
        if type(action) is T.Plan:
            kwargs["holder"] = self.holder
        return getattr(self.pmm, "tx_" + method_name(action))(**kwargs)

    def abstract(self) -> TxState:
        return self.pmm.abstract_tx()
