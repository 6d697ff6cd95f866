"""The composed manager spec (`spec.manager`): scripted scenarios and rejections.

Scenarios assert the WHOLE manager after each step, as a diff from the
previous one (`expect`: everything not named must be unchanged) and run
every clause of `invariants.manager` on every step (`run`). Rejections
(`test_invalid_*`) assert the error type and message and that nothing
changed. Guard controls and clause mutations: `test_manager_clauses.py`.
(C3 C4 C5 C8 I1 I2 I6 I13)
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, HOST, expect, lease, make_alloc, make_ticket, run, start

from invariants import manager as IM
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import (
    StaleAnswer,
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UnknownAllocation,
    UnknownAuthority,
    UnknownBundle,
    UnknownHolder,
    UnknownTicket,
    UnknownTransaction,
)
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Role, Tier

_T = TicketState


# --- scenarios: the whole state after each step ------------------------------------------


def test_grant_is_a_provisional_reservation_before_any_claim_then_claim_is_a_live_lease() -> None:
    m0 = start()
    m1, tid = run(m0, M.Submit(H1, DEV, 3))
    assert tid == 1
    assert m1 == expect(m0, used={DEV: 3}, allocs={1: make_alloc(1, DEV, H1, 3)},
                         tickets={1: make_ticket(1, H1, DEV, 3, _T.GRANTED, 1, 1)}, next_ticket=2, next_allocation=2)
    m2, alloc = run(m1, M.Claim(H1, 1))
    assert alloc == 1
    assert m2 == expect(m1, allocs={1: make_alloc(1, DEV, H1, 3, AllocState.LIVE)}, tickets={1: None})


def test_cancel_of_granted_credits_once_and_a_second_cancel_credits_nothing() -> None:
    m1, _ = run(start(), M.Submit(H1, DEV, 3))
    m2, credit = run(m1, M.CancelTicket(H1, 1))
    assert credit == 3
    assert m2 == expect(m1, used={DEV: 0}, allocs={1: None}, tickets={1: None})
    m3, again = run(m2, M.CancelTicket(H1, 1))
    assert again == 0 and m3 is m2
    m4, late = run(m2, M.TimeoutTicket(H1, 1))
    assert late == 0 and m4 is m2


def test_timeout_of_pending_ticket_credits_nothing() -> None:
    m1, _ = run(start(), M.Submit(H1, DEV, 4))
    m2, _ = run(m1, M.Submit(H2, DEV, 2))  # pending: 0 B free
    assert m2.tickets[2].state is _T.PENDING
    m3, credit = run(m2, M.TimeoutTicket(H2, 2))
    assert credit == 0 and m3 == expect(m2, tickets={2: None})


def test_tx_reserve_refused_while_a_granted_unclaimed_ticket_holds_the_bytes() -> None:
    m1, _ = run(start(), M.Submit(H1, DEV, 3))
    m2, xid = run(m1, M.PlanTx(H2, ((DEV, 2),)))
    assert m2 == expect(m1, txs={1: M.Tx(1, H2, ((DEV, 2),), ())}, next_tx=2)
    with pytest.raises(CapacityDenied, match=r"authority 1: transaction 1 needs 2 B, 1 B free"):
        MG.step(m2, M.ReserveTx(xid))
    # Once the ticket is cancelled, the same reservation fits.
    m3, _ = run(m2, M.CancelTicket(H1, 1))
    m4, alloc = run(m3, M.ReserveTx(xid))
    assert alloc == 2
    assert m4 == expect(m3, used={DEV: 2}, allocs={2: make_alloc(2, DEV, H2, 2, role=Role.STATE)},
                         txs={1: M.Tx(1, H2, ((DEV, 2),), (2,))}, next_allocation=3)


def test_tx_reserves_in_authority_order_and_commits_every_lease() -> None:
    m0 = start()
    m1, xid = run(m0, M.PlanTx(H1, ((HOST, 2), (DEV, 1))))
    assert m1.txs[xid].needs == ((DEV, 1), (HOST, 2))
    m2, a1 = run(m1, M.ReserveTx(xid))
    m3, a2 = run(m2, M.ReserveTx(xid))
    assert (a1, a2) == (1, 2) and m3.ledger.allocations[1].authority == DEV
    m4, held = run(m3, M.CommitTx(xid))
    assert held == (1, 2)
    assert m4 == expect(m3, allocs={1: make_alloc(1, DEV, H1, 1, AllocState.LIVE, Role.STATE),
                                     2: make_alloc(2, HOST, H1, 2, AllocState.LIVE, Role.STATE)}, txs={1: None})


def test_abort_tx_credits_every_held_reservation_and_wakes_a_waiter() -> None:
    m0 = start()
    m1, xid = run(m0, M.PlanTx(H1, ((DEV, 3),)))
    m2, _ = run(m1, M.ReserveTx(xid))
    m3, _ = run(m2, M.Submit(H2, DEV, 2))
    assert m3.tickets[1] == make_ticket(1, H2, DEV, 2, _T.PENDING, 1)
    m4, credit = run(m3, M.AbortTx(xid))
    assert credit == 3
    assert m4 == expect(m3, used={DEV: 2}, allocs={1: None, 2: make_alloc(2, DEV, H2, 2)}, txs={1: None},
                         tickets={1: make_ticket(1, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3,
                         intents={1: M.Intent(1, H1, 1, 0, 1)})  # its place, at zero bytes (C4)


def test_device_loss_mid_transaction_keeps_the_lost_part_charged_and_credits_the_rest() -> None:
    m0 = start()
    m1, _ = run(m0, M.Submit(H2, DEV, 1))  # a granted ticket on the device too
    m2, xid = run(m1, M.PlanTx(H1, ((DEV, 1), (HOST, 2))))
    m3, _ = run(m2, M.ReserveTx(xid))
    m4, _ = run(m3, M.ReserveTx(xid))
    m5, _ = run(m4, M.Press(H1, DEV, 1))
    assert set(m5.ledger.allocations.keys()) == {1, 2, 3}
    m6, result = run(m5, A.LoseDevice(DEV))
    assert result is None
    lost = AllocState.DEVICE_LOST
    assert m6 == expect(m5, context={DEV: ContextState.LOST}, used={HOST: 0},
                         allocs={1: make_alloc(1, DEV, H2, 1, lost), 2: make_alloc(2, DEV, H1, 1, lost, Role.STATE), 3: None},
                         tickets={1: None}, txs={1: None}, pressures={1: None})
    m7, _ = run(m6, A.ConfirmTermination(DEV))
    assert m7 == expect(m6, context={DEV: ContextState.TERMINATED}, used={DEV: 0}, allocs={1: None, 2: None})
    m8, _ = run(m7, A.ConfirmTermination(DEV))
    assert m8 == m7  # confirmation is idempotent: no second credit


def test_limit_lowering_commits_after_the_holder_answers() -> None:
    m1, alloc = lease(start(), H1, DEV, 3)
    m2, pids = run(m1, M.PrepareLimit(DEV, 1))
    assert pids == (1,)
    assert m2 == expect(m1, pressures={1: M.Pressure(1, H1, DEV, 2, True)}, changes={DEV: M.LimitChange(DEV, 1)},
                         next_pressure=2)
    m3, released = run(m2, M.Answer(H1, 1, (alloc,)))
    assert released == 3
    assert m3 == expect(m2, used={DEV: 0}, allocs={alloc: None}, pressures={1: None},
                         changes={DEV: M.LimitChange(DEV, 1, ((1, 3),))})
    m4, outcome = run(m3, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(True, 1, ((1, 3),))
    assert m4 == expect(m3, limit={DEV: 1}, changes={DEV: None})


def test_limit_lowering_keeps_the_old_limit_and_lists_the_completed_answers() -> None:
    m1, _ = lease(start(), H1, DEV, 3)
    m2, _ = lease(m1, H2, DEV, 1)
    m3, pids = run(m2, M.PrepareLimit(DEV, 2))
    assert pids == (1, 2) and m3.pressures[2] == M.Pressure(2, H2, DEV, 2, True)
    m4, released = run(m3, M.Answer(H1, 1, ()))
    assert released == 0 and m4 == expect(m3, pressures={1: None}, changes={DEV: M.LimitChange(DEV, 2, ((1, 0),))})
    m5, outcome = run(m4, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(False, 4, ((1, 0),))
    assert m5 == expect(m4, pressures={2: None}, changes={DEV: None})


def test_raising_the_limit_runs_a_round() -> None:
    m0 = start(dev=4)
    m1, _ = run(m0, M.PrepareLimit(DEV, 2))
    m2, _ = run(m1, M.CommitLimit(DEV))
    m3, _ = run(m2, M.Submit(H1, DEV, 2))
    m4, _ = run(m3, M.Submit(H2, DEV, 2))
    assert m4.tickets[2].state is _T.PENDING
    m5, _ = run(m4, M.PrepareLimit(DEV, 4))
    m6, outcome = run(m5, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(True, 4, ())
    assert m6 == expect(m5, limit={DEV: 4}, used={DEV: 4}, changes={DEV: None}, allocs={2: make_alloc(2, DEV, H2, 2)},
                         tickets={2: make_ticket(2, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3)


def test_a_round_after_release_grants_the_waiter() -> None:
    m1, alloc = lease(start(), H1, DEV, 3)
    m2, tid = run(m1, M.Submit(H2, DEV, 2))
    assert m2 == expect(m1, tickets={tid: make_ticket(tid, H2, DEV, 2, _T.PENDING, 1)}, next_ticket=3)
    m3, _ = run(m2, A.Release(H1, alloc))
    assert m3 == expect(m2, used={DEV: 2}, allocs={alloc: None, 2: make_alloc(2, DEV, H2, 2)},
                         tickets={tid: make_ticket(tid, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3)


def test_pressure_answer_releases_the_holders_own_leases() -> None:
    m1, alloc = lease(start(), H1, DEV, 2)
    m2, pid = run(m1, M.Press(H1, DEV, 1))
    assert m2 == expect(m1, pressures={pid: M.Pressure(pid, H1, DEV, 1, False)}, next_pressure=2)
    m3, released = run(m2, M.Answer(H1, pid, (alloc,)))
    assert released == 2 and m3 == expect(m2, used={DEV: 0}, allocs={alloc: None}, pressures={pid: None})
    m4, _ = run(m1, M.Press(H1, DEV, 1))
    m5, result = run(m4, M.CancelPressure(1))
    assert result is None and m5 == expect(m4, pressures={1: None})


@pytest.mark.parametrize("bound, first", [(2, 2), (10, 3)], ids=["aging", "no-aging"])
def test_aging_lets_a_matured_low_priority_ticket_go_first(bound: int, first: int) -> None:
    m1, alloc = lease(start(aging_bound=bound), H1, DEV, 4)
    m2, low = run(m1, M.Submit(H2, DEV, 3, priority=0))  # ages to 1
    m3, high = run(m2, M.Submit(H2, DEV, 3, priority=5))  # low ages to 2 (matured when bound is 2)
    assert (low, high) == (2, 3)
    m4, _ = run(m3, A.Release(H1, alloc))
    assert m4.tickets[first].state is _T.GRANTED
    other = high if first == low else low
    assert m4.tickets[other].state is _T.PENDING and m4.ledger.authorities[DEV].used == 3


# --- rejections: typed error, message, nothing changed ------------------------------------


def _base() -> tuple[M.Manager, dict[str, int]]:
    """A manager with something in every part, and the ids the cases need."""
    m = start()
    ids: dict[str, int] = {}
    m, ids["alias"] = run(m, A.RegisterAlias(DEV, "uvm"))
    m, ids["lost"] = run(m, A.RegisterAuthority("gpu2", Tier.DEVICE, 4))
    m, _ = run(m, A.LoseDevice(ids["lost"]))
    m, ids["granted"] = run(m, M.Submit(H1, DEV, 1))
    m, ids["claimed"] = run(m, M.Submit(H1, DEV, 1))
    m, ids["lease_dev"] = run(m, M.Claim(H1, ids["claimed"]))
    m, ids["pending"] = run(m, M.Submit(H2, DEV, 4))
    m, t = run(m, M.Submit(H1, HOST, 1))
    m, ids["lease_host"] = run(m, M.Claim(H1, t))
    m, ids["press"] = run(m, M.Press(H1, DEV, 1))
    m, ids["press_done"] = run(m, M.Press(H1, DEV, 1))
    m, _ = run(m, M.CancelPressure(ids["press_done"]))
    m, ids["tx_full"] = run(m, M.PlanTx(H1, ((HOST, 1),)))
    m, ids["tx_alloc"] = run(m, M.ReserveTx(ids["tx_full"]))
    m, ids["tx_open"] = run(m, M.PlanTx(H2, ((DEV, 3),)))
    m, ids["tx_done"] = run(m, M.PlanTx(H2, ((HOST, 1),)))
    m, _ = run(m, M.AbortTx(ids["tx_done"]))
    m, _ = run(m, M.PrepareLimit(HOST, 4))
    m, ids["bundle"] = run(m, M.OpenBundle())
    m, ids["poisoned"] = run(m, M.OpenBundle())
    m, _ = run(m, M.ReportMismatch(ids["poisoned"]))
    m, ids["tx_in_bundle"] = run(m, M.PlanTx(H2, ((HOST, 1),)))
    m, _ = run(m, M.JoinBundle(ids["tx_in_bundle"], ids["bundle"]))
    m, ids["press_due"] = run(m, M.Press(H1, DEV, 1, 2, 3))  # priority 2, due at 3 (C5)
    return m, ids


_CASES: list[tuple[str, Any, type, str]] = [
    ("submit_bytes", lambda i: M.Submit(H1, DEV, 0), InvalidBytes, r"nbytes must be in \[1"),
    ("submit_priority", lambda i: M.Submit(H1, DEV, 1, priority="hi"), InvalidArgument, "priority must be an int"),
    ("submit_role", lambda i: M.Submit(H1, DEV, 1, role="kv"), InvalidArgument, "role must be a Role"),
    ("submit_holder", lambda i: M.Submit(9, DEV, 1), UnknownHolder, "holder 9 is not registered"),
    ("submit_authority", lambda i: M.Submit(H1, 99, 1), UnknownAuthority, "authority 99 is not registered"),
    ("submit_alias", lambda i: M.Submit(H1, i["alias"], 1), InvalidArgument, "is an alias of authority 1"),
    ("submit_lost", lambda i: M.Submit(H1, i["lost"], 1), DeviceLost, "context is lost"),
    ("submit_never_fits", lambda i: M.Submit(H1, DEV, 5), CapacityDenied, "5 B can never fit its 4 B limit"),
    ("claim_holder", lambda i: M.Claim(9, i["granted"]), UnknownHolder, "holder 9"),
    ("claim_unknown", lambda i: M.Claim(H1, 99), UnknownTicket, "ticket 99 was never issued"),
    ("claim_retired", lambda i: M.Claim(H1, i["claimed"]), InvalidTransition, "already retired"),
    ("claim_foreign", lambda i: M.Claim(H2, i["granted"]), ForeignHolder, "belongs to holder 1, not holder 2"),
    ("claim_pending", lambda i: M.Claim(H2, i["pending"]), InvalidTransition, "'claim' in state 'pending'"),
    ("cancel_holder", lambda i: M.CancelTicket(9, i["granted"]), UnknownHolder, "holder 9"),
    ("cancel_unknown", lambda i: M.CancelTicket(H1, 99), UnknownTicket, "ticket 99 was never issued"),
    ("cancel_foreign", lambda i: M.CancelTicket(H2, i["granted"]), ForeignHolder, "belongs to holder 1"),
    ("timeout_foreign", lambda i: M.TimeoutTicket(H1, i["pending"]), ForeignHolder, "belongs to holder 2"),
    ("press_holder", lambda i: M.Press(9, DEV, 1), UnknownHolder, "holder 9"),
    ("press_authority", lambda i: M.Press(H1, 99, 1), UnknownAuthority, "authority 99"),
    ("press_alias", lambda i: M.Press(H1, i["alias"], 1), InvalidArgument, "alias"),
    ("press_lost", lambda i: M.Press(H1, i["lost"], 1), DeviceLost, "context is lost"),
    ("press_target", lambda i: M.Press(H1, DEV, 0), InvalidBytes, "target must be"),
    ("answer_holder", lambda i: M.Answer(9, i["press"], ()), UnknownHolder, "holder 9"),
    ("answer_unknown", lambda i: M.Answer(H1, 99, ()), UnknownTicket, "pressure 99 was never issued"),
    ("answer_retired", lambda i: M.Answer(H1, i["press_done"], ()), StaleAnswer, "already retired"),
    ("answer_late", lambda i: M.Answer(H1, i["press_due"], (i["lease_dev"],), 4), StaleAnswer,
     "due at 3; answered at 4"),
    ("answer_due_without_time", lambda i: M.Answer(H1, i["press_due"], ()), InvalidArgument, "due at 3"),
    ("answer_now_negative", lambda i: M.Answer(H1, i["press"], (), -1), InvalidArgument, "now must be"),
    ("press_priority", lambda i: M.Press(H1, DEV, 1, "hi"), InvalidArgument, "priority must be an int"),
    ("press_deadline", lambda i: M.Press(H1, DEV, 1, 0, -1), InvalidArgument, "deadline must be"),
    # 64-bit priorities and times, as refimpl's (tests/test_manager_bad_input.py): a trace carries each exactly.
    ("submit_priority_int64", lambda i: M.Submit(H1, DEV, 1, priority=2**63), InvalidArgument,
     r"^priority must be an int in \[-2\*\*63, 2\*\*63-1\], got 9223372036854775808$"),
    ("try_priority_int64", lambda i: M.TryReserve(H1, DEV, 1, -(2**63) - 1), InvalidArgument, "priority must be"),
    ("press_priority_int64", lambda i: M.Press(H1, DEV, 1, 2**70), InvalidArgument, "priority must be"),
    ("plan_priority_int64", lambda i: M.PlanTx(H1, ((DEV, 1),), 2**63), InvalidArgument, "priority must be"),
    ("press_deadline_int64", lambda i: M.Press(H1, DEV, 1, 0, 2**63), InvalidArgument,
     r"^deadline must be None or an int in \[0, 2\*\*63-1\], got 9223372036854775808$"),
    ("answer_now_int64", lambda i: M.Answer(H1, i["press"], (), 2**63), InvalidArgument, "now must be None or"),
    ("expire_now_int64", lambda i: M.ExpirePressure(i["press_due"], 2**63), InvalidArgument,
     r"^now must be an int in \[0, 2\*\*63-1\], got 9223372036854775808$"),
    ("try_bytes", lambda i: M.TryReserve(H1, DEV, 0), InvalidBytes, r"nbytes must be in \[1"),
    ("try_role", lambda i: M.TryReserve(H1, DEV, 1, 0, "kv"), InvalidArgument, "role must be a Role"),
    ("try_alias", lambda i: M.TryReserve(H1, i["alias"], 1), InvalidArgument, "is an alias of authority 1"),
    ("try_never_fits", lambda i: M.TryReserve(H1, DEV, 5), CapacityDenied, "can never fit"),
    ("try_behind_a_waiter", lambda i: M.TryReserve(H1, DEV, 1), CapacityDenied, "a ticket is waiting"),
    ("try_no_room", lambda i: M.TryReserve(H1, HOST, 4), CapacityDenied, "try-only: 4 B asked"),
    ("use_flags", lambda i: M.SetUse(H1, i["lease_dev"], 1, False), InvalidArgument, "must be bools"),
    ("use_holder", lambda i: M.SetUse(9, i["lease_dev"], True, False), UnknownHolder, "holder 9"),
    ("use_unknown", lambda i: M.SetUse(H1, 99, True, False), UnknownAllocation, "allocation 99"),
    ("use_foreign", lambda i: M.SetUse(H2, i["lease_dev"], True, False), ForeignHolder, "holder 1, not holder 2"),
    ("use_held", lambda i: M.SetUse(H1, 1, True, False), InvalidTransition, "held by ticket 1"),
    ("reconfigure_unknown", lambda i: M.Reconfigure(99), UnknownAuthority, "authority 99"),
    ("reconfigure_alias", lambda i: M.Reconfigure(i["alias"]), InvalidArgument, "alias"),
    ("reconfigure_lost", lambda i: M.Reconfigure(i["lost"]), DeviceLost, "context is lost"),
    ("expire_unknown", lambda i: M.ExpirePressure(99, 9), UnknownTicket, "pressure 99"),
    ("expire_retired", lambda i: M.ExpirePressure(i["press_done"], 9), InvalidTransition, "already retired"),
    ("expire_on_time", lambda i: M.ExpirePressure(i["press_due"], 3), InvalidTransition, "not expired at 3"),
    ("expire_no_deadline", lambda i: M.ExpirePressure(i["press"], 9), InvalidTransition, "due at None"),
    ("expire_now", lambda i: M.ExpirePressure(i["press_due"], None), InvalidArgument, "now must be"),
    ("answer_foreign", lambda i: M.Answer(H2, i["press"], ()), ForeignHolder, "holder 1, not holder 2"),
    ("answer_victims_list", lambda i: M.Answer(H1, i["press"], [i["lease_dev"]]), InvalidArgument,
     "victims must be a tuple"),
    ("answer_victims_twice", lambda i: M.Answer(H1, i["press"], (i["lease_dev"], i["lease_dev"])),
     InvalidArgument, "distinct ints"),
    ("answer_victim_unknown", lambda i: M.Answer(H1, i["press"], (99,)), UnknownAllocation,
     "allocation 99 was never issued"),
    ("answer_victim_other_authority", lambda i: M.Answer(H1, i["press"], (i["lease_dev"], i["lease_host"])),
     InvalidArgument, "not pressure 1's authority 1"),
    ("answer_victim_held", lambda i: M.Answer(H1, i["press"], (1,)), InvalidTransition,
     "provisional, held by ticket 1"),
    ("cancel_pressure_unknown", lambda i: M.CancelPressure(99), UnknownTicket, "pressure 99"),
    ("cancel_pressure_retired", lambda i: M.CancelPressure(i["press_done"]), InvalidTransition, "already retired"),
    ("plan_holder", lambda i: M.PlanTx(9, ((DEV, 1),)), UnknownHolder, "holder 9"),
    ("plan_empty", lambda i: M.PlanTx(H1, ()), InvalidArgument, "non-empty tuple"),
    ("plan_duplicate", lambda i: M.PlanTx(H1, ((DEV, 1), (DEV, 2))), InvalidArgument, "distinct authorities"),
    ("plan_unknown", lambda i: M.PlanTx(H1, ((99, 1),)), UnknownAuthority, "authority 99"),
    ("plan_alias", lambda i: M.PlanTx(H1, ((i["alias"], 1),)), InvalidArgument, "alias"),
    ("plan_lost", lambda i: M.PlanTx(H1, ((DEV, 1), (i["lost"], 1))), DeviceLost, "context is lost"),
    ("plan_bytes_before_authorities", lambda i: M.PlanTx(H1, ((DEV, 0), (99, 1))), InvalidBytes, "nbytes must be"),
    ("plan_types_before_state", lambda i: M.PlanTx(99, ((i["lost"], 7.0),)), InvalidArgument, "int nbytes"),
    ("plan_bytes", lambda i: M.PlanTx(H1, ((DEV, 0),)), InvalidBytes, "nbytes must be"),
    ("reserve_unknown", lambda i: M.ReserveTx(99), UnknownTransaction, "transaction 99 was never planned"),
    ("reserve_retired", lambda i: M.ReserveTx(i["tx_done"]), InvalidTransition, "already retired"),
    ("reserve_all_held", lambda i: M.ReserveTx(i["tx_full"]), InvalidTransition, "already holds every need"),
    ("reserve_no_room", lambda i: M.ReserveTx(i["tx_open"]), CapacityDenied, "needs 3 B, 2 B free"),
    ("commit_unknown", lambda i: M.CommitTx(99), UnknownTransaction, "transaction 99"),
    ("commit_retired", lambda i: M.CommitTx(i["tx_done"]), InvalidTransition, "already retired"),
    ("commit_not_all_held", lambda i: M.CommitTx(i["tx_open"]), InvalidTransition, "holds 0 of its 1 needs"),
    ("abort_unknown", lambda i: M.AbortTx(99), UnknownTransaction, "transaction 99"),
    ("abort_retired", lambda i: M.AbortTx(i["tx_done"]), InvalidTransition, "already retired"),
    ("prepare_unknown", lambda i: M.PrepareLimit(99, 1), UnknownAuthority, "authority 99"),
    ("prepare_alias", lambda i: M.PrepareLimit(i["alias"], 1), InvalidArgument, "alias"),
    ("prepare_lost", lambda i: M.PrepareLimit(i["lost"], 1), DeviceLost, "context is lost"),
    ("prepare_bytes", lambda i: M.PrepareLimit(DEV, -1), InvalidBytes, r"limit must be in \[0"),
    ("prepare_over_capacity", lambda i: M.PrepareLimit(DEV, 5), InvalidBytes, "exceeds authority 1's capacity"),
    ("prepare_pending", lambda i: M.PrepareLimit(HOST, 3), InvalidTransition, "already has a limit change"),
    ("commit_limit_unknown", lambda i: M.CommitLimit(99), UnknownAuthority, "authority 99"),
    ("commit_limit_none", lambda i: M.CommitLimit(DEV), InvalidTransition, "no limit change pending"),
    ("commit_limit_alias", lambda i: M.CommitLimit(i["alias"]), InvalidTransition, "no limit change pending"),
    ("ledger_release_granted", lambda i: A.Release(H1, 1), InvalidTransition, "held by ticket 1"),
    ("ledger_commit_granted_past_reserved", lambda i: A.Commit(H1, 1, 9), InvalidTransition, "held by ticket 1"),
    ("ledger_cancel_tx_held", lambda i: A.Cancel(H1, i["tx_alloc"]), InvalidTransition, "held by transaction 1"),
    ("ledger_cancel_foreign", lambda i: A.Cancel(H2, 1), ForeignHolder, "belongs to holder 1"),
    ("ledger_lose_unknown", lambda i: A.LoseDevice(99), UnknownAuthority, "authority 99"),
    ("not_an_action", lambda i: "Submit", InvalidArgument, "not a manager action"),
    ("join_unknown_tx", lambda i: M.JoinBundle(99, i["bundle"]), UnknownTransaction, "transaction 99"),
    ("join_retired_tx", lambda i: M.JoinBundle(i["tx_done"], i["bundle"]), InvalidTransition, "already retired"),
    ("join_unknown_bundle", lambda i: M.JoinBundle(i["tx_open"], 99), UnknownBundle, "bundle 99 is not known"),
    ("join_bundle_id_type", lambda i: M.JoinBundle(i["tx_open"], "1"), UnknownBundle, "not known"),
    ("join_twice", lambda i: M.JoinBundle(i["tx_in_bundle"], i["bundle"]), InvalidTransition, "already in bundle"),
    ("join_poisoned", lambda i: M.JoinBundle(i["tx_open"], i["poisoned"]), BundlePoisoned, "poisoned"),
    ("mismatch_unknown", lambda i: M.ReportMismatch(99), UnknownBundle, "bundle 99"),
]


@pytest.mark.parametrize("make, error, message", [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_invalid_action_is_rejected_and_changes_nothing(make: Any, error: type, message: str) -> None:
    m, ids = _base()
    snapshot = evolve(m)
    with pytest.raises(error, match=message):
        MG.step(m, make(ids))
    assert m == snapshot and MG.step(m, M.CancelTicket(H1, ids["claimed"]))[0] == snapshot


def test_invalid_base_is_itself_valid() -> None:
    m, ids = _base()
    IM.check_all(m)
    assert m.tickets[ids["pending"]].state is _T.PENDING and m.tickets[ids["granted"]].state is _T.GRANTED


@pytest.mark.parametrize("bound, small_granted", [(2, False), (10, True)], ids=["matured-stops", "young-skipped"])
def test_a_matured_misfit_ends_the_round_but_a_young_one_is_skipped(bound: int, small_granted: bool) -> None:
    m1, _ = lease(start(aging_bound=bound), H1, DEV, 2)
    m2, big = run(m1, M.Submit(H2, DEV, 3))  # age 1
    m3, small = run(m2, M.Submit(H2, DEV, 1))  # big ages to 2: matured iff the bound is 2
    assert m3.tickets[big] == make_ticket(big, H2, DEV, 3, _T.PENDING, 2)
    if small_granted:
        assert m3 == expect(m2, used={DEV: 3}, allocs={2: make_alloc(2, DEV, H2, 1)}, next_allocation=3, next_ticket=4,
                             tickets={big: m3.tickets[big], small: make_ticket(small, H2, DEV, 1, _T.GRANTED, 1, 2)})
    else:
        assert m3 == expect(m2, next_ticket=4,
                             tickets={big: m3.tickets[big], small: make_ticket(small, H2, DEV, 1, _T.PENDING, 1)})


def test_cancelling_the_matured_misfit_that_ended_a_round_grants_the_next_without_ageing() -> None:
    # Found by the explorer (invariants.manager_scope): without a grant pass here, ticket 3 fits and waits.
    # D10: retiring a pending ticket is no round, so ticket 3 keeps age 1.
    m1, _ = run(start(dev=2, aging_bound=2), M.Submit(H1, DEV, 1))
    m2, _ = run(m1, M.Submit(H1, DEV, 2))  # pending, age 1
    m3, _ = run(m2, M.Submit(H1, DEV, 1))  # ticket 2 matures (age 2), does not fit: the round ends before ticket 3
    assert m3.tickets[3] == make_ticket(3, H1, DEV, 1, _T.PENDING, 1)
    m4, credit = run(m3, M.CancelTicket(H1, 2))
    assert credit == 0
    assert m4 == expect(m3, used={DEV: 2}, allocs={2: make_alloc(2, DEV, H1, 1)}, next_allocation=3,
                         tickets={2: None, 3: make_ticket(3, H1, DEV, 1, _T.GRANTED, 1, 2)})


def test_a_bundle_advances_as_one_with_its_transactions_commit_and_a_poisoned_one_never() -> None:
    # I10: every part moves by one in the step that turns the reservations into leases; I5: a mismatch
    # poisons that bundle only, and its joined transaction can then only abort.
    m = start()
    m, b = run(m, M.OpenBundle())
    m, other = run(m, M.OpenBundle())
    m, tx = run(m, M.PlanTx(H1, ((DEV, 1), (HOST, 1))))
    m, _ = run(m, M.JoinBundle(tx, b))
    m, _ = run(m, M.ReserveTx(tx))
    m, _ = run(m, M.ReserveTx(tx))
    m, held = run(m, M.CommitTx(tx))
    assert m.bundles[b].versions == (1, 1, 1, 1) and m.bundles[other].versions == (0, 0, 0, 0)
    assert all(m.ledger.allocations[i].state is AllocState.LIVE for i in held)
    m, tx2 = run(m, M.PlanTx(H1, ((DEV, 1),)))
    m, _ = run(m, M.JoinBundle(tx2, b))
    m, _ = run(m, M.ReserveTx(tx2))
    m, _ = run(m, M.ReportMismatch(b))
    assert m.bundles[b].poisoned and not m.bundles[other].poisoned
    with pytest.raises(BundlePoisoned, match="poisoned"):
        MG.step(m, M.CommitTx(tx2))
    m, credited = run(m, M.AbortTx(tx2))
    assert credited == 1 and m.bundles[b].versions == (1, 1, 1, 1)
