"""The composed campaign checks each grant a governor makes on its own as the spec's `GrantTicket` (issue #21).

`invariants.governor_grants`: the spec steps without granting, the governor's records say which tickets it
granted, and each must be a legal `GrantTicket` (pending, fitting, first in the design's order), with no
fitting first waiter left pending. Here: the rule on hand-built states, then two governors that break it
(one never grants, one grants the newest fitting ticket first), each caught by the campaign naming the clause,
and the campaign counting the grants of a correct governor as accepted `GrantTicket` steps."""

from __future__ import annotations

import functools

import pytest

from invariants._violation import RefinementViolation
from invariants.campaign import campaign_settings
from invariants.governor_grants import apply_grants, governor_grants
from invariants.manager_machine import ManagerSpecAdapter, run_manager_campaign
from spec import ledger_actions as A
from spec import manager as S
from spec import manager_actions as M
from spec.grants import grant
from spec.guards import ALL_ON
from spec.quota import headroom
from spec.tickets import TicketState
from spec.types import Role, Tier

RELEASE = A.Release(1, 1)


def _freed(eager: bool = False) -> M.Manager:
    """Tickets 2 and 3 (20 B each) waiting on a 100 B ledger, then the 90 B lease released: both fit, 2 first
    (`eager`: the spec's rounds grant them, as a governor that grants at once does)."""
    m = M.initial()
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", Tier.DEVICE, 100)):
        m = S.step(m, act)[0]
    m, t1 = S.step(m, M.Submit(1, 1, 90, 0, Role.KV))
    m = S.step(m, M.Claim(1, t1))[0]
    for _ in range(2):
        m = S.step(m, M.Submit(1, 1, 20, 0, Role.KV))[0]
    return S.step(m, RELEASE, eager=eager)[0]


def test_the_grants_a_governor_made_are_read_from_its_records_and_step_the_spec() -> None:
    lazy, governor = _freed(), ManagerSpecAdapter()
    governor.state = _freed(eager=True)
    granted = governor_grants(governor, lazy, None, RELEASE, None)
    assert granted == {2, 3}
    assert apply_grants(lazy, RELEASE, granted) == governor.state


def test_a_grant_out_of_the_designs_order_is_refused_naming_I13() -> None:
    with pytest.raises(RefinementViolation, match=r"granted ticket 3, which the spec refuses \(GrantOutOfOrder: "
                                                  r".*ticket 2 fits and comes first \(I13\)"):
        apply_grants(_freed(), RELEASE, {3})


def test_a_fitting_first_waiter_left_pending_is_refused_naming_I13() -> None:
    m = _freed()
    with pytest.raises(RefinementViolation, match=r"ticket 3 fits on authority 1 .* left it pending \(I13\)"):
        apply_grants(m, RELEASE, {2})
    with pytest.raises(RefinementViolation, match=r"ticket 2 fits .* left it pending"):
        apply_grants(m, RELEASE, set())


def test_an_over_grant_is_refused_naming_I2() -> None:
    m = M.initial()
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", Tier.DEVICE, 100),
                M.Submit(1, 1, 90, 0, Role.KV), M.Submit(1, 1, 20, 0, Role.KV)):
        m = S.step(m, act)[0]
    with pytest.raises(RefinementViolation, match=r"CapacityDenied: grant of ticket 2: 20 B asked, 10 B free .*I2"):
        apply_grants(m, M.Submit(1, 1, 20, 0, Role.KV), {2})


def _newest_first(m: M.Manager, action: object, guards: object) -> tuple[M.Manager, object]:
    """A governor that grants every fitting waiter, the newest first (not the design's order, I13)."""
    m, result = S.step(m, action, guards, eager=False)
    while fit := [t for t in m.tickets.values() if t.state is TicketState.PENDING
                  and (a := m.ledger.authorities.get(t.authority)) is not None
                  and t.nbytes <= headroom(m.quotas, m.ledger, a)]:
        m = grant(m, max(fit, key=lambda t: t.id), ALL_ON)[0]
    return m, result


@pytest.mark.parametrize("step, found", [
    (functools.partial(S.step, eager=False), r"left it pending \(I13\)"),  # grants nobody
    (_newest_first, r"GrantOutOfOrder: .*\(I13\)"),
])
def test_the_campaign_catches_a_governor_that_breaks_the_grant_rule(step: object, found: str) -> None:
    class Broken(ManagerSpecAdapter):
        def __init__(self) -> None:
            super().__init__()
            self._step = step

    with pytest.raises(RefinementViolation, match=found):
        run_manager_campaign(Broken, campaign_settings(100, 50))


def test_the_campaign_counts_a_correct_governors_grants_as_GrantTicket_steps() -> None:
    stats = run_manager_campaign(ManagerSpecAdapter, campaign_settings(20, 30))
    assert stats.accepted_by_action.get("GrantTicket", 0) > 0
    assert sum(stats.accepted_by_action.values()) == stats.accepted
