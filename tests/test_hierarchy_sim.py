"""The hierarchy's real code in one process (`refimpl.verify.hierarchy_sim`): it refines the spec under the
environment's freedom, garbage changes nothing, and the seeded crash campaign loses and doubles nothing (C10).

Each control here also runs with one guard off (or a named bug applied): the same harness must then fail,
so a clean run means something.
"""

from __future__ import annotations

import random
from collections import Counter

import attrs
import pytest

from invariants._violation import InvariantViolation, RefinementViolation
from invariants.campaign import campaign_settings
from invariants.hierarchy import check_state, evaluate
from invariants.hierarchy_machine import Crash, Lose, campaign_step, model
from invariants.model_machine import run_model_campaign
from invariants.mutation import applied
from refimpl.verify.hierarchy_checker import cases
from refimpl.verify.hierarchy_crashes import CrashCampaignFailed, combined_units, crash_campaign
from refimpl.verify.hierarchy_sim import SimAdapter
from refimpl.verify.mutants import MUTANTS
from spec import hierarchy as H
from spec.errors import GovernorError, InvalidTransition
from spec.guards import ALL_ON, GuardSet

CONFIG = (20, 32, 3)


def test_simulated_hierarchy_refines_spec_and_reaches_every_case() -> None:
    seen: Counter[str] = Counter()

    def counted(s: H.HierarchyState, act: object, guards: GuardSet = ALL_ON) -> tuple[H.HierarchyState, object]:
        seen.update(cases(s, act))
        return campaign_step(s, act, guards)

    m = attrs.evolve(model(lambda c, g: SimAdapter(c, g)), step=counted)
    stats = run_model_campaign(m, campaign_settings(25, 30, shrink=False))
    assert stats.examples >= 25 and stats.accepted > 300
    for case in ("messages from fenced identities", "messages from exited identities",
                 "messages from never-spawned identities", "messages from spawned-but-silent identities",
                 "replies lost", "messages lost", "crashes between journal and reply", "crashes before the journal",
                 "grant pushes lost", "resynchronising hellos", "impostor hellos", "restarts"):
        assert seen[case] > 0, (case, dict(seen))


def _run(sim: SimAdapter, *acts: object) -> H.HierarchyState:
    for a in acts:
        sim.execute(a)
    return sim.abstract()


def test_the_double_grant_window_in_the_simulation() -> None:
    """The issue's scenario, the reply to the deferral lost and the worker left out of sync while a third worker
    takes the units back: with the guard on no unit is usable twice; with it off the harm is there at once."""
    script = (H.Spawn(), H.Spawn(), H.Spawn(), H.Request(1, 1, 1, 10), H.Reserve(1, 3), H.Request(2, 1, 1, 10),
              Crash(H.Request(1, 1, 2, 5)), H.Hello(2), H.Hello(3), H.Request(3, 2, 1, 10))
    for guards, harmed in ((ALL_ON, False), (GuardSet.without("lost_reply_assumes_worst"), True)):
        sim = SimAdapter(CONFIG, guards)
        try:
            s = _run(sim, *script)
            assert (combined_units(s) > CONFIG[0]) is harmed, combined_units(s)
            problems = {n: p for n, _, p in evaluate("state_C10_hierarchy", s)}
            assert (problems["units_not_doubled"] is not None) is harmed
            if not harmed:
                w = s.workers[1]
                assert (w.slice, w.reserved, w.synced) == (0, 0, False)
                with pytest.raises(InvalidTransition, match="out of sync"):
                    sim.execute(H.Commit(1))
                assert _run(sim, H.Hello(1)).workers[1].synced
        finally:
            sim.close()


