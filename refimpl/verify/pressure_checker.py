"""The `pressure` checker for `ortmem verify`: tickets, arbitration, holder pressure (C5 I6 I7 I13).

Drives the one `ProcessMemoryManager` (through the composed `ManagerAdapter`) against `spec.manager` with
`invariants.manager_pressure.PressureMachine`, the composed machine restricted to tickets, arbitration and
holder pressure (a restriction of the one model, never a second one); negative controls switch one pressure
guard off in the spec or in refimpl, and its mutants run on the same restriction. The campaign is a third of
the ledger campaign's examples.
The explorer (its deterministic controls, rule R4) is the composed spec's
pressure restriction (`invariants.manager_scope.PRESSURE_SCOPE`, given by
`refimpl.verify.checkers`); a guard the spec cannot express gets a fixed
refimpl script on the composed adapter (`refimpl.verify.pressure_scripts`).
"""

from __future__ import annotations

from typing import Any

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings
from invariants.explore import ExploreResult
from invariants.manager_pressure import find_pressure_counterexample, run_pressure_campaign
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.pressure_scripts import SCRIPTS, run_script
from spec.guards import Guard, Layer

__all__ = ["PressureChecker", "SPEC_CANNOT_EXPRESS"]

#: Guards whose harm the spec model cannot state, and why (their spec-layer control is an honest "not found").
SPEC_CANNOT_EXPRESS = {
    "unlock_before_callback": "a spec step is atomic, has no lock and calls no one, so 'a holder callback ran "
                              "under the ledger lock' is not a state or step of the model; the refimpl control "
                              "observes it from another thread (observed_I7_callbacks)",
}


class PressureChecker:
    name = "pressure"

    def __init__(self, explorer: Any = None) -> None:
        self._explorer = explorer
        if explorer is not None:  # spec-only explorer scope (deterministic controls, rule R4)
            self.explore = self._explore

    def _explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        if guard is not None and guard.name in SPEC_CANNOT_EXPRESS:
            # Not searched: no spec state reads the guard, so the whole scope would be exhausted for nothing.
            # Its deterministic control is a fixed refimpl script instead (rule R4 names it a script).
            if guard.name in SCRIPTS:
                return run_script(guard)
            return ExploreResult("pressure", 0, 0, 0, 0, False, 0.0, None,
                                 f"not expressible in the spec: {SPEC_CANNOT_EXPRESS[guard.name]}", ())
        return self._explorer(guard, budget)

    def campaign(self, budget: Budget) -> CheckerRun:

        examples = max(50, budget.campaign_examples // 3)
        with contracts.contracts(True):
            stats = run_pressure_campaign(ManagerAdapter, campaign_settings(examples, budget.campaign_steps))
        return CheckerRun(stats)

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        if layer is Layer.SPEC and guard.name in SPEC_CANNOT_EXPRESS:
            # Not searched: nothing in the spec reads the guard, so a search could only report "not found".
            return ControlResult(guard.name, layer, guard.ids, False, None, None, 0.0, (),
                                 f"not expressible in the spec: {SPEC_CANNOT_EXPRESS[guard.name]}")
        # Overtaking (I13) needs a long script: a big request, then rounds of smaller arrivals (the steered burst).
        cfg = campaign_settings(budget.control_examples, max(budget.control_steps, 40), shrink=budget.shrink)
        return find_pressure_counterexample(guard, layer, cfg, ManagerAdapter)
