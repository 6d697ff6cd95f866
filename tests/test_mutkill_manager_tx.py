"""The composed manager's transaction clauses (`invariants.manager_tx`: C4 holds and intents, I5 abort and
poisoning) judged exactly.

Each clause on states or steps broken by hand in one way only, the whole message it fails with (the transaction,
intent, bundle or ticket it names), the nearest case it must accept, and its case counted exactly when its
situation occurs (verify's coverage rule R1). Written from the mutation survivors of `invariants/manager_tx.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, HOST, judged, lease, run, start

from invariants.manager_tx import state_C4_holds, state_C4_intents, step_C4_intents, step_I5_abort, step_I5_poisoned
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import Tier

CYCLE, ONE_PLACE = "state_C4_holds.no_circular_holding", "state_C4_intents.one_place_per_request"
KEPT, LEFT = "step_C4_intents.retry_keeps_place", "step_C4_intents.abort_leaves_place"
ABORT = "step_I5_abort.abort_leaves_no_charge"
ONE_BUNDLE, POISONED = "step_I5_poisoned.mismatch_poisons_one_bundle", "step_I5_poisoned.poisoned_grants_nothing"
DEV2 = 3


_judge = judged


def _steps(m: M.Manager, *acts: Any) -> M.Manager:
    for act in acts:
        m = run(m, act)[0]
    return m


# --- C4: no circle of holds ---------------------------------------------------------------------------------------

def _three() -> M.Manager:
    return run(start(), A.RegisterAuthority("dev2", Tier.DEVICE, 4))[0]


def test_the_circle_case_is_counted_from_two_open_transactions() -> None:
    m = _three()
    one = _steps(m, M.PlanTx(H1, ((DEV, 1),)))
    two = _steps(one, M.PlanTx(H2, ((HOST, 1),)))
    assert [_judge(state_C4_holds, s) for s in (m, one, two)] == [(None, {CYCLE: (1, c)}) for c in (0, 0, 1)]


def _circle(*first: Any) -> M.Manager:
    """After `first`: a transaction of H1 holds 3 B of DEV and needs 3 B of HOST next; one of H2 holds 3 B of HOST
    and needs 3 B of DEV next (each 4 B): each waits for the other (its needs rewritten by hand after its reserve)."""
    m = _steps(_three(), *first, M.PlanTx(H1, ((DEV, 3), (HOST, 3))))
    t1 = max(m.txs)
    m = _steps(m, M.ReserveTx(t1), M.PlanTx(H2, ((HOST, 3),)))
    t2 = max(m.txs)
    m = run(m, M.ReserveTx(t2))[0]
    return evolve(m, txs=m.txs.set(t2, evolve(m.txs[t2], needs=((HOST, 3), (DEV, 3)))))


def test_a_circle_of_two_is_named_with_each_transaction_s_needs_and_holds() -> None:
    m = _circle()
    message, counts = _judge(state_C4_holds, m)
    circle = [(t, m.txs[t].needs, m.txs[t].held) for t in (1, 2)]
    assert message == f"C4: transactions [1, 2] each hold an authority the next needs and cannot get: {circle}"
    assert counts == {CYCLE: (1, 1)}


def test_a_finished_transaction_does_not_hide_a_circle_behind_it() -> None:
    m = _circle(M.PlanTx(H1, ((DEV2, 1),)), M.ReserveTx(1))  # transaction 1 holds all it needs, first in the table
    assert [x.id for x in m.txs.values()][0] == 1 and len(m.txs[1].held) == len(m.txs[1].needs)
    assert (_judge(state_C4_holds, m)[0] or "").startswith("C4: transactions [2, 3] each hold")


def test_an_exact_fit_is_not_blocked() -> None:
    # Transaction 1 holds 2 B of DEV and needs 2 B of HOST, where transaction 2 holds 2 of 4: it fits exactly.
    # Transaction 2 needs 3 B of DEV next (2 free): blocked by 1. No circle.
    m = _steps(start(), M.PlanTx(H1, ((DEV, 2), (HOST, 2))), M.ReserveTx(1),
               M.PlanTx(H2, ((HOST, 2),)), M.ReserveTx(2))
    m = evolve(m, txs=m.txs.set(2, evolve(m.txs[2], needs=((HOST, 2), (DEV, 3)))))
    assert _judge(state_C4_holds, m) == (None, {CYCLE: (1, 1)})


def test_a_hold_on_another_authority_does_not_block() -> None:
    # Transaction 1 holds DEV and waits for HOST, full with a plain lease nobody's transaction holds; transaction
    # 2 holds only DEV2 and waits for DEV, held by 1. 2 waits for 1, 1 waits for no transaction: no circle.
    m, _ = lease(_three(), H2, HOST, 3)
    m = _steps(m, M.PlanTx(H1, ((DEV, 2), (HOST, 3))), M.ReserveTx(1),
               M.PlanTx(H2, ((DEV2, 1),)), M.ReserveTx(2))
    m = evolve(m, txs=m.txs.set(2, evolve(m.txs[2], needs=((DEV2, 1), (DEV, 3)))))
    assert _judge(state_C4_holds, m) == (None, {CYCLE: (1, 1)})


# --- C4: one place per request, kept across an abort ---------------------------------------------------------------

def _aborted() -> tuple[M.Manager, M.Tx]:
    m = _steps(start(), M.PlanTx(H1, ((DEV, 3),), 2), M.ReserveTx(1))
    return m, m.txs[1]


def test_the_one_place_case_is_counted_where_an_intent_lives() -> None:
    m, _ = _aborted()
    assert _judge(state_C4_intents, m) == (None, {ONE_PLACE: (1, 0)})
    assert _judge(state_C4_intents, run(m, M.AbortTx(1))[0]) == (None, {ONE_PLACE: (1, 1)})


def test_an_abort_is_counted_and_must_leave_its_place() -> None:
    m, x = _aborted()
    act = M.AbortTx(1)
    after, got = MG.step(m, act)
    assert _judge(step_C4_intents, m, act, after, got) == (None, {KEPT: (1, 0), LEFT: (1, 1)})
    lost = evolve(after, intents=after.intents.delete(1))
    assert _judge(step_C4_intents, m, act, lost, got)[0] == (
        f"C4: {act!r}: transaction {x!r} left intent None, not its place (holder {H1}, seq 1, priority 2, age 1)")


def _retried() -> tuple[M.Manager, Any, M.Manager, Any]:
    m = run(_aborted()[0], M.AbortTx(1))[0]
    act = M.PlanTx(H1, ((DEV, 3),), 2, 1)
    after, got = MG.step(m, act)
    return m, act, after, got


def test_a_retry_is_counted_and_keeps_its_place() -> None:
    m, act, after, got = _retried()
    assert _judge(step_C4_intents, m, act, after, got) == (None, {KEPT: (1, 1), LEFT: (1, 0)})
    plain = M.PlanTx(H2, ((DEV, 1),))
    assert _judge(step_C4_intents, m, plain, *MG.step(m, plain))[1] == {KEPT: (1, 0), LEFT: (1, 0)}


@pytest.mark.parametrize("change", ["younger", "lower_priority", "intent_kept"])
def test_a_retry_that_loses_any_part_of_its_place_is_named(change: str) -> None:
    m, act, after, got = _retried()
    i, x = m.intents[1], after.txs[got]
    if change == "younger":  # the same sequence and priority, one abort younger
        bad = evolve(after, txs=after.txs.set(got, evolve(x, age=i.age - 1)))
    elif change == "lower_priority":  # the same sequence and age, a lower priority
        bad = evolve(after, txs=after.txs.set(got, evolve(x, priority=i.priority - 1)))
    else:  # the retry took the place, and the intent is still there: two places
        bad = evolve(after, intents=m.intents)
    y = bad.txs[got]
    tail = " and is still there" if change == "intent_kept" else ""
    assert _judge(step_C4_intents, m, act, bad, got)[0] == f"C4: {act!r}: intent {i!r} came back as {y!r}{tail}"


# --- I5: an abort leaves no charge; poisoning -----------------------------------------------------------------------

def test_an_abort_that_leaves_a_reservation_is_named_and_counted() -> None:
    m, x = _aborted()
    act = M.AbortTx(1)
    after, got = MG.step(m, act)
    assert _judge(step_I5_abort, m, act, after, got) == (None, {ABORT: (1, 1)})
    kept = evolve(after, ledger=evolve(after.ledger, allocations=m.ledger.allocations))
    assert _judge(step_I5_abort, m, act, kept, got)[0] == (
        f"I5: {act!r}: transaction 1's reservation(s) {list(x.held)} of {list(x.held)} are still charged")
    empty = _steps(start(), M.PlanTx(H1, ((DEV, 1),)))  # an abort of a transaction that holds nothing
    assert _judge(step_I5_abort, empty, act, *MG.step(empty, act)) == (None, {ABORT: (1, 0)})


def test_a_mismatch_poisons_its_own_bundle_only_and_a_new_poisoned_bundle_is_named() -> None:
    m = _steps(start(), M.OpenBundle(), M.OpenBundle())
    act = M.ReportMismatch(1)
    after, got = MG.step(m, act)
    assert _judge(step_I5_poisoned, m, act, after, got) == (None, {ONE_BUNDLE: (1, 1), POISONED: (1, 0)})
    both = evolve(after, bundles=after.bundles.set(2, evolve(after.bundles[2], poisoned=True)))
    assert _judge(step_I5_poisoned, m, act, both, got)[0] == (
        f"I5: {act!r} poisoned bundle(s) [2], which reported no mismatch")
    opened = M.OpenBundle()
    new, bid = MG.step(m, opened)
    born_poisoned = evolve(new, bundles=new.bundles.set(bid, evolve(new.bundles[bid], poisoned=True)))
    assert _judge(step_I5_poisoned, m, opened, born_poisoned, bid)[0] == (
        f"I5: {opened!r} poisoned bundle(s) [{bid}], which reported no mismatch")
    assert _judge(step_I5_poisoned, m, opened, new, bid) == (None, {ONE_BUNDLE: (1, 0), POISONED: (1, 0)})


def test_a_poisoned_manager_that_grants_a_new_ticket_is_named() -> None:
    m = evolve(start(), poisoned=True)
    act = M.Submit(H1, DEV, 1)
    granted, tid = MG.step(start(), act)  # what an unpoisoned manager does: a new ticket granted at once
    assert granted.tickets[tid].state is TicketState.GRANTED
    message, counts = _judge(step_I5_poisoned, m, act, evolve(granted, poisoned=True), tid)
    alloc = granted.tickets[tid].allocation
    assert message == (f"I5: {act!r} on a poisoned manager created allocation(s) [{alloc}] and granted ticket(s) "
                       f"[{tid}]")
    assert counts[POISONED] == (1, 1)
    # a waiting ticket granted by hand, its allocation an existing one: no new allocation, still a grant
    m, lease_id = lease(start(), H2, DEV, 4)
    m, waiting = run(m, M.Submit(H1, DEV, 1))
    m = evolve(m, poisoned=True)
    t = evolve(m.tickets[waiting], state=TicketState.GRANTED, allocation=lease_id)
    message, _ = _judge(step_I5_poisoned, m, act, evolve(m, tickets=m.tickets.set(waiting, t)), None)
    assert message == f"I5: {act!r} on a poisoned manager created allocation(s) [] and granted ticket(s) [{waiting}]"


def test_a_ticket_still_waiting_on_a_poisoned_manager_is_no_grant() -> None:
    m, _ = lease(start(), H1, DEV, 4)
    m, waiting = run(m, M.Submit(H2, DEV, 1))
    m = evolve(m, poisoned=True)  # a waiter left on the poisoned manager (by hand): it waits, nothing is granted
    act = A.RegisterHolder("late")
    assert _judge(step_I5_poisoned, m, act, m, None) == (None, {ONE_BUNDLE: (1, 0), POISONED: (1, 1)})
