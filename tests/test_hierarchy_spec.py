"""The hierarchy spec (C10, I11): lifecycles, typed refusals, harm clauses, deterministic controls."""

from __future__ import annotations

import attrs
import pytest

from invariants.explore import explore
from invariants.hierarchy import CLAUSES, check_state, evaluate
from invariants.hierarchy_scope import SCRIPT_CONFIG, SCRIPTS, arbitration_model, hierarchy_model, run_script
from spec import hierarchy as H
from spec.errors import (
    AuthenticationFailed,
    CapacityDenied,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    NotAParticipant,
    ReplayedMessage,
    StaleEpoch,
    UnknownWorker,
    WorkerNotLive,
)
from spec.guards import GUARDS, GuardSet, guard

HIERARCHY_GUARDS = sorted(g.name for g in GUARDS if g.model == "hierarchy")


def _run(*actions: object) -> H.HierarchyState:
    s = H.new_hierarchy(*SCRIPT_CONFIG)
    for a in actions:
        s, _ = H.step(s, a)
        check_state(s)
    return s


def _up(quota: int = 0) -> H.HierarchyState:
    acts: list[object] = [H.Spawn(), H.Hello(1)]
    if quota:
        acts.append(H.Request(1, 1, 1, quota))
    return _run(*acts)


def test_every_hierarchy_guard_has_a_script() -> None:
    assert sorted(SCRIPTS) == HIERARCHY_GUARDS


@pytest.mark.parametrize("name", HIERARCHY_GUARDS)
def test_hierarchy_guard_off_violates_a_harm_clause(name: str) -> None:
    script = SCRIPTS[name]
    on = run_script(script)
    assert on.violated is None, on.message
    off = run_script(script, GuardSet.without(name))
    assert off.violated in guard(name).ids, off.message


@pytest.mark.parametrize("name", HIERARCHY_GUARDS)
def test_explorer_finds_each_short_control(name: str) -> None:
    off = GuardSet.without(name)
    scope = arbitration_model(off) if name == "coordinator_aging" else hierarchy_model(off)
    r = explore(scope, max_depth=8, max_states=100_000)
    assert r.violated in guard(name).ids, r.message


def test_arbitration_scope_with_every_guard_on_is_clean() -> None:
    r = explore(arbitration_model(), max_depth=7, max_states=100_000)
    assert r.violated is None and r.exhausted, r.message




@pytest.mark.parametrize("name,clauses", sorted(CLAUSES.items()))
def test_every_clause_is_named_for_a_harm(name: str, clauses: tuple) -> None:
    assert clauses and all(fn.__doc__ for _, fn in clauses)


# --- typed refusals change nothing -------------------------------------------------


@pytest.mark.parametrize("act,err", [
    (H.Request(1, 1, 2, 1, authentic=False), AuthenticationFailed),
    (H.Request(1, 1, 1, 1), ReplayedMessage),
    (H.Return(1, 1, 1, 1), ReplayedMessage),
    (H.Request(1, 0, 2, 1), StaleEpoch),
    (H.Request(9, 1, 1, 1), UnknownWorker),
    (H.Reclaim("db", 1), NotAParticipant),
    (H.ObserveExit(1), InvalidTransition),
    (H.Reserve(1, 5), CapacityDenied),
])
def test_hierarchy_rejects_bad_message_and_changes_nothing(act: object, err: type) -> None:
    s = _up(4)
    with pytest.raises(err):
        H.step(s, act)
    # The refusal leaves the whole state as it was (the step is pure: `s` itself is unchanged).
    assert s == _up(4)


def test_fence_keeps_quota_until_exit_is_observed() -> None:
    s = _up(4)
    s, _ = H.step(s, H.MissHeartbeat(1))
    w = s.workers[1]
    assert (w.state, w.epoch, w.quota, s.free) == (H.WorkerState.FENCED, 2, 4, 6)
    with pytest.raises(StaleEpoch, match="epoch 1, current 2"):
        H.step(s, H.Return(1, 1, 2, 1))
    with pytest.raises(InvalidTransition, match="no exit to observe"):
        H.step(s, H.ObserveExit(1))
    s, _ = H.step(s, H.Kill(1))
    s, credit = H.step(s, H.ObserveExit(1))
    assert (credit, s.free, s.workers[1].quota, s.workers[1].state) == (4, 10, 0, H.WorkerState.EXITED)
    s2, again = H.step(H.step(s, H.Restart())[0], H.ObserveExit(1))
    assert (again, s2.free) == (0, 10)


