"""The checkers `ortmem verify` runs: one per modelled protocol.

Each checker owns some catalog IDs and knows how to (1) run its stateful
campaign with every guard on and (2) hunt for a counterexample with one of
its guards switched off (a negative control). Each checker lives in its own
`*_checker` module named for its concern; this module only registers them.
"""

from __future__ import annotations

from typing import Any

from invariants.explore import ExploreResult
from invariants.model_scopes import explore_scopes
from refimpl.verify.admission_checker import AdmissionChecker
from refimpl.verify.checker_api import Budget, Checker, CheckerRun
from refimpl.verify.hierarchy_checker import HierarchyChecker
from refimpl.verify.lazy_checker import LazyChecker
from refimpl.verify.ledger_checker import LedgerChecker
from refimpl.verify.manager_checker import ManagerChecker
from refimpl.verify.pressure_checker import PressureChecker
from refimpl.verify.transactions_checker import TransactionsChecker
from spec.guards import ALL_ON, Guard, GuardSet

__all__ = ["Budget", "Checker", "CheckerRun", "LedgerChecker", "CHECKERS"]


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


CHECKERS: dict[str, Checker] = {
    "ledger": LedgerChecker(),
    # `unlock_before_callback` gets no explorer control: the spec has no lock (SPEC_CANNOT_EXPRESS).
    "pressure": PressureChecker(_scopes(("manager_pressure",), {})),
    "transactions": TransactionsChecker(_scopes(("manager_tx",), {})),
    "admission": AdmissionChecker(_scopes(("kv_batch", "coresidency", "elastic"), {
        "kv_admission_fits": "kv_batch", "retire_before_evict": "coresidency", "elastic_guaranteed_path": "elastic"})),
    "ort": LazyChecker("ort", "refimpl.verify.sessions_checker", "OrtChecker",
                       _scopes(("sessions", "sessions_arena"), {"arena_room": "sessions_arena"})),
    "hierarchy": HierarchyChecker(),
    # The one ProcessMemoryManager: every part on shared authorities (the per-part campaigns above stay focused).
    "manager": ManagerChecker(),
}
