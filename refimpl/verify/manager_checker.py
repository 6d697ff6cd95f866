"""The composed `manager` checker for `ortmem verify`: every part on shared authorities.

Drives the one `ProcessMemoryManager` (ledger, arbitration, pressure,
transactions, device loss, limits) against `spec.manager` through
`invariants.manager_machine.ManagerMachine`: refinement after every step,
contracts on, the cross-cutting predicates of `invariants.manager`. Its
negative controls are the cross-cutting guards (`model="manager"`); the
per-part campaigns stay as focused ones.
"""

from __future__ import annotations

from typing import Any

import attrs

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings
from invariants.explore import ExploreResult
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.replay_control import replay_control
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["ManagerChecker"]


def _adapter(guards: GuardSet = ALL_ON) -> Any:
    """The composed adapter: every guard on for the campaign, one guard off for a control."""
    from refimpl.verify.manager_adapter import ManagerAdapter
    return ManagerAdapter(guards)


class ManagerChecker:
    name = "manager"

    def campaign(self, budget: Budget) -> CheckerRun:
        from invariants.manager_machine import run_manager_campaign
        # Half the ledger campaign's examples, at most 1000: each composed step also checks every part's
        # records; 300 quick examples meet every cross-cutting clause's case over 100 times (R1 asks 20).
        cfg = campaign_settings(max(50, min(1000, budget.campaign_examples // 2)), budget.campaign_steps)
        with contracts.contracts(True):
            stats = run_manager_campaign(_adapter, cfg)
        return CheckerRun(stats)

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        if getattr(guard, "submodel", None) == "replay":  # a mutant of replay or tracing: its corpus's verdicts
            return replay_control(guard, layer)
        from invariants.manager_machine import find_manager_counterexample
        cfg = campaign_settings(budget.control_examples, max(budget.control_steps, 40), shrink=budget.shrink)
        return find_manager_counterexample(guard, layer, cfg, _adapter)

    def explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        """Breadth-first over the composed spec; with every guard on, each complete scope to its fixpoint.

        Every guard on: each of `invariants.manager_scope.COMPLETE_SCOPES` (the thorough profile's set where
        the budget's depth is 8 or more), every reachable state, symmetry on, the situations
        `invariants.manager_features` names counted into the message. A guard off: its control scope, whose
        shortest counterexample is at most 3 steps deep."""
        from invariants.explore import explore
        from invariants.manager_features import counting_features
        from invariants.manager_scope import COMPLETE_SCOPES, manager_model
        from invariants.model_scopes import combine, explore_scopes
        if guard is not None:
            return explore_scopes(("manager",), GuardSet.without(guard.name), max_depth=5,
                                  max_states=min(budget.explore_states, 150_000))
        runs, counts = [], {}
        for name, scope in COMPLETE_SCOPES["thorough" if budget.explore_depth >= 8 else "quick"].items():
            model, reached = counting_features(manager_model(ALL_ON, scope, symmetry=True, name=name))
            runs.append(explore(model, max_depth=10**6, max_states=budget.explore_states))
            counts = {k: counts.get(k, 0) + v for k, v in reached.items()}
            if runs[-1].found:
                break
        r = combine(runs)
        unmet = [k for k, v in counts.items() if not v]
        return attrs.evolve(r, message=f"{r.message}; situations reached (accepted steps): "
                            + ", ".join(f"{k} {v}" for k, v in counts.items())
                            + (f"; NOT reached: {', '.join(unmet)}" if unmet else ""))