def test_defer_returns_uncommitted_and_keeps_an_intent() -> None:
    s = _run(H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Commit(1), H.Reserve(1, 1),
             H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 4))
    s, result = H.step(s, H.Request(1, 1, 2, 3, priority=1))
    w = s.workers[1]
    assert result == (H.DEFERRED, 1)
    assert (w.quota, w.slice, w.committed, w.reserved, s.free) == (2, 2, 2, 0, 4)
    assert s.intents[1] == H.Intent(1, 3, 1, 1, 0)
    s, granted = H.step(s, H.Arbitrate())
    assert granted == (1,) and s.workers[1].quota == 5 and not s.intents


def test_budget_is_min_of_slice_and_os_ceiling() -> None:
    s = _up(8)
    assert H.budget(s, 1) == 8
    s, _ = H.step(s, H.Outside("db", 12))
    assert (H.ceiling(s, 1), H.budget(s, 1), s.free, s.workers[1].quota) == (4, 4, 2, 8)
    s, _ = H.step(s, H.Reserve(1, 4))
    with pytest.raises(CapacityDenied):
        H.step(s, H.Reserve(1, 1))


def test_worker_table_makes_exit_idempotent() -> None:
    assert H.WORKER_TABLE[(H.WorkerState.EXITED, H.WorkerEvent.OBSERVE_EXIT)] is H.WorkerState.EXITED
    assert (H.WorkerState.FENCED, H.WorkerEvent.HELLO) not in H.WORKER_TABLE
    s = _up()
    s, _ = H.step(s, H.MissHeartbeat(1))
    with pytest.raises(WorkerNotLive, match="worker 1 is fenced: its epoch is over"):
        H.step(s, H.Hello(1))


# --- every clause can fail -----------------------------------------------------------


def _bad_states() -> dict[str, H.HierarchyState]:
    s = _up(4)
    w = s.workers[1]
    put = lambda **kw: attrs.evolve(s, workers=s.workers.set(1, attrs.evolve(w, **kw)))  # noqa: E731
    waiting = attrs.evolve(s, intents=s.intents.set(1, H.Intent(1, 3, 0, 1, 0)))
    spawned = _run(H.Spawn())
    return {
        "quota_within_serving": attrs.evolve(put(quota=11, slice=11), free=-1),
        "slices_within_serving": attrs.evolve(put(quota=11, slice=11), free=-1),
        "conservation": attrs.evolve(s, free=7),
        "slice_charged": put(slice=5),
        "charge_has_owner": put(slice=3),
        "within_slice": put(committed=5),
        "unauthenticated_hold_nothing": attrs.evolve(spawned, free=6, workers=spawned.workers.set(
            1, attrs.evolve(spawned.workers[1], quota=4, slice=4))),
        "exited_hold_nothing": put(state=H.WorkerState.EXITED, proc=H.ProcState.DEAD),
        "deferring_holds_nothing": waiting,
        "units_not_doubled": attrs.evolve(put(reserved=3, committed=3), free=6),
        "no_outside_target": attrs.evolve(s, tickets=s.tickets.set(1, H.Ticket("db", 1))),
    }


@pytest.mark.parametrize("clause", sorted(_bad_states()))
def test_state_clause_can_fail(clause: str) -> None:
    s = _bad_states()[clause]
    pred = "state_I11_hierarchy" if clause == "no_outside_target" else "state_C10_hierarchy"
    outcome = {name: problem for name, _, problem in evaluate(pred, s)}
    assert outcome[clause] is not None


def test_intent_keeps_place_can_fail() -> None:
    s = _run(H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 10), H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 3))
    moved = attrs.evolve(s, intents=s.intents.set(1, attrs.evolve(s.intents[1], seq=7)))
    outcome = {n: p for n, _, p in evaluate("step_C10_hierarchy", s, H.Arbitrate(), moved)}
    assert outcome["intent_keeps_place"] is not None


# --- the environment's freedom (issue 23) ---------------------------------------------------------------


@pytest.mark.parametrize("setup,act,err,match", [
    ((H.MissHeartbeat(1),), H.Request(1, 2, 2, 3), WorkerNotLive, "worker 1 is fenced"),
    ((H.Kill(1), H.ObserveExit(1)), H.Request(1, 2, 2, 5), WorkerNotLive, "worker 1 is exited"),
    ((H.Spawn(),), H.Request(2, 1, 1, 3), WorkerNotLive, "worker 2 is spawned"),
    ((), H.Request(7, 1, 1, 3), UnknownWorker, "never spawned"),
    ((), H.Request(1, 1, 2, 2 ** 70), InvalidBytes, "nbytes must be an int in"),
    ((), H.Request(1, 1, 2, 3, priority=2 ** 70), InvalidArgument, "priority must be an int in"),
    ((), H.Request(1, 1, 2, 11), CapacityDenied, "could never be granted"),
    ((), H.Request(1, 2 ** 70, 2, 1), InvalidArgument, "epoch must be an int in"),
])
def test_messages_in_the_name_of_no_live_worker_or_out_of_bounds_get_nothing(setup: tuple, act: object, err: type,
                                                                            match: str) -> None:
    s = _run(H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 4), *setup)
    with pytest.raises(err, match=match):
        H.step(s, act)


