"""The composed manager spec (`spec.manager`): scripted scenarios, rejections, negative controls, clause mutations.

Scenarios assert the WHOLE manager after each step, as a diff from the
previous one (`_expect`: everything not named must be unchanged) and run
every clause of `invariants.manager` on every step. Rejections
(`test_invalid_*`) assert the error type and message and that nothing
changed. Each cross-cutting guard switched off must produce a harm that a
named clause of `invariants.manager` catches; each clause of that module is
shown to fail on a hand-mutated state or step. (C3 I1 I2 I6 I13)
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.clauses import CLAUSES, collecting
from spec import actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import (
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UnknownAllocation,
    UnknownAuthority,
    UnknownHolder,
    UnknownTicket,
    UnknownTransaction,
)
from spec.guards import ALL_ON, GUARDS, GuardSet
from spec.state import Allocation
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Origin, Role, Tier

DEV, HOST = 1, 2
H1, H2 = 1, 2
_T = TicketState


def _run(m: M.Manager, act: Any, guards: GuardSet = ALL_ON) -> tuple[M.Manager, Any]:
    """One accepted step, judged by every manager and ledger clause."""
    nxt, result = MG.step(m, act, guards)
    IM.check_step(m, act, nxt, result)
    IM.check_all(nxt)
    return nxt, result


def _broken(m: M.Manager, act: Any, guards: GuardSet) -> tuple[M.Manager, list[str]]:
    """One step with `guards`; every clause it breaks (step and state)."""
    nxt, result = MG.step(m, act, guards)
    with collecting() as found:
        IM.check_step(m, act, nxt, result)
        IM.check_all(nxt)
    return nxt, found


def _start(dev: int = 4, host: int = 4, aging_bound: int = 4) -> M.Manager:
    m = M.initial(aging_bound)
    for act in (A.RegisterAuthority("dev", Tier.DEVICE, dev), A.RegisterAuthority("host", Tier.HOST, host),
                A.RegisterHolder("h1"), A.RegisterHolder("h2")):
        m = _run(m, act)[0]
    return m


def _alloc(id: int, auth: int, holder: int, nbytes: int, state: AllocState = AllocState.PROVISIONAL,
           role: Role = Role.STAGING) -> Allocation:
    tier = Tier.DEVICE if auth == DEV else Tier.HOST
    return Allocation(id, auth, holder, tier, role, nbytes, nbytes, nbytes, state, Origin.GRANTED)


def _expect(prev: M.Manager, *, used: dict[int, int] | None = None, limit: dict[int, int] | None = None,
            context: dict[int, ContextState] | None = None, allocs: dict[int, Allocation | None] | None = None,
            tickets: dict[int, M.Ticket | None] | None = None, txs: dict[int, M.Tx | None] | None = None,
            pressures: dict[int, M.Pressure | None] | None = None,
            changes: dict[int, M.LimitChange | None] | None = None, **counters: int) -> M.Manager:
    """`prev` with exactly the named changes (None deletes)."""
    def patch(mp: Any, diff: dict | None) -> Any:
        for k, v in (diff or {}).items():
            mp = mp.delete(k) if v is None else mp.set(k, v)
        return mp

    auths = prev.ledger.authorities
    for field, diff in (("used", used), ("limit", limit), ("context", context)):
        for aid, v in (diff or {}).items():
            auths = auths.set(aid, evolve(auths[aid], **{field: v}))
    ledger_counters = {k: counters.pop(k) for k in list(counters) if k == "next_allocation"}
    ledger = evolve(prev.ledger, authorities=auths, allocations=patch(prev.ledger.allocations, allocs),
                    **ledger_counters)
    return evolve(prev, ledger=ledger, tickets=patch(prev.tickets, tickets), txs=patch(prev.txs, txs),
                  pressures=patch(prev.pressures, pressures), changes=patch(prev.changes, changes), **counters)


def _ticket(id: int, holder: int, auth: int, nbytes: int, state: TicketState, age: int,
            allocation: int | None = None, priority: int = 0) -> M.Ticket:
    return M.Ticket(id, holder, auth, nbytes, priority, Role.STAGING, age, state, allocation)


# --- scenarios: the whole state after each step ------------------------------------------


def test_grant_is_a_provisional_reservation_before_any_claim_then_claim_is_a_live_lease() -> None:
    m0 = _start()
    m1, tid = _run(m0, M.Submit(H1, DEV, 3))
    assert tid == 1
    assert m1 == _expect(m0, used={DEV: 3}, allocs={1: _alloc(1, DEV, H1, 3)},
                         tickets={1: _ticket(1, H1, DEV, 3, _T.GRANTED, 1, 1)}, next_ticket=2, next_allocation=2)
    m2, alloc = _run(m1, M.Claim(H1, 1))
    assert alloc == 1
    assert m2 == _expect(m1, allocs={1: _alloc(1, DEV, H1, 3, AllocState.LIVE)}, tickets={1: None})


def test_cancel_of_granted_credits_once_and_a_second_cancel_credits_nothing() -> None:
    m1, _ = _run(_start(), M.Submit(H1, DEV, 3))
    m2, credit = _run(m1, M.CancelTicket(H1, 1))
    assert credit == 3
    assert m2 == _expect(m1, used={DEV: 0}, allocs={1: None}, tickets={1: None})
    m3, again = _run(m2, M.CancelTicket(H1, 1))
    assert again == 0 and m3 is m2
    m4, late = _run(m2, M.TimeoutTicket(H1, 1))
    assert late == 0 and m4 is m2


def test_timeout_of_pending_ticket_credits_nothing() -> None:
    m1, _ = _run(_start(), M.Submit(H1, DEV, 4))
    m2, _ = _run(m1, M.Submit(H2, DEV, 2))  # pending: 0 B free
    assert m2.tickets[2].state is _T.PENDING
    m3, credit = _run(m2, M.TimeoutTicket(H2, 2))
    assert credit == 0 and m3 == _expect(m2, tickets={2: None})


def test_tx_reserve_refused_while_a_granted_unclaimed_ticket_holds_the_bytes() -> None:
    m1, _ = _run(_start(), M.Submit(H1, DEV, 3))
    m2, xid = _run(m1, M.PlanTx(H2, ((DEV, 2),)))
    assert m2 == _expect(m1, txs={1: M.Tx(1, H2, ((DEV, 2),), ())}, next_tx=2)
    with pytest.raises(CapacityDenied, match=r"authority 1: transaction 1 needs 2 B, 1 B free"):
        MG.step(m2, M.ReserveTx(xid))
    # Once the ticket is cancelled, the same reservation fits.
    m3, _ = _run(m2, M.CancelTicket(H1, 1))
    m4, alloc = _run(m3, M.ReserveTx(xid))
    assert alloc == 2
    assert m4 == _expect(m3, used={DEV: 2}, allocs={2: _alloc(2, DEV, H2, 2, role=Role.STATE)},
                         txs={1: M.Tx(1, H2, ((DEV, 2),), (2,))}, next_allocation=3)


def test_tx_reserves_in_authority_order_and_commits_every_lease() -> None:
    m0 = _start()
    m1, xid = _run(m0, M.PlanTx(H1, ((HOST, 2), (DEV, 1))))
    assert m1.txs[xid].needs == ((DEV, 1), (HOST, 2))
    m2, a1 = _run(m1, M.ReserveTx(xid))
    m3, a2 = _run(m2, M.ReserveTx(xid))
    assert (a1, a2) == (1, 2) and m3.ledger.allocations[1].authority == DEV
    m4, held = _run(m3, M.CommitTx(xid))
    assert held == (1, 2)
    assert m4 == _expect(m3, allocs={1: _alloc(1, DEV, H1, 1, AllocState.LIVE, Role.STATE),
                                     2: _alloc(2, HOST, H1, 2, AllocState.LIVE, Role.STATE)}, txs={1: None})


def test_abort_tx_credits_every_held_reservation_and_wakes_a_waiter() -> None:
    m0 = _start()
    m1, xid = _run(m0, M.PlanTx(H1, ((DEV, 3),)))
    m2, _ = _run(m1, M.ReserveTx(xid))
    m3, _ = _run(m2, M.Submit(H2, DEV, 2))
    assert m3.tickets[1] == _ticket(1, H2, DEV, 2, _T.PENDING, 1)
    m4, credit = _run(m3, M.AbortTx(xid))
    assert credit == 3
    assert m4 == _expect(m3, used={DEV: 2}, allocs={1: None, 2: _alloc(2, DEV, H2, 2)}, txs={1: None},
                         tickets={1: _ticket(1, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3)


def test_device_loss_mid_transaction_keeps_the_lost_part_charged_and_credits_the_rest() -> None:
    m0 = _start()
    m1, _ = _run(m0, M.Submit(H2, DEV, 1))  # a granted ticket on the device too
    m2, xid = _run(m1, M.PlanTx(H1, ((DEV, 1), (HOST, 2))))
    m3, _ = _run(m2, M.ReserveTx(xid))
    m4, _ = _run(m3, M.ReserveTx(xid))
    m5, _ = _run(m4, M.Press(H1, DEV, 1))
    assert set(m5.ledger.allocations.keys()) == {1, 2, 3}
    m6, result = _run(m5, A.LoseDevice(DEV))
    assert result is None
    lost = AllocState.DEVICE_LOST
    assert m6 == _expect(m5, context={DEV: ContextState.LOST}, used={HOST: 0},
                         allocs={1: _alloc(1, DEV, H2, 1, lost), 2: _alloc(2, DEV, H1, 1, lost, Role.STATE), 3: None},
                         tickets={1: None}, txs={1: None}, pressures={1: None})
    m7, _ = _run(m6, A.ConfirmTermination(DEV))
    assert m7 == _expect(m6, context={DEV: ContextState.TERMINATED}, used={DEV: 0}, allocs={1: None, 2: None})
    m8, _ = _run(m7, A.ConfirmTermination(DEV))
    assert m8 == m7  # confirmation is idempotent: no second credit


def _lease(m: M.Manager, holder: int, auth: int, nbytes: int) -> tuple[M.Manager, int]:
    m, tid = _run(m, M.Submit(holder, auth, nbytes))
    return _run(m, M.Claim(holder, tid))


def test_limit_lowering_commits_after_the_holder_answers() -> None:
    m1, alloc = _lease(_start(), H1, DEV, 3)
    m2, pids = _run(m1, M.PrepareLimit(DEV, 1))
    assert pids == (1,)
    assert m2 == _expect(m1, pressures={1: M.Pressure(1, H1, DEV, 2, True)}, changes={DEV: M.LimitChange(DEV, 1)},
                         next_pressure=2)
    m3, released = _run(m2, M.Answer(H1, 1, (alloc,)))
    assert released == 3
    assert m3 == _expect(m2, used={DEV: 0}, allocs={alloc: None}, pressures={1: None},
                         changes={DEV: M.LimitChange(DEV, 1, ((1, 3),))})
    m4, outcome = _run(m3, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(True, 1, ((1, 3),))
    assert m4 == _expect(m3, limit={DEV: 1}, changes={DEV: None})


def test_limit_lowering_keeps_the_old_limit_and_lists_the_completed_answers() -> None:
    m1, _ = _lease(_start(), H1, DEV, 3)
    m2, _ = _lease(m1, H2, DEV, 1)
    m3, pids = _run(m2, M.PrepareLimit(DEV, 2))
    assert pids == (1, 2) and m3.pressures[2] == M.Pressure(2, H2, DEV, 2, True)
    m4, released = _run(m3, M.Answer(H1, 1, ()))
    assert released == 0 and m4 == _expect(m3, pressures={1: None}, changes={DEV: M.LimitChange(DEV, 2, ((1, 0),))})
    m5, outcome = _run(m4, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(False, 4, ((1, 0),))
    assert m5 == _expect(m4, pressures={2: None}, changes={DEV: None})


def test_raising_the_limit_runs_a_round() -> None:
    m0 = _start(dev=4)
    m1, _ = _run(m0, M.PrepareLimit(DEV, 2))
    m2, _ = _run(m1, M.CommitLimit(DEV))
    m3, _ = _run(m2, M.Submit(H1, DEV, 2))
    m4, _ = _run(m3, M.Submit(H2, DEV, 2))
    assert m4.tickets[2].state is _T.PENDING
    m5, _ = _run(m4, M.PrepareLimit(DEV, 4))
    m6, outcome = _run(m5, M.CommitLimit(DEV))
    assert outcome == M.LimitOutcome(True, 4, ())
    assert m6 == _expect(m5, limit={DEV: 4}, used={DEV: 4}, changes={DEV: None}, allocs={2: _alloc(2, DEV, H2, 2)},
                         tickets={2: _ticket(2, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3)


def test_a_round_after_release_grants_the_waiter() -> None:
    m1, alloc = _lease(_start(), H1, DEV, 3)
    m2, tid = _run(m1, M.Submit(H2, DEV, 2))
    assert m2 == _expect(m1, tickets={tid: _ticket(tid, H2, DEV, 2, _T.PENDING, 1)}, next_ticket=3)
    m3, _ = _run(m2, A.Release(H1, alloc))
    assert m3 == _expect(m2, used={DEV: 2}, allocs={alloc: None, 2: _alloc(2, DEV, H2, 2)},
                         tickets={tid: _ticket(tid, H2, DEV, 2, _T.GRANTED, 2, 2)}, next_allocation=3)


def test_pressure_answer_releases_the_holders_own_leases() -> None:
    m1, alloc = _lease(_start(), H1, DEV, 2)
    m2, pid = _run(m1, M.Press(H1, DEV, 1))
    assert m2 == _expect(m1, pressures={pid: M.Pressure(pid, H1, DEV, 1, False)}, next_pressure=2)
    m3, released = _run(m2, M.Answer(H1, pid, (alloc,)))
    assert released == 2 and m3 == _expect(m2, used={DEV: 0}, allocs={alloc: None}, pressures={pid: None})
    m4, _ = _run(m1, M.Press(H1, DEV, 1))
    m5, result = _run(m4, M.CancelPressure(1))
    assert result is None and m5 == _expect(m4, pressures={1: None})


@pytest.mark.parametrize("bound, first", [(2, 2), (10, 3)], ids=["aging", "no-aging"])
def test_aging_lets_a_matured_low_priority_ticket_go_first(bound: int, first: int) -> None:
    m1, alloc = _lease(_start(aging_bound=bound), H1, DEV, 4)
    m2, low = _run(m1, M.Submit(H2, DEV, 3, priority=0))  # ages to 1
    m3, high = _run(m2, M.Submit(H2, DEV, 3, priority=5))  # low ages to 2 (matured when bound is 2)
    assert (low, high) == (2, 3)
    m4, _ = _run(m3, A.Release(H1, alloc))
    assert m4.tickets[first].state is _T.GRANTED
    other = high if first == low else low
    assert m4.tickets[other].state is _T.PENDING and m4.ledger.authorities[DEV].used == 3


# --- rejections: typed error, message, nothing changed ------------------------------------


def _base() -> tuple[M.Manager, dict[str, int]]:
    """A manager with something in every part, and the ids the cases need."""
    m = _start()
    ids: dict[str, int] = {}
    m, ids["alias"] = _run(m, A.RegisterAlias(DEV, "uvm"))
    m, ids["lost"] = _run(m, A.RegisterAuthority("gpu2", Tier.DEVICE, 4))
    m, _ = _run(m, A.LoseDevice(ids["lost"]))
    m, ids["granted"] = _run(m, M.Submit(H1, DEV, 1))
    m, ids["claimed"] = _run(m, M.Submit(H1, DEV, 1))
    m, ids["lease_dev"] = _run(m, M.Claim(H1, ids["claimed"]))
    m, ids["pending"] = _run(m, M.Submit(H2, DEV, 4))
    m, t = _run(m, M.Submit(H1, HOST, 1))
    m, ids["lease_host"] = _run(m, M.Claim(H1, t))
    m, ids["press"] = _run(m, M.Press(H1, DEV, 1))
    m, ids["press_done"] = _run(m, M.Press(H1, DEV, 1))
    m, _ = _run(m, M.CancelPressure(ids["press_done"]))
    m, ids["tx_full"] = _run(m, M.PlanTx(H1, ((HOST, 1),)))
    m, ids["tx_alloc"] = _run(m, M.ReserveTx(ids["tx_full"]))
    m, ids["tx_open"] = _run(m, M.PlanTx(H2, ((DEV, 3),)))
    m, ids["tx_done"] = _run(m, M.PlanTx(H2, ((HOST, 1),)))
    m, _ = _run(m, M.AbortTx(ids["tx_done"]))
    m, _ = _run(m, M.PrepareLimit(HOST, 4))
    return m, ids


_CASES: list[tuple[str, Any, type, str]] = [
    ("submit_bytes", lambda i: M.Submit(H1, DEV, 0), InvalidBytes, r"nbytes must be in \[1"),
    ("submit_priority", lambda i: M.Submit(H1, DEV, 1, priority="hi"), InvalidArgument, "priority must be an int"),
    ("submit_role", lambda i: M.Submit(H1, DEV, 1, role="kv"), InvalidArgument, "role must be a Role"),
    ("submit_holder", lambda i: M.Submit(9, DEV, 1), UnknownHolder, "holder 9 is not registered"),
    ("submit_authority", lambda i: M.Submit(H1, 99, 1), UnknownAuthority, "authority 99 is not registered"),
    ("submit_alias", lambda i: M.Submit(H1, i["alias"], 1), InvalidArgument, "is an alias of 1"),
    ("submit_lost", lambda i: M.Submit(H1, i["lost"], 1), DeviceLost, "context is lost"),
    ("submit_never_fits", lambda i: M.Submit(H1, DEV, 5), CapacityDenied, "5 B can never fit its 4 B limit"),
    ("claim_holder", lambda i: M.Claim(9, i["granted"]), UnknownHolder, "holder 9"),
    ("claim_unknown", lambda i: M.Claim(H1, 99), UnknownTicket, "ticket 99 was never issued"),
    ("claim_retired", lambda i: M.Claim(H1, i["claimed"]), InvalidTransition, "already retired"),
    ("claim_foreign", lambda i: M.Claim(H2, i["granted"]), ForeignHolder, "belongs to holder 1, not 2"),
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
    ("answer_retired", lambda i: M.Answer(H1, i["press_done"], ()), InvalidTransition, "already retired"),
    ("answer_foreign", lambda i: M.Answer(H2, i["press"], ()), ForeignHolder, "holder 1, not 2"),
    ("answer_victims_list", lambda i: M.Answer(H1, i["press"], [i["lease_dev"]]), InvalidArgument,
     "victims must be a tuple"),
    ("answer_victims_twice", lambda i: M.Answer(H1, i["press"], (i["lease_dev"], i["lease_dev"])),
     InvalidArgument, "distinct ints"),
    ("answer_victim_unknown", lambda i: M.Answer(H1, i["press"], (99,)), UnknownAllocation,
     "allocation 99 was never issued"),
    ("answer_victim_other_authority", lambda i: M.Answer(H1, i["press"], (i["lease_dev"], i["lease_host"])),
     InvalidArgument, "not pressure 1's 1"),
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
    ("plan_bytes_after_authorities", lambda i: M.PlanTx(H1, ((DEV, 0), (99, 1))), UnknownAuthority, "99"),
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


# --- negative controls: each cross-cutting guard off yields a harm a manager clause names ----------

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")


def _script_grant_charges_ledger() -> tuple[M.Manager, list[Any]]:
    return _start(), [M.Submit(H1, DEV, 3), M.Submit(H2, DEV, 3), M.Claim(H1, 1), M.Claim(H2, 2)]


def _script_tx_counts_granted() -> tuple[M.Manager, list[Any]]:
    return _start(), [M.Submit(H1, DEV, 3), M.PlanTx(H2, ((DEV, 3),)), M.ReserveTx(1)]


def _script_loss_keeps_charge() -> tuple[M.Manager, list[Any]]:
    return _start(), [M.PlanTx(H1, ((DEV, 2),)), M.ReserveTx(1), A.LoseDevice(DEV)]


def _script_limit_after_reclaim() -> tuple[M.Manager, list[Any]]:
    return _start(), [M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.PrepareLimit(DEV, 1), M.Answer(H1, 1, ()),
                      M.CommitLimit(DEV)]


#: guard -> (script, the clauses of invariants.manager its harm must break somewhere along the script)
CONTROLS = {
    # The grant promises bytes the ledger never charged (partition), then the claims push used past the limit.
    "grant_charges_ledger": (_script_grant_charges_ledger, {"state_I1_manager.buckets_partition_used",
                                                            "step_I2_manager.grant_within_limit"}),
    "tx_counts_granted": (_script_tx_counts_granted, {"step_I2_manager.grant_within_limit"}),
    "loss_keeps_charge": (_script_loss_keeps_charge, {"step_C3_manager.lost_charge_kept"}),
    "limit_after_reclaim": (_script_limit_after_reclaim, {"step_I2_manager.limit_not_below_used"}),
}


def test_every_manager_guard_has_a_control() -> None:
    assert sorted(CONTROLS) == _MANAGER_GUARDS and len(_MANAGER_GUARDS) == 4


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_manager_guard_off_is_caught_by_a_manager_clause(name: str) -> None:
    script, expected = CONTROLS[name]
    m, acts = script()
    off = GuardSet.without(name)
    found: set[str] = set()
    for act in acts:
        m, broken = _broken(m, act, off)
        found |= set(broken)
    assert expected <= found, found
    assert expected <= {c.key for c in CLAUSES.values() if c.predicate in _OWN_PREDICATES}


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_manager_guard_script_is_clean_with_every_guard_on(name: str) -> None:
    m, acts = CONTROLS[name][0]()
    for act in acts:
        try:
            m = _run(m, act)[0]
        except (CapacityDenied, InvalidTransition):
            pass  # the guard refuses the harmful step (or the claim of a ticket it left pending); nothing changed


def test_grant_charges_ledger_off_also_breaks_conservation_and_exact_credit() -> None:
    off = GuardSet.without("grant_charges_ledger")
    m, _ = MG.step(_start(), M.Submit(H1, DEV, 3), off)
    assert m.tickets[1].allocation is None and m.ledger.authorities[DEV].used == 0
    with pytest.raises(InvariantViolation, match="parts hold 3 B"):
        IM.check_all(m)
    nxt, result = MG.step(m, M.CancelTicket(H1, 1), off)
    with pytest.raises(InvariantViolation, match="reports 3 B credited"):
        IM.step_I1_manager(m, M.CancelTicket(H1, 1), nxt, result)


# --- mutations: every clause of invariants.manager can fail ------------------------------------

_OWN_PREDICATES = {"state_I1_manager", "state_I13_manager", "step_I1_manager", "step_I6_manager", "step_C3_manager",
                   "step_I2_manager"}


def _granted() -> M.Manager:
    return _run(_start(), M.Submit(H1, DEV, 3))[0]


def _with_tx() -> M.Manager:
    m, x = _run(_start(), M.PlanTx(H2, ((DEV, 1), (HOST, 1))))
    return _run(_run(m, M.ReserveTx(x))[0], M.ReserveTx(x))[0]


def _state_mut(name: str) -> M.Manager:
    if name == "partition":
        m = _granted()
        a = m.ledger.authorities[DEV]
        return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, used=2))))
    if name == "one_part":
        m = _with_tx()
        return evolve(m, txs=m.txs.set(2, M.Tx(2, H2, ((DEV, 1),), (1,))))
    if name == "ticket_reserved":
        m = _granted()
        return evolve(m, tickets=m.tickets.set(1, evolve(m.tickets[1], holder=H2)))
    if name == "tx_reserved":
        m = _with_tx()
        return evolve(m, txs=m.txs.set(1, evolve(m.txs[1], needs=((DEV, 2), (HOST, 1)))))
    if name == "idle_waiter":
        m, _ = _lease(_start(), H1, DEV, 4)
        m, _ = _run(m, M.Submit(H2, DEV, 1))
        a = m.ledger.authorities[DEV]
        return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, limit=5))))
    if name == "pending_holds":
        m, alloc = _lease(_start(), H1, DEV, 4)
        m, _ = _run(m, M.Submit(H2, DEV, 1))
        return evolve(m, tickets=m.tickets.set(2, evolve(m.tickets[2], allocation=alloc)))
    raise KeyError(name)


_STATE_MUTATIONS = {
    "partition": "state_I1_manager.buckets_partition_used",
    "one_part": "state_I1_manager.one_part_per_reservation",
    "ticket_reserved": "state_I1_manager.granted_ticket_reserved",
    "tx_reserved": "state_I1_manager.tx_held_reserved",
    "idle_waiter": "state_I13_manager.no_idle_fitting_waiter",
    "pending_holds": "state_I13_manager.pending_holds_nothing",
}


@pytest.mark.parametrize("name", sorted(_STATE_MUTATIONS))
def test_state_clause_fails_on_mutated_state(name: str) -> None:
    bad = _state_mut(name)
    with collecting() as found:
        IM.check_all(bad)
    assert _STATE_MUTATIONS[name] in found, found


def _step_mut(name: str) -> tuple[M.Manager, Any, M.Manager, Any]:
    """(before, action, a wrong after, a wrong result)."""
    if name == "credit_wrong":
        m = _granted()
        nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
        return m, M.CancelTicket(H1, 1), nxt, 2
    if name == "credit_twice":
        m = _granted()
        nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
        # a part still names the reservation the ledger already credited, and credits it again
        twice = evolve(nxt, tickets=nxt.tickets.set(1, m.tickets[1]))
        return twice, M.CancelTicket(H1, 1), nxt, 3
    if name == "own_action":
        m, alloc = _lease(_start(), H1, DEV, 2)
        nxt, _ = MG.step(m, A.Release(H1, alloc))
        return m, M.Press(H2, DEV, 1), nxt, 1
    if name == "lost_charge":
        m = _with_tx()
        nxt, _ = MG.step(m, A.LoseDevice(DEV))
        a = nxt.ledger.authorities[DEV]
        cut = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(DEV, evolve(a, used=0))))
        return m, A.LoseDevice(DEV), cut, None
    if name == "limit_below_used":
        m, _ = _lease(_start(), H1, DEV, 3)
        a = m.ledger.authorities[DEV]
        low = evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, limit=1))))
        return m, M.CommitLimit(DEV), low, M.LimitOutcome(True, 1, ())
    if name == "grant_past_limit":
        m = _start()
        nxt, _ = MG.step(m, M.Submit(H1, DEV, 3))
        a = nxt.ledger.authorities[DEV]
        low = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(DEV, evolve(a, limit=2))))
        return m, M.Submit(H1, DEV, 3), low, 1
    raise KeyError(name)


_STEP_MUTATIONS = {
    "credit_wrong": "step_I1_manager.credit_exactly_once",
    "credit_twice": "step_I1_manager.credit_exactly_once",
    "own_action": "step_I6_manager.charge_falls_by_own_action",
    "lost_charge": "step_C3_manager.lost_charge_kept",
    "limit_below_used": "step_I2_manager.limit_not_below_used",
    "grant_past_limit": "step_I2_manager.grant_within_limit",
}


@pytest.mark.parametrize("name", sorted(_STEP_MUTATIONS))
def test_step_clause_fails_on_mutated_step(name: str) -> None:
    before, act, after, result = _step_mut(name)
    with collecting() as found:
        IM.check_step(before, act, after, result)
    assert _STEP_MUTATIONS[name] in found, found


def test_every_manager_clause_has_a_mutation() -> None:
    own = {k for k, c in CLAUSES.items() if c.predicate in _OWN_PREDICATES}
    assert own == set(_STATE_MUTATIONS.values()) | set(_STEP_MUTATIONS.values())


@pytest.mark.parametrize("bound, small_granted", [(2, False), (10, True)], ids=["matured-stops", "young-skipped"])
def test_a_matured_misfit_ends_the_round_but_a_young_one_is_skipped(bound: int, small_granted: bool) -> None:
    m1, _ = _lease(_start(aging_bound=bound), H1, DEV, 2)
    m2, big = _run(m1, M.Submit(H2, DEV, 3))  # age 1
    m3, small = _run(m2, M.Submit(H2, DEV, 1))  # big ages to 2: matured iff the bound is 2
    assert m3.tickets[big] == _ticket(big, H2, DEV, 3, _T.PENDING, 2)
    if small_granted:
        assert m3 == _expect(m2, used={DEV: 3}, allocs={2: _alloc(2, DEV, H2, 1)}, next_allocation=3, next_ticket=4,
                             tickets={big: m3.tickets[big], small: _ticket(small, H2, DEV, 1, _T.GRANTED, 1, 2)})
    else:
        assert m3 == _expect(m2, next_ticket=4,
                             tickets={big: m3.tickets[big], small: _ticket(small, H2, DEV, 1, _T.PENDING, 1)})


def test_cancelling_the_matured_misfit_that_ended_a_round_runs_a_round() -> None:
    # Found by the explorer (invariants.manager_scope): without a round here, ticket 3 fits and waits.
    m1, _ = _run(_start(dev=2, aging_bound=2), M.Submit(H1, DEV, 1))
    m2, _ = _run(m1, M.Submit(H1, DEV, 2))  # pending, age 1
    m3, _ = _run(m2, M.Submit(H1, DEV, 1))  # ticket 2 matures (age 2), does not fit: the round ends before ticket 3
    assert m3.tickets[3] == _ticket(3, H1, DEV, 1, _T.PENDING, 1)
    m4, credit = _run(m3, M.CancelTicket(H1, 2))
    assert credit == 0
    assert m4 == _expect(m3, used={DEV: 2}, allocs={2: _alloc(2, DEV, H1, 1)}, next_allocation=3,
                         tickets={2: None, 3: _ticket(3, H1, DEV, 1, _T.GRANTED, 2, 2)})
