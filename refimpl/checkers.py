"""The checkers `ortmem verify` runs: one per modelled protocol.

Each checker owns some catalog IDs and knows how to (1) run its stateful
campaign with every guard on and (2) hunt for a counterexample with one of
its guards switched off (a negative control). The ledger checker drives
`ProcessMemoryManager` against `spec.machine`; later protocols (pressure,
transactions, real ORT sessions) register theirs in `CHECKERS`.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from invariants import contracts
from invariants.campaign import CampaignStats, ControlResult, campaign_settings, find_counterexample, run_campaign
from invariants.explore import ExploreResult, explore
from invariants.ledger_scope import CONTROL_SCOPE, QUICK_SCOPE, ledger_model
from invariants.predicates import STATE_PREDICATES, STEP_PREDICATES
from refimpl.adapter import RefimplAdapter
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["Budget", "Checker", "CheckerRun", "LedgerChecker", "CHECKERS"]


@attrs.frozen
class Budget:
    """How hard to look: campaign size and negative-control search size."""

    campaign_examples: int
    campaign_steps: int
    control_examples: int
    control_steps: int
    shrink: bool
    #: Bounded-exhaustive exploration (issue #6): depth with every guard on, and per negative control.
    explore_depth: int = 7
    explore_states: int = 200_000
    control_depth: int = 8


@attrs.frozen
class CheckerRun:
    stats: CampaignStats
    #: Predicate evaluations per catalog ID during the campaign.
    checks: dict[str, int]


class Checker(Protocol):
    name: str

    def campaign(self, budget: Budget) -> CheckerRun:
        """Run with every guard on; an `InvariantViolation` propagates."""

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        """Switch `guard` off in `layer` and report whether a counterexample was found."""

    # Optional (issue #6): `explore(guard, budget) -> ExploreResult`, bounded-exhaustive search
    # of the checker's spec with `guard` switched off (None: every guard on).


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


from refimpl.admission_checker import AdmissionChecker  # noqa: E402  (issue #5)
from refimpl.lazy_checker import LazyChecker  # noqa: E402  (issue #5: ORT is an optional extra)
from refimpl.pressure_checker import PressureChecker  # noqa: E402  (issue #3)
from refimpl.tx_checker import TransactionsChecker  # noqa: E402  (issue #4)

CHECKERS: dict[str, Checker] = {
    "ledger": LedgerChecker(),
    "pressure": PressureChecker(),
    "transactions": TransactionsChecker(),
    "admission": AdmissionChecker(),
    "ort": LazyChecker("ort", "refimpl.ort.checker", "OrtChecker"),
}
