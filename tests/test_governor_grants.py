"""The composed campaign checks each grant a governor makes on its own as the spec's `GrantTicket` (issue #21).

`invariants.governor_grants`: the spec steps without granting, the governor's records say which tickets it
granted, and each must be a legal `GrantTicket` (pending, fitting, first in the design's order), with no
fitting first waiter left pending. Here: the rule on hand-built states, then two governors that break it
(one never grants, one grants the newest fitting ticket first), each caught by the campaign naming the clause,
and the campaign counting the grants of a correct governor as accepted `GrantTicket` steps."""

from __future__ import annotations

import functools

import attrs
import pytest

from invariants._violation import RefinementViolation
from invariants.adapter import OwnIds
from invariants.campaign import campaign_settings, run_machine
from invariants.governor_grants import apply_grants, governor_grants
from invariants.manager_machine import ManagerMachine, ManagerSpecAdapter
from spec import ledger_actions as A
from spec import manager as S
from spec import manager_actions as M
from spec.grants import grant
from spec.guards import ALL_ON
from spec.quota import headroom
from spec.tickets import TicketState
from spec.types import Role, Tier

RELEASE = A.Release(1, 1)


def _leased(aging_bound: int = 4) -> M.Manager:
    """A 100 B device ledger whose holder claimed a 90 B lease (allocation 1, ticket 1): 10 B free."""
    m = M.initial(aging_bound)
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", Tier.DEVICE, 100)):
        m = S.step(m, act)[0]
    m, t1 = S.step(m, M.Submit(1, 1, 90, 0, Role.KV))
    return S.step(m, M.Claim(1, t1))[0]


def _freed(eager: bool = False) -> M.Manager:
    """Tickets 2 and 3 (20 B each) waiting on a 100 B ledger, then the 90 B lease released: both fit, 2 first
    (`eager`: the spec's rounds grant them, as a governor that grants at once does)."""
    m = _leased()
    for _ in range(2):
        m = S.step(m, M.Submit(1, 1, 20, 0, Role.KV))[0]
    return S.step(m, RELEASE, eager=eager)[0]


def test_the_grants_a_governor_made_are_read_from_its_records_and_step_the_spec() -> None:
    lazy, governor = _freed(), ManagerSpecAdapter()
    governor.state = _freed(eager=True)
    granted = governor_grants(governor, lazy, None, RELEASE, None)
    assert granted == {2, 3}
    assert apply_grants(lazy, RELEASE, granted) == governor.state


def _own(state: M.Manager, renamed: dict[int, int], bound: dict[int, int] | None = None) -> OwnIds:
    """A governor whose records `state` name tickets by its own ids (`renamed`: spec id -> its id), seen through
    `OwnIds` as a campaign with refinement sees it, the ids of `bound` (default: all) already matched."""
    governor = ManagerSpecAdapter()
    governor.state = attrs.evolve(state, tickets={renamed.get(t, t): r for t, r in state.tickets.items()})
    ids = OwnIds(governor, M.initial())
    ids.gov_of["ticket"] = dict(renamed if bound is None else bound)
    ids.spec_of["ticket"] = {g: s for s, g in ids.gov_of["ticket"].items()}
    return ids


def test_the_grants_are_read_in_the_governors_own_ids() -> None:
    assert governor_grants(_own(_freed(eager=True), {2: 502, 3: 503}), _freed(), None, RELEASE, None) == {2, 3}
    assert governor_grants(_own(_freed(), {2: 502, 3: 503}), _freed(), None, RELEASE, None) == set()


