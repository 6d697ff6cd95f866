"""`ortmem verify`: the main job, as phases that produce one per-ID report.

Phases: drift (catalog, predicates, tests, docs in step), one stateful
campaign per checker (`refimpl.checkers.CHECKERS`: refimpl refines spec,
invariants after every step, contracts on), and negative controls (each
registered guard switched off, in the spec and in refimpl, must yield a
counterexample to an ID it protects). The report is a plain value;
rendering (table, JSON) lives in `refimpl.cli`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from invariants.campaign import CampaignStats, ControlResult
from invariants.drift import drift_problems
from invariants._violation import InvariantViolation
from refimpl.checkers import CHECKERS, Budget, CheckerRun
from spec.catalog import CATALOG, Status
from spec.guards import GUARDS, Layer

__all__ = ["PROFILES", "Report", "IdReport", "verify"]

PROFILES = {
    "quick": Budget(campaign_examples=600, campaign_steps=40, control_examples=400, control_steps=30, shrink=False),
    "thorough": Budget(campaign_examples=4000, campaign_steps=60, control_examples=1500, control_steps=40,
                       shrink=True),
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
    campaigns: dict[str, CampaignStats]
    campaign_errors: dict[str, str]
    ids: tuple[IdReport, ...]
    seconds: float


Progress = Callable[[str, int, int], None]


def _noop(phase: str, done: int, total: int) -> None:
    return None


def verify(profile: str, progress: Progress = _noop) -> Report:
    budget = PROFILES[profile]
    t0 = time.perf_counter()
    progress("drift", 0, 1)
    drift = tuple(drift_problems())
    progress("drift", 1, 1)

    runs: dict[str, CheckerRun] = {}
    errors: dict[str, str] = {}
    for i, (name, checker) in enumerate(CHECKERS.items()):
        progress("campaigns", i, len(CHECKERS))
        try:
            runs[name] = checker.campaign(budget)
        except InvariantViolation as e:
            errors[name] = str(e)
    progress("campaigns", len(CHECKERS), len(CHECKERS))

    controls: list[ControlResult] = []
    jobs = [(g, layer) for g in GUARDS for layer in Layer]
    for i, (g, layer) in enumerate(jobs):
        progress("negative controls", i, len(jobs))
        controls.append(CHECKERS[g.model].control(g, layer, budget))
    progress("negative controls", len(jobs), len(jobs))

    ids = tuple(_id_report(e, runs, errors, controls) for e in CATALOG)
    ok = (not drift and not errors and all(c.found for c in controls)
          and all(r.status != "partial" for r in ids))
    return Report(ok, profile, drift, {k: r.stats for k, r in runs.items()}, errors, ids,
                  time.perf_counter() - t0)


def _id_report(e: Any, runs: dict[str, CheckerRun], errors: dict[str, str],
               controls: list[ControlResult]) -> IdReport:
    mine = tuple(c for c in controls if e.id in c.ids)
    expected = len(e.guards) * len(Layer)
    if e.status is Status.NOT_YET_IMPLEMENTED:
        return IdReport(e.id, e.title, Status.NOT_YET_IMPLEMENTED.value, (), (), 0, 0, mine, expected,
                        e.scope, e.planned)
    owners = [r for r in runs.values() if r.checks.get(e.id)]
    examples = sum(r.stats.examples for r in owners)
    checks = sum(r.checks[e.id] for r in owners)
    verified = (not errors and examples > 0 and expected > 0 and sum(c.found for c in mine) == expected)
    return IdReport(e.id, e.title, "verified" if verified else "partial", e.predicates, e.tests, examples,
                    checks, mine, expected, e.scope, e.planned)
