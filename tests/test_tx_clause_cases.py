"""The transaction clauses' evidence: a case is counted exactly where its harm could occur, and a failure
names what was harmed (issue #26 item 4: the checkers checked by mutating `invariants/transactions.py`).

A clause's case count is what the verdict's coverage rule reads: counted on a state that cannot show the
harm, it inflates coverage (an ID looks exercised by states that could never have failed it); never
counted, a covered ID looks unexercised. So each clause's case is shown to occur with one subject of it
(one transaction holding, one bound view...), to stay absent without one, and to survive other subjects
around it. A failure message is what a counterexample's reader sees: it must name the transaction, view,
authority or bytes involved. Deterministic scripts on `spec.transactions` with every guard on, and states
broken by hand where no guard lets the harm happen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, recording
from invariants.transactions import check_all, check_step, wait_for_cycle
from spec import transactions as S
from spec import transactions_actions as T
from spec.guards import ALL_ON
from spec.records import evolve
from spec.transactions_lifecycle import BundleState, ManagerState, TxPhase, ViewKind, ViewState
from spec.types import ContextState

C = ViewKind.CONTIGUOUS
SETUP = (T.AddAuthority("dev", 2), T.AddAuthority("host", 2))  # authorities 1 and 2, 2 B each


def run(*acts: Any) -> list[S.TxState]:
    """The state after SETUP, then after each action (every guard on, every check passing)."""
    s = S.TX_EMPTY
    for a in SETUP:
        s = S.step(s, a)[0]
    out = [s]
    for a in acts:
        nxt = S.step(s, a, ALL_ON)[0]
        check_step(s, a, nxt)
        check_all(nxt)
        out.append(s := nxt)
    return out


def _held(check: Callable[..., None], *args: Any) -> set[str]:
    cov = Coverage()
    with recording(cov):
        check(*args)
    return {k for k, (_, h) in cov.counts.items() if h}


def state_cases(s: S.TxState) -> set[str]:
    return _held(check_all, s)


def step_cases(p: S.TxState, a: Any, n: S.TxState) -> set[str]:
    return _held(check_step, p, a, n)


PLAN1 = T.Plan(((1, 1),), 0, C)
EXEC1 = (PLAN1, T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 1))  # transaction 1 executes on its view 1
# Transaction 2 misses authority 1 (transaction 1 holds both bytes): it aborts and leaves intent 1.
INTENT = (T.Plan(((1, 2),), 0, C), T.Plan(((1, 2),), 0, C), T.Reserve(1, 1), T.Reserve(2, 1))

# clause -> a script whose last action brings in exactly one subject of the clause
STATE_WITNESS: dict[str, tuple[Any, ...]] = {
    "state_C3.lost_context_gets_no_work": (T.LoseDevice(2),),
    "state_C3.stranded_only_while_lost": (T.LoseDevice(2),),  # lost, with nothing stranded
    "state_C4.held_within_needs": (PLAN1, T.Reserve(1, 1)),
    "state_C4.planned_holds_nothing": (PLAN1,),
    "state_C4.runs_on_reserved_bytes": EXEC1,
    "state_C4.one_identity_per_request": (PLAN1, T.Plan(((2, 1),), 0, C)),
    # 1 holds authority 1 and needs 2 B of authority 2, where 2 already holds 1 of its 2 B
    "state_C4.no_circular_holding": (T.Plan(((1, 2), (2, 2)), 0, C), T.Plan(((2, 1),), 0, C), T.Reserve(2, 2),
                                     T.Reserve(1, 1)),
    "state_C6.bound_view_live": EXEC1,
    "state_C6.no_stale_view_read": EXEC1,
    "state_C6.users_are_executions": EXEC1,
    "state_C6.provisional_view_private": EXEC1,
    "state_C6.view_owned_and_issued": EXEC1[:3],
    "state_I10.bundle_parts_agree": (T.OpenBundle(),),
}


@pytest.mark.parametrize("key", sorted(STATE_WITNESS))
def test_one_subject_makes_the_state_case_occur(key: str) -> None:
    *_, before, after = run(*STATE_WITNESS[key])
    assert key not in state_cases(before) and key in state_cases(after)


def test_nothing_to_harm_counts_no_case_but_the_ledgers() -> None:
    assert state_cases(S.TX_EMPTY) == set()
    assert state_cases(run()[0]) == {"state_I5.ledger_matches_holdings"}  # two authorities, nothing else


def test_cases_survive_other_subjects_around_them() -> None:
    # a later transaction that holds nothing does not hide an earlier one that holds
    assert "state_C4.held_within_needs" in state_cases(run(PLAN1, T.Reserve(1, 1), T.Plan(((2, 1),), 0, C))[-1])
    # a later view that nobody uses does not hide an earlier one in use
    s = run(*EXEC1, T.Plan(((2, 1),), 0, C), T.Reserve(2, 2), T.Publish(2))[-1]
    assert "state_C6.provisional_view_private" in state_cases(s)
    # identities: an open transaction and an intent are two; a committed one and an intent are one
    states = run(*INTENT, T.Publish(1), T.Execute(1, 1, 1), T.Commit(1))
    assert states[4].intents and "state_C4.one_identity_per_request" in state_cases(states[4])
    assert "state_C4.one_identity_per_request" not in state_cases(states[-1])
    assert "state_C4.one_identity_per_request" not in state_cases(run(PLAN1)[-1])


WAIT = "state_C4.no_circular_holding"


def test_only_a_holder_whose_next_need_does_not_fit_is_a_wait() -> None:
    # holds 1, its next need fits: no wait
    assert WAIT not in state_cases(run(T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1))[-1])
    # its next need fits exactly (1 + 1 of 2 B): no wait
    exact = run(T.Plan(((1, 1), (2, 1)), 0, C), T.Plan(((2, 1),), 0, C), T.Reserve(2, 2), T.Reserve(1, 1))[-1]
    assert WAIT not in state_cases(exact)
    # does not fit but holds nothing: blocks no one, no wait
    assert WAIT not in state_cases(run(T.Plan(((2, 2),), 0, C), T.Reserve(1, 2), T.Plan(((2, 1),), 0, C))[-1])
    # a waiting holder after a transaction that holds all it needs is still seen
    assert WAIT in state_cases(run(T.Plan(((2, 2),), 0, C), T.Reserve(1, 2), T.Plan(((1, 1), (2, 1)), 0, C),
                                   T.Reserve(2, 1))[-1])


# step clause(s) -> a script whose last step brings in the clause's case
STEP_WITNESS: dict[tuple[str, ...], tuple[Any, ...]] = {
    ("step_C3.loss_refunds_nothing",): (T.LoseDevice(2),),
    ("step_C3.termination_refunds_once",): (T.LoseDevice(2), T.ConfirmTermination(2)),
    ("step_C4.retry_keeps_identity",): (*INTENT, T.Plan(((1, 2),), 0, C, None, 1)),
    ("step_I5.abort_restores_ledgers", "step_I5.abort_leaves_bundles"): (PLAN1, T.Abort(1)),
    ("step_I5.corrupt_ledger_charges_nothing",): (T.CorruptLedger(), T.OpenBundle()),
    ("step_I5.mismatch_poisons_one_bundle",): (T.OpenBundle(), T.ReportMismatch(1)),
    ("step_I9.remap_fences_users", "step_I9.generation_never_back"): (*EXEC1[:3], T.Remap(1)),
    ("step_I10.only_commit_moves_bundle", "step_I10.bundle_moves_as_unit"):
        (T.OpenBundle(), T.Plan(((1, 1),), 0, C, 1), T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 1), T.Commit(1)),
}


@pytest.mark.parametrize("keys", sorted(STEP_WITNESS), ids=lambda k: k[0])
def test_the_step_that_could_harm_counts_the_step_case(keys: tuple[str, ...]) -> None:
    acts = STEP_WITNESS[keys]
    states = run(*acts)
    last = step_cases(states[-2], acts[-1], states[-1])
    earlier = set().union(*(step_cases(states[i], acts[i], states[i + 1]) for i in range(len(acts) - 1)))
    for key in keys:
        assert key in last and key not in earlier, key


def test_a_repeated_confirmation_refunds_nothing_and_passes() -> None:
    states = run(T.Plan(((2, 1),), 0, C), T.Reserve(1, 2), T.LoseDevice(2), T.ConfirmTermination(2),
                 T.ConfirmTermination(2))
    assert states[-1] == states[-2] and states[-2].authorities[2].used == 0


def test_a_user_that_observes_the_new_generation_reads_nothing_stale() -> None:
    p = run(*EXEC1)[-1]
    n = evolve(p, views=p.views.set(1, evolve(p.views[1], generation=2)),
               txs=p.txs.set(1, evolve(p.txs[1], bound=((1, 2),))))
    check_step(p, T.Remap(1), n)  # a fenced user: it was moved to generation 2 with the view


def test_two_holders_waiting_on_a_third_that_can_finish_are_no_circle() -> None:
    s = run(T.Plan(((1, 1),), 0, C), T.Plan(((2, 1),), 0, C))[-1]
    s = evolve(s, authorities=s.authorities.set(3, evolve(s.authorities[1], id=3, name="x", capacity=1)))
    # 3 holds all of authority 3; 1 and 2 each hold one byte elsewhere and need authority 3
    txs = {1: evolve(s.txs[1], needs=((1, 1), (3, 1)), held=((1, 1),), phase=TxPhase.RESERVING),
           2: evolve(s.txs[2], needs=((2, 1), (3, 1)), held=((2, 1),), phase=TxPhase.RESERVING),
           3: evolve(s.txs[1], id=3, seq=3, needs=((3, 1),), held=((3, 1),), phase=TxPhase.RESERVED)}
    auths = {a: evolve(x, used=1) for a, x in s.authorities.items()}
    s = evolve(s, txs=s.txs.__class__(txs), authorities=s.authorities.__class__(auths), next_tx=4, next_seq=4)
    assert wait_for_cycle(s) is None
    check_all(s)


# --- failures name what was harmed ---------------------------------------------------------------------------


def _state(s: S.TxState, **changes: Any) -> S.TxState:
    return evolve(s, **changes)


def _tx(s: S.TxState, tid: int, **changes: Any) -> S.TxState:
    return evolve(s, txs=s.txs.set(tid, evolve(s.txs[tid], **changes)))


def _auth(s: S.TxState, aid: int, **changes: Any) -> S.TxState:
    return evolve(s, authorities=s.authorities.set(aid, evolve(s.authorities[aid], **changes)))


def _view(s: S.TxState, vid: int, **changes: Any) -> S.TxState:
    return evolve(s, views=s.views.set(vid, evolve(s.views[vid], **changes)))


PLANNED = run(PLAN1)[-1]
RUNNING = run(*EXEC1)[-1]
TWO = run(PLAN1, T.Plan(((2, 1),), 0, C))[-1]
WITH_INTENT = run(*INTENT)[-1]
BUNDLE = run(T.OpenBundle())[-1]
SHARED = run(*EXEC1[:3], T.Plan(((2, 1),), 0, C), T.Reserve(2, 2), T.Publish(2))[-1]  # 1 and 2 published

# name -> (broken state, the clause that must fail, what its message must name)
BROKEN_STATES: dict[str, tuple[S.TxState, str, tuple[str, ...]]] = {
    "open_tx_needs_lost": (_auth(PLANNED, 1, context=ContextState.LOST), "state_C3.lost_context_gets_no_work",
                           ("transaction 1", "lost", "authority 1")),
    "view_on_lost": (_auth(_tx(RUNNING, 1, held=(), needs=((2, 1),), bound=(), phase=TxPhase.PUBLISHED), 1,
                           context=ContextState.LOST, used=0),
                     "state_C3.lost_context_gets_no_work", ("view 1", "lost", "authority 1")),
    "stranded_active": (_auth(run()[0], 2, used=1, stranded=1), "state_C3.stranded_only_while_lost",
                        ("authority 2", "1 B")),
    "stranded_terminated": (_auth(run()[0], 2, used=1, stranded=1, context=ContextState.TERMINATED),
                            "state_C3.stranded_only_while_lost", ("terminated authority 2", "1 B")),
    "held_undeclared": (_auth(_tx(PLANNED, 1, held=((1, 2),), phase=TxPhase.RESERVED), 1, used=2),
                        "state_C4.held_within_needs", ("transaction 1", "((1, 2),)", "((1, 1),)")),
    "held_twice": (_auth(_tx(PLANNED, 1, held=((1, 1), (1, 1)), phase=TxPhase.RESERVED), 1, used=2),
                   "state_C4.held_within_needs", ("transaction 1",)),
    "planned_holds": (_auth(_tx(PLANNED, 1, held=((1, 1),)), 1, used=1), "state_C4.planned_holds_nothing",
                      ("planned transaction 1", "((1, 1),)")),
    "runs_unreserved": (_auth(_view(_tx(RUNNING, 1, held=()), 1), 1, used=0), "state_C4.runs_on_reserved_bytes",
                        ("transaction 1", "executing", "[1]")),
    "committed_missing_active_part": (
        _auth(_tx(RUNNING, 1, held=(), phase=TxPhase.COMMITTED, bound=()), 1, used=0),
        "state_C4.runs_on_reserved_bytes", ("transaction 1", "committed", "[1]")),
    "two_open_share_seq": (_tx(TWO, 2, seq=1), "state_C4.one_identity_per_request",
                           ("transaction 2", "sequence 1", "transaction 1")),
    "intent_shares_seq": (evolve(WITH_INTENT, intents=WITH_INTENT.intents.set(1, evolve(WITH_INTENT.intents[1],
                                                                                          seq=1))),
                          "state_C4.one_identity_per_request", ("intent 1", "sequence 1", "transaction 1")),
    "two_intents_share_seq": (evolve(WITH_INTENT, intents=WITH_INTENT.intents.set(2, evolve(WITH_INTENT.intents[1],
                                                                                             id=2)), next_intent=3),
                              "state_C4.one_identity_per_request", ("intent 2", "sequence 2", "intent 1")),
    "bound_view_gone": (_state(RUNNING, views=RUNNING.views.delete(1)), "state_C6.bound_view_live",
                        ("transaction 1", "view 1")),
    "bound_view_invalid": (_view(RUNNING, 1, state=ViewState.INVALID), "state_C6.bound_view_live",
                           ("transaction 1", "view 1")),
    "stale_read": (_tx(RUNNING, 1, bound=((1, 2),)), "state_C6.no_stale_view_read",
                   ("transaction 1", "view 1", "generation 2", "generation 1")),
    "user_unlisted": (_view(RUNNING, 1, users=()), "state_C6.users_are_executions", ("view 1", "user 1")),
    "view_outlives": (_state(_view(RUNNING, 1, users=(), allocation=7), txs=RUNNING.txs.delete(1),
                             authorities=RUNNING.authorities.set(1, evolve(RUNNING.authorities[1], used=0))),
                      "state_C6.bound_view_live", ("view 1", "allocation 7")),
    "view_id_not_issued": (_state(RUNNING, views=RUNNING.views.delete(1).set(2, evolve(RUNNING.views[1], id=2,
                                                                                           users=())),
                                  txs=RUNNING.txs.set(1, evolve(RUNNING.txs[1], phase=TxPhase.PUBLISHED,
                                                                bound=()))),
                           "state_C6.view_owned_and_issued", ("view 2",)),
    "user_not_executing": (_tx(RUNNING, 1, phase=TxPhase.PUBLISHED), "state_C6.users_are_executions",
                           ("view 1", "user 1")),
    "user_not_bound": (_tx(RUNNING, 1, bound=()), "state_C6.users_are_executions", ("view 1", "user 1")),
    "uses_provisional_view": (_view(_tx(SHARED, 2, phase=TxPhase.EXECUTING, bound=((1, 1),)), 1, users=(2,)),
                              "state_C6.provisional_view_private", ("transaction 2", "view 1", "transaction 1")),
    "ledger_residue": (_auth(run()[0], 2, used=1), "state_I5.ledger_matches_holdings",
                       ("authority 2", "used 1 B", "hold 0 B", "0 B are stranded")),
    "ledger_short": (_auth(RUNNING, 1, used=2), "state_I5.ledger_matches_holdings",
                     ("authority 1", "used 2 B", "hold 1 B")),
    "bundle_torn": (evolve(BUNDLE, bundles=BUNDLE.bundles.set(1, evolve(BUNDLE.bundles[1], versions=(1, 0, 0, 0)))),
                    "state_I10.bundle_parts_agree", ("bundle 1", "(1, 0, 0, 0)")),
}


def _failure(check: Callable[..., None], *args: Any) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as e:
        check(*args)
    return e.value


@pytest.mark.parametrize("name", sorted(BROKEN_STATES))
def test_a_broken_state_fails_its_clause_naming_the_harm(name: str) -> None:
    s, key, names = BROKEN_STATES[name]
    e = _failure(check_all, s)
    assert e.clause == key, (name, str(e))
    assert all(x in str(e) for x in names), (name, str(e))


def test_a_circle_of_holds_names_its_members() -> None:
    s = run(T.Plan(((1, 2), (2, 2)), 0, C), T.Plan(((2, 2), (1, 2)), 0, C), T.Reserve(1, 1))[-1]
    s = _auth(_tx(s, 2, held=((2, 2),), phase=TxPhase.RESERVING), 2, used=2)  # 2 took authority 2 out of order
    e = _failure(check_all, s)
    assert e.clause == WAIT and "[1, 2, 1]" in str(e)


def _step(p: S.TxState, act: Any, n: S.TxState, key: str, names: tuple[str, ...]) -> None:
    e = _failure(check_step, p, act, n)
    assert e.clause == key, str(e)
    assert all(x in str(e) for x in names), str(e)


def test_broken_steps_fail_their_clause_naming_the_harm() -> None:
    held = run(T.Plan(((2, 1),), 0, C), T.Reserve(1, 2))[-1]
    lost = _auth(held, 2, context=ContextState.LOST, used=0)  # the loss refunded the held byte
    _step(held, T.LoseDevice(2), lost, "step_C3.loss_refunds_nothing", ("moved charge 1 -> 0 B",))
    stranded = run(T.Plan(((2, 1),), 0, C), T.Reserve(1, 2), T.LoseDevice(2))[-1]
    kept = _auth(stranded, 2, context=ContextState.TERMINATED, stranded=0)  # confirmed, refunded nothing
    _step(stranded, T.ConfirmTermination(2), kept, "step_C3.termination_refunds_once",
          ("refunded 0 B", "expected 1 B"))
    ready = run(*INTENT)[-1]
    retried = S.step(ready, T.Plan(((1, 2),), 0, C, None, 1))[0]
    _step(ready, T.Plan(((1, 2),), 0, C, None, 1), _tx(retried, 3, age=0), "step_C4.retry_keeps_identity",
          ("(2, 0, 0)", "(2, 0, 1)"))


def test_broken_aborts_and_poisoned_steps_fail_naming_the_harm() -> None:
    both = run(T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1), T.Reserve(1, 2))[-1]
    aborted = S.step(both, T.Abort(1))[0]
    _step(both, T.Abort(1), _auth(aborted, 1, used=1), "step_I5.abort_restores_ledgers",
          ("authority 1 went 1 -> 1 B", "held 1 B"))
    _step(both, T.Abort(1), _auth(aborted, 2, used=2), "step_I5.abort_restores_ledgers",
          ("authority 2 went 1 -> 2 B", "held 1 B"))
    one = run(T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1))[-1]
    _step(one, T.Abort(1), _auth(S.step(one, T.Abort(1))[0], 2, used=1), "step_I5.abort_restores_ledgers",
          ("authority 2 went 0 -> 1 B", "held 0 B"))
    b = run(T.OpenBundle(), T.Plan(((1, 1),), 0, C, 1))[-1]
    a = S.step(b, T.Abort(1))[0]
    _step(b, T.Abort(1), evolve(a, bundles=a.bundles.set(1, evolve(a.bundles[1], versions=(1,) * 4))),
          "step_I5.abort_leaves_bundles", ("Abort(tx=1)", "bundle"))
    poisoned = _state(PLANNED, manager=ManagerState.POISONED)
    _step(poisoned, T.Reserve(1, 1), _auth(_tx(poisoned, 1, held=((1, 1),), phase=TxPhase.RESERVED), 1, used=1),
          "step_I5.corrupt_ledger_charges_nothing", ("{1: (0, 1)}",))
    two = run(T.OpenBundle(), T.OpenBundle())[-1]
    both_poisoned = S.step(S.step(two, T.ReportMismatch(1))[0], T.ReportMismatch(2))[0]
    _step(two, T.ReportMismatch(1), both_poisoned, "step_I5.mismatch_poisons_one_bundle", ("poisoned bundle 2",))
    more = _auth(S.step(two, T.ReportMismatch(1))[0], 1, used=1)
    _step(two, T.ReportMismatch(1), more, "step_I5.mismatch_poisons_one_bundle", ("changed more than the bundle",))


def test_broken_remaps_and_bundles_fail_naming_the_harm() -> None:
    published = run(*EXEC1[:3], T.Remap(1))[-1]  # view 1 at generation 2, nobody bound
    _step(published, T.Remap(1), _view(published, 1, generation=1), "step_I9.generation_never_back",
          ("view 1", "2 -> 1"))
    p = run(*EXEC1)[-1]
    _step(p, T.Remap(1), _view(p, 1, generation=2), "step_I9.remap_fences_users",
          ("view 1", "generation 2", "[1]", "generation 1"))
    b = run(T.OpenBundle(), T.OpenBundle(), T.Plan(((1, 1),), 0, C, 2), T.Reserve(1, 1), T.Publish(1),
            T.Execute(1, 1, 1))[-1]
    moved = evolve(b, bundles=b.bundles.set(1, evolve(b.bundles[1], versions=(1,) * 4)))
    _step(b, T.OpenBundle(), moved, "step_I10.only_commit_moves_bundle", ("OpenBundle()", "bundle 1"))
    _step(b, T.Abort(1), moved, "step_I10.only_commit_moves_bundle", ("Abort(tx=1)", "bundle 1"))
    _step(b, T.Commit(1), moved, "step_I10.only_commit_moves_bundle", ("Commit(tx=1)", "bundle 1"))  # not its bundle
    by_abort = evolve(b, bundles=b.bundles.set(2, evolve(b.bundles[2], versions=(1,) * 4)))  # its own bundle
    _step(b, T.Abort(1), by_abort, "step_I10.only_commit_moves_bundle", ("Abort(tx=1)", "bundle 2"))
    own = evolve(b, bundles=b.bundles.set(2, evolve(b.bundles[2], versions=(2,) * 4)))
    _step(b, T.Commit(1), own, "step_I10.bundle_moves_as_unit", ("bundle 2", "(0, 0, 0, 0) -> (2, 2, 2, 2)"))
    sick = evolve(b, bundles=b.bundles.set(2, evolve(b.bundles[2], state=BundleState.POISONED)))
    _step(sick, T.Commit(1), evolve(sick, bundles=sick.bundles.set(2, evolve(sick.bundles[2], versions=(1,) * 4))),
          "step_I10.bundle_moves_as_unit", ("bundle 2",))
