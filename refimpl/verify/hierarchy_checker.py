"""The `hierarchy` checker for `ortmem verify`: the cooperative hierarchy with real processes (C10, I11).

Campaign: Hypothesis drives `refimpl.verify.hierarchy_adapter.HierarchyAdapter` (a
real coordinator process and up to three real worker processes) against
`invariants.hierarchy_machine.campaign_step`, with refinement and every
predicate after every step; each example starts and tears down its own
processes. Negative controls are deterministic: the guard's scripted scenario
(`invariants.hierarchy_scope.SCRIPTS`) replayed on the spec with the guard off
(a harm clause must fail), or on the real processes with the guard off
against the intact spec (refinement must diverge in state or result, not in
error type alone, or a harm clause must fail). Mutation controls are the
hierarchy mutants of `refimpl.verify.mutants` (source patches of
`refimpl.hierarchy.core` and `.worker`, applied by verify in its job process,
inherited by the forked coordinator and workers): each mutant's script
(`refimpl.verify.hierarchy_mutants.MUTANT_SCRIPTS`) is replayed with every guard on
and refinement off, so only a clause of C10 / I11 on the implementation's
own abstraction can expose it (`replay_predicates`). `explore` runs the
bounded-exhaustive explorer over the spec's scopes.
"""

from __future__ import annotations

import importlib
import time
from collections import Counter
from typing import Any

import attrs

from invariants import contracts
from invariants.clauses import Coverage
from invariants._violation import InvariantViolation
from invariants.campaign import CampaignStats, ControlResult, campaign_settings
from invariants.checked import diff
from invariants.explore import ExploreResult, explore
from invariants.mutation import Mutant
from invariants.hierarchy import CLAUSES, check_state, check_step, evaluate
from invariants.hierarchy_machine import Crash, Lose, campaign_step, model, to_campaign
from invariants.hierarchy_scope import (COMPLETE_SCOPES, SCRIPT_CONFIG, SCRIPTS, arbitration_model, counting_cases,
                                        hierarchy_model, run_script)
from invariants.model_machine import run_model_campaign
from refimpl.verify.checker_api import Budget, CheckerRun
from refimpl.verify.hierarchy_adapter import HierarchyAdapter
from refimpl.verify.hierarchy_crashes import crash_campaign
from refimpl.verify.hierarchy_sim import SimAdapter
from refimpl.hierarchy.core import Core
from spec import hierarchy as H
from spec.errors import GovernorError
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["HierarchyChecker", "replay_refimpl", "replay_predicates", "cases"]


def _impl(config: Any, guards: GuardSet) -> HierarchyAdapter:
    return HierarchyAdapter(config, guards)


def _sim(config: Any, guards: GuardSet) -> SimAdapter:
    return SimAdapter(config, guards)


_WHO = {H.WorkerState.SPAWNED: "spawned-but-silent", H.WorkerState.FENCED: "fenced", H.WorkerState.EXITED: "exited",
        H.WorkerState.ACTIVE: "live"}


def cases(s: H.HierarchyState, act: Any) -> list[str]:
    """The environment's cases one campaign action is, read from the spec state before it (for coverage)."""
    out = []
    inner = act.act if isinstance(act, (Lose, Crash)) else act
    if isinstance(act, Crash):
        out.append("crashes between journal and reply" if act.fate == H.REPLY_LOST else "crashes before the journal")
    elif isinstance(act, Lose):
        out.append("replies lost" if act.fate == H.REPLY_LOST else "messages lost")
    if isinstance(act, (Lose, Crash)) and isinstance(inner, H.Arbitrate):
        out.append("grant pushes lost")
    if isinstance(act, H.Restart):
        out.append("restarts")
    if isinstance(inner, (H.Request, H.Return)) and not H.own_call(s, inner):
        w = s.workers.get(inner.worker) if type(inner.worker) is int else None
        out.append(f"messages from {'never-spawned' if w is None else _WHO[w.state]} identities")
    if isinstance(act, H.Hello):
        w = s.workers.get(act.worker)
        if not act.authentic:
            out.append("impostor hellos")
        elif w is not None and w.state is H.WorkerState.ACTIVE and not w.synced:
            out.append("resynchronising hellos")
    return out


