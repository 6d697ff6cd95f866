"""The manager's focused transaction operations under their model names, planned for one holder (tests only).

`ProcessMemoryManager` exposes `spec.transactions` as `tx_<operation>`
(`tx_plan` takes the holder whose ledger records the reservations are);
this wrapper lets scripts call `c.plan(...)`, `c.reserve(tx, a)`, ... and
`c.abstract()` (`abstract_tx`, read from the manager's own records).
"""

from __future__ import annotations

from typing import Any

from refimpl.manager import ProcessMemoryManager
from spec.guards import ALL_ON, GuardSet
from spec.transactions import TxState

__all__ = ["TxManager"]


class TxManager:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards)
        self.holder = self.pmm.register_holder("transactions")

    def plan(self, *args: Any, **kwargs: Any) -> int:
        return self.pmm.tx_plan(self.holder, *args, **kwargs)

    def abstract(self) -> TxState:
        return self.pmm.abstract_tx()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pmm, "tx_" + name)
