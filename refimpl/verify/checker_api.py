"""What a checker is: its budget, its campaign result, and the protocol `ortmem verify` calls.

Kept apart from `refimpl.verify.checkers` (the registry) so each checker module can
import these names without importing the registry that imports it.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from invariants.campaign import CampaignStats, ControlResult
from spec.guards import Guard, Layer

__all__ = ["Budget", "Checker", "CheckerRun"]


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


class Checker(Protocol):
    name: str

    def campaign(self, budget: Budget) -> CheckerRun:
        """Run with every guard on; an `InvariantViolation` propagates."""

    def control(self, guard: Guard, layer: Layer, budget: Budget) -> ControlResult:
        """Switch `guard` off in `layer` and report whether a counterexample was found."""

    # Optional (issue #6): `explore(guard, budget) -> ExploreResult`, bounded-exhaustive search
    # of the checker's spec with `guard` switched off (None: every guard on).
