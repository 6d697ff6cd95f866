"""The checkers `ortmem verify` runs: one per modelled protocol.

Each checker owns some catalog IDs and knows how to (1) run its stateful
campaign with every guard on and (2) hunt for a counterexample with one of
its guards switched off (a negative control). The ledger, pressure,
transactions and manager checkers are one class over restrictions of the one
composed machine (`refimpl.verify.manager_checker.RestrictionChecker`), told
apart by the data given here; each other checker lives in its own `*_checker`
module named for its concern. This module only registers them.
"""

from __future__ import annotations

from typing import Any

from invariants.explore import ExploreResult
from invariants.manager_ledger_machine import LedgerMachine
from invariants.manager_machine import ManagerMachine
from invariants.manager_pressure import PressureMachine
from invariants.manager_tx_machine import TxMachine
from invariants.model_scopes import explore_scopes
from refimpl.verify.admission_checker import AdmissionChecker
from refimpl.verify.checker_api import Budget, Checker, CheckerRun
from refimpl.verify.hierarchy_checker import HierarchyChecker
from refimpl.verify.lazy_checker import LazyChecker
from refimpl.verify.manager_checker import RestrictionChecker, explore_ledger, explore_manager
from spec.guards import ALL_ON, Guard, GuardSet

__all__ = ["Budget", "Checker", "CheckerRun", "CHECKERS"]


#: With every guard on, each spec-only scope is explored to its fixpoint (no depth cut; the state bound still
#: applies), quick and thorough alike: kv_batch 1,623 states, coresidency 6,426, elastic 44, sessions 22,665,
#: sessions_arena 24,091, manager_tx 3,220 (the transactions restriction of the composed spec,
#: `invariants.manager_scope.TX_SCOPE`: about 1 s), manager_pressure 21,188 (the pressure restriction,
#: `invariants.manager_scope.PRESSURE_SCOPE`: about 20 s).
_NO_DEPTH_CUT = 10**6


def _scopes(names: tuple[str, ...], scope_of: dict[str, str]) -> Any:
    """An `explore(guard, budget)` over spec-only scopes (`invariants.model_scopes`): a guard's own scope."""
    def run(guard: Guard | None, budget: Budget) -> ExploreResult:
        if guard is None:
            return explore_scopes(names, ALL_ON, max_depth=_NO_DEPTH_CUT, max_states=budget.explore_states)
        return explore_scopes((scope_of.get(guard.name, names[0]),), GuardSet.without(guard.name),
                              max_depth=budget.control_depth, max_states=budget.explore_states)
    return run


def _a_third(budget: Budget) -> int:
    """A third of the ledger campaign's examples, at least 50: each pressure or transaction step checks more,
    and the quick profile keeps each of these checkers (campaign + controls) near 20 s on 2 cores."""
    return max(50, budget.campaign_examples // 3)


def _long_controls(budget: Budget) -> tuple[int, int]:
    """Overtaking (I13) needs a long script: a big request, then rounds of smaller arrivals (the steered burst)."""
    return budget.control_examples, max(budget.control_steps, 40)


CHECKERS: dict[str, Checker] = {
    "ledger": RestrictionChecker("ledger", LedgerMachine, lambda b: b.campaign_examples,
                                 lambda b: (b.control_examples, b.control_steps), explore_ledger),
    # `unlock_before_callback` gets no explorer control: the spec has no lock (SPEC_CANNOT_EXPRESS).
    "pressure": RestrictionChecker("pressure", PressureMachine, _a_third, _long_controls,
                                   _scopes(("manager_pressure",), {})),
    # Controls stop at the first counterexample; 200 examples of 30 steps cap the search when one is missing.
    "transactions": RestrictionChecker("transactions", TxMachine, _a_third,
                                       lambda b: (min(b.control_examples, 200), min(b.control_steps, 30)),
                                       _scopes(("manager_tx",), {})),
    "admission": AdmissionChecker(_scopes(("kv_batch", "coresidency", "elastic"), {
        "kv_admission_fits": "kv_batch", "retire_before_evict": "coresidency", "elastic_guaranteed_path": "elastic"})),
    "ort": LazyChecker("ort", "refimpl.verify.sessions_checker", "OrtChecker",
                       _scopes(("sessions", "sessions_arena"), {"arena_room": "sessions_arena"})),
    "hierarchy": HierarchyChecker(),
    # The one ProcessMemoryManager: every part on shared authorities, the whole composed machine. Half the ledger
    # campaign's examples, at most 1000: each composed step also checks every part's records; 300 quick examples
    # meet every cross-cutting clause's case over 100 times (R1 asks 20).
    "manager": RestrictionChecker("manager", ManagerMachine, lambda b: max(50, min(1000, b.campaign_examples // 2)),
                                  _long_controls, explore_manager),
}
