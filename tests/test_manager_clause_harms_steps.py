"""I6, I2, C3, I10 and I7 on the composed manager: each step harm its clause exists for, with its near miss.

Each test builds the harm with the spec's own actions or by breaking one record of a real step by hand
(as `test_manager_clauses.py` does), asserts the clause that states it fails with a report naming the
records, and, beside it, the nearest harmless step, which must pass. (I6 I2 C3 I10 I7)
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
from attrs import evolve
from clause_harness import violation
from manager_harness import DEV, H1, H2, HOST, lease, run, start, with_allocs

from invariants import manager as IM
from invariants.clauses import collecting
from invariants.mutation import applied
from refimpl.verify.mutants import MUTANTS
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.types import AllocState


def _with_alloc(m: M.Manager, alloc: int, **changes: Any) -> M.Manager:
    """`m` with allocation `alloc` changed (None: deleted), nothing else."""
    allocs = m.ledger.allocations
    allocs = allocs.delete(alloc) if changes.get("gone") else allocs.set(alloc, evolve(allocs[alloc], **changes))
    return with_allocs(m, allocs)


# --- I6: charge_falls_by_own_action ---------------------------------------------------------------

_PRESS = M.Press(H1, DEV, 1)


def test_another_holders_lease_shrunk_is_named_with_its_charges() -> None:
    m, _ = lease(start(), H1, DEV, 1)
    m, theirs = lease(m, H2, DEV, 3)
    shrunk = _with_alloc(m, theirs, nbytes=2, charge=2)  # H1's step takes 1 of H2's 3 B: the record stays
    e = violation(IM.step_I6_manager, m, _PRESS, shrunk, 1)
    assert (e.clause, str(e)) == ("step_I6_manager.charge_falls_by_own_action",
                                  f"I6: {_PRESS!r} (by {H1}) lowered holder {H2}'s charge 3 -> 2 B")


def test_another_holders_one_byte_lease_taken_is_named() -> None:
    m, theirs = lease(start(), H2, DEV, 1)
    e = violation(IM.step_I6_manager, m, _PRESS, _with_alloc(m, theirs, gone=True), 1)
    assert (e.clause, str(e)) == ("step_I6_manager.charge_falls_by_own_action",
                                  f"I6: {_PRESS!r} (by {H1}) lowered holder {H2}'s charge 1 -> 0 B")


def test_another_holders_record_changed_at_the_same_charge_passes() -> None:
    # H2's granted reservation becomes its lease inside H1's step (as a part may do on its behalf): nothing fell.
    m, tid = run(start(), M.Submit(H2, DEV, 2))
    alloc = m.tickets[tid].allocation
    IM.step_I6_manager(m, _PRESS, _with_alloc(m, alloc, state=AllocState.LIVE), 1)


def test_an_action_of_no_holder_taking_a_lease_is_named() -> None:
    m, mine = lease(start(), H1, DEV, 2)
    act = M.CommitLimit(DEV)  # a limit commit reclaims nothing by itself: only answers release
    e = violation(IM.step_I6_manager, m, act, _with_alloc(m, mine, gone=True), None)
    assert (e.clause, str(e)) == ("step_I6_manager.charge_falls_by_own_action",
                                  f"I6: {act!r} (by None) lowered holder {H1}'s charge 2 -> 0 B")


# --- I6: allowance_changes_by_own_action ------------------------------------------------------------


def _mapped_allowance() -> tuple[M.Manager, int]:
    """H1's allowance on DEV with 2 B of growth reserved and mapped."""
    m, wid = run(start(), A.OpenAllowance(H1, DEV, 3))
    m, _ = run(m, A.ReserveGrowth(H1, wid, 2))
    return run(m, A.MapAllowance(H1, wid, 2))[0], wid


def test_device_loss_dropping_an_allowance_is_named() -> None:
    m, wid = _mapped_allowance()
    lost, _ = MG.step(m, A.LoseDevice(DEV))
    dropped = evolve(lost, ledger=evolve(lost.ledger, allowances=lost.ledger.allowances.delete(wid)))
    e = violation(IM.step_I6_manager, m, A.LoseDevice(DEV), dropped, None)
    assert (e.clause, str(e)) == ("step_I6_manager.allowance_changes_by_own_action",
                                  f"I6: {A.LoseDevice(DEV)!r} changed holder {H1}'s allowance {wid}: "
                                  f"{m.ledger.allowances[wid]!r} -> None")


def test_a_parts_step_shrinking_an_allowance_is_named() -> None:
    m, wid = _mapped_allowance()
    w = m.ledger.allowances[wid]
    shrunk = evolve(m, ledger=evolve(m.ledger, allowances=m.ledger.allowances.set(wid, evolve(w, limit=2))))
    e = violation(IM.step_I6_manager, m, _PRESS, shrunk, 1)
    assert e.clause == "step_I6_manager.allowance_changes_by_own_action"


