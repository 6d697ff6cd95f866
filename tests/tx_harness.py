"""The manager's focused transaction operations under their model names, planned for one holder (tests only).

`ProcessMemoryManager` exposes `spec.transactions` as `tx_<operation>`
(`tx_plan` takes the holder whose ledger records the reservations are), and
registering, device loss, bundles and model views as its composed verbs;
this wrapper lets scripts call `c.plan(...)`, `c.reserve(tx, a)`, ... and
`c.abstract()` (`abstract_tx`, read from the manager's own records).
"""

from __future__ import annotations

from typing import Any

from refimpl.manager import ProcessMemoryManager
from spec.guards import ALL_ON, GuardSet
from spec.transactions import TxState
from spec.types import Tier

__all__ = ["TxManager", "reserve_every"]

_COMPOSED = ("lose_device", "confirm_termination", "open_bundle", "report_mismatch")
#: The focused model's view actions, run by the composed verbs (`publish_view`, ...).
_VIEWS = {"publish": "publish_view", "execute": "execute_view", "remap": "remap_view"}


def reserve_every(pmm: ProcessMemoryManager, tx: int) -> int | None:
    """`tx_reserve` each need `tx` does not hold yet, in ascending authority id (the design's order, C4): None when
    every need is held, else the retry intent of the miss (the manager no longer has a verb for this loop)."""
    t = pmm.abstract_tx().txs.get(tx) if type(tx) is int else None
    if t is None:
        return pmm.tx_reserve(tx, 1)  # not a live id: the manager's own refusal of `tx` (checked before authority)
    held = {a for a, _ in t.held}
    for aid in sorted(a for a, _ in t.needs if a not in held):
        intent = pmm.tx_reserve(tx, aid)
        if intent is not None:
            return intent
    return None


class TxManager:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards)
        self.guards = guards
        self.holder = self.pmm.register_holder("transactions")

    def plan(self, *args: Any, **kwargs: Any) -> int:
        return self.pmm.tx_plan(self.holder, *args, **kwargs)

    def add_authority(self, name: str, capacity: int) -> int:
        return self.pmm.register_authority(name, Tier.DEVICE, capacity)

    def abstract(self) -> TxState:
        return self.pmm.abstract_tx()

    def reserve_all(self, tx: int) -> int | None:
        return reserve_every(self.pmm, tx)

    def reservation_order(self, tx: int) -> list[int]:
        """The authorities `tx` still needs: ascending id, or as declared where `ordered_reservation` is off (its
        negative control: the order a script then takes them in)."""
        t = self.pmm.abstract_tx().txs[tx]
        held = {a for a, _ in t.held}
        todo = [a for a, _ in t.needs if a not in held]
        return sorted(todo) if self.guards.on("ordered_reservation") else todo

    def __getattr__(self, name: str) -> Any:
        if name in _COMPOSED or name in _VIEWS:  # one composed verb per concept (issue #21)
            return getattr(self.pmm, _VIEWS.get(name, name))
        return getattr(self.pmm, "tx_" + name)
