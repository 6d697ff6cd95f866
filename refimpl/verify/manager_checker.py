"""The checker of the one composed machine, and of each restriction of it (issue #21: one spec).

`ledger`, `pressure`, `transactions` and `manager` are one `RestrictionChecker` each
(`refimpl.verify.checkers` registers them): the one `ProcessMemoryManager`, through the composed
`ManagerAdapter`, against `spec.manager` on `invariants.manager_machine.ManagerMachine` or a restriction of
it (`LedgerMachine`, `PressureMachine`, `TxMachine`: a subset of its rules plus steered ones), with
refinement and the predicates of `invariants.manager` after every step. The campaign runs with contracts on;
a negative control switches one guard off in the spec or in refimpl (or runs a mutant) on the same machine
and demands a harm of the guard's IDs. What differs between them is data: the machine, the campaign's and a
control's search size, the explorer. Two kinds of control are judged otherwise, whatever the checker: a
mutant of replay or tracing by its corpus's verdicts (`refimpl.verify.replay_control`), and a guard the spec
cannot express (`refimpl.verify.pressure_scripts.SPEC_CANNOT_EXPRESS`) in the spec layer not at all (an
honest "not found") and in the explorer by its fixed refimpl script.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings, run_machine
from invariants.explore import ExploreResult
from invariants.manager_machine import ManagerMachine, find_counterexample
from invariants.mutation import Mutant
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.pressure_scripts import SCRIPTS, SPEC_CANNOT_EXPRESS, run_script
from refimpl.verify.replay_control import replay_control
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["RestrictionChecker", "explore_ledger", "explore_manager"]


@attrs.frozen
class RestrictionChecker:
    """A checker over `machine`, the composed machine or a restriction of it."""

    name: str
    machine: type[ManagerMachine]
    #: The campaign's examples under a budget (its steps are the budget's).
    campaign_examples: Callable[[Budget], int]
    #: A negative control's (examples, steps) under a budget.
    control_size: Callable[[Budget], tuple[int, int]]
    #: `explore(guard, budget)` over the spec: with `guard` off a counterexample is expected (None: every guard on).
    explorer: Callable[[Guard | None, Budget], ExploreResult]

    def campaign(self, budget: Budget) -> CheckerRun:
        cfg = campaign_settings(self.campaign_examples(budget), budget.campaign_steps)
        with contracts.contracts(True):
            return CheckerRun(run_machine(self.machine, ManagerAdapter, cfg))

    def control(self, guard: Guard | Mutant, layer: Layer, budget: Budget) -> ControlResult:
        if getattr(guard, "submodel", None) == "replay":  # a mutant of replay or tracing: its corpus's verdicts
            return replay_control(guard, layer)
        if layer is Layer.SPEC and guard.name in SPEC_CANNOT_EXPRESS:
            # Not searched: nothing in the spec reads the guard, so a search could only report "not found".
            return ControlResult(guard.name, layer, guard.ids, False, None, None, 0.0, (),
                                 f"not expressible in the spec: {SPEC_CANNOT_EXPRESS[guard.name]}")
        examples, steps = self.control_size(budget)
        cfg = campaign_settings(examples, steps, shrink=budget.shrink)
        return find_counterexample(self.machine, guard, layer, cfg, ManagerAdapter)

    def explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        if guard is not None and guard.name in SPEC_CANNOT_EXPRESS:
            # Not searched: no spec state reads the guard, so the whole scope would be exhausted for nothing.
            # Its deterministic control is a fixed refimpl script instead (rule R4 names it a script).
            if guard.name in SCRIPTS:
                return run_script(guard)
            return ExploreResult(self.name, 0, 0, 0, 0, False, 0.0, None,
                                 f"not expressible in the spec: {SPEC_CANNOT_EXPRESS[guard.name]}", ())
        return self.explorer(guard, budget)


def explore_ledger(guard: Guard | None, budget: Budget) -> ExploreResult:
    """Breadth-first over the ledger model in a small scope; with `guard` off a counterexample is expected.

    With every guard on, each of the profile's `invariants.ledger_scope.COMPLETE_SCOPES` to its fixpoint,
    symmetry on (quick: two parts of the quick scope, about 15,000 states; thorough: the whole quick scope,
    105,379 states, 695,413 transitions, diameter 14), within the state bound."""
    from invariants.explore import explore
    from invariants.ledger_scope import COMPLETE_SCOPES, CONTROL_SCOPE, ledger_model
    from invariants.model_scopes import combine
    if guard is None:
        scopes = COMPLETE_SCOPES["thorough" if budget.explore_depth >= 8 else "quick"]
        return combine([explore(ledger_model(scope, ALL_ON, symmetry=True, name=name), max_depth=10**6,
                                max_states=budget.explore_states) for name, scope in scopes.items()])
    return explore(ledger_model(CONTROL_SCOPE, GuardSet.without(guard.name)), max_depth=budget.control_depth,
                   max_states=budget.explore_states)


def explore_manager(guard: Guard | None, budget: Budget) -> ExploreResult:
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