def _deferral() -> H.HierarchyState:
    return _run(H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Spawn(), H.Hello(2),
                H.Request(2, 1, 1, 4))


def test_a_lost_reply_to_a_deferral_leaves_the_worker_holding_nothing_uncharged() -> None:
    s, result = H.step(_deferral(), H.Request(1, 1, 2, 3, fate=H.REPLY_LOST))
    w = s.workers[1]
    assert result is None  # the caller learns nothing
    assert (w.quota, w.slice, w.reserved, w.synced, w.seq, s.free, len(s.intents)) == (0, 0, 0, False, 2, 6, 1)
    check_state(s)
    with pytest.raises(InvalidTransition, match="says hello again before it acts"):
        H.step(s, H.Reserve(1, 1))
    s, _ = H.step(s, H.Restart())  # a crash between the journal write and the reply: the journal kept it
    assert (s.workers[1].quota, s.free, len(s.intents)) == (0, 6, 1)
    s, _ = H.step(s, H.Hello(1))
    w = s.workers[1]
    assert (w.synced, w.epoch, w.known_epoch, w.slice, w.quota) == (True, 2, 2, 0, 0)
    check_state(s)


def test_a_lost_message_changes_nothing_at_the_coordinator() -> None:
    before = _deferral()
    s, _ = H.step(before, H.Request(1, 1, 2, 3, fate=H.MESSAGE_LOST))
    assert (s.free, s.intents, s.workers[1].quota, s.workers[1].seq) == (before.free, before.intents, 6, 1)
    assert (s.workers[1].slice, s.workers[1].reserved, s.workers[1].synced) == (0, 0, False)  # the worst assumed
    s, _ = H.step(s, H.Hello(1))
    assert (s.workers[1].slice, s.workers[1].synced) == (6, True)  # resynchronised: nothing was lost


def test_only_a_workers_own_call_can_lose_its_reply() -> None:
    s = _deferral()
    with pytest.raises(InvalidArgument, match="only a worker's own call"):
        H.step(s, H.Request(1, 1, 5, 1, fate=H.REPLY_LOST))  # not its next sequence number


def test_a_reconnect_starts_a_new_epoch_and_old_connections_are_stale() -> None:
    s, _ = H.step(_up(4), H.Hello(1))
    assert (s.workers[1].epoch, s.workers[1].known_epoch) == (2, 2)
    with pytest.raises(StaleEpoch, match="epoch 1, current 2"):
        H.step(s, H.Return(1, 1, 2, 1))


#: Each finite scope's fixpoint: (distinct states, diameter). A change to the spec's reachable states shows here.
_FIXPOINTS = {"hierarchy_one": (21076, 17), "hierarchy_two": (71102, 16)}


@pytest.mark.parametrize("name", sorted(_FIXPOINTS))
def test_each_finite_scope_is_explored_to_its_fixpoint_clean(name: str) -> None:
    from invariants.hierarchy_scope import COMPLETE_SCOPES, counting_cases
    scope, counts = counting_cases(hierarchy_model(scope=COMPLETE_SCOPES[name], name=name))
    r = explore(scope, max_depth=10**6, max_states=200_000)
    assert r.violated is None and r.complete and (r.states, r.diameter) == _FIXPOINTS[name], r.message
    cases = ["messages lost", "replies lost (journaled, unanswered)",
             "restarts with a worker out of sync (after a crash between journal and reply)"]
    if name == "hierarchy_one":  # messages not the worker's own call: only the one-worker scope offers them
        cases += ["messages from fenced identities", "messages from exited identities",
                  "messages from never-spawned identities", "messages from spawned-but-silent identities"]
    for case in cases:
        assert counts.get(case, 0) > 0, (case, counts)


def test_a_step_leaving_the_scope_is_cut_not_judged() -> None:
    # The first Hello makes worker 1 live at epoch 1, each reconnect adds one: a fourth Hello would take it to
    # epoch 4, past the one-worker scope's bound of 3, so that step is cut.
    from invariants.hierarchy_scope import OutOfScope
    m = hierarchy_model()
    s = m.initial
    for a in (H.Spawn(), H.Hello(1), H.Hello(1), H.Hello(1)):
        s = m.step(s, a)
    assert s.workers[1].epoch == 3
    with pytest.raises(OutOfScope, match="leaves the scope"):
        m.step(s, H.Hello(1))