def _crash_run(crashes: int) -> CampaignStats:
    """The seeded crash-and-restart campaign (`hierarchy_crashes`) as one more campaign: its clause evaluations
    count toward coverage; its figures are events (a harm or divergence raises)."""
    cov = Coverage()
    with contracts.contracts(True):
        f = crash_campaign(0, crashes, coverage=cov)
    events = {"crash-campaign coordinator crashes": f.crashes,
              "crash-campaign crashes between journal and reply": f.crashes_between_journal_and_reply,
              "crash-campaign crashes before the journal": f.crashes_before_journal,
              "crash-campaign units granted": f.units_granted, "crash-campaign units returned": f.units_returned,
              f"crash-campaign max units grantable or usable at once (serving quota {f.serving_quota})":
                  f.max_combined_units, "crash-campaign units lost": f.max_units_lost}
    return CampaignStats(f.walks, f.steps, f.steps - f.refusals, f.refusals_by_error, f.seconds, f.accepted_by_action,
                         dict(cov.counts), events)


def _counting(events: Counter[str]) -> Any:
    def step(s: H.HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> tuple[H.HierarchyState, Any]:
        events.update(cases(s, act))
        return campaign_step(s, act, guards)
    return step


def replay_refimpl(script: tuple[Any, ...], guards: GuardSet, config: tuple[int, int, int] = SCRIPT_CONFIG,
                   core: type = Core, mutants: tuple[str, ...] = ()) -> tuple[str | None, str, int | None]:
    """Replay a campaign-form script on real processes with `guards` (and ledger class `core`, worker-side
    `mutants`), against the intact spec. Returns (violated ID or "refinement" or None, message, index of the step).
    """
    gov = HierarchyAdapter(config, guards, core=core, mutants=mutants)
    s = H.new_hierarchy(*config)
    try:
        for k, act in enumerate(script):
            expected: tuple[Any, Any] | None = None
            try:
                expected = campaign_step(s, act, ALL_ON)
            except GovernorError:
                pass
            result, refused = None, False
            try:
                result = gov.execute(act)
            except GovernorError:
                refused = True
            now = gov.abstract()
            if (expected is None) != refused:
                return "refinement", f"{act!r}: spec {'refuses' if expected is None else 'accepts'}, " \
                                     f"implementation {'refuses' if refused else 'accepts'}", k
            if expected is not None and (result != expected[1] or now != expected[0]):
                return "refinement", f"{act!r}: result {result!r} vs {expected[1]!r}; {diff(now, expected[0])}", k
            try:
                if not refused:
                    check_step(s, act, now)
                check_state(now)
            except InvariantViolation as e:
                return e.id, str(e), k
            if expected is not None:
                s = expected[0]
        return None, "no counterexample found", None
    finally:
        gov.close()


def _failing(prev: H.HierarchyState, act: Any, now: H.HierarchyState, accepted: bool) -> list[tuple[str, str, str]]:
    """Every failing clause on this step: (ID, clause key, problem), state clauses and (if accepted) step clauses."""
    out = []
    for pred, named in CLAUSES.items():
        if pred.startswith("step_") and not accepted:
            continue
        args = (prev, act, now) if pred.startswith("step_") else (now,)
        for name, _, problem in evaluate(pred, *args):
            if problem is not None:
                out.append(("C10" if "C10" in pred else "I11", f"{pred}.{name}", problem))
    return out


def replay_predicates(script: tuple[Any, ...], core: type, config: tuple[int, int, int] = SCRIPT_CONFIG,
                      mutants: tuple[str, ...] = ()) -> tuple[str | None, str, int | None, tuple[str, ...]]:
    """A mutation control: replay `script` on real processes with every guard on and ledger class `core` (and
    worker-side `mutants`, applied by the workers' zygote), refinement off; only the predicates, on the
    implementation's own abstraction, can notice the bug.

    Returns (violated ID or None, message, index of the step, every clause that step breaks).
    """
    gov = HierarchyAdapter(config, ALL_ON, core=core, mutants=mutants)
    try:
        prev = gov.abstract()
        for k, act in enumerate(script):
            accepted = True
            try:
                gov.execute(act)
            except GovernorError:
                accepted = False
            now = gov.abstract()
            bad = _failing(prev, act, now, accepted)
            if bad:
                return bad[0][0], f"{act!r}: {bad[0][2]}", k, tuple(dict.fromkeys(c for _, c, _ in bad))
            prev = now
        return None, "no clause failed", None, ()
    finally:
        gov.close()


class HierarchyChecker:
    name = "hierarchy"

    def campaign(self, budget: Budget) -> CheckerRun:
        # Two campaigns of one model. Real processes (a coordinator, up to three workers, real sockets, kill -9,
        # SIGSTOP, restarts; about a second per example on a loaded 2-core machine): a fortieth of the ledger's
        # examples. The same code in one process with its network simulated (`hierarchy_sim`; a tenth of that
        # per example): a quarter, so every clause and every environment case is met well above the threshold.
        # Case counts (messages in the name of dead identities, lost replies, crashes between journal and reply)
        # are the campaign's events.
        runs = []
        for name, impl, examples in (("real-process", _impl, max(8, budget.campaign_examples // 40)),
                                     ("simulated", _sim, max(20, budget.campaign_examples // 4))):
            events: Counter[str] = Counter()
            m = attrs.evolve(model(impl), step=_counting(events))
            with contracts.contracts(True):
                stats = run_model_campaign(m, campaign_settings(examples, min(budget.campaign_steps, 30)))
            runs.append(attrs.evolve(stats, events={f"{name} {k}": v for k, v in events.items()}))
        runs.append(_crash_run(max(100, budget.campaign_examples // 4)))
        stats = CampaignStats.total(runs)
        return CheckerRun(stats)

    def control(self, guard: Guard | Mutant, layer: Layer, budget: Budget) -> ControlResult:
        if isinstance(guard, Mutant):
            return self._mutant(guard)
        script = SCRIPTS[guard.name]
        off = GuardSet.without(guard.name)
        t0 = time.perf_counter()
        with contracts.contracts(False):
            if layer is Layer.SPEC:
                r = run_script(script, off)
                violated, message, at = r.violated, r.message, r.at
                accept = set(guard.ids)
            else:
                script = to_campaign(script)
                violated, message, at = replay_refimpl(script, off)
                accept = set(guard.ids) | {"refinement"}
        steps = None if at is None else at + 1
        trace = tuple(repr(a) for a in script[:steps]) if steps else ()
        return ControlResult(guard.name, layer, guard.ids, violated in accept, violated, steps,
                             time.perf_counter() - t0, trace, message)

    def explore(self, guard: Guard | None, budget: Budget) -> ExploreResult:
        if guard is None:  # every guard on: each finite scope to its fixpoint, the environment's cases counted
            from invariants.model_scopes import combine
            runs, counts = [], {}
            for name, bounds in COMPLETE_SCOPES.items():
                scope, reached = counting_cases(hierarchy_model(ALL_ON, bounds, name=name))
                runs.append(explore(scope, max_depth=10**6, max_states=budget.explore_states))
                counts = {k: counts.get(k, 0) + reached.get(k, 0) for k in {*counts, *reached}}
                if runs[-1].found:
                    break
            r = combine(runs)
            reached = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            return attrs.evolve(r, message=f"{r.message}; transitions tried by case: {reached}")
        off = GuardSet.without(guard.name)
        scope = arbitration_model(off) if guard.name == "coordinator_aging" else hierarchy_model(off)
        return explore(scope, max_depth=budget.control_depth, max_states=budget.explore_states)

    def _mutant(self, m: Mutant) -> ControlResult:
        """A mutation control (`refimpl.verify.mutants`, already applied by verify): its script on real processes."""
        from refimpl.verify.hierarchy_mutants import MUTANT_SCRIPTS  # the script that must expose each named bug
        # Looked up now, not at import: `invariants.mutation.applied` replaced the patched definition in its
        # module (defaults bound at definition time still name the intact class).
        core = importlib.import_module("refimpl.hierarchy.core").Core
        script = MUTANT_SCRIPTS[m.name]
        # Worker code runs in processes the zygote forks from the code on disk: each applies the worker-side
        # patch itself.
        mutants = (m.name,) if m.module == "refimpl.hierarchy.worker_core" else ()
        t0 = time.perf_counter()
        with contracts.contracts(False):
            violated, message, at, clauses = replay_predicates(script, core, mutants=mutants)
        steps = None if at is None else at + 1
        trace = tuple(repr(a) for a in script[:steps]) if steps else ()
        return ControlResult(m.name, m.layer, m.ids, violated in m.ids, violated, steps, time.perf_counter() - t0,
                             trace, message, clauses[0] if clauses else None, clauses)