def test_garbage_at_the_coordinator_changes_nothing() -> None:
    sim = SimAdapter(CONFIG, ALL_ON)
    rng = random.Random(7)
    try:
        _run(sim, H.Spawn(), H.Spawn(), H.Request(1, 1, 1, 6), H.Request(2, 1, 1, 20))
        before = sim.abstract()
        kinds = Counter(sim.hostile(rng) for _ in range(120))
        assert sim.abstract() == before
        assert set(kinds) == {"not-a-hello", "pickle", "wrong-key", "bad-tag", "bad-body", "unknown-role"}
        check_state(before)
    finally:
        sim.close()


def test_seeded_crash_campaign_loses_and_doubles_nothing() -> None:
    f = crash_campaign(3, crashes=150)
    assert f.crashes >= 150 and f.crashes_between_journal_and_reply > 20 and f.crashes_before_journal > 10
    assert f.max_combined_units <= f.serving_quota and f.max_units_lost == 0
    assert f.units_granted == f.units_returned > 0  # every worker exited at the end of each walk


def test_crash_campaign_is_deterministic() -> None:
    a, b = crash_campaign(11, crashes=40), crash_campaign(11, crashes=40)
    assert attrs.evolve(a, seconds=0) == attrs.evolve(b, seconds=0)


@pytest.mark.parametrize("guard", ["lost_reply_assumes_worst", "return_once", "defer_returns_uncommitted",
                                   "epoch_fencing", "live_workers_only"])
def test_crash_campaign_catches_a_guard_switched_off(guard: str) -> None:
    with pytest.raises((CrashCampaignFailed, InvariantViolation, RefinementViolation)):
        crash_campaign(5, crashes=400, guards=GuardSet.without(guard))


@pytest.mark.parametrize("mutant", ["grant_not_journaled", "lost_reply_trusts_old_slice", "exit_credited_twice"])
def test_crash_campaign_catches_a_named_bug(mutant: str) -> None:
    with applied(MUTANTS[mutant]), pytest.raises((CrashCampaignFailed, InvariantViolation)):
        crash_campaign(5, crashes=400)


def test_a_lost_reply_in_the_simulation_is_the_specs() -> None:
    """Every fate of every own call, one at a time, from one state: the simulation lands where the spec does."""
    base = (H.Spawn(), H.Spawn(), H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Request(2, 1, 1, 12))
    calls = [H.Request(1, 1, 2, 4), H.Return(1, 1, 2, 1), H.Arbitrate()]
    for call in calls:
        for fate in (H.REPLY_LOST, H.MESSAGE_LOST):
            for kind in (Lose, Crash):
                if isinstance(call, H.Arbitrate) and fate == H.MESSAGE_LOST:
                    continue
                sim = SimAdapter(CONFIG, ALL_ON)
                try:
                    s = _run(sim, *base)
                    act = kind(call, fate)
                    try:
                        want = campaign_step(s, act)[0]
                    except GovernorError:
                        continue
                    sim.execute(act)
                    assert sim.abstract() == want, act
                finally:
                    sim.close()


@pytest.mark.parametrize("bad", [H.Outside("web", 21), H.Outside("db", -13), H.Outside("", 1), H.Outside("db", 0),
                                 H.Answer(1, 1), H.Answer(9, 1)],
                         ids=["outside-past-the-machine", "outside-below-zero", "outside-no-name", "outside-zero",
                              "answer-by-a-stopped-worker", "answer-unknown-ticket"])
def test_a_refused_outside_or_answer_is_the_specs_refusal_and_changes_nothing(bad: object) -> None:
    # 12 of the machine's 32 units are the outside program's; worker 1, charged 4, is stopped with a reclaim ticket open.
    sim = SimAdapter(CONFIG, ALL_ON)
    try:
        before = _run(sim, H.Spawn(), H.Request(1, 1, 1, 4), H.Outside("db", 12), H.Reclaim(1, 2), H.Stop(1))
        assert set(before.tickets) == {1} and sum(before.outside.values()) == 12
        with pytest.raises(GovernorError) as spec_error:
            campaign_step(before, bad)
        with pytest.raises(type(spec_error.value)):
            sim.execute(bad)
        assert sim.abstract() == before
    finally:
        sim.close()
