"""The composed manager's explorer scope (`invariants.manager_scope`): clean with every guard on, and a
deterministic, shortest counterexample for each cross-cutting guard switched off (rule R4). (C3 I1 I2 I6 I13)"""

from __future__ import annotations

import pytest
from manager_harness import walk

from invariants.clauses import CLAUSES, Coverage, recording
from invariants.explore import explore
from invariants.manager_scope import CONTROL_SCOPE, CONTROLS, manager_actions, manager_model, manager_start
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.guards import GUARDS, GuardSet

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")

#: guard -> (the clause its harm breaks first, the shortest counterexample's length)
EXPECTED = {
    "grant_charges_ledger": ("state_I1_manager.buckets_partition_used", 1),
    "tx_counts_granted": ("step_I2_manager.grant_within_limit", 3),
    "loss_keeps_charge": ("step_C3_manager.lost_charge_kept", 3),
    "limit_after_reclaim": ("step_I2_manager.limit_backs_every_grant", 3),
    "provider_pinned": ("step_C3_manager.removal_drops_no_charge", 2),
    "holder_in_use": ("step_I4a_holders.no_record_outlives_its_holder", 2),
}


def test_every_manager_guard_has_a_deterministic_control() -> None:
    assert sorted(CONTROLS) == _MANAGER_GUARDS == sorted(EXPECTED)


def test_scope_is_clean_with_every_guard_on() -> None:
    r = explore(manager_model(), max_depth=4, max_states=200_000)
    assert not r.found, r.message
    assert r.exhausted and r.depth == 4 and r.states > 4_000


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_guard_off_is_found_by_the_explorer(name: str) -> None:
    model = manager_model(GuardSet.without(name), CONTROLS[name])
    r = explore(model, max_depth=6, max_states=200_000)
    clause, steps = EXPECTED[name]
    assert r.found, f"{name} off: no counterexample in {r.states} states"
    assert r.clause == clause and len(r.counterexample) == steps, (r.clause, r.counterexample)
    fp = explore(model, max_depth=6, max_states=200_000, fingerprints=True)  # a fingerprint seen-set: the same
    assert (fp.counterexample, fp.clause, fp.states) == (r.counterexample, r.clause, r.states)


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_control_scope_is_clean_with_the_guard_on(name: str) -> None:
    r = explore(manager_model(GuardSet(), CONTROLS[name]), max_depth=EXPECTED[name][1] + 1, max_states=200_000)
    assert not r.found and r.exhausted, r.message


def test_alphabet_reaches_every_part_within_three_steps() -> None:
    """Every action kind of the scope is accepted somewhere within depth 3 (the scope is not vacuous)."""
    accepted = {type(act) for _, act, o in walk(manager_start(CONTROL_SCOPE), lambda m: manager_actions(CONTROL_SCOPE, m),
                                                MG.step, 3) if o[0] == "accepted"}
    kinds = {M.Submit, M.Claim, M.CancelTicket, M.TimeoutTicket, A.Release, M.Press, M.Answer, M.CancelPressure,
             M.PlanTx, M.ReserveTx, M.CommitTx, M.AbortTx, A.LoseDevice, A.ConfirmTermination, M.PrepareLimit,
             M.CommitLimit}
    assert kinds <= accepted, kinds - accepted


def test_fingerprint_seen_set_counts_the_same_states() -> None:
    whole = explore(manager_model(), max_depth=3)
    fp = explore(manager_model(), max_depth=3, fingerprints=True)
    assert not fp.found and (fp.states, fp.transitions, fp.exhausted) == (whole.states, whole.transitions, True)


def test_every_manager_clause_meets_its_case_in_the_scope() -> None:
    """No clause passes vacuously: within depth 3 each one is evaluated where its situation occurs (the states and
    steps'; an observation clause, I7's lock probe, judges what the refimpl adapter saw: the campaign's)."""
    cov = Coverage()
    with recording(cov):
        r = explore(manager_model(), max_depth=3)
    assert not r.found
    own = [k for k, c in CLAUSES.items() if c.predicate.endswith("_manager") and not c.predicate.startswith("observed")]
    assert len(own) == 22
    # This scope opens no allowance, so a clause about allowances has nothing to judge in it: its case is met by the
    # composed campaign (verify's coverage rule R1), where a device loss meets an open allowance.
    no_allowance = {"step_I6_manager.allowance_changes_by_own_action"}
    assert all(cov.of(k)[1] > 0 for k in own if k not in no_allowance), {k: cov.of(k) for k in own}
    assert all(cov.of(k)[1] == 0 for k in no_allowance)  # met here once the scope holds allowances: drop it above
