"""Adapter from `spec.pressure` actions to `PressureGovernor` calls (for the stateful checker).

Method names are the actions' names in snake case, keywords the field names.
Each holder gets a recording pressure callback that checks, independently of
the governor, that it is not called with the ledger lock held (I7).
"""

from __future__ import annotations

from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.pressure_machine import PoolParams
from refimpl.adapter import method_name
from refimpl.pressure import PressureGovernor
from spec import pressure as P
from spec.guards import ALL_ON, GuardSet

__all__ = ["PressureAdapter"]


class PressureAdapter:
    def __init__(self, params: PoolParams, guards: GuardSet = ALL_ON, strict_callbacks: bool = False) -> None:
        self.gov = PressureGovernor(params.capacity, params.fixed, params.holders, params.aging_bound,
                                    params.mailbox, guards=guards)
        self.delivered: list[tuple[int, int, int, bool]] = []
        self.strict = strict_callbacks
        for h in range(1, params.holders + 1):
            self.gov.register_callback(h, self._callback(h))

    def _callback(self, holder: int) -> Any:
        def on_pressure(gov: PressureGovernor, pressure: int, target: int, deadline: int) -> None:
            locked = gov.lock_held_by_me()
            self.delivered.append((holder, pressure, target, locked))
            if locked and self.strict:
                raise InvariantViolation("I7", f"holder {holder} was called with the ledger lock held")
        return on_pressure

    def execute(self, action: Any) -> Any:
        return getattr(self.gov, method_name(action))(**attrs.asdict(action, recurse=False))

    def abstract(self) -> P.Pool:
        return self.gov.abstract()
