"""`ortmem verify`: the main job, as phases that produce one per-ID report.

Phases: drift (catalog, predicates, tests, docs in step), the stateful
campaign (refimpl refines spec; invariants after every step; contracts on),
and negative controls (each registered guard switched off, in the spec and
in refimpl, must yield a counterexample to an ID it protects). The report
is a plain value; rendering (table, JSON) lives in `refimpl.cli`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from invariants import contracts
from invariants.campaign import CampaignStats, ControlResult, campaign_settings, find_counterexample, run_campaign
from invariants.drift import drift_problems
from invariants._violation import InvariantViolation
from invariants.predicates import STATE_PREDICATES, STEP_PREDICATES
from refimpl.adapter import RefimplAdapter
from spec.catalog import CATALOG, Status
from spec.guards import GUARDS, Layer

__all__ = ["Profile", "PROFILES", "Report", "IdReport", "verify"]


@attrs.frozen
class Profile:
    name: str
    campaign_examples: int
    campaign_steps: int
    control_examples: int
    control_steps: int
    shrink: bool  # shrink counterexamples to their shortest form (slower)


PROFILES = {
    "quick": Profile("quick", 600, 40, 400, 30, shrink=False),
    "thorough": Profile("thorough", 4000, 60, 1500, 40, shrink=True),
}


@attrs.frozen
class IdReport:
    id: str
    title: str
    status: str  # "verified" | "partial" | "not yet implemented"
    predicates: tuple[str, ...]
    tests: tuple[str, ...]
    examples: int
    checks: int
    negative_controls: tuple[ControlResult, ...]
    expected_controls: int
    scope: str
    planned: str


@attrs.frozen
class Report:
    ok: bool
    profile: str
    drift: tuple[str, ...]
    campaign: CampaignStats | None
    campaign_error: str | None
    ids: tuple[IdReport, ...]
    seconds: float


Progress = Callable[[str, int, int], None]


def _noop(phase: str, done: int, total: int) -> None:
    return None


def verify(profile: Profile, progress: Progress = _noop) -> Report:
    t0 = time.perf_counter()
    progress("drift", 0, 1)
    drift = tuple(drift_problems())
    progress("drift", 1, 1)

    progress("campaign", 0, 1)
    campaign: CampaignStats | None = None
    campaign_error = None
    try:
        with contracts.contracts(True):
            campaign = run_campaign(RefimplAdapter, campaign_settings(profile.campaign_examples,
                                                                      profile.campaign_steps))
    except InvariantViolation as e:
        campaign_error = str(e)
    progress("campaign", 1, 1)

    controls: list[ControlResult] = []
    jobs = [(g, layer) for g in GUARDS for layer in Layer]
    cfg = campaign_settings(profile.control_examples, profile.control_steps, shrink=profile.shrink)
    for i, (g, layer) in enumerate(jobs):
        progress("negative controls", i, len(jobs))
        controls.append(find_counterexample(g, layer, cfg, RefimplAdapter))
    progress("negative controls", len(jobs), len(jobs))

    ids = tuple(_id_report(e, campaign, campaign_error is None, controls) for e in CATALOG)
    ok = (not drift and campaign_error is None and all(c.found for c in controls)
          and all(r.status != "partial" for r in ids))
    return Report(ok, profile.name, drift, campaign, campaign_error, ids, time.perf_counter() - t0)


def _id_report(e: Any, campaign: CampaignStats | None, clean: bool, controls: list[ControlResult]) -> IdReport:
    mine = tuple(c for c in controls if e.id in c.ids)
    expected = len(e.guards) * len(Layer)
    if e.status is Status.NOT_YET_IMPLEMENTED:
        return IdReport(e.id, e.title, Status.NOT_YET_IMPLEMENTED.value, (), (), 0, 0, mine, expected,
                        e.scope, e.planned)
    examples = campaign.examples if campaign else 0
    # Predicate evaluations: state predicates after every step, step predicates after accepted ones.
    checks = 0
    if campaign:
        checks = (len(STATE_PREDICATES.get(e.id, ())) * campaign.steps
                  + len(STEP_PREDICATES.get(e.id, ())) * campaign.accepted)
    verified = clean and examples > 0 and expected > 0 and sum(c.found for c in mine) == expected
    return IdReport(e.id, e.title, "verified" if verified else "partial", e.predicates, e.tests, examples,
                    checks, mine, expected, e.scope, e.planned)
