"""The "ledger" checker for `ortmem verify`: authorities, leases, settlement, allowances (C1 C2 I1 I2 I4a I4b I6).

Drives `ProcessMemoryManager` against `spec.manager` through `refimpl.verify.manager_adapter.ManagerAdapter`
on the composed machine's ledger restriction (`invariants.manager_ledger_machine.LedgerMachine`: refinement and
the predicates after every step); negative controls switch one guard off and
demand a counterexample; the explorer runs over the ledger model's own scopes.
"""

from __future__ import annotations

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings
from invariants.manager_ledger_machine import find_counterexample, run_campaign
from invariants.explore import ExploreResult, explore
from invariants.ledger_scope import COMPLETE_SCOPES, CONTROL_SCOPE, ledger_model
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.replay_control import replay_control
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["LedgerChecker"]


class LedgerChecker:
    """The core ledger: authorities, leases, settlement, allowances (C1 C2 I1 I2 I4a I4b I6)."""

    name = "ledger"

    def campaign(self, budget: Budget) -> CheckerRun:
        with contracts.contracts(True):
            stats = run_campaign(ManagerAdapter, campaign_settings(budget.campaign_examples, budget.campaign_steps))
        return CheckerRun(stats)

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        if getattr(guard, "submodel", None) == "replay":  # a mutant of replay or tracing: its corpus's verdicts
            return replay_control(guard, layer)
        cfg = campaign_settings(budget.control_examples, budget.control_steps, shrink=budget.shrink)
        return find_counterexample(guard, layer, cfg, ManagerAdapter)

    def explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        """Breadth-first over the spec in a small scope; with `guard` off a counterexample is expected.

        With every guard on, each of the profile's `invariants.ledger_scope.COMPLETE_SCOPES` to its fixpoint,
        symmetry on (quick: two parts of the quick scope, about 15,000 states; thorough: the whole quick scope,
        105,379 states, 695,413 transitions, diameter 14), within the state bound."""
        if guard is None:
            from invariants.model_scopes import combine
            scopes = COMPLETE_SCOPES["thorough" if budget.explore_depth >= 8 else "quick"]
            return combine([explore(ledger_model(scope, ALL_ON, symmetry=True, name=name), max_depth=10**6,
                                    max_states=budget.explore_states) for name, scope in scopes.items()])
        return explore(ledger_model(CONTROL_SCOPE, GuardSet.without(guard.name)), max_depth=budget.control_depth,
                       max_states=budget.explore_states)
