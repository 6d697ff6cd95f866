"""The case counts of the composed manager's clauses: counted exactly when their situation occurs.

`ortmem verify` calls an ID verified only when each clause was evaluated on states where its case held
(rule 1, coverage); a clause that counts its case on every state, or never, makes that rule vacuous or
unreachable. Each row: a state or step where the clause's case occurs, counted (1 evaluation, 1 case),
and the nearest one where it does not, counted (1, 0). (I1 I2 I6 C3 I10)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from manager_harness import DEV, H1, H2, HOST, clause_counts, granted, lease, run, start

from invariants import manager as IM
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.types import Role, Tier


def _step(m: M.Manager, act: Any) -> tuple[M.Manager, Any, M.Manager, Any]:
    nxt, result = MG.step(m, act)
    return m, act, nxt, result


# --- state_I1_manager ------------------------------------------------------------------------------

_I1 = ("granted_ticket_reserved", "tx_held_reserved", "one_part_per_reservation", "buckets_partition_used")


def _ticket_and_tx() -> M.Manager:
    m, x = run(start(), M.PlanTx(H2, ((DEV, 1), (HOST, 1))))
    m = run(run(m, M.ReserveTx(x))[0], M.ReserveTx(x))[0]
    return run(m, M.Submit(H1, DEV, 1))[0]


def _planned_tx_only() -> M.Manager:
    return run(start(), M.PlanTx(H2, ((DEV, 1),)))[0]  # a transaction that holds nothing yet


@pytest.mark.parametrize(("name", "build", "hits"), [
    ("empty", start, (0, 0, 0, 0)),
    ("planned transaction, nothing held", _planned_tx_only, (0, 0, 0, 0)),
    ("granted ticket and a transaction holding both needs", _ticket_and_tx, (1, 1, 1, 1)),
    ("a lease only", lambda: lease(start(), H1, DEV, 2)[0], (0, 0, 0, 1)),
])
def test_state_i1_counts_its_cases(name: str, build: Callable[[], M.Manager], hits: tuple[int, ...]) -> None:
    got = clause_counts(IM.state_I1_manager, build())
    assert {c: got[f"state_I1_manager.{c}"] for c in _I1} == {c: (1, h) for c, h in zip(_I1, hits)}


# --- step predicates: (step where the case occurs, step where it does not) -------------------------


def _leased_and_pressed() -> tuple[M.Manager, int, int]:
    m, alloc = lease(start(), H1, DEV, 2)
    m, pid = run(m, M.Press(H1, DEV, 2))
    return m, alloc, pid


def _answer_releasing() -> tuple:
    m, alloc, pid = _leased_and_pressed()
    return _step(m, M.Answer(H1, pid, (alloc,)))


def _answer_keeping() -> tuple:
    m, _, pid = _leased_and_pressed()
    return _step(m, M.Answer(H1, pid, ()))


def _recorded() -> tuple:
    return _step(start(), A.RecordCommitted(H1, DEV, Tier.DEVICE, 2, Role.STAGING))


def _claim() -> tuple:
    m, tid = run(start(), M.Submit(H1, DEV, 2))
    return _step(m, M.Claim(H1, tid))


def _limit_commit() -> tuple:
    m, _ = run(start(), M.PrepareLimit(DEV, 2))
    return _step(m, M.CommitLimit(DEV))


def _bundle_open() -> tuple:
    return _step(start(), M.OpenBundle())


STEP_CASES = {
    # clause key: (a step where its case occurs, the nearest step where it does not)
    "step_I1_manager.credit_exactly_once": (lambda: _step(granted(), M.CancelTicket(H1, 1)),
                                            lambda: _step(start(), M.Submit(H1, DEV, 3))),
    "step_I6_manager.pinned_never_reclaimed": (_answer_releasing, _answer_keeping),
    "step_I6_manager.charge_falls_by_own_action": (_answer_releasing, _claim),
    "step_I6_manager.allowance_changes_by_own_action": (
        lambda: _step(run(start(), A.OpenAllowance(H1, DEV, 2))[0], A.LoseDevice(DEV)),
        lambda: _step(start(), A.LoseDevice(DEV))),
    "step_I2_manager.grant_within_limit": (lambda: _step(start(), M.Submit(H1, DEV, 3)), _recorded),
    "step_I2_manager.limit_backs_every_grant": (_limit_commit, _claim),
    "step_C3_manager.lost_charge_kept": (lambda: _step(start(), A.LoseDevice(DEV)), _claim),
    "step_C3_manager.removal_drops_no_charge": (lambda: _step(start(), M.RemoveAuthority(DEV)), _claim),
    "step_I10_manager.bundle_moves_with_its_leases": (_bundle_open, _claim),
}


def _pred(key: str) -> Callable[..., None]:
    return getattr(IM, key.split(".")[0])


@pytest.mark.parametrize("key", sorted(STEP_CASES))
def test_step_clause_counts_its_case(key: str) -> None:
    assert clause_counts(_pred(key), *STEP_CASES[key][0]())[key] == (1, 1)


@pytest.mark.parametrize("key", sorted(STEP_CASES))
def test_step_clause_does_not_count_a_step_without_its_case(key: str) -> None:
    assert clause_counts(_pred(key), *STEP_CASES[key][1]())[key] == (1, 0)


def test_an_allowances_own_action_is_no_case_of_the_composed_allowance_clause() -> None:
    # The holder's own close is the ledger I6's to judge: an allowance exists, but no other actor moved it.
    key = "step_I6_manager.allowance_changes_by_own_action"
    assert clause_counts(IM.step_I6_manager, *_step(run(start(), A.OpenAllowance(H1, DEV, 2))[0],
                                              A.CloseAllowance(H1, 1)))[key] == (1, 0)


def test_claim_charges_nothing_new_so_no_grant_case() -> None:
    # The grant clause's case is a charge that rose, not by recording: a claim turns a reservation into a lease
    # at the same charge (the table's near miss is a recording, whose charge does rise).
    before, act, nxt, result = _claim()
    assert nxt.ledger.authorities[DEV].used == before.ledger.authorities[DEV].used == 2
    assert clause_counts(IM.step_I2_manager, before, act, nxt, result)["step_I2_manager.grant_within_limit"] == (1, 0)
    before, act, nxt, _ = _recorded()
    assert nxt.ledger.authorities[DEV].used > before.ledger.authorities[DEV].used

