"""The checkers `ortmem verify` runs: one per modelled protocol.

Each checker owns some catalog IDs and knows how to (1) run its stateful
campaign with every guard on and (2) hunt for a counterexample with one of
its guards switched off (a negative control). The ledger checker drives
`ProcessMemoryManager` against `spec.machine`; later protocols (pressure,
transactions, real ORT sessions) register theirs in `CHECKERS`.
"""

from __future__ import annotations

from typing import Any

from invariants import contracts
from invariants.campaign import ControlResult, campaign_settings, find_counterexample, run_campaign
from invariants.explore import ExploreResult, explore
from invariants.ledger_scope import CONTROL_SCOPE, QUICK_SCOPE, ledger_model
from invariants.model_scopes import explore_scopes
from invariants.predicates import STATE_PREDICATES, STEP_PREDICATES
from refimpl.adapter import RefimplAdapter
from refimpl.admission_checker import AdmissionChecker
from refimpl.checker_api import Budget, Checker, CheckerRun
from refimpl.hierarchy_checker import HierarchyChecker
from refimpl.lazy_checker import LazyChecker
from refimpl.manager_checker import ManagerChecker
from refimpl.pressure_checker import PressureChecker
from refimpl.tx_checker import TransactionsChecker
from spec.guards import ALL_ON, GUARDS, Guard, GuardSet, Layer

__all__ = ["Budget", "Checker", "CheckerRun", "LedgerChecker", "CHECKERS"]


class LedgerChecker:
    """The core ledger: authorities, leases, settlement, allowances (C1 C2 I1 I2 I4a I4b I6)."""

    name = "ledger"

    def campaign(self, budget: Budget) -> CheckerRun:
        with contracts.contracts(True):
            stats = run_campaign(RefimplAdapter, campaign_settings(budget.campaign_examples, budget.campaign_steps))
        # State predicates run after every step, step predicates after every accepted one.
        ids = set(STATE_PREDICATES) | set(STEP_PREDICATES)
        checks = {i: len(STATE_PREDICATES.get(i, ())) * stats.steps + len(STEP_PREDICATES.get(i, ())) * stats.accepted
                  for i in ids}
        return CheckerRun(stats, checks)

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        cfg = campaign_settings(budget.control_examples, budget.control_steps, shrink=budget.shrink)
        return find_counterexample(guard, layer, cfg, RefimplAdapter)

    def explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        """Breadth-first over the spec in a small scope; with `guard` off a counterexample is expected."""
        if guard is None:
            return explore(ledger_model(QUICK_SCOPE, ALL_ON), max_depth=budget.explore_depth,
                           max_states=budget.explore_states)
        return explore(ledger_model(CONTROL_SCOPE, GuardSet.without(guard.name)), max_depth=budget.control_depth,
                       max_states=budget.explore_states)


def _scopes(names: tuple[str, ...], scope_of: dict[str, str]) -> Any:
    """An `explore(guard, budget)` over spec-only scopes (`invariants.model_scopes`): a guard's own scope."""
    def run(guard: Guard | None, budget: Budget) -> ExploreResult:
        if guard is None:
            return explore_scopes(names, ALL_ON, max_depth=budget.explore_depth, max_states=budget.explore_states)
        return explore_scopes((scope_of.get(guard.name, names[0]),), GuardSet.without(guard.name),
                              max_depth=budget.control_depth, max_states=budget.explore_states)
    return run


CHECKERS: dict[str, Checker] = {
    "ledger": LedgerChecker(),
    # `unlock_before_callback` gets no explorer control: the spec has no lock (SPEC_CANNOT_EXPRESS).
    "pressure": PressureChecker(_scopes(("pressure",), {
        g.name: "pressure_control" for g in GUARDS if g.model == "pressure"})),
    "transactions": TransactionsChecker(_scopes(("transactions",), {})),
    "admission": AdmissionChecker(_scopes(("kv_batch", "coresidency", "elastic"), {
        "kv_admission_fits": "kv_batch", "retire_before_evict": "coresidency", "elastic_guaranteed_path": "elastic"})),
    "ort": LazyChecker("ort", "refimpl.ort.checker", "OrtChecker", _scopes(("sessions",), {})),
    "hierarchy": HierarchyChecker(),
    # The one ProcessMemoryManager: every part on shared authorities (the per-part campaigns above stay focused).
    "manager": ManagerChecker(),
}
