"""refimpl's process quota per tier (I1, D6; `refimpl.manager.limits`) refines `spec.manager`'s, step by step.

Two device ledgers of 8 B under one 6 B device quota: 4 B charged on gpu0, a 4 B ticket waits on gpu1 (its own
ledger has room, the quota 2 B). Each way a byte comes back on gpu0 (or the quota moves) owes the waiter on gpu1
its round (`Limits._quota_rounds`, `spec.manager._quota_rounds`); refimpl's whole abstract state must equal the
spec's after every step, contracts off and on.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_manager_differential import _diff, call

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_manager
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import CapacityDenied, GovernorError
from spec.tickets import TicketState
from spec.types import Role, Tier
from trace_harness import traced

GPU0, GPU1, KV, W = 1, 2, 1, 2
SETUP = [A.RegisterAuthority("gpu0", Tier.DEVICE, 8), A.RegisterAuthority("gpu1", Tier.DEVICE, 8, "cuda:1"),
         A.RegisterHolder("kv"), A.RegisterHolder("weights"), M.SetProcessQuota(Tier.DEVICE, 6)]
_LEASE = [A.Reserve(KV, GPU0, Tier.DEVICE, 4, Role.KV), A.Commit(KV, 1, 4)]  # allocation 1: 4 B on gpu0
_WAIT = [M.Submit(W, GPU1, 4)]  # ticket 1: pending behind the quota
#: name -> (what charges gpu0, then the ticket that waits, then what gives room back)
SCENARIOS: dict[str, list[Any]] = {
    "release": [*_LEASE, *_WAIT, A.Release(KV, 1)],
    "cancel": [A.Reserve(KV, GPU0, Tier.DEVICE, 4, Role.KV), *_WAIT, A.Cancel(KV, 1)],
    "commit_refund": [A.Reserve(KV, GPU0, Tier.DEVICE, 4, Role.KV), *_WAIT, A.Commit(KV, 1, 2)],
    "quarantine": [*_LEASE, *_WAIT, A.Quarantine(KV, 1, 2)],
    "shrink": [*_LEASE, *_WAIT, M.ShrinkLease(KV, 1, 2)],
    "answer": [*_LEASE, *_WAIT, M.Press(KV, GPU0, 2), M.Answer(KV, 1, (1,))],
    "cancel_granted_ticket": [M.Submit(KV, GPU0, 4), M.Submit(W, GPU1, 4), M.CancelTicket(KV, 1)],
    "abort_tx": [M.PlanTx(KV, ((GPU0, 4),)), M.ReserveTx(1), *_WAIT, M.AbortTx(1)],
    "confirm_termination": [*_LEASE, *_WAIT, A.LoseDevice(GPU0), A.ConfirmTermination(GPU0)],
    # a transaction holding 4 B on gpu0 needs gpu2; losing gpu2 aborts it, crediting gpu0
    "loss": [A.RegisterAuthority("gpu2", Tier.DEVICE, 8, "cuda:2"), M.PlanTx(KV, ((GPU0, 4), (3, 1))), M.ReserveTx(1),
             *_WAIT, A.LoseDevice(3)],
    "quota_raised": [*_LEASE, *_WAIT, M.SetProcessQuota(Tier.DEVICE, 8)],
    "quota_removed": [*_LEASE, *_WAIT, M.SetProcessQuota(Tier.DEVICE, None)],
}


def _run(actions: list[Any]) -> tuple[ProcessMemoryManager, M.Manager]:
    pmm, spec = ProcessMemoryManager(), M.initial()
    for i, act in enumerate(actions):
        spec, want = MG.step(spec, act)  # every scripted step is accepted by the spec
        got = call(pmm, act)
        assert got == want, f"step {i}: {act!r}: refimpl returned {got!r}, spec {want!r}"
        mine = abstract_manager(pmm)
        assert mine == spec, f"step {i}: {act!r}: states diverge\n{_diff(mine, spec)}"
    return pmm, spec


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_room_given_back_in_the_tier_grants_the_waiter_on_the_other_ledger(name: str, on: bool) -> None:
    with contracts.contracts(on):
        pmm, spec = _run([*SETUP, *SCENARIOS[name][:-1]])
        waiter = max(spec.tickets)
        assert spec.tickets[waiter].state is TicketState.PENDING  # gpu1 has 8 B free; the quota leaves 2 B
        _, spec = _run([*SETUP, *SCENARIOS[name]])
        assert spec.tickets[waiter].state is TicketState.GRANTED


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_every_grant_path_is_refused_past_the_quota_as_the_spec_refuses(on: bool) -> None:
    """Each refused on both sides with the spec's error class; the lease and recorded bytes pass as the spec's."""
    refused = [A.Reserve(KV, GPU1, Tier.DEVICE, 3, Role.KV), M.TryReserve(KV, GPU1, 3), M.GrowLease(KV, 1, 3),
               M.Submit(KV, GPU1, 7), M.SetProcessQuota(Tier.DEVICE, 3)]
    with contracts.contracts(on):
        pmm, spec = _run([*SETUP, *_LEASE, M.PlanTx(W, ((GPU1, 3),))])
        for act in [*refused, M.ReserveTx(1)]:
            with pytest.raises(GovernorError) as want:
                MG.step(spec, act)
            with pytest.raises(type(want.value)):
                call(pmm, act)
            assert abstract_manager(pmm) == spec, act
        _run([*SETUP, *_LEASE, A.RecordCommitted(KV, GPU1, Tier.DEVICE, 5, Role.KV)])  # recorded: past the quota


def test_the_full_contract_catches_a_grant_past_the_quota() -> None:
    """Mutant `quota_ignored` (a grant's room is its ledger's free bytes alone): a try-reserve past the quota is
    caught by I1's harm clause while a quota is set (the full contract runs then, `refimpl.manager.views`)."""
    from invariants._violation import InvariantViolation
    from invariants.mutation import applied
    from refimpl.verify.mutants import MUTANTS

    pmm, _ = _run([*SETUP, *_LEASE])
    with applied(MUTANTS["quota_ignored"]), contracts.contracts(True), pytest.raises(InvariantViolation) as exc:
        pmm.try_reserve(KV, GPU1, 3)
    assert exc.value.clause == "step_I1_quota.tier_charge_within_quota", exc.value