def test_the_holders_own_unmap_and_a_loss_that_keeps_the_allowance_pass() -> None:
    m, wid = _mapped_allowance()
    IM.step_I6_manager(m, A.UnmapAllowance(H1, wid, 2), *MG.step(m, A.UnmapAllowance(H1, wid, 2)))
    IM.step_I6_manager(m, A.LoseDevice(DEV), *MG.step(m, A.LoseDevice(DEV)))


@pytest.mark.parametrize("mutant", [None, "spec_loss_drops_allowances"])
def test_a_spec_loss_dropping_allowances_breaks_exactly_the_allowance_clause(mutant: str | None) -> None:
    m, _ = _mapped_allowance()
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        after, result = MG.step(m, A.LoseDevice(DEV))
    with collecting() as broken:
        IM.check_step(m, A.LoseDevice(DEV), after, result)
        IM.check_all(after)
    assert set(broken) == ({"step_I6_manager.allowance_changes_by_own_action"} if mutant else set())


# --- I6: pinned_never_reclaimed --------------------------------------------------------------------


def _pinned_and_pressed() -> tuple[M.Manager, int, int]:
    m, alloc = lease(start(), H1, DEV, 2)
    m, pid = run(m, M.Press(H1, DEV, 2, 0, 5))
    return evolve(m, uses=m.uses.set(alloc, (True, False))), alloc, pid


def test_answer_releasing_a_pinned_lease_is_named() -> None:
    m, alloc, pid = _pinned_and_pressed()
    act = M.Answer(H1, pid, (alloc,), 5)
    e = violation(IM.step_I6_manager, m, act, _with_alloc(m, alloc, gone=True), 2)
    assert (e.clause, str(e)) == ("step_I6_manager.pinned_never_reclaimed",
                                  f"I6: {act!r} released allocation {alloc}, flagged (pinned, in flight) = "
                                  f"(True, False)")


def test_answer_naming_a_pinned_lease_that_keeps_it_passes() -> None:
    m, alloc, pid = _pinned_and_pressed()
    IM.step_I6_manager(m, M.Answer(H1, pid, (alloc,), 5), m, 0)  # the lease stays live: nothing was reclaimed


# --- I2 --------------------------------------------------------------------------------------------


def test_limit_change_counts_only_its_own_authoritys_grants() -> None:
    # DEV's limit falls to exactly its 2 B granted while HOST holds 3 B: DEV still backs every grant.
    m, _ = lease(start(), H1, DEV, 2)
    m, _ = lease(m, H2, HOST, 3)
    m, _ = run(m, M.PrepareLimit(DEV, 2))
    nxt, out = MG.step(m, M.CommitLimit(DEV))
    assert out.limit == 2
    IM.step_I2_manager(m, M.CommitLimit(DEV), nxt, out)
    low = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(
        DEV, evolve(nxt.ledger.authorities[DEV], limit=1))))
    e = violation(IM.step_I2_manager, m, M.CommitLimit(DEV), low, out)  # 1 B cannot back DEV's 2 B
    assert (e.clause, str(e)) == ("step_I2_manager.limit_backs_every_grant",
                                  f"I2: CommitLimit(authority={DEV}): authority {DEV}'s limit moved to 1 B with 2 B "
                                  f"granted on a 4 B pool")


def test_grant_past_the_limit_is_named_with_the_charge_it_made() -> None:
    m = start()
    act = M.Submit(H1, DEV, 3)
    nxt, tid = MG.step(m, act)
    low = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(
        DEV, evolve(nxt.ledger.authorities[DEV], limit=2))))
    e = violation(IM.step_I2_manager, m, act, low, tid)
    assert (e.clause, str(e)) == ("step_I2_manager.grant_within_limit",
                                  f"I2: {act!r}: authority {DEV} charged 0 -> 3 B past its 2 B limit")


# --- C3 --------------------------------------------------------------------------------------------


def _removed(m: M.Manager, aid: int = DEV) -> M.Manager:
    """`m` with authority `aid` deleted and every record naming it left behind (the harm)."""
    return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.delete(aid)))


def test_removal_leaving_leases_names_the_first_four() -> None:
    m = start(dev=8)
    for _ in range(5):
        m, _ = lease(m, H1, DEV, 1)
    act = M.RemoveAuthority(DEV)
    e = violation(IM.step_C3_manager, m, act, _removed(m), None)
    assert (e.clause, str(e)) == ("step_C3_manager.removal_drops_no_charge",
                                  f"C3: {act!r}: authority {DEV} is gone but allocation 1, allocation 2, "
                                  f"allocation 3, allocation 4 still name it")


def test_removal_leaving_an_allowance_is_named() -> None:
    m, w = run(start(), A.OpenAllowance(H1, DEV, 2))
    e = violation(IM.step_C3_manager, m, M.RemoveAuthority(DEV), _removed(m), None)
    assert str(e).endswith(f"authority {DEV} is gone but allowance {w} still name it")


