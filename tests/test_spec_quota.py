"""The process quota per tier in the composed spec (I1, D6; `spec.quota`): SetProcessQuota, every grant path
admitted within the quota's room, the rounds the quota owes, and the harm clause `step_I1_quota`.

Two device ledgers of 4 B and 8 B (ids 1 and 3) share one device quota; the host ledger (2) has none.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, HOST, lease, run, start

from invariants import manager as IM
from invariants._violation import InvariantViolation
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import CapacityDenied, InvalidArgument, InvalidBytes
from spec.grants import GrantTicket
from spec.guards import GuardSet
from spec.tickets import TicketState
from spec.types import Role, Tier

DEV2 = 3


def _two_devices(quota: int | None = 5) -> M.Manager:
    m = run(start(), A.RegisterAuthority("dev2", Tier.DEVICE, 8, "cuda:1"))[0]
    return m if quota is None else run(m, M.SetProcessQuota(Tier.DEVICE, quota))[0]


def _charged(m: M.Manager) -> M.Manager:
    """3 B leased on dev2 (2 B of the 5 B quota left, 5 B of dev2's limit), a 3 B transaction planned on dev."""
    m = lease(m, H1, DEV2, 3)[0]
    return run(m, M.PlanTx(H2, ((DEV, 3),)))[0]


_REFUSED: list[tuple[str, Any, type, str]] = [
    ("tier_str", lambda m: M.SetProcessQuota("device", 9), InvalidArgument, "tier must be a Tier"),
    ("negative", lambda m: M.SetProcessQuota(Tier.DEVICE, -1), InvalidBytes, r"must be in \[0"),
    ("float", lambda m: M.SetProcessQuota(Tier.DEVICE, 9.0), InvalidBytes, "must be an int"),
    ("below_charge", lambda m: M.SetProcessQuota(Tier.DEVICE, 2), CapacityDenied,
     "a 2 B process quota is below the 3 B it charges"),
    ("reserve", lambda m: A.Reserve(H1, DEV2, Tier.DEVICE, 3, Role.KV), CapacityDenied, "2 B left of its 5 B"),
    ("try_reserve", lambda m: M.TryReserve(H1, DEV2, 3), CapacityDenied, "try-only: 3 B asked, 2 B free"),
    ("grow", lambda m: M.GrowLease(H1, 1, 3), CapacityDenied, "try-only: 3 B asked, 2 B free"),
    ("reserve_tx", lambda m: M.ReserveTx(1), CapacityDenied, "needs 3 B, 2 B free"),
    ("submit_never_fits", lambda m: M.Submit(H1, DEV2, 6), CapacityDenied, "6 B can never fit its 5 B process quota"),
]


@pytest.mark.parametrize("make, error, message", [c[1:] for c in _REFUSED], ids=[c[0] for c in _REFUSED])
def test_bad_quota_input_and_grants_past_the_quota_are_refused_unchanged(make: Any, error: type,
                                                                          message: str) -> None:
    m = _charged(_two_devices())
    snapshot = evolve(m)
    with pytest.raises(error, match=message) as exc:
        MG.step(m, make(m))
    assert type(exc.value) is error and m == snapshot


def test_a_grant_event_past_the_quota_is_refused() -> None:
    m = run(lease(_two_devices(None), H1, DEV, 3)[0], M.SetProcessQuota(Tier.DEVICE, 5))[0]
    m, t = MG.step(m, M.Submit(H2, DEV2, 3), eager=False)  # a round that only ages (ortmem-manager/2)
    assert m.tickets[t].state is TicketState.PENDING
    with pytest.raises(CapacityDenied, match="process quota|I1"):
        MG.step(m, GrantTicket(t), eager=False)


def test_a_credit_on_one_ledger_is_room_for_a_waiter_on_the_other() -> None:
    m, r = lease(_two_devices(5), H1, DEV, 3)
    m, t = run(m, M.Submit(H2, DEV2, 3))
    assert m.tickets[t].state is TicketState.PENDING  # dev2 has 8 B free, the quota 2 B
    m = run(m, A.Release(H1, r))[0]  # dev has no waiter; its credit is the device tier's room
    assert m.tickets[t].state is TicketState.GRANTED


def test_a_raised_or_removed_quota_grants_its_waiters() -> None:
    for quota in (6, None):
        m = lease(_two_devices(5), H1, DEV, 3)[0]
        m, t = run(m, M.Submit(H2, DEV2, 3))
        m = run(m, M.SetProcessQuota(Tier.DEVICE, quota))[0]
        assert m.tickets[t].state is TicketState.GRANTED and (Tier.DEVICE in m.quotas) is (quota is not None)


def test_the_quota_is_per_tier_and_recorded_bytes_may_pass_it() -> None:
    m = _two_devices(1)
    m = run(m, A.Reserve(H1, HOST, Tier.HOST, 4, Role.KV))[0]  # the host tier has no quota
    m = run(m, A.RecordCommitted(H1, DEV, Tier.DEVICE, 3, Role.KV))[0]  # bytes taken outside: recorded
    assert sum(a.used for a in m.ledger.authorities.values() if a.tier is Tier.DEVICE) == 3
    with pytest.raises(CapacityDenied):
        MG.step(m, A.Reserve(H1, DEV2, Tier.DEVICE, 1, Role.KV))


def test_the_harm_clause_catches_a_grant_past_the_quota_and_a_quota_below_the_charge() -> None:
    m = lease(_two_devices(5), H1, DEV, 3)[0]
    act = A.Reserve(H1, DEV2, Tier.DEVICE, 3, Role.KV)
    past = MG.step(m, act, GuardSet().waive("quota"))[0]  # the quota refusal passed over
    with pytest.raises(InvariantViolation, match="tier device charges 6 B against its 5 B process quota"):
        IM.check_step(m, act, past)
    below = M.SetProcessQuota(Tier.DEVICE, 2)
    with pytest.raises(InvariantViolation, match="tier_charge_within_quota|3 B against its 2 B"):
        IM.check_step(m, below, evolve(m, quotas=m.quotas.set(Tier.DEVICE, 2)))
    recorded = A.RecordCommitted(H1, DEV2, Tier.DEVICE, 3, Role.KV)
    IM.check_step(m, recorded, MG.step(m, recorded)[0])  # recorded, not admitted: no harm


# --- pinned by the mutation run of spec/quota.py (benchmarks/mutation.py) -------------------------------------

def test_a_charge_of_exactly_what_the_quota_leaves_fits_and_another_tiers_bytes_do_not_count() -> None:
    """`check_quota` / `tier_charged`: 4 B on the host (no quota) are not the device tier's; 2 B on dev fill the
    5 B quota exactly; then 1 B more is refused with the whole message, the state unchanged."""
    m = lease(_charged(_two_devices()), H1, HOST, 4)[0]  # dev2: 3 B of the 5 B device quota
    m = run(m, A.Reserve(H1, DEV, Tier.DEVICE, 2, Role.KV))[0]
    snapshot = evolve(m)
    with pytest.raises(CapacityDenied, match=r"^tier device: 1 B asked, 0 B left of its 5 B process quota \(I1\)$"):
        MG.step(m, A.Reserve(H1, DEV2, Tier.DEVICE, 1, Role.KV))
    assert m == snapshot


@pytest.mark.parametrize("quota", [10, None], ids=["quota-wide", "no-quota"])
def test_the_room_is_the_ledgers_free_bytes_when_the_quota_leaves_more_or_there_is_none(quota: int | None) -> None:
    """`headroom`: 3 B leased on each 4 B ledger leave 1 B free there, whatever the device quota; 2 B are refused."""
    m = lease(lease(_two_devices(quota), H1, DEV, 3)[0], H1, HOST, 3)[0]
    snapshot = evolve(m)
    for aid in (DEV, HOST):
        with pytest.raises(CapacityDenied, match="2 B asked, 1 B free"):
            MG.step(m, M.TryReserve(H2, aid, 2))
        assert m == snapshot


# --- pinned by the mutation run of invariants/manager_quota.py (the clause and the I13 room) -------------------

def test_a_quota_on_a_tier_without_ledgers_is_judged_as_charging_nothing() -> None:
    """`step_I1_quota` reads a tier no canonical ledger charges as 0 B, before and after: a 0 B quota there holds."""
    m = run(start(), M.SetProcessQuota(Tier.DISK, 0))[0]  # `run` judges every clause, step and state
    run(m, A.RegisterHolder("h3"))


def test_a_step_that_does_not_charge_a_tier_already_past_its_quota_is_not_judged() -> None:
    """Recorded bytes carried the device tier past its quota; a later step that charges no more there is no harm."""
    m = run(_two_devices(5), A.RecordCommitted(H1, DEV2, Tier.DEVICE, 6, Role.KV))[0]
    run(m, A.Reserve(H1, HOST, Tier.HOST, 2, Role.KV))


def test_the_clause_catches_a_ledger_that_appears_charged_past_a_zero_quota() -> None:
    """A tier with no ledger before the step: a ledger registered already charging 1 B breaks its 0 B quota."""
    from invariants.manager_quota import step_I1_quota

    before = run(start(), M.SetProcessQuota(Tier.DISK, 0))[0]
    act = A.RegisterAuthority("disk", Tier.DISK, 8)
    after = run(before, act)[0]
    disk = max(after.ledger.authorities)
    bad = evolve(after, ledger=evolve(after.ledger, authorities=after.ledger.authorities.set(
        disk, evolve(after.ledger.authorities[disk], used=1))))
    with pytest.raises(InvariantViolation, match=r"tier disk charges 1 B against its 0 B process quota"):
        step_I1_quota(before, act, bad)


def test_the_idle_clause_reads_the_ledgers_free_bytes_under_a_wide_quota() -> None:
    """`room` (I13's "fits"): a 2 B ticket waits on dev (1 B free of 4, the 10 B quota leaves 7): no idle harm."""
    m = lease(_two_devices(10), H1, DEV, 3)[0]
    m, t = run(m, M.Submit(H2, DEV, 2))  # `run` checks state_I13_manager on the result
    assert m.tickets[t].state is TicketState.PENDING


def test_a_lazy_step_ages_the_tickets_an_eager_one_does_when_a_grant_takes_the_quota_back() -> None:
    """The quota's rounds read the headroom with the rounds' grants made: cancelling ticket x on dev frees 3 B
    there and 3 B of the tier's quota; the round on dev grants w2 (3 B), so dev2's quota headroom is 2 B as before
    and w1 there is owed no round. A lazy step (`ortmem-manager/2` replay, the composed campaign) must not age w1
    where the eager one did not (the full verify's manager campaign found the two a round apart)."""
    from spec.grants import enabled_grants
    from spec.guards import ALL_ON
    m = _two_devices(5)
    m, x = run(m, M.Submit(H1, DEV, 3))
    m, w2 = run(m, M.Submit(H2, DEV, 3))
    m, w1 = run(m, M.Submit(H2, DEV2, 3))
    assert (m.tickets[x].state, m.tickets[w2].state, m.tickets[w1].state) == (
        TicketState.GRANTED, TicketState.PENDING, TicketState.PENDING)
    eager = MG.step(m, M.CancelTicket(H1, x))[0]
    lazy = MG.step(m, M.CancelTicket(H1, x), eager=False)[0]
    while owed := enabled_grants(lazy, ALL_ON):
        lazy = MG.step(lazy, GrantTicket(owed[min(owed)]), eager=False)[0]
    assert eager.tickets[w2].state is TicketState.GRANTED and eager.tickets[w1].age == m.tickets[w1].age
    assert lazy == eager