# --- pinned by the mutation run of refimpl/manager/limits.py (benchmarks/mutation.py) ------------------------

def test_a_charge_of_exactly_what_the_quota_leaves_is_granted_and_one_byte_more_is_refused_whole() -> None:
    """`_within_quota`: asked == left fits; then 0 B left is refused, the message whole, the state unchanged."""
    pmm, spec = _run([*SETUP, *_LEASE, A.Reserve(W, GPU1, Tier.DEVICE, 2, Role.KV)])  # 4 + 2 == the 6 B quota
    assert [a.used for a in spec.ledger.authorities.values()] == [4, 2]
    with pytest.raises(CapacityDenied, match=re.escape("tier device: 1 B asked, 0 B left of its 6 B process quota "
                                                       "(I1)") + "$"):
        pmm.reserve(W, GPU1, Tier.DEVICE, 1, Role.KV)
    assert abstract_manager(pmm) == spec


def test_room_given_back_grants_the_waiting_ledgers_of_the_tier_in_ascending_id() -> None:
    """`_quota_rounds`: two ledgers wait behind the quota; 4 B credited on gpu0 grant gpu1's 4 B ticket (the lower
    id) and leave gpu2's pending (2 B left), as the spec does."""
    setup = [*SETUP[:2], A.RegisterAuthority("gpu2", Tier.DEVICE, 8, "cuda:2"), *SETUP[2:]]
    gpu2 = 3
    _, spec = _run([*setup, *_LEASE, M.Submit(W, GPU1, 4), M.Submit(W, gpu2, 4), A.Release(KV, 1)])
    assert {i: t.state for i, t in spec.tickets.items()} == {1: TicketState.GRANTED, 2: TicketState.PENDING}


