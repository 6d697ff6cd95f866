"""The composed manager's view clauses (`invariants.manager_views`: C4, C6, I9) judged exactly.

States and steps built through the spec (the views of `test_mutkill_manager_views.SETUP`), then broken by hand in
one way: the whole message each clause fails with (the view, the executions, the generations), and each case
counted exactly when its situation occurs (verify's coverage rule R1). Written from the mutation survivors of
`invariants/manager_views.py`.
"""

from __future__ import annotations

from attrs import evolve
from manager_harness import judged
from test_mutkill_manager_views import SETUP, _run

from invariants.manager_views import state_C4_views, state_C6_views, step_C6_views, step_I9_views
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.types import AllocState

C4 = "state_C4_views.view_over_reserved_bytes"
CURRENT, PRIVATE, RUNNING = ("state_C6_views." + c for c in ("no_stale_view_read", "provisional_view_private",
                                                             "users_are_running"))
KEPT, FRESH = "step_C6_views.view_bytes_kept", "step_C6_views.view_names_fresh"
DROP, FORWARD, FENCE = ("step_I9_views." + c for c in ("drop_fences_users", "generation_never_back",
                                                        "remap_fences_users"))


_judge = judged


def _users(m: M.Manager, vid: int, users: tuple[tuple[int, int], ...]) -> M.Manager:
    return evolve(m, views=m.views.set(vid, evolve(m.views[vid], users=users)))


def test_state_cases_are_counted_only_where_views_are_bound_or_open() -> None:
    empty = M.initial()
    assert _judge(state_C4_views, empty) == (None, {C4: (1, 0)})
    assert _judge(state_C6_views, empty) == (None, {CURRENT: (1, 0), PRIVATE: (1, 0), RUNNING: (1, 0)})
    m = _run(SETUP)  # view 1 (committed transaction 1's) bound by transaction 2; views 2 and 3 open, unbound
    assert _judge(state_C4_views, m) == (None, {C4: (1, 1)})
    assert _judge(state_C6_views, m) == (None, {CURRENT: (1, 1), PRIVATE: (1, 0), RUNNING: (1, 1)})
    own = MG.step(m, M.ExecuteView(4, 3, 1))[0]  # transaction 4 reads its own open view: the private case
    assert _judge(state_C6_views, own) == (None, {CURRENT: (1, 1), PRIVATE: (1, 1), RUNNING: (1, 1)})


def test_state_messages_name_the_view_and_the_executions() -> None:
    m = _run(SETUP)
    assert _judge(state_C6_views, _users(m, 1, ((9, 1),)))[0] == (
        "C6: view 1 is bound to execution(s) [9], whose transactions have ended")
    assert _judge(state_C6_views, _users(m, 1, ((2, 0),)))[0] == (
        "C6: view 1 is at generation 1; execution(s) read it at [(2, 0)]")
    assert _judge(state_C6_views, _users(m, 3, ((2, 1),)))[0] == (
        "C6: execution(s) [2] read view 3, the provisional view of open transaction 4")


def test_a_published_view_is_counted_fresh_and_a_reused_name_is_named() -> None:
    m = _run(SETUP[:-1])  # before transaction 4 publishes its view
    act = M.PublishView(4)
    after, vid = MG.step(m, act)
    assert _judge(step_C6_views, m, act, after, vid)[1][FRESH] == (1, 1)
    plain = A.RegisterHolder("late")
    assert _judge(step_C6_views, m, plain, *MG.step(m, plain))[1][FRESH] == (1, 0)
    reused = evolve(after, next_view=m.next_view)  # the counter did not move past the new name
    assert _judge(step_C6_views, m, act, reused, vid)[0] == (
        f"C6: {act!r}: view {vid} of transaction 4 was issued with next view id {m.next_view} -> {m.next_view}")


def test_bytes_under_a_mapped_view_are_kept_or_named() -> None:
    m = _run(SETUP)  # view 1 is over lease 1, charged
    plain = A.RegisterHolder("late")
    assert _judge(step_C6_views, m, plain, *MG.step(m, plain))[1][KEPT] == (1, 1)
    assert _judge(step_C6_views, M.initial(), plain, *MG.step(M.initial(), plain))[1][KEPT] == (1, 0)
    alloc = m.views[1].allocation
    gone = evolve(m, ledger=evolve(m.ledger, allocations=m.ledger.allocations.delete(alloc)))
    assert _judge(step_C6_views, m, plain, gone, None)[0] == (
        f"C6: {plain!r}: allocation {alloc} under mapped view 1 is gone: its readers read credited bytes")
    r = m.ledger.allocations[alloc]
    quarantined = evolve(m, ledger=evolve(m.ledger, allocations=m.ledger.allocations.set(
        alloc, evolve(r, state=AllocState.QUARANTINED))))
    assert _judge(step_C6_views, m, plain, quarantined, None)[0] == (
        f"C6: {plain!r}: allocation {alloc} under mapped view 1 is {AllocState.QUARANTINED.value}: its readers "
        "read credited bytes")


def test_remaps_and_drops_are_counted_and_their_harms_named() -> None:
    idle = _run((*SETUP, M.CommitTx(2)))  # view 1 no longer bound
    act = M.RemapView(1)
    after, gen = MG.step(idle, act)
    assert _judge(step_I9_views, idle, act, after, gen) == (None, {FENCE: (1, 1), FORWARD: (1, 1), DROP: (1, 0)})
    plain = A.RegisterHolder("late")
    assert _judge(step_I9_views, idle, plain, *MG.step(idle, plain)) == (
        None, {FENCE: (1, 0), FORWARD: (1, 0), DROP: (1, 0)})
    back = _users(evolve(after, views=after.views.set(1, evolve(after.views[1], generation=0))), 1, ())
    assert _judge(step_I9_views, idle, act, back, gen)[0] == (
        f"I9: {act!r}: view 1's generation went back from 1 to 0")
    m = _run(SETUP)  # view 1 bound by transaction 2 at generation 1: remapped under it by hand
    under = evolve(m, views=m.views.set(1, evolve(m.views[1], generation=2)))
    assert _judge(step_I9_views, m, act, under, 2)[0] == (
        f"I9: {act!r}: view 1 moved from generation 1 to 2 under execution(s) [2]")
    drop = M.DropView(1)
    dropped = MG.step(idle, drop)[0]
    assert _judge(step_I9_views, idle, drop, dropped, None) == (None, {FENCE: (1, 0), FORWARD: (1, 0), DROP: (1, 1)})
    torn = evolve(m, views=m.views.delete(1))  # dropped while transaction 2 still reads it
    assert _judge(step_I9_views, m, drop, torn, None)[0] == (
        f"I9: {drop!r}: view 1 was dropped under execution(s) [2], still open")


def test_a_view_of_a_transaction_missing_a_need_is_named() -> None:
    m = _run(SETUP)  # transaction 3 is planned and holds none of its one need; a view of it by hand
    v = evolve(m.views[3], id=9, tx=3, allocation=None, users=())
    assert _judge(state_C4_views, evolve(m, views=m.views.set(9, v)))[0] == (
        "C4: view 9 of transaction 3 exists with 0 of its 1 needs reserved")
