"""The hierarchy clauses' evidence (issue #26 item 4: the checkers checked by mutating `invariants/hierarchy.py`).

For each harm (a unit usable twice, quota taken from a worker that still uses it, a grant to a fenced worker, a
figure forgotten across a restart...) the whole outcome of every clause is asserted: exactly which clauses fail
and what each names, so a clause weakened, silenced or made to blame the wrong worker fails here. Each harm has
its near miss (the largest figure the clause must accept) and each clause's case is shown to occur with one
subject of it and not without (the verdict's coverage rule reads it). The guard-off harms replay the scripts
of `invariants.hierarchy_scope`; the rest are states and steps broken by hand. Deterministic, spec only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from invariants import hierarchy as IH
from invariants._violation import InvariantViolation
from invariants.hierarchy_scope import SCRIPT_CONFIG, SCRIPTS
from spec import hierarchy as H
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet

STATE = ("state_C10_hierarchy", "state_I11_hierarchy")
STEP = ("step_C10_hierarchy", "step_I11_hierarchy")
UP = (H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 4))  # worker 1 live, charged 4 of the 10 serving units


def run(*acts: Any, guards: GuardSet = ALL_ON) -> list[H.HierarchyState]:
    """The state before and after each action (serving 10, machine 16, aging cap 2); a refused one changes nothing."""
    s = H.new_hierarchy(*SCRIPT_CONFIG)
    out = [s]
    for a in acts:
        try:
            s, _ = H.step(s, a, guards)
        except GovernorError:
            pass
        out.append(s)
    return out


def last(*acts: Any) -> H.HierarchyState:
    return run(*acts)[-1]


def put(s: H.HierarchyState, wid: int, **changes: Any) -> H.HierarchyState:
    return attrs.evolve(s, workers=s.workers.set(wid, attrs.evolve(s.workers[wid], **changes)))


def problems(preds: tuple[str, ...], *args: Any) -> dict[str, str]:
    """Every failing clause of `preds` on `args`, with what it names."""
    return {name: p for pred in preds for name, _, p in IH.evaluate(pred, *args) if p is not None}


def held(preds: tuple[str, ...], *args: Any) -> set[str]:
    return {name for pred in preds for name, h, _ in IH.evaluate(pred, *args) if h}


# --- state harms ------------------------------------------------------------------------------------------

S4 = last(*UP)
SPAWNED = last(H.Spawn())
WAITING = attrs.evolve(S4, intents=S4.intents.set(1, H.Intent(1, 3, 0, 1, 0)))

#: name -> (the broken state, every clause it breaks with what each names)
STATE_HARMS: dict[str, tuple[H.HierarchyState, dict[str, str]]] = {
    "quota_past_serving": (attrs.evolve(put(S4, 1, quota=11, slice=11), free=-1), {
        "quota_within_serving": "quotas sum to 11 > serving quota 10",
        "slices_within_serving": "workers not yet exited hold slices summing to 11 > serving quota 10"}),
    "slices_past_serving": (put(last(*UP, H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 6)), 2, slice=7), {
        "slices_within_serving": "workers not yet exited hold slices summing to 11 > serving quota 10",
        "slice_charged": "worker 2: slice 7 > quota 6",
        "charge_has_owner": "worker 2: quota 6 but its own slice is 7",
        "units_not_doubled": "grantable 0 + per worker max(charged, usable) = 11 > serving quota 10 (1: 4/4, 2: 6/7)"}),
    "unit_lost": (attrs.evolve(S4, free=5), {"conservation": "free 5 + quotas 4 = 9 != serving quota 10"}),
    "unit_minted": (attrs.evolve(S4, free=7), {
        "conservation": "free 7 + quotas 4 = 11 != serving quota 10",
        "units_not_doubled": "grantable 7 + per worker max(charged, usable) = 11 > serving quota 10 (1: 4/4)"}),
    "slice_past_quota": (put(S4, 1, slice=5), {
        "slice_charged": "worker 1: slice 5 > quota 4",
        "charge_has_owner": "worker 1: quota 4 but its own slice is 5",
        "units_not_doubled": "grantable 6 + per worker max(charged, usable) = 11 > serving quota 10 (1: 4/5)"}),
    "quota_nobody_uses": (put(S4, 1, slice=3), {"charge_has_owner": "worker 1: quota 4 but its own slice is 3"}),
    "local_charge_past_slice": (put(S4, 1, committed=3, reserved=2), {
        "units_not_doubled": "grantable 6 + per worker max(charged, usable) = 11 > serving quota 10 (1: 4/5)",
        "within_slice": "worker 1: committed 3 + reserved 2 > slice 4"}),
    "unauthenticated_holds_quota": (attrs.evolve(put(SPAWNED, 1, quota=4, slice=4), free=6), {
        "unauthenticated_hold_nothing": "worker 1 never authenticated but holds quota 4"}),
    "unauthenticated_holds_a_slice": (put(SPAWNED, 1, slice=1), {
        "slice_charged": "worker 1: slice 1 > quota 0",
        "units_not_doubled": "grantable 10 + per worker max(charged, usable) = 11 > serving quota 10 (1: 0/1)",
        "unauthenticated_hold_nothing": "worker 1 never authenticated but holds quota 0"}),
    "exited_still_charged": (put(S4, 1, state=H.WorkerState.EXITED, proc=H.ProcState.DEAD), {
        "exited_hold_nothing": "worker 1 exited but is charged 4"}),
    "deferring_keeps_its_reservation": (put(WAITING, 1, reserved=1), {
        "deferring_holds_nothing": "worker 1 awaits quota but keeps reserved 1, slice 4 > committed 0"}),
    "deferring_keeps_uncommitted_quota": (WAITING, {
        "deferring_holds_nothing": "worker 1 awaits quota but keeps reserved 0, slice 4 > committed 0"}),
    "ticket_to_an_outsider": (attrs.evolve(S4, tickets=S4.tickets.set(1, H.Ticket("db", 1))), {
        "no_outside_target": "reclaim ticket 1 targets 'db', which is not a worker"}),
    "ticket_to_no_worker": (attrs.evolve(S4, tickets=S4.tickets.set(3, H.Ticket(2, 1))), {
        "no_outside_target": "reclaim ticket 3 targets 2, which is not a worker"}),
}


@pytest.mark.parametrize("name", sorted(STATE_HARMS))
def test_each_state_harm_breaks_exactly_its_clauses(name: str) -> None:
    s, expected = STATE_HARMS[name]
    assert problems(STATE, s) == expected
    assert set(expected) <= held(STATE, s)  # a harm is a case of the clause it breaks
    # the predicate fails on the first failing clause, naming it (checked through the whole conjunction)
    with pytest.raises(InvariantViolation) as e:
        IH.check_state(s)
    first = next(iter(expected))
    pred = "state_I11_hierarchy" if first == "no_outside_target" else "state_C10_hierarchy"
    assert e.value.clause == f"{pred}.{first}" and str(e.value).endswith(f"{first}: {expected[first]}")
    assert e.value.id == ("I11" if first == "no_outside_target" else "C10")


#: the largest figures each state clause must accept
STATE_NEAR_MISSES: dict[str, H.HierarchyState] = {
    "every_unit_delegated": last(*UP, H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 6)),
    "slice_full": last(*UP, H.Reserve(1, 2), H.Commit(1), H.Reserve(1, 2)),
    "exited_worker_keeps_its_slice": put(last(*UP, H.Kill(1), H.ObserveExit(1)), 1, slice=4, committed=4),
    "dead_worker_not_yet_seen_exiting": last(*UP, H.Reserve(1, 3), H.Kill(1)),
    "lost_reply_gives_up_its_slice": last(*UP, H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 6),
                                          H.Request(1, 1, 2, 3, fate=H.REPLY_LOST)),
    "deferred_after_committing": last(*UP, H.Reserve(1, 2), H.Commit(1), H.Spawn(), H.Hello(2),
                                      H.Request(2, 1, 1, 6), H.Request(1, 1, 2, 3)),
    "fenced_worker_keeps_its_charge": last(*UP, H.MissHeartbeat(1)),
    "reclaim_from_a_worker": last(*UP, H.Reclaim(1, 2)),
    "outside_program_uses_the_machine": last(*UP, H.Outside("db", 12)),
}


@pytest.mark.parametrize("name", sorted(STATE_NEAR_MISSES))
def test_each_state_near_miss_breaks_nothing(name: str) -> None:
    assert problems(STATE, STATE_NEAR_MISSES[name]) == {}


# --- step harms: the guard-off scripts, then steps broken by hand -------------------------------------------

#: guard -> every clause (state and step) the first harmful step of its script breaks, with what each names
GUARD_OFF: dict[str, dict[str, str]] = {
    "authenticated_only": {"charge_has_owner": "worker 1: quota 4 but its own slice is 0"},
    "budget_min_ceiling": {"reserve_within_budget": "worker 1 reserved 6 B with 4 B left of min(slice, OS ceiling)"},
    "charge_until_exit": {
        "no_return_before_exit": "worker 1 lost 6 units of quota (now 0) while its own slice still holds 6, and it "
                                 "has not exited",
        "slice_charged": "worker 1: slice 6 > quota 0", "charge_has_owner": "worker 1: quota 0 but its own slice is 6",
        "units_not_doubled": "grantable 10 + per worker max(charged, usable) = 16 > serving quota 10 (1: 0/6)"},
    "coordinator_aging": {"matured_not_overtaken": "intent 2 (submitted after matured intent 1) was granted ahead "
                                                   "of it"},
    "defer_returns_uncommitted": {"deferring_holds_nothing": "worker 1 awaits quota but keeps reserved 2, slice 6 > "
                                                             "committed 2"},
    "epoch_fencing": {
        "no_return_before_exit": "worker 1 lost 4 units of quota (now 2) while its own slice still holds 6, and it "
                                 "has not exited",
        "slice_charged": "worker 1: slice 6 > quota 2", "charge_has_owner": "worker 1: quota 2 but its own slice is 6",
        "units_not_doubled": "grantable 8 + per worker max(charged, usable) = 14 > serving quota 10 (1: 2/6)"},
    "live_workers_only": {"non_live_gains_nothing": "fenced worker 1 grew from quota 3/slice 3 to 5/3",
                          "charge_has_owner": "worker 1: quota 5 but its own slice is 3"},
    "lost_reply_assumes_worst": {
        "no_return_before_exit": "worker 1 lost 6 units of quota (now 0) while its own slice still holds 6, and it "
                                 "has not exited",
        "lost_reply_uses_nothing_uncharged": "worker 1 can use 6 units but is charged 0",
        "slice_charged": "worker 1: slice 6 > quota 0",
        "units_not_doubled": "grantable 6 + per worker max(charged, usable) = 16 > serving quota 10 (1: 0/6, 2: 4/4)",
        "deferring_holds_nothing": "worker 1 awaits quota but keeps reserved 2, slice 6 > committed 0"},
    "outside_is_ceiling": {"outside_only_lowers_ceiling": "outside program 'db' moved the coordinator's free balance "
                                                          "8 -> 5",
                           "conservation": "free 5 + quotas 2 = 7 != serving quota 10"},
    "participants_only": {"no_outside_target": "reclaim ticket 1 targets 'db', which is not a worker"},
    "return_once": {"conservation": "free 14 + quotas 0 = 14 != serving quota 10",
                    "units_not_doubled": "grantable 14 + per worker max(charged, usable) = 14 > serving quota 10 "
                                         "(1: 0/0)"},
    "sequence_check": {"charge_has_owner": "worker 1: quota 6 but its own slice is 3"},
}


def _first_harm(script: tuple[Any, ...], guards: GuardSet) -> dict[str, str]:
    states = run(*script, guards=guards)
    for i, act in enumerate(script):
        found = problems(STEP, states[i], act, states[i + 1]) | problems(STATE, states[i + 1])
        if found:
            return found
    return {}


def test_every_guard_script_is_listed() -> None:
    assert sorted(GUARD_OFF) == sorted(SCRIPTS)


@pytest.mark.parametrize("guard", sorted(GUARD_OFF))
def test_each_guard_off_breaks_exactly_its_clauses(guard: str) -> None:
    assert _first_harm(SCRIPTS[guard], GuardSet.without(guard)) == GUARD_OFF[guard]
    states = run(*SCRIPTS[guard], guards=GuardSet.without(guard))
    cased = set().union(*(held(STEP, states[i], a, states[i + 1]) | held(STATE, states[i + 1])
                          for i, a in enumerate(SCRIPTS[guard])))
    assert set(GUARD_OFF[guard]) <= cased
    assert _first_harm(SCRIPTS[guard], ALL_ON) == {}  # with the guard on, no step of the script harms


def _step(acts: tuple[Any, ...], change: Callable[[H.HierarchyState], H.HierarchyState] = lambda n: n,
          ) -> tuple[H.HierarchyState, Any, H.HierarchyState]:
    states = run(*acts)
    return states[-2], acts[-1], change(states[-1])


#: worker 1 commits 1 and reserves 1 of its 8; worker 2 (2 units) commits 1 and is killed; an outsider takes 12 of the
#: machine's 16: the OS has 16 - 12 - 2 = 2 left (a dead worker's bytes are the OS's again), so worker 1 may add 2
CEILING = (H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 8), H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 2), H.Reserve(2, 1),
           H.Commit(2), H.Kill(2), H.Reserve(1, 1), H.Commit(1), H.Reserve(1, 1), H.Outside("db", 12))


def _intent(s: H.HierarchyState, key: int = 1, **changes: Any) -> H.HierarchyState:
    return attrs.evolve(s, intents=s.intents.set(key, attrs.evolve(s.intents[key], **changes)))


#: workers 2 (3 B) and 3 (4 B) wait; worker 1 gives 3 back and the arbitration grants the first intent only
THREE_WAITING = (H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 8), H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 3),
                 H.Spawn(), H.Hello(3), H.Request(3, 1, 1, 4), H.Return(1, 1, 2, 3), H.Arbitrate())
TWO_WAITING = (H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 10), H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 3))

#: name -> ((prev, action, next), every step clause it breaks with what each names)
STEP_HARMS: dict[str, tuple[tuple[H.HierarchyState, Any, H.HierarchyState], dict[str, str]]] = {
    "stranger_appears_charged": (_step((*UP, H.Spawn()), lambda n: put(n, 2, quota=1)),
                                 {"non_live_gains_nothing": "worker 2 appeared holding quota 1/slice 0"}),
    "stranger_appears_with_a_slice": (_step((*UP, H.Spawn()), lambda n: put(n, 2, slice=1)),
                                      {"non_live_gains_nothing": "worker 2 appeared holding quota 0/slice 1"}),
    "spawned_worker_sliced": (_step((H.Spawn(), H.Spawn()), lambda n: put(n, 1, slice=2)),
                              {"non_live_gains_nothing": "spawned worker 1 grew from quota 0/slice 0 to 0/2"}),
    "exited_worker_charged": (_step((*UP, H.Kill(1), H.ObserveExit(1), H.Arbitrate()), lambda n: put(n, 1, quota=1)),
                              {"non_live_gains_nothing": "exited worker 1 grew from quota 0/slice 0 to 1/0"}),
    "intent_renumbered": (_step((*TWO_WAITING, H.Arbitrate()), lambda n: _intent(n, seq=7)),
        {"intent_keeps_place": "intent 1 changed from Intent(worker=2, nbytes=3, priority=0, seq=1, age=0) to "
                               "Intent(worker=2, nbytes=3, priority=0, seq=7, age=1)"}),
    "intent_grows": (_step((*TWO_WAITING, H.Arbitrate()), lambda n: _intent(n, nbytes=4)),
                {"intent_keeps_place": "intent 1 changed"}),
    "intent_moves_to_another_worker": (_step((*TWO_WAITING, H.Arbitrate()), lambda n: _intent(n, worker=1)),
                {"intent_keeps_place": "intent 1 changed"}),
    "intent_reprioritised": (_step((*TWO_WAITING, H.Arbitrate()), lambda n: _intent(n, priority=5)),
                {"intent_keeps_place": "intent 1 changed"}),
    "intent_ages_past_the_cap": (_step((*TWO_WAITING, H.Arbitrate()), lambda n: _intent(n, age=3)),
        {"intent_keeps_place": "intent 1 aged from 0 to 3 (bound 2)"}),
    "intent_grows_younger": (_step((*TWO_WAITING, H.Arbitrate(), H.Arbitrate()), lambda n: _intent(n, age=0)),
        {"intent_keeps_place": "intent 1 aged from 1 to 0 (bound 2)"}),
    "restart_moves_free": (_step((*UP, H.Restart()), lambda n: attrs.evolve(n, free=5)),
                           {"restart_loses_nothing": "the free balance moved across a restart: 6 -> 5"}),
    "restart_forgets_a_grant": (_step((*UP, H.Restart()), lambda n: put(n, 1, quota=3)),
                                {"no_return_before_exit": "worker 1 lost 1 units of quota (now 3) while its own slice "
                                                          "still holds 4",
                                 "restart_loses_nothing": "worker 1's journaled ('state', 'seq', 'quota', 'returned') "
                                                          "moved across a restart: (WorkerState.ACTIVE, 1, 4, 0) -> "
                                                          "(WorkerState.ACTIVE, 1, 3, 0)"}),
    "restart_forgets_a_return": (_step((*UP, H.Kill(1), H.ObserveExit(1), H.Restart()),
                                       lambda n: put(n, 1, returned=0)),
                                 {"restart_loses_nothing": "(WorkerState.EXITED, 1, 0, 4) -> (WorkerState.EXITED, 1, "
                                                           "0, 0)"}),
    "restart_rewinds_a_sequence": (_step((*UP, H.Restart()), lambda n: put(n, 1, seq=0)),
                                   {"restart_loses_nothing": "(WorkerState.ACTIVE, 1, 4, 0) -> (WorkerState.ACTIVE, 0, "
                                                             "4, 0)"}),
    "restart_revives_a_fenced_worker": (_step((*UP, H.MissHeartbeat(1), H.Restart()),
                                              lambda n: put(n, 1, state=H.WorkerState.ACTIVE)),
                                        {"restart_loses_nothing": "(WorkerState.FENCED, 1, 4, 0) -> "
                                                                  "(WorkerState.ACTIVE, 1, 4, 0)"}),
    "restart_rewinds_an_epoch": (_step((*UP, H.MissHeartbeat(1), H.Restart()), lambda n: put(n, 1, epoch=1)),
                                 {"restart_loses_nothing": "worker 1's epoch went back across a restart: 2 -> 1"}),
    "restart_forgets_an_intent": (_step((*TWO_WAITING, H.Restart()),
                                        lambda n: attrs.evolve(n, intents=n.intents.delete(1))),
                                  {"restart_loses_nothing": "an intent or a reclaim ticket was lost or changed across "
                                                            "a restart"}),
    "restart_forgets_a_ticket": (_step((*UP, H.Reclaim(1, 2), H.Restart()),
                                       lambda n: attrs.evolve(n, tickets=n.tickets.delete(1))),
                                 {"restart_loses_nothing": "an intent or a reclaim ticket was lost or changed"}),
    "outside_moves_a_quota": (_step((*UP, H.Outside("db", 2)), lambda n: put(n, 1, quota=3, slice=3)),
                              {"outside_only_lowers_ceiling": "outside program 'db' changed the quota of worker 1"}),
    "outside_moves_a_slice": (_step((*UP, H.Outside("db", 2)), lambda n: put(n, 1, slice=3)),
                              {"outside_only_lowers_ceiling": "outside program 'db' changed the quota of worker 1"}),
    "outside_moves_the_ceiling_too_far": (_step((*UP, H.Outside("db", 2)),
                                                lambda n: attrs.evolve(n, outside=n.outside.set("db", 3))),
                                          {"outside_only_lowers_ceiling": "OS ceiling moved by 3, not 2"}),
    "reserve_past_the_os_ceiling": ((lambda st: (st[-2], H.Reserve(1, 3), st[-1]))(
        run(*CEILING, H.Reserve(1, 3), guards=GuardSet.without("budget_min_ceiling"))),
        {"reserve_within_budget": "worker 1 reserved 3 B with 2 B left of min(slice, OS ceiling)"}),
    # worker 1 holds 1 committed + 1 reserved of its 4: 2 left; its reservation of 2 is booked as 3
    "reserve_past_a_partly_used_slice": (_step((*UP, H.Reserve(1, 1), H.Commit(1), H.Reserve(1, 1), H.Reserve(1, 2)),
                                               lambda n: put(n, 1, reserved=4)),
                                         {"reserve_within_budget": "worker 1 reserved 3 B with 2 B left of min(slice, "
                                                                   "OS ceiling)"}),
    # an outsider holds the whole machine: the OS has nothing left, yet the worker reserves within its slice
    "reserve_with_the_machine_full": ((lambda st: (st[-2], H.Reserve(1, 1), st[-1]))(
        run(*UP, H.Outside("db", 16), H.Reserve(1, 1), guards=GuardSet.without("budget_min_ceiling"))),
        {"reserve_within_budget": "worker 1 reserved 1 B with 0 B left of min(slice, OS ceiling)"}),
    "quota_taken_from_the_second_worker": (_step((*UP, H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 3), H.Arbitrate()),
                                                 lambda n: attrs.evolve(put(n, 2, quota=1), free=5)),
                                           {"no_return_before_exit": "worker 2 lost 2 units of quota (now 1) while its "
                                                                     "own slice still holds 3, and it has not exited"}),
    "later_intent_changed_after_a_grant": (_step(THREE_WAITING, lambda n: _intent(n, key=2, nbytes=5)),
                                           {"intent_keeps_place": "intent 2 changed"}),
    "reserve_past_the_slice": (_step((*UP, H.Reserve(1, 3)), lambda n: put(n, 1, reserved=5)),
                               {"reserve_within_budget": "worker 1 reserved 5 B with 4 B left of min(slice, OS "
                                                         "ceiling)"}),
    "quota_taken_from_a_live_user": (_step((*UP, H.Arbitrate()), lambda n: attrs.evolve(put(n, 1, quota=1), free=9)),
                                     {"no_return_before_exit": "worker 1 lost 3 units of quota (now 1) while its own "
                                                               "slice still holds 4, and it has not exited"}),
    "quota_taken_from_a_dead_worker_before_its_exit": (
        _step((*UP, H.Kill(1), H.Arbitrate()), lambda n: attrs.evolve(put(n, 1, quota=0), free=10)),
        {"no_return_before_exit": "worker 1 lost 4 units of quota (now 0) while its own slice still holds 4, and it "
                                  "has not exited"}),
}


@pytest.mark.parametrize("name", sorted(STEP_HARMS))
def test_each_step_harm_breaks_exactly_its_clauses(name: str) -> None:
    (p, act, n), expected = STEP_HARMS[name]
    found = problems(STEP, p, act, n)
    assert set(found) == set(expected)
    assert all(found[k].startswith(expected[k]) or found[k].endswith(expected[k]) for k in expected), found
    assert set(found) <= held(STEP, p, act, n)  # a harm is a case of the clause it breaks
    first = next(iter(found))
    pred = "step_I11_hierarchy" if first == "outside_only_lowers_ceiling" else "step_C10_hierarchy"
    with pytest.raises(InvariantViolation) as e:
        IH.check_step(p, act, n)
    assert e.value.clause == f"{pred}.{first}" and e.value.id == pred.split("_")[1]


#: steps each step clause must accept
STEP_NEAR_MISSES: dict[str, tuple[Any, ...]] = {
    "worker_returns_its_own_quota": (*UP, H.Return(1, 1, 2, 3)),
    "exit_observed_credits_the_quota": (*UP, H.Kill(1), H.ObserveExit(1)),
    "reserve_exactly_the_budget": (*UP, H.Outside("db", 12), H.Reserve(1, 4)),
    "reserve_exactly_the_slice": (*UP, H.Reserve(1, 4)),
    "reserve_exactly_the_os_ceiling": (*CEILING, H.Reserve(1, 2)),
    "intent_ages_to_the_cap": (*TWO_WAITING, H.Arbitrate(), H.Arbitrate()),
    "matured_intent_granted_first": SCRIPTS["coordinator_aging"],
    "lost_reply_assumes_the_worst": (*UP, H.Reserve(1, 2), H.Spawn(), H.Hello(2), H.Request(2, 1, 1, 4),
                                     H.Request(1, 1, 2, 3, fate=H.REPLY_LOST)),
    "lost_message_assumes_the_worst": (*UP, H.Return(1, 1, 2, 2, fate=H.MESSAGE_LOST)),
    "restart_keeps_everything": (*TWO_WAITING, H.Reclaim(1, 2), H.MissHeartbeat(2), H.Restart()),
    "outside_lowers_only_the_ceiling": (*UP, H.Reserve(1, 2), H.Outside("db", 3)),
    "outside_gives_back": (*UP, H.Outside("db", 3), H.Outside("db", -2)),
    "hello_resyncs_a_worker": (*UP, H.Restart(), H.Hello(1)),
}


@pytest.mark.parametrize("name", sorted(STEP_NEAR_MISSES))
def test_each_step_near_miss_breaks_nothing(name: str) -> None:
    acts = STEP_NEAR_MISSES[name]
    states = run(*acts)
    for i, act in enumerate(acts):
        assert problems(STEP, states[i], act, states[i + 1]) == {}, (i, act)
        assert problems(STATE, states[i + 1]) == {}, (i, act)
    assert states[-1] != states[-2]  # the last step was accepted and did something


def test_a_restart_that_forgets_a_worker_is_named() -> None:
    p, act, n = _step((*UP, H.Restart()), lambda n: attrs.evolve(n, workers=n.workers.delete(1)))
    assert IH.restart_loses_nothing(p, act, n) == (
        True, "worker 1's journaled ('state', 'seq', 'quota', 'returned') moved across a restart: "
              "(WorkerState.ACTIVE, 1, 4, 0) -> None")


# --- case accounting: a clause's case occurs with one subject of it, and not without ----------------------

FRESH = last()
KILLED = last(*UP, H.Kill(1))

#: clause -> (a state with one subject of the clause, one without)
STATE_WITNESS: dict[str, tuple[H.HierarchyState, H.HierarchyState]] = {
    "quota_within_serving": (S4, FRESH),
    "slices_within_serving": (S4, STATE_NEAR_MISSES["exited_worker_keeps_its_slice"]),
    "conservation": (last(*UP, H.Kill(1), H.ObserveExit(1)), SPAWNED),  # a returned credit is held too
    "slice_charged": (S4, STATE_NEAR_MISSES["exited_worker_keeps_its_slice"]),
    "charge_has_owner": (S4, KILLED),
    "units_not_doubled": (S4, KILLED),
    "within_slice": (last(*UP, H.Reserve(1, 1)), S4),
    "unauthenticated_hold_nothing": (SPAWNED, S4),
    "exited_hold_nothing": (last(*UP, H.Kill(1), H.ObserveExit(1)), KILLED),
    "deferring_holds_nothing": (WAITING, S4),
    "no_outside_target": (last(*UP, H.Reclaim(1, 1)), S4),
}


@pytest.mark.parametrize("name", sorted(STATE_WITNESS))
def test_one_subject_makes_the_state_case_occur(name: str) -> None:
    with_, without = STATE_WITNESS[name]
    assert name in held(STATE, with_) and name not in held(STATE, without)


def test_nothing_to_harm_counts_no_case() -> None:
    assert held(STATE, FRESH) == set()


def test_one_unit_delegated_is_a_case() -> None:
    one = last(H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 1))
    assert {"quota_within_serving", "slices_within_serving", "conservation", "slice_charged"} <= held(STATE, one)


#: clause -> (a script whose last step is a case of the clause, one whose last step is not)
STEP_WITNESS: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
    "no_return_before_exit": ((*UP, H.Return(1, 1, 2, 1)), (*UP, H.Reserve(1, 1))),
    "non_live_gains_nothing": ((*UP, H.Spawn()), (*UP, H.Reserve(1, 1))),
    "reserve_within_budget": ((*UP, H.Reserve(1, 1)), (*UP, H.Reserve(1, 1), H.Commit(1))),
    "intent_keeps_place": ((*TWO_WAITING, H.Arbitrate()), (*TWO_WAITING, H.Return(1, 1, 2, 3), H.Arbitrate())),
    "matured_not_overtaken": ((*TWO_WAITING, H.Arbitrate(), H.Arbitrate()), (*TWO_WAITING, H.Arbitrate())),
    "lost_reply_uses_nothing_uncharged": ((*UP, H.Return(1, 1, 2, 1, fate=H.REPLY_LOST)), (*UP, H.Return(1, 1, 2, 1))),
    "restart_loses_nothing": ((*UP, H.Restart()), (*UP, H.Arbitrate())),
    "outside_only_lowers_ceiling": ((*UP, H.Outside("db", 1)), (*UP, H.Reserve(1, 1))),
}


@pytest.mark.parametrize("name", sorted(STEP_WITNESS))
def test_one_subject_makes_the_step_case_occur(name: str) -> None:
    def seen(acts: tuple[Any, ...]) -> set[str]:
        p, act, n = _step(acts)
        return held(STEP, p, act, n)

    with_, without = STEP_WITNESS[name]
    assert name in seen(with_) and name not in seen(without)


def test_the_registry_counts_each_clause_case() -> None:
    from invariants.clauses import Coverage, recording

    cov = Coverage()
    with recording(cov):
        IH.check_state(S4)
        IH.check_state(FRESH)
    assert cov.of("state_C10_hierarchy.conservation") == (2, 1)
    assert cov.of("state_C10_hierarchy.within_slice") == (2, 0)
    assert cov.of("state_I11_hierarchy.no_outside_target") == (2, 0)
    with recording(cov):
        IH.check_step(*_step((*UP, H.Outside("db", 1))))
    assert cov.of("step_I11_hierarchy.outside_only_lowers_ceiling") == (1, 1)
    assert cov.of("step_C10_hierarchy.restart_loses_nothing") == (1, 0)


def test_predicates_ignore_what_is_not_a_hierarchy_state() -> None:
    for p in (IH.state_C10_hierarchy, IH.state_I11_hierarchy):
        p(object())
    for q in (IH.step_C10_hierarchy, IH.step_I11_hierarchy):
        q(object(), H.Arbitrate(), object())


def test_exit_credits_the_quota_whatever_the_dead_process_last_held() -> None:
    # the dead worker's own view still shows its slice: the credit is still its exit's, no return before exit
    p, act, n = _step((*UP, H.Kill(1), H.ObserveExit(1)), lambda n: put(n, 1, slice=4))
    assert problems(STEP, p, act, n) == {} and "no_return_before_exit" in held(STEP, p, act, n)


def test_balanced_local_charge_and_a_fenced_worker_are_cases() -> None:
    assert "within_slice" in held(STATE, last(*UP, H.Reserve(1, 1), H.Commit(1), H.Reserve(1, 1)))  # 1 + 1
    assert "non_live_gains_nothing" in held(STEP, *_step((*UP, H.MissHeartbeat(1), H.Arbitrate())))


def test_a_plain_reservation_is_a_case_of_the_budget_clause_only() -> None:
    assert held(STEP, *_step((*UP, H.Reserve(1, 1)))) == {"reserve_within_budget"}
