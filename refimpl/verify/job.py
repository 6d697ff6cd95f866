"""`ortmem verify`: the main job, as phases that produce one per-ID report.

Phases: drift (catalog, predicates, tests, docs in step), one stateful
campaign per checker (`refimpl.verify.checkers.CHECKERS`: refimpl refines spec,
invariants after every step, contracts on, every clause's coverage counted),
negative controls (each registered guard switched off, in the spec and in
refimpl, must yield a harm to an ID it protects), mutation controls (each
named bug of `refimpl.verify.mutants.MUTANTS` injected with every guard on must make
a clause of its ID fail), the explorer, liveness under fairness (`invariants.liveness_props`: each
property on its whole scope, and its guard off must yield a lasso) and CrossHair. Each ID is judged by
the rules of `refimpl.verify.verdict_rules`. The report is a plain value; rendering
(table, JSON) lives in `refimpl.cli`.

Progress: `progress(phase, done, total)` when a phase starts and as its jobs
finish; `live(job, counts)` while a job runs, with its live counts (examples
and steps of a campaign or control, states of an exploration; an empty dict
when the job ended), sent from worker processes over a queue at most twice a
second (`invariants.progress` collects them inside the checks).

`ok` is false only when something is *violated* (drift, a campaign or
explorer violation, a liveness violation or a liveness control without a lasso, a CrossHair
counterexample, a stale mutant); an ID that
does not meet the rules is "partial" with its reasons, which `--strict`
turns into a failure.
"""

from __future__ import annotations

import functools
import importlib
import multiprocessing
import os
import pkgutil
import signal
import threading
import time
from contextlib import nullcontext
from concurrent.futures import ProcessPoolExecutor, as_completed
from collections.abc import Callable
from typing import Any

import attrs

from invariants.campaign import CampaignStats, ControlResult, Search, searching
from invariants.clauses import Coverage
# Every predicate module declares its clauses on import; the ORT checker imports its own lazily.
import invariants.admission  # noqa: F401
import invariants.manager  # noqa: F401
import invariants.replay_predicates  # noqa: F401
import invariants.sessions  # noqa: F401
from invariants.drift import drift_problems, unchecked
from invariants.explore import ExploreResult
from invariants.liveness_props import LivenessResult, liveness_ok, run_liveness
from invariants.mutation import StaleMutant, applied
from invariants._violation import InvariantViolation
from invariants.progress import reporting
from refimpl.verify.checkers import CHECKERS, Budget, CheckerRun
from refimpl.verify.crosshair_check import CrosshairResult, run_crosshair
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.verdict_rules import ClauseCoverage, guards_of, judge, judged_clauses
from spec.catalog import CATALOG, Status
from spec.guards import GUARDS, Layer

__all__ = ["PROFILES", "CHECKER_NAMES", "Report", "IdReport", "Search", "verify", "verdict"]

