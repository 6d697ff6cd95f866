"""`ortmem verify`: the main job, as phases that produce one per-ID report.

Phases: drift (catalog, predicates, tests, docs in step), one stateful
campaign per checker (`refimpl.checkers.CHECKERS`: refimpl refines spec,
invariants after every step, contracts on), and negative controls (each
registered guard switched off, in the spec and in refimpl, must yield a
counterexample to an ID it protects). The report is a plain value;
rendering (table, JSON) lives in `refimpl.cli`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from collections.abc import Callable
from typing import Any

import attrs

from invariants.campaign import CampaignStats, ControlResult
from invariants.drift import drift_problems
from invariants.explore import ExploreResult
from invariants._violation import InvariantViolation
from refimpl.checkers import CHECKERS, Budget, CheckerRun
from refimpl.crosshair_check import CrosshairResult, run_crosshair
from spec.catalog import CATALOG, Status
from spec.guards import GUARDS, Layer

__all__ = ["PROFILES", "Report", "IdReport", "verify", "verdict"]

PROFILES = {
    "quick": Budget(campaign_examples=600, campaign_steps=40, control_examples=400, control_steps=30, shrink=False),
    "thorough": Budget(campaign_examples=4000, campaign_steps=60, control_examples=1500, control_steps=40,
                       shrink=True, explore_depth=8, explore_states=1_000_000, control_depth=9),
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
    #: Issue #6: exhaustive exploration per checker (every guard on), and per spec-layer guard.
    explorations: dict[str, ExploreResult] = attrs.field(factory=dict)
    explorer_controls: dict[str, ExploreResult] = attrs.field(factory=dict)
    crosshair: CrosshairResult | None = None


Progress = Callable[[str, int, int], None]


def _noop(phase: str, done: int, total: int) -> None:
    return None


def verify(profile: str, progress: Progress = _noop, jobs: int | None = None) -> Report:
    """Run every phase; `jobs` worker processes share the campaigns and controls (default: one per core)."""
    budget = PROFILES[profile]
    t0 = time.perf_counter()
    progress("drift", 0, 1)
    drift = tuple(drift_problems())
    progress("drift", 1, 1)

    runs, errors, controls = _campaigns_and_controls(profile, progress, jobs)

    explorations, explorer_controls = _explore(budget, progress)
    progress("crosshair", 0, 1)
    crosshair = run_crosshair()
    progress("crosshair", 1, 1)

    ids = tuple(_id_report(e, runs, errors, controls) for e in CATALOG)
    ok = verdict(drift, errors, controls, ids, explorations, explorer_controls, crosshair.ok)
    return Report(ok, profile, drift, {k: r.stats for k, r in runs.items()}, errors, ids,
                  time.perf_counter() - t0, explorations, explorer_controls, crosshair)


GUARD_IDS = {g.name: g.ids for g in GUARDS}


def verdict(drift: tuple[str, ...], errors: dict[str, str], controls: list[ControlResult], ids: tuple[IdReport, ...],
            explorations: dict[str, ExploreResult], explorer_controls: dict[str, ExploreResult],
            crosshair_ok: bool) -> bool:
    """True iff nothing drifted, no campaign or exploration found a violation, every negative control
    (Hypothesis and explorer) found a counterexample to an ID its guard protects, and CrossHair passed."""
    return (not drift and not errors and all(c.found for c in controls)
            and all(r.status != "partial" for r in ids)
            and not any(x.found for x in explorations.values())
            and all(x.violated in GUARD_IDS[name] for name, x in explorer_controls.items())
            and crosshair_ok)


def _job(kind: str, name: str, layer: str | None, profile: str) -> Any:
    """One campaign or one negative control; module-level so a worker process can run it."""
    budget = PROFILES[profile]
    if kind == "campaign":
        try:
            return CHECKERS[name].campaign(budget)
        except InvariantViolation as e:
            return str(e)
    g = next(g for g in GUARDS if g.name == name)
    return CHECKERS[g.model].control(g, Layer(layer), budget)


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no worker tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    procs = list((getattr(pool, "_processes", None) or {}).values())  # the executor offers no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=2)
        if p.is_alive():
            p.kill()
            p.join(timeout=1)


def _campaigns_and_controls(profile: str, progress: Progress, jobs: int | None
                            ) -> tuple[dict[str, CheckerRun], dict[str, str], list[ControlResult]]:
    """The campaigns, then every guard off in each layer; in parallel worker processes when jobs > 1.

    Each job is deterministic on its own (fixed seeds), so the split across processes does not
    change what is found; results are put back in job order.
    """
    work = [("campaign", name, None) for name in CHECKERS]
    work += [("control", g.name, layer.value) for g in GUARDS for layer in Layer]
    totals = {"campaigns": len(CHECKERS), "negative controls": len(work) - len(CHECKERS)}
    done = {phase: 0 for phase in totals}
    for phase, total in totals.items():
        progress(phase, 0, total)
    results: list[Any] = [None] * len(work)

    def record(i: int, result: Any) -> None:
        results[i] = result
        phase = "campaigns" if work[i][0] == "campaign" else "negative controls"
        done[phase] += 1
        progress(phase, done[phase], totals[phase])

    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers <= 1:
        for i, (kind, name, layer) in enumerate(work):
            record(i, _job(kind, name, layer, profile))
    else:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_ignore_sigint)
        try:
            futures = {pool.submit(_job, kind, name, layer, profile): i for i, (kind, name, layer) in enumerate(work)}
            for f in as_completed(futures):
                record(futures[f], f.result())
        except BaseException:
            _stop(pool)  # Ctrl-C (or a failure): drop queued jobs, end the workers now, no tracebacks
            raise
        pool.shutdown(wait=True)
    runs = {name: r for (kind, name, _), r in zip(work, results) if kind == "campaign" and not isinstance(r, str)}
    errors = {name: r for (kind, name, _), r in zip(work, results) if kind == "campaign" and isinstance(r, str)}
    controls = [r for (kind, _, _), r in zip(work, results) if kind == "control"]
    return runs, errors, controls


def _explore(budget: Budget, progress: Progress) -> tuple[dict[str, ExploreResult], dict[str, ExploreResult]]:
    """Exhaust each checker's scope with every guard on; then demand a counterexample per spec-layer guard."""
    explorers = {name: c for name, c in CHECKERS.items() if hasattr(c, "explore")}
    explorations: dict[str, ExploreResult] = {}
    for i, (name, checker) in enumerate(explorers.items()):
        progress("explorer", i, len(explorers))
        explorations[name] = checker.explore(None, budget)  # type: ignore[attr-defined]
    progress("explorer", len(explorers), len(explorers))
    mine = [g for g in GUARDS if g.model in explorers]
    controls: dict[str, ExploreResult] = {}
    for i, g in enumerate(mine):
        progress("explorer controls", i, len(mine))
        controls[g.name] = explorers[g.model].explore(g, budget)  # type: ignore[attr-defined]
    progress("explorer controls", len(mine), len(mine))
    return explorations, controls


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
