"""A seeded crash-and-restart campaign of the hierarchy's real code (C10): nothing lost, nothing doubled.

`crash_campaign(seed, crashes)` walks `refimpl.verify.hierarchy_sim.SimAdapter`
(the real coordinator and worker code, its network simulated) with actions
drawn by `invariants.hierarchy_machine.choose` from one `random.Random(seed)`,
and at random points crashes the coordinator: before it handles a worker's
call, between its journal write and its reply, between journaling an
arbitration round and pushing its grants, or between two steps; workers are
killed, stopped, fenced and lose replies as the draw decides, and between
steps the environment throws garbage at the coordinator (`SimAdapter.hostile`).
After every step: refinement against `spec.hierarchy` (same result or the same
error type, same abstract state), every C10 / I11 predicate, and garbage
changed nothing. Each walk ends by killing every worker and observing its
exit: the free balance must then be the whole serving quota again.

The figures say what happened: coordinator crashes (and how many fell
between a journal write and its reply), units granted and returned, the
most units ever grantable-or-in-use in every process's view combined (free +
per worker max(charged, usable)) against the serving quota, and the worst
shortfall of the free balance at the end of a walk (units lost). Seeded:
the same seed gives the same walk.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import attrs

from invariants.clauses import Coverage, recording
from invariants.hierarchy import check_state, check_step
from invariants.hierarchy_machine import Crash, Lose, campaign_step, choose
from refimpl.verify.hierarchy_sim import SimAdapter
from spec import hierarchy as H
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet

__all__ = ["CrashFigures", "crash_campaign", "combined_units", "CrashCampaignFailed"]

#: (serving quota, machine, aging cap): three workers contend for 20 units on a 32-unit machine.
CONFIG = (20, 32, 3)


class CrashCampaignFailed(AssertionError):
    """The implementation and the spec parted ways, or garbage changed something."""


@attrs.frozen
class CrashFigures:
    seed: int
    walks: int
    steps: int
    crashes: int  # coordinator crashes, all kinds (the simulation's own log)
    crashes_between_journal_and_reply: int  # the crashed call had written the journal, its reply was never sent
    crashes_before_journal: int  # during a call, before it wrote anything
    crashes_between_steps: int
    workers_killed: int
    replies_lost: int
    hostile_inputs: int
    refusals: int
    units_granted: int
    units_returned: int
    serving_quota: int
    max_combined_units: int  # max over every state of free + per worker max(charged, usable)
    max_units_lost: int  # the worst shortfall of the free balance once every worker of a walk has exited
    seconds: float
    refusals_by_error: dict[str, int] = attrs.field(factory=dict)
    accepted_by_action: dict[str, int] = attrs.field(factory=dict)  # action type -> steps that took effect


def combined_units(s: H.HierarchyState) -> int:
    """Grantable plus, per worker, max(charged, usable): what could be handed out or used at once."""
    def usable(w: H.Worker) -> int:
        if w.state is H.WorkerState.EXITED or w.proc is H.ProcState.DEAD:
            return 0
        return max(w.slice, w.committed + w.reserved)
    return s.free + sum(max(w.quota, usable(w)) for w in s.workers.values())


def _crashing(s: H.HierarchyState, act: Any, r: random.Random) -> Any:
    """`act`, or a coordinator crash at a point of it: one call in three (a worker's own call, a live worker's
    reconnect, an arbitration round) crashes before or after the journal write; one other action in twenty is
    followed by a crash between steps."""
    own = isinstance(act, (H.Free, H.Answer, H.Arbitrate)) or (
        isinstance(act, (H.Request, H.Return)) and H.own_call(s, act)) or (
        isinstance(act, H.Hello) and act.authentic is True and act.worker in s.workers
        and s.workers[act.worker].state is H.WorkerState.ACTIVE and s.workers[act.worker].proc is H.ProcState.RUNNING)
    if own and r.random() < 1 / 3:
        return Crash(act, H.REPLY_LOST if isinstance(act, H.Arbitrate) else r.choice((H.REPLY_LOST, H.MESSAGE_LOST)))
    if not own and r.random() < 1 / 20:
        return H.Restart()
    return act


class _Walk:
    def __init__(self, seed: int, guards: GuardSet, coverage: Coverage | None) -> None:
        self.sim = SimAdapter(CONFIG, guards, seed)
        self.state = H.new_hierarchy(*CONFIG)
        self.guards, self.coverage = guards, coverage

    def step(self, act: Any) -> tuple[str | None, H.HierarchyState]:
        """One checked step; (the refusal's error class name or None, state before it)."""
        prev = self.state
        expected: tuple[Any, Any] | None = None
        want_err: type | None = None
        try:
            expected = campaign_step(prev, act, ALL_ON)
        except GovernorError as e:
            want_err = type(e)
        got: Any = None
        err: GovernorError | None = None
        try:
            got = self.sim.execute(act)
        except GovernorError as e:
            err = e
        now = self.sim.abstract()
        if (want_err is None) != (err is None) or (err is not None and type(err) is not want_err):
            raise CrashCampaignFailed(f"{act!r}: spec {want_err.__name__ if want_err else 'accepts'}, implementation "
                                      f"{type(err).__name__ + ': ' + str(err) if err else 'accepts'}")
        if expected is not None and (got != expected[1] or now != expected[0]):
            raise CrashCampaignFailed(f"{act!r}: result {got!r} vs {expected[1]!r}, or the state diverged")
        if err is not None and now != prev:
            raise CrashCampaignFailed(f"{act!r} was refused but changed the state")
        with recording(self.coverage):  # our predicates only, not the contracts the implementation runs
            if err is None:
                check_step(prev, act, now)
            check_state(now)
        self.state = now
        return (type(err).__name__ if err else None), prev


def crash_campaign(seed: int, crashes: int = 1000, walk_steps: int = 60, guards: GuardSet = ALL_ON,
                   hostile_rate: float = 0.3, coverage: Coverage | None = None) -> CrashFigures:
    """Walk until at least `crashes` coordinator crashes happened; raises on any divergence or violation.
    `coverage`: where the predicates' clause evaluations are counted."""
    r = random.Random(seed)
    t0 = time.perf_counter()
    by_error: Counter[str] = Counter()
    by_action: Counter[str] = Counter()
    n = dict(walks=0, steps=0, crashes=0, between=0, before=0, restarts=0, killed=0, lost=0, hostile=0, refused=0,
             granted=0, returned=0, max_combined=0, max_lost=0)
    while n["crashes"] < crashes:
        walk = _Walk(r.randrange(1 << 30), guards, coverage)
        n["walks"] += 1
        try:
            for _ in range(walk_steps):
                act = _crashing(walk.state, choose(walk.state, r), r)
                refused, prev = walk.step(act)
                n["steps"] += 1
                if refused:
                    n["refused"] += 1
                    by_error[refused] += 1
                else:
                    by_action[type(act).__name__] += 1
                    n["killed"] += isinstance(act, H.Kill)
                    n["lost"] += isinstance(act, Lose) or (isinstance(act, Crash) and act.fate == H.REPLY_LOST)
                for wid, w in walk.state.workers.items():
                    old = prev.workers[wid].quota if wid in prev.workers else 0
                    n["granted"] += max(0, w.quota - old)
                    n["returned"] += max(0, old - w.quota)
                n["max_combined"] = max(n["max_combined"], combined_units(walk.state))
                if r.random() < hostile_rate:
                    before = walk.sim.abstract()
                    kind = walk.sim.hostile(r)
                    n["hostile"] += 1
                    if walk.sim.abstract() != before:
                        raise CrashCampaignFailed(f"garbage ({kind}) changed the state")
            for wid, w in walk.state.workers.items():  # the end of the walk: every worker exits
                if w.proc is not H.ProcState.DEAD:
                    walk.step(H.Kill(wid))
                    n["returned"] += w.quota - walk.state.workers[wid].quota
            n["max_lost"] = max(n["max_lost"], walk.state.serving_quota - walk.state.free)
        finally:
            log = walk.sim.crash_log
            n["crashes"] += len(log)
            n["between"] += log.count("after-journal")
            n["before"] += log.count("before-journal")
            n["restarts"] += log.count("between-steps")
            walk.sim.close()
    return CrashFigures(seed, n["walks"], n["steps"], n["crashes"], n["between"], n["before"], n["restarts"],
                        n["killed"], n["lost"], n["hostile"], n["refused"], n["granted"], n["returned"], CONFIG[0],
                        n["max_combined"], n["max_lost"], time.perf_counter() - t0, dict(sorted(by_error.items())),
                        dict(sorted(by_action.items())))