#: Neither profile shrinks a control's counterexample. The verdict needs a harm, not a minimal one, and the
#: shortest counterexample per guard is the explorer's (deterministic, rule R4). Shrinking was most of the
#: thorough run's control time: answer_takes_foreign_lease 65.1 s shrunk (16 steps) vs 1.1 s not (94 steps);
#: cancel_forgets_round 207.8 s vs 34.6 s; tx_adopts_grant 12.3 s vs 0.9 s (one loaded run, same budget).
PROFILES = {
    "quick": Budget(campaign_examples=600, campaign_steps=40, control_examples=400, control_steps=30, shrink=False),
    "thorough": Budget(campaign_examples=4000, campaign_steps=60, control_examples=1500, control_steps=40,
                       shrink=False, explore_depth=8, explore_states=1_000_000, control_depth=9),
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
    mutation_controls: tuple[ControlResult, ...] = ()
    coverage: tuple[ClauseCoverage, ...] = ()
    reasons: tuple[str, ...] = ()
    evaluated: int = 0


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
    mutation_controls: tuple[ControlResult, ...] = ()
    #: Mutants whose snippet no longer matches the code (they would test nothing): a violation.
    stale_mutants: tuple[str, ...] = ()
    #: The checkers whose phases ran (`ortmem verify --checker`); every checker when none was named.
    checkers: tuple[str, ...] = ()
    #: What the drift phase could not check here (an installed copy has no docs/ or tests/): not a pass.
    drift_unchecked: tuple[str, ...] = ()
    #: Issue #26: liveness under fairness per catalog ID (every guard on), and per control guard (guard off).
    liveness: dict[str, LivenessResult] = attrs.field(factory=dict)
    liveness_controls: dict[str, LivenessResult] = attrs.field(factory=dict)

    @property
    def all_verified(self) -> bool:
        return all(i.status != "partial" for i in self.ids)


Progress = Callable[[str, int, int], None]
#: A running job's live counts: (job label, {"examples": n, "steps": m} or {"states": k}); {} when it ended.
Live = Callable[[str, dict[str, int]], None]

#: Seconds between two live reports of one job (a worker's queue is not flooded by every step).
LIVE_EVERY = 0.5

#: The checkers `ortmem verify --checker NAME` can select, in run order.
CHECKER_NAMES = tuple(CHECKERS)


def _noop(phase: str, done: int, total: int) -> None:
    return None


def _quiet(job: str, counts: dict[str, int]) -> None:
    return None


class _Counter:
    """A job's progress sink: adds up ticks and forwards the totals at most every `LIVE_EVERY` seconds."""

    def __init__(self, send: Callable[[dict[str, int]], None]) -> None:
        self.counts: dict[str, int] = {}
        self.send, self.last = send, 0.0

    def __call__(self, counter: str, n: int) -> None:
        self.counts[counter] = self.counts.get(counter, 0) + n
        now = time.monotonic()
        if now - self.last >= LIVE_EVERY:
            self.last = now
            self.send(dict(self.counts))


def verify(profile: str, progress: Progress = _noop, jobs: int | None = None,
           checkers: tuple[str, ...] | None = None, live: Live = _quiet, search: Search = Search()) -> Report:
    """Run every phase; `jobs` worker processes share the campaigns, controls and explorer (default: one per core).

    `checkers` (default: all) restricts the campaigns, negative and mutation controls and the explorer
    to those checkers, and the per-ID report to the IDs they check (an ID some guard, mutant or
    campaign clause of theirs names), judged by the same rules. CrossHair checks the shared
    arithmetic, no checker's, so a restricted run skips it and says so (the IDs it backs stay partial).
    `search` (default: fixed seeds, no example database) is the campaigns' and controls' search
    (`invariants.campaign.Search`: `ortmem verify --seed N --database WHERE`).
    """
    names = CHECKER_NAMES if checkers is None else tuple(dict.fromkeys(checkers))
    unknown = [n for n in names if n not in CHECKERS]
    if unknown or not names:
        raise ValueError(f"unknown checkers {unknown}; known: {', '.join(CHECKER_NAMES)}")
    PROFILES[profile]  # KeyError for an unknown profile, before any phase runs
    t0 = time.perf_counter()
    progress("drift", 0, 1)
    drift = tuple(drift_problems())
    drift_unchecked = tuple(unchecked())
    progress("drift", 1, 1)

    runs, errors, controls, mutants, stale, explorations, explorer_controls = _campaigns_and_controls(
        profile, progress, jobs, names, live=live, search=search)
    progress("liveness", 0, 1)
    liveness, liveness_controls = run_liveness(names)
    progress("liveness", 1, 1)
    if names == CHECKER_NAMES:
        progress("crosshair", 0, 1)
        crosshair = run_crosshair()
        progress("crosshair", 1, 1)
    else:
        crosshair = CrosshairResult(False, "not run: --checker selected " + ", ".join(names), 0, (), 0.0, None)

    entries = [e for e in CATALOG if names == CHECKER_NAMES or _checked_by(e.id, names, runs)]
    ids = tuple(_id_report(e, profile, runs, errors, controls, mutants, explorer_controls, crosshair)
                for e in entries)
    ok = (verdict(drift, errors, controls, ids, explorations, explorer_controls, crosshair) and not stale
          and liveness_ok(liveness, liveness_controls))
    return Report(ok, profile, drift, {k: r.stats for k, r in runs.items()}, errors, ids,
                  time.perf_counter() - t0, explorations, explorer_controls, crosshair, tuple(mutants), stale,
                  names, drift_unchecked, liveness, liveness_controls)


def _checked_by(id: str, names: tuple[str, ...], runs: dict[str, CheckerRun]) -> bool:
    """True iff one of the `names` checkers has a guard or a mutant for `id`, or counted one of its clauses."""
    keys = _keys(id)
    return (any(g.model in names and id in g.ids for g in GUARDS)
            or any(m.model in names and id in m.ids for m in MUTANTS.values())
            or any(k in r.stats.coverage for r in runs.values() for k in keys))


GUARD_IDS = {g.name: g.ids for g in GUARDS}


def verdict(drift: tuple[str, ...], errors: dict[str, str], controls: list[ControlResult], ids: tuple[IdReport, ...],
            explorations: dict[str, ExploreResult], explorer_controls: dict[str, ExploreResult],
            crosshair: CrosshairResult | bool) -> bool:
    """True iff nothing is violated: no drift, no campaign or exploration violation, no CrossHair problem.

    Weak evidence (a control that found no harm, thin coverage, a skipped CrossHair) is not a
    violation: it makes the IDs concerned "partial" (see `refimpl.verify.verdict_rules`).
    """
    problems = crosshair.problems if isinstance(crosshair, CrosshairResult) else (() if crosshair else ("x",))
    return (not drift and not errors and not any(x.found for x in explorations.values()) and not problems)


def _job(kind: str, name: str, layer: str | None, profile: str, search: Search | None = None,
         index: int = -1) -> Any:
    """One campaign or one control; module-level so a worker process can run it.

    In a worker, its live counts go to the parent over the queue the worker was started with
    (`_start_worker`) and `search` is the run's; in the parent's own process the caller sets both."""
    q = _LIVE_QUEUE
    with (searching(search) if search is not None else nullcontext(),
          reporting(_Counter(lambda counts: q.put((index, counts)))) if q is not None else nullcontext()):
        return _run_job(kind, name, layer, profile)


def _run_job(kind: str, name: str, layer: str | None, profile: str) -> Any:
    budget = PROFILES[profile]
    if kind == "scope":  # the checker's whole scope explored with every guard on
        return CHECKERS[name].explore(None, budget)
    if kind == "scope-control":  # one spec-layer guard off: the explorer must find its shortest counterexample
        g = next(g for g in GUARDS if g.name == name)
        return CHECKERS[g.model].explore(g, budget)
    if kind == "campaign":
        try:
            return CHECKERS[name].campaign(budget)
        except InvariantViolation as e:
            return str(e)
    if kind == "mutant":
        m = MUTANTS[name]
        # A mutant searches about as long as a campaign does (it must find the bug where the campaign
        # would), capped so that a surviving mutant cannot dominate the thorough run.
        wide = attrs.evolve(budget, control_examples=min(budget.campaign_examples, 1000),
                            control_steps=budget.campaign_steps)
        try:
            with applied(m):
                return CHECKERS[m.model].control(m, m.layer, wide)
        except StaleMutant as e:
            return str(e)
    g = next(g for g in GUARDS if g.name == name)
    return CHECKERS[g.model].control(g, Layer(layer), budget)


#: In a worker process: where its jobs' live counts go (set once by `_start_worker`, the pool's initializer).
_LIVE_QUEUE: Any = None


@functools.cache
def import_every_module() -> None:
    """Import every module of spec, invariants and refimpl (once a process). Hypothesis now and then draws a
    constant it found in the source of the local modules imported so far, so a derandomized campaign's search
    depends on what its process imported before it: a verify worker's earlier jobs, a pytest worker's earlier
    tests (CI's composed campaign met no ConfirmTermination in 240 examples after tests/test_cli.py had run in
    its worker). With every module imported first, every process draws from the same constants."""
    import invariants
    import refimpl
    import spec

    for package in (spec, invariants, refimpl):
        for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                importlib.import_module(m.name)
            except ImportError as e:  # e.g. a module left behind in an old build or install of ortmem
                raise ImportError(f"cannot import {m.name} from {package.__path__[0]}: {e} (a module left from "
                                  "an older build or install? rebuild or reinstall ortmem)") from e


def _start_worker(live_queue: Any) -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no worker tracebacks), report over the queue, and
    import every module first (the same search in every worker, whatever jobs it ran before)."""
    global _LIVE_QUEUE
    import_every_module()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _LIVE_QUEUE = live_queue


def _forward(q: Any, labels: list[str], live: Live, finished: set[int], lock: threading.Lock) -> None:
    """The parent's reader of the workers' live counts (a daemon thread; None on the queue ends it).

    A job's last counts can still be in the queue when its result arrives: counts of a finished job
    are dropped, under the lock `record` takes, so an ended job never shows as running again."""
    while True:
        try:
            msg = q.get()
        except (EOFError, OSError, ValueError):  # the queue closed under us at shutdown
            return
        if msg is None:
            return
        index, counts = msg
        with lock:
            if index not in finished:
                live(labels[index], counts)


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
    # Let the executor's manager thread finish its cleanup (it closes its wake-up pipe) before the interpreter
    # exits: CPython 3.11's exit hook otherwise races it, writing to the pipe as it closes (EBADF traceback).
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is not None:
        manager.join(timeout=2)


def _label(kind: str, name: str, layer: str | None) -> str:
    return {"campaign": f"{name} campaign", "control": f"control {name} ({layer})",
            "mutant": f"mutant {name}", "scope": f"{name} scope", "scope-control": f"{name} off"}[kind]


def _work(names: tuple[str, ...]) -> list[tuple[str, str, str | None]]:
    """Every job of a run over the checkers `names`, longest kinds first (the campaigns, then the explorer's
    scopes), so that the short controls fill the cores at the end."""
    explorers = [name for name, c in CHECKERS.items() if hasattr(c, "explore") and name in names]
    work: list[tuple[str, str, str | None]] = [("campaign", name, None) for name in CHECKERS if name in names]
    work += [("scope", name, None) for name in explorers]
    work += [("control", g.name, layer.value) for g in GUARDS if g.model in names for layer in Layer]
    work += [("mutant", m.name, m.layer.value) for m in MUTANTS.values() if m.model in names]
    work += [("scope-control", g.name, None) for g in GUARDS if g.model in explorers]
    return work


def _campaigns_and_controls(profile: str, progress: Progress, jobs: int | None, names: tuple[str, ...],
                            live: Live = _quiet, search: Search = Search()
                            ) -> tuple[dict[str, CheckerRun], dict[str, str], list[ControlResult],
                                       list[ControlResult], tuple[str, ...], dict[str, ExploreResult],
                                       dict[str, ExploreResult]]:
    """The campaigns, every guard off in each layer, every mutant, and the explorer (each checker's scope
    exhausted with every guard on, then each spec-layer guard off, which must yield a counterexample); in
    parallel worker processes when jobs > 1.

    Each job is deterministic on its own (fixed seeds; the explorer is breadth-first), so the split across
    processes does not change what is found; results are put back in job order.
    """
    work = _work(names)
    phase_of = {"campaign": "campaigns", "control": "negative controls", "mutant": "mutation controls",
                "scope": "explorer", "scope-control": "explorer controls"}
    totals = {p: sum(phase_of[k] == p for k, _, _ in work) for p in phase_of.values()}
    done = {phase: 0 for phase in totals}
    for phase, total in totals.items():
        progress(phase, 0, total)
    results: list[Any] = [None] * len(work)
    labels = [_label(*w) for w in work]

    finished: set[int] = set()
    lock = threading.Lock()

    def record(i: int, result: Any) -> None:
        results[i] = result
        with lock:
            finished.add(i)
            live(labels[i], {})
        phase = phase_of[work[i][0]]
        done[phase] += 1
        progress(phase, done[phase], totals[phase])

    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    import_every_module()  # here first: a module that cannot be imported is named, not a broken worker pool
    if workers <= 1:
        for i, (kind, name, layer) in enumerate(work):
            with searching(search), reporting(_Counter(lambda counts, i=i: live(labels[i], counts))):
                record(i, _job(kind, name, layer, profile))
    else:
        ctx = multiprocessing.get_context("spawn")
        live_queue = ctx.SimpleQueue()
        reader = threading.Thread(target=_forward, args=(live_queue, labels, live, finished, lock), daemon=True,
                                  name="ortmem-verify-live")
        reader.start()
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start_worker,
                                   initargs=(live_queue,))
        try:
            futures = {pool.submit(_job, kind, name, layer, profile, search, i): i
                       for i, (kind, name, layer) in enumerate(work)}
            for f in as_completed(futures):
                record(futures[f], f.result())
        except BaseException:
            # Ctrl-C (or a failure): drop queued jobs, end the workers now, no tracebacks. The reader is left
            # blocked (a daemon thread): a worker ended while writing to the queue may hold its write lock,
            # so a last put() here could wait forever.
            _stop(pool)
            raise
        live_queue.put(None)  # every job returned, so no worker is inside a put(): the reader ends
        reader.join(timeout=2)
        pool.shutdown(wait=True)
    runs = {name: r for (kind, name, _), r in zip(work, results) if kind == "campaign" and not isinstance(r, str)}
    errors = {name: r for (kind, name, _), r in zip(work, results) if kind == "campaign" and isinstance(r, str)}
    controls = [r for (kind, _, _), r in zip(work, results) if kind == "control"]
    mutants = [r for (kind, _, _), r in zip(work, results) if kind == "mutant" and not isinstance(r, str)]
    stale = tuple(r for (kind, _, _), r in zip(work, results) if kind == "mutant" and isinstance(r, str))
    explorations = {name: r for (kind, name, _), r in zip(work, results) if kind == "scope"}
    explorer_controls = {name: r for (kind, name, _), r in zip(work, results) if kind == "scope-control"}
    return runs, errors, controls, mutants, stale, explorations, explorer_controls


def _id_report(e: Any, profile: str, runs: dict[str, CheckerRun], errors: dict[str, str],
               controls: list[ControlResult], mutants: list[ControlResult],
               explorer_controls: dict[str, ExploreResult], crosshair: CrosshairResult) -> IdReport:
    mine = tuple(c for c in controls if e.id in c.ids)
    killers = tuple(m for m in mutants if e.id in m.ids)
    guards = guards_of(e.id)
    expected = len(guards) * len(Layer)
    if e.status is Status.NOT_YET_IMPLEMENTED:
        return IdReport(e.id, e.title, Status.NOT_YET_IMPLEMENTED.value, (), (), 0, 0, mine, expected,
                        e.scope, e.planned, killers)
    cov = Coverage()
    owners = [r for r in runs.values() if any(k in r.stats.coverage for k in _keys(e.id))]
    for r in owners:
        cov.add(r.stats.coverage)
    examples = sum(r.stats.examples for r in owners)
    why = crosshair.skipped or "; ".join(crosshair.problems) or "CrossHair did not confirm the arithmetic"
    j = judge(e.id, profile, cov, guards, mine, killers, explorer_controls,
              crosshair.ok and not crosshair.skipped, f"CrossHair: {why}", no_campaign=bool(errors) and not owners)
    return IdReport(e.id, e.title, j.status, e.predicates, e.tests, examples, j.checks, mine, expected,
                    e.scope, e.planned, killers, j.coverage, j.reasons, j.evaluated)


def _keys(id: str) -> list[str]:
    return [c.key for c in judged_clauses(id)]