def test_removal_beside_another_authoritys_allowance_passes() -> None:
    m, _ = run(start(), A.OpenAllowance(H1, HOST, 2))
    nxt, res = MG.step(m, M.RemoveAuthority(DEV))
    IM.step_C3_manager(m, M.RemoveAuthority(DEV), nxt, res)


def test_removal_leaving_a_pending_limit_change_is_named() -> None:
    m = evolve(start(), changes=start().changes.set(DEV, M.LimitChange(DEV, 2)))  # prepared, not committed
    e = violation(IM.step_C3_manager, m, M.RemoveAuthority(DEV), _removed(m), None)
    assert (e.clause, str(e)) == ("step_C3_manager.removal_drops_no_charge",
                                  f"C3: RemoveAuthority(authority={DEV}): authority {DEV} is gone but limit change on "
                                  f"authority {DEV} still name it")


def test_lost_device_refund_is_named() -> None:
    m, _ = lease(start(), H1, DEV, 2)
    nxt, _ = MG.step(m, A.LoseDevice(DEV))
    cut = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(
        DEV, evolve(nxt.ledger.authorities[DEV], used=0))))
    IM.step_C3_manager(m, A.LoseDevice(DEV), nxt, None)  # near miss: the charge is kept
    e = violation(IM.step_C3_manager, m, A.LoseDevice(DEV), cut, None)
    assert (e.clause, str(e)) == ("step_C3_manager.lost_charge_kept",
                                  f"C3: LoseDevice(authority={DEV}): lost authority {DEV}'s used fell 2 -> 0 B before "
                                  f"termination")


# --- I10 -------------------------------------------------------------------------------------------


def _bundle_of_two() -> tuple[M.Manager, M.Manager, int]:
    """(both transactions of bundle 1 reserved, both committed); each commit moves the bundle by one."""
    m, b = run(start(), M.OpenBundle())
    m, x = run(m, M.PlanTx(H1, ((DEV, 1),)))
    m, y = run(m, M.PlanTx(H1, ((DEV, 1),)))
    for t in (x, y):
        m = run(run(m, M.JoinBundle(t, b))[0], M.ReserveTx(t))[0]
    both = run(run(m, M.CommitTx(x))[0], M.CommitTx(y))[0]
    assert both.bundles[b].versions == (2, 2, 2, 2)
    return m, both, b


def test_two_transactions_leased_in_one_step_move_their_bundle_by_two() -> None:
    # An implementation may commit both in one step (a batch): the bundle must move by both, not lag one.
    before, both, b = _bundle_of_two()
    IM.step_I10_manager(before, M.CommitTx(1), both, None)
    lag = evolve(both, bundles=both.bundles.set(b, M.Bundle(b, (1, 1, 1, 1))))
    e = violation(IM.step_I10_manager, before, M.CommitTx(1), lag, None)
    assert (e.clause, str(e)) == ("step_I10_manager.bundle_moves_with_its_leases",
                                  f"I10: CommitTx(tx=1): bundle {b} moved (0, 0, 0, 0) -> (1, 1, 1, 1) with 2 step(s) "
                                  f"of its bytes leased")


def test_a_vanished_bundle_does_not_hide_another_bundles_unleased_move() -> None:
    m, b1 = run(start(), M.OpenBundle())
    m, b2 = run(m, M.OpenBundle())
    bad = evolve(m, bundles=m.bundles.delete(b1).set(b2, M.Bundle(b2, (1, 1, 1, 1))))
    e = violation(IM.step_I10_manager, m, M.OpenBundle(), bad, None)
    assert str(e) == (f"I10: OpenBundle(): bundle {b2} moved (0, 0, 0, 0) -> (1, 1, 1, 1) with 0 step(s) of its "
                      f"bytes leased")


def test_poisoned_bundles_commit_is_named() -> None:
    before, both, b = _bundle_of_two()
    one = run(before, M.CommitTx(1))[0]
    poisoned = evolve(before, bundles=before.bundles.set(b, evolve(before.bundles[b], poisoned=True)))
    after = evolve(one, bundles=one.bundles.set(b, evolve(one.bundles[b], poisoned=True)))
    e = violation(IM.step_I10_manager, poisoned, M.CommitTx(1), after, None)
    assert (e.clause, str(e)) == ("step_I10_manager.bundle_moves_with_its_leases",
                                  f"I10: CommitTx(tx=1): poisoned bundle {b}'s transaction turned its reservations "
                                  f"into leases")


# --- I7 ----------------------------------------------------------------------------------------------


def test_callback_under_the_ledger_lock_is_named() -> None:
    IM.observed_I7_manager([(H1, 1, 2, False)])  # near miss: delivered outside the lock
    e = violation(IM.observed_I7_manager, [(H1, 1, 2, False), (H2, 3, 1, True)])
    assert (e.clause, str(e)) == ("observed_I7_manager.callback_without_ledger_lock",
                                  f"I7: holder {H2}'s callback for pressure 3 ran while its caller held the ledger lock")
