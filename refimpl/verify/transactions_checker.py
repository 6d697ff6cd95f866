"""The "transactions" checker for `ortmem verify`: C3, C4, C6, I5, I9, I10.

Drives `ProcessMemoryManager`'s composed verbs against `spec.manager` through the
transactions restriction of the composed machine (`invariants.manager_tx_machine.TxMachine`:
transactions, retry intents, views, bundles, poisoning; refinement and the manager predicates
after every step, contracts on), and runs on that same restriction the negative controls of
the guards registered with `model="transactions"` and its mutants. Its explorer scope is the
same restriction of the composed spec (`invariants.manager_scope.TX_SCOPE`, issue #21: one spec).
"""

from __future__ import annotations

from typing import Any

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings
from invariants.manager_tx_machine import find_tx_manager_counterexample, run_tx_manager_campaign
from invariants.mutation import Mutant
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.manager_adapter import ManagerAdapter
from spec.guards import Guard, Layer

__all__ = ["TransactionsChecker"]

#: Controls stop at the first counterexample; this caps the search when one is missing.
_CONTROL_EXAMPLES, _CONTROL_STEPS = 200, 30


class TransactionsChecker:
    """Capacity transactions, views, bundles, provider lifetime, failure scope."""

    name = "transactions"

    def __init__(self, explorer: Any = None) -> None:
        if explorer is not None:  # spec-only explorer scope (deterministic controls, rule R4)
            self.explore = explorer

    def campaign(self, budget: Budget) -> CheckerRun:

        # A third of the ledger campaign's examples: each transaction step checks more, and
        # the quick profile keeps this checker (campaign + controls) near 20 s on 2 cores.
        cfg = campaign_settings(max(50, budget.campaign_examples // 3), budget.campaign_steps)
        with contracts.contracts(True):
            run = run_tx_manager_campaign(ManagerAdapter, cfg)
        return CheckerRun(run)

    def control(self, guard: Guard | Mutant, layer: Layer, budget: Budget) -> ControlResult:
        cfg = campaign_settings(min(budget.control_examples, _CONTROL_EXAMPLES),
                                min(budget.control_steps, _CONTROL_STEPS), shrink=budget.shrink)
        return find_tx_manager_counterexample(guard, layer, cfg, ManagerAdapter)
