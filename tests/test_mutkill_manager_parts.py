"""The composed manager's C5 answer and C3 device clauses, and the frame table, judged exactly.

For each clause: a step broken by hand in one way only (one disjunct of its condition), the whole message it
fails with (a foreign governor's trace is read against these: the message must name the lease, the authority and
the bytes), the nearest step it must accept, and its case counted exactly when its situation occurs (verify's
coverage rule R1). Written from the mutation survivors of `invariants/manager_answers.py`,
`invariants/manager_devices.py` and `invariants/step_frames.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, HOST, judged, lease, run, start

from invariants import step_frames as F
from invariants.manager_answers import step_C5_answers
from invariants.manager_devices import state_C3_manager, step_C3_manager
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.types import ContextState, Tier

_judge = judged


def _used(m: M.Manager, aid: int, delta: int) -> M.Manager:
    a = m.ledger.authorities[aid]
    return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(aid, evolve(a, used=a.used + delta))))


def _extra_authority(m: M.Manager) -> M.Manager:
    """`m` with one more authority than before (id 9), as a step that registers one leaves it."""
    a = evolve(m.ledger.authorities[HOST], id=9, pool="extra", used=0)
    return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(9, a)))


# --- C5: a press takes nothing ------------------------------------------------------------------------------------

PRESS, CHOICE, ZERO = ("step_C5_answers." + c for c in ("press_takes_nothing", "answer_is_holders_choice",
                                                        "zero_answer_takes_nothing"))


def _pressed() -> tuple[M.Manager, Any]:
    m, _ = lease(start(), H1, DEV, 2)
    return m, M.Press(H1, DEV, 2)


@pytest.mark.parametrize("change", ["used", "tickets", "txs", "allocations"])
def test_a_press_that_moves_any_one_part_fails_with_the_whole_message(change: str) -> None:
    m, act = _pressed()
    after = MG.step(m, act)[0]
    if change == "used":  # no record moves, yet an authority's used falls
        bad = _used(after, DEV, -1)
    elif change == "tickets":
        bad = evolve(after, tickets=MG.step(m, M.Submit(H2, DEV, 1))[0].tickets)
    elif change == "txs":
        bad = evolve(after, txs=MG.step(m, M.PlanTx(H2, ((DEV, 1),)))[0].txs)
    else:
        bad = evolve(after, ledger=evolve(after.ledger, allocations=after.ledger.allocations.delete(
            next(iter(after.ledger.allocations)))))
    message, counts = _judge(step_C5_answers, m, act, bad, 1)
    assert message == f"C5: {act!r}: opening a pressure ticket moved bytes, leases, tickets or transactions"
    assert counts[PRESS] == (1, 1)


def test_a_press_beside_a_new_authority_takes_nothing_and_counts_only_the_press() -> None:
    m, act = _pressed()
    after = _extra_authority(MG.step(m, act)[0])  # an authority the before-state lacks is no used that fell
    assert _judge(step_C5_answers, m, act, after, 1) == (None, {PRESS: (1, 1), CHOICE: (1, 0), ZERO: (1, 0)})


# --- C5: an answer gives back exactly the named leases ------------------------------------------------------------

def _two_leases_pressed() -> tuple[M.Manager, int, int, int]:
    m, a1 = lease(start(), H1, DEV, 1)
    m, a2 = lease(m, H1, DEV, 2)
    m, pid = run(m, M.Press(H1, DEV, 2))
    return m, a1, a2, pid


def test_answers_count_their_cases() -> None:
    m, a1, a2, pid = _two_leases_pressed()
    act = M.Answer(H1, pid, (a2,))
    after, got = MG.step(m, act)
    assert _judge(step_C5_answers, m, act, after, got) == (None, {PRESS: (1, 0), CHOICE: (1, 1), ZERO: (1, 0)})
    zero = M.Answer(H1, pid, ())
    after, got = MG.step(m, zero)
    assert _judge(step_C5_answers, m, zero, after, got) == (None, {PRESS: (1, 0), CHOICE: (1, 1), ZERO: (1, 1)})
    other = A.Release(H1, a1)
    after, got = MG.step(m, other)
    assert _judge(step_C5_answers, m, other, after, got) == (None, {PRESS: (1, 0), CHOICE: (1, 0), ZERO: (1, 0)})


def test_a_zero_answer_that_lowers_used_without_taking_a_lease_fails() -> None:
    m, a1, a2, pid = _two_leases_pressed()
    act = M.Answer(H1, pid, ())
    after, got = MG.step(m, act)
    message, _ = _judge(step_C5_answers, m, act, _used(after, DEV, -1), got)
    assert message == f"C5: {act!r}: a zero answer took lease(s) [] / lowered used on authorities [{DEV}]"
    # a new authority beside the zero answer is no used that fell
    assert _judge(step_C5_answers, m, act, _extra_authority(after), got)[0] is None


def test_a_zero_answer_that_takes_a_lease_names_it() -> None:
    m, a1, a2, pid = _two_leases_pressed()
    act = M.Answer(H1, pid, ())
    taken = MG.step(m, A.Release(H1, a1))[0]
    message, _ = _judge(step_C5_answers, m, act, evolve(taken, pressures=taken.pressures.delete(pid)), 0)
    assert message == f"C5: {act!r}: a zero answer took lease(s) [{a1}] / lowered used on authorities [{DEV}]"


def test_an_answer_that_is_not_the_holders_choice_says_which_lease_and_how_many_bytes() -> None:
    m, a1, a2, pid = _two_leases_pressed()
    act = M.Answer(H1, pid, (a2,))
    both = MG.step(MG.step(m, A.Release(H1, a1))[0], A.Release(H1, a2))[0]
    assert _judge(step_C5_answers, m, act, both, 2)[0] == (
        f"C5: {act!r}: lease(s) [{a1}] left though the holder did not name them")
    kept = evolve(m, pressures=m.pressures.delete(pid))
    assert _judge(step_C5_answers, m, act, kept, 0)[0] == f"C5: {act!r}: named victim(s) [{a2}] are still live leases"
    right, got = MG.step(m, act)
    assert _judge(step_C5_answers, m, act, right, 3)[0] == (
        f"C5: {act!r}: the answer reports 3 B released, the holder gave back {got} B")


# --- C3: lost and terminated contexts -----------------------------------------------------------------------------

NO_WORK = "state_C3_manager.lost_context_gets_no_work"
KEPT, REFUND, REMOVED = ("step_C3_manager." + c for c in ("lost_charge_kept", "termination_refunds_once",
                                                          "removal_drops_no_charge"))


def _context(m: M.Manager, aid: int, state: ContextState) -> M.Manager:
    a = m.ledger.authorities[aid]
    return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(aid, evolve(a, context=state))))


def test_no_work_counts_its_case_only_with_a_dead_context_and_an_open_transaction() -> None:
    m = start()
    planned = run(m, M.PlanTx(H2, ((HOST, 1),)))[0]
    assert _judge(state_C3_manager, m) == (None, {NO_WORK: (1, 0)})
    assert _judge(state_C3_manager, planned) == (None, {NO_WORK: (1, 0)})  # a transaction, every context active
    assert _judge(state_C3_manager, _context(m, DEV, ContextState.LOST)) == (None, {NO_WORK: (1, 0)})  # no tx
    # both: a transaction on the live host while the device is lost is no harm, and the case is met
    assert _judge(state_C3_manager, _context(planned, DEV, ContextState.LOST)) == (None, {NO_WORK: (1, 1)})
    on_dead = _context(run(m, M.PlanTx(H2, ((DEV, 1),)))[0], DEV, ContextState.TERMINATED)
    assert _judge(state_C3_manager, on_dead) == (
        f"C3: open transaction 1 needs authority [{DEV}], whose context is not active", {NO_WORK: (1, 1)})


def _lost_twice() -> M.Manager:
    """DEV and a second device (3) lost, each with a stranded 1 B lease."""
    m = run(start(), A.RegisterAuthority("dev2", Tier.DEVICE, 4))[0]
    m, _ = lease(m, H1, DEV, 1)
    m, _ = lease(m, H2, 3, 1)
    m = run(m, A.LoseDevice(DEV))[0]
    return run(m, A.LoseDevice(3))[0]


def test_terminating_one_of_two_lost_devices_refunds_its_own_charge_only() -> None:
    m = _lost_twice()
    act = A.ConfirmTermination(DEV)
    after, got = MG.step(m, act)
    message, counts = _judge(step_C3_manager, m, act, after, got)
    assert message is None and counts[REFUND] == (1, 1) and counts[KEPT] == (1, 1)
    kept = _used(after, DEV, +1)  # the refund not applied to used
    assert _judge(step_C3_manager, m, act, kept, got)[0] == (
        f"C3: {act!r}: authority {DEV} terminated with stranded charge 1 B: used 1 -> 1 B, allocation(s) [] still "
        "recorded")


def test_a_step_that_terminates_nothing_does_not_count_the_refund_case() -> None:
    m = _lost_twice()
    act = M.Submit(H1, HOST, 1)
    after, got = MG.step(m, act)
    assert _judge(step_C3_manager, m, act, after, got) == (None, {KEPT: (1, 1), REFUND: (1, 0), REMOVED: (1, 0)})


# --- the frame table: which parts a step replaced -----------------------------------------------------------------

def test_replaced_names_exactly_the_parts_a_step_replaced() -> None:
    m = start()
    submitted = MG.step(m, M.Submit(H1, DEV, 1))[0]  # a grant: a ticket, an allocation, used and the id counter
    assert F.replaced(m, m) == 0
    assert F.replaced(m, evolve(m, tickets=submitted.tickets)) == F.TICKETS
    assert F.replaced(m, evolve(m, ledger=evolve(m.ledger, allocations=submitted.ledger.allocations))) == F.ALLOCATIONS
    holders = run(m, A.RegisterHolder("h3"))[0]
    assert F.replaced(m, evolve(m, ledger=evolve(m.ledger, holders=holders.ledger.holders))) == F.HOLDERS