def test_a_submits_new_ticket_is_the_governors_own_result() -> None:
    """Ticket 1 (90 B) waits on 80 B; a Submit issues ticket 2 (20 B), which fits at once. Its id is bound to
    nothing yet: the governor's result (777) names it; the waiter is named by its binding (501)."""
    m = M.initial()
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", Tier.DEVICE, 100),
                A.Reserve(1, 1, Tier.DEVICE, 20, Role.KV), M.Submit(1, 1, 90, 0, Role.KV)):
        m = S.step(m, act)[0]
    submit = M.Submit(1, 1, 20, 0, Role.KV)
    lazy, tid = S.step(m, submit, eager=False)
    eager = S.step(m, submit)[0]
    assert (tid, eager.tickets[1].state, eager.tickets[2].state) == (2, TicketState.PENDING, TicketState.GRANTED)
    mine = _own(eager, {1: 501, 2: 777}, bound={1: 501})
    assert governor_grants(mine, lazy, tid, submit, 777) == {2}
    assert governor_grants(mine, lazy, tid, submit, 778) == set()  # the governor's result names another ticket


def test_a_waiter_missing_from_the_governors_records_is_not_granted() -> None:
    governor = ManagerSpecAdapter()
    governor.state = attrs.evolve(_freed(eager=True), tickets={})
    assert governor_grants(governor, _freed(), None, RELEASE, None) == set()


def _behind_a_matured_misfit() -> M.Manager:
    """Ticket 2 (20 B) waits on 10 B free, passed over by ticket 3 (5 B, granted) and aged by the next submit's round
    to the aging bound (3, its own submit round the first: matured); ticket 4 (5 B) fits behind it."""
    m = _leased(aging_bound=3)
    m = S.step(m, M.Submit(1, 1, 20, 0, Role.KV))[0]
    m = S.step(m, M.Submit(1, 1, 5, 0, Role.KV))[0]
    m = S.step(m, M.Submit(1, 1, 5, 0, Role.KV), eager=False)[0]
    assert m.tickets[2].state is TicketState.PENDING and m.tickets[3].state is TicketState.GRANTED
    assert m.tickets[4].state is TicketState.PENDING
    return m


def test_a_matured_misfit_ahead_owes_nothing_and_refuses_the_grant_behind_it() -> None:
    m = _behind_a_matured_misfit()
    assert apply_grants(m, RELEASE, set()) == m  # the freed bytes accumulate for ticket 2: nobody is owed
    with pytest.raises(RefinementViolation, match=r"granted ticket 4, which the spec refuses \(GrantOutOfOrder: .*"
                                                  r"ticket 2 is a matured misfit"):
        apply_grants(m, RELEASE, {4})


def test_the_governors_grants_follow_the_designs_order_not_the_ids() -> None:
    """Ticket 3 (priority 2) comes before ticket 2 (priority 0): both granted, in that order."""
    m = _leased()
    m = S.step(m, M.Submit(1, 1, 20, 0, Role.KV))[0]
    m = S.step(m, M.Submit(1, 1, 20, 2, Role.KV))[0]
    lazy, eager = S.step(m, RELEASE, eager=False)[0], S.step(m, RELEASE)[0]
    assert apply_grants(lazy, RELEASE, {2, 3}) == eager
    assert eager.tickets[3].allocation < eager.tickets[2].allocation  # ticket 3 was granted first


def test_a_grant_out_of_the_designs_order_is_refused_naming_I13() -> None:
    with pytest.raises(RefinementViolation, match=r"granted ticket 3, which the spec refuses \(GrantOutOfOrder: "
                                                  r".*ticket 2 fits and comes first \(I13\)"):
        apply_grants(_freed(), RELEASE, {3})


def test_a_fitting_first_waiter_left_pending_is_refused_naming_I13() -> None:
    m = _freed()
    with pytest.raises(RefinementViolation, match=r"ticket 3 fits on authority 1 and is first in the design's order, "
                                                  r"but the governor left it pending \(I13\)$"):
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
        run_machine(ManagerMachine, Broken, campaign_settings(100, 50))


def test_the_campaign_counts_a_correct_governors_grants_as_GrantTicket_steps() -> None:
    stats = run_machine(ManagerMachine, ManagerSpecAdapter, campaign_settings(20, 30))
    assert stats.accepted_by_action.get("GrantTicket", 0) > 0
    assert sum(stats.accepted_by_action.values()) == stats.accepted