def test_the_quota_event_reports_the_used_of_its_own_tiers_ledgers_only() -> None:
    """`_ms_tier` (the scope of `set_process_quota`): the traced event's `used` figure names the tier's canonical
    ledgers, not another tier's."""
    pmm, buf = traced()
    gpu, host = pmm.register_authority("gpu0", Tier.DEVICE, 8), pmm.register_authority("host", Tier.HOST, 8)
    kv = pmm.register_holder("kv")
    pmm.reserve(kv, host, Tier.HOST, 3, Role.KV)
    pmm.reserve(kv, gpu, Tier.DEVICE, 2, Role.KV)
    pmm.set_process_quota(Tier.DEVICE, 5)
    event = json.loads(buf.getvalue().splitlines()[-1])
    assert (event["kind"], event["payload"]["used"]) == ("set_process_quota", {str(gpu): 2})


#: name -> a script after SETUP whose every step refimpl must match the spec on (ages included): where a credit
#: owes no round, or owes exactly one (`Arbitration._rounds`: the notes `Ledger._credit` took).
NO_EXTRA_ROUND: dict[str, list[Any]] = {
    # 0 B quarantined: gpu0's headroom did not rise, so its waiter does not age (no round, D10)
    "quarantine_of_nothing": [*_LEASE, M.Submit(W, GPU0, 5), A.Quarantine(KV, 1, 0)],
    # 2 B of 4 quarantined on gpu0: its own round ages its 5 B waiter (4 B room now), and the quota's rounds
    # skip gpu0 (its round ran), though its room rose past what the quota left before
    "own_round_once": [*_LEASE, M.Submit(W, GPU0, 5), A.Quarantine(KV, 1, 2)],
    # gpu1's own free bytes (2 B) bind its room before and after a 2 B refund on gpu0 (used 2 B after it): the
    # quota's room rose, gpu1's did not, so its waiter does not age
    "room_bound_by_own_free": [M.SetProcessQuota(Tier.DEVICE, 14), A.Reserve(W, GPU1, Tier.DEVICE, 6, Role.KV),
                               A.Commit(W, 1, 6), M.Submit(W, GPU1, 4),
                               A.Reserve(KV, GPU0, Tier.DEVICE, 4, Role.KV), A.Commit(KV, 2, 2)],
}


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
@pytest.mark.parametrize("name", sorted(NO_EXTRA_ROUND))
def test_a_credit_owes_each_waiting_ledger_one_round_at_most_and_none_where_its_room_did_not_rise(
        name: str, on: bool) -> None:
    with contracts.contracts(on):
        _, spec = _run([*SETUP, *NO_EXTRA_ROUND[name]])
    ages = {t.id: (t.state, t.age) for t in spec.tickets.values()}
    rounds = {"quarantine_of_nothing": 0, "own_round_once": 1, "room_bound_by_own_free": 0}[name]
    assert ages == {1: (TicketState.PENDING, 1 + rounds)}  # its submit's round, then the credit's


def test_a_charge_that_credits_nothing_leaves_no_note_behind() -> None:
    """`Ledger._credit` notes a ledger only for a credit: try_reserve's commit (of exactly its charge) leaves no
    note on gpu0, so gpu0's later 4 B reservation does not count as 4 B credited when gpu1's 1 B lease comes back
    (the quota left 0 B before, 1 B after: gpu0's 1 B waiter gets its round and is granted, as in the spec)."""
    _, spec = _run([*SETUP, A.Reserve(W, GPU1, Tier.DEVICE, 1, Role.KV), A.Commit(W, 1, 1), M.TryReserve(KV, GPU0, 1),
                    A.Reserve(KV, GPU0, Tier.DEVICE, 4, Role.KV), M.Submit(W, GPU0, 1), A.Release(W, 1)])
    assert spec.tickets[1].state is TicketState.GRANTED
