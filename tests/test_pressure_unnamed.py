"""Pins for `step_I7.unnamed_tickets_untouched`: a step changes no ticket its action does not name.

The spec's own steps pass it (a round's grant of a waiter and a reconfigure's failing of the
waiters are the only changes to unnamed tickets); a hand-made pool that retires or alters another
holder's ticket fails it; and the refimpl mutant `cancel_retires_another_waiter` (a cancel that
retires another holder's pending ticket) fails it on the manager's pool view, deterministically.
"""

from __future__ import annotations

import contextlib

import attrs
import pytest

from invariants import InvariantViolation, contracts
from invariants.mutation import applied
from invariants.pressure import check_step, step_I7
from invariants.pressure_machine import PoolParams
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.pressure_adapter import PressureAdapter
from spec import pressure as P
from spec.tickets import TicketState

_CLAUSE = "step_I7.unnamed_tickets_untouched"


def _clause(check, *args) -> str | None:
    try:
        check(*args)
    except InvariantViolation as e:
        return e.clause
    return None


def _two_waiters() -> P.Pool:
    """A full pool (holder 1 holds it all) with a pending ticket of holder 2 (id 2) and one of holder 3 (id 3)."""
    p = P.initial(capacity=10, fixed=0, holders=3, aging_bound=4, mailbox=8)
    for act in (P.TryReserve(1, 10, 0), P.Submit(2, 4, 0), P.Submit(3, 4, 0)):
        p, _ = P.step(p, act)
    assert [p.tickets[i].state for i in (2, 3)] == [TicketState.PENDING] * 2
    return p


def test_spec_cancel_grant_and_reconfigure_pass() -> None:
    p = _two_waiters()
    q, _ = P.step(p, P.Cancel(3, 3))  # the named ticket leaves, the other waits on
    assert _clause(check_step, p, P.Cancel(3, 3), q) is None
    r, _ = P.step(p, P.Release(1, 1))  # a release grants both waiters: pending -> granted is allowed
    assert [r.tickets[i].state for i in (2, 3)] == [TicketState.GRANTED] * 2
    assert _clause(check_step, p, P.Release(1, 1), r) is None
    s, _ = P.step(p, P.Reconfigure())  # a reconfigure fails every waiter, naming none
    assert 2 not in s.tickets and 3 not in s.tickets
    assert _clause(check_step, p, P.Reconfigure(), s) is None


def test_hand_made_harms_fail_the_clause() -> None:
    p = _two_waiters()
    q, _ = P.step(p, P.Cancel(3, 3))
    act = P.Cancel(3, 3)
    wrong = attrs.evolve(q, tickets=p.tickets.delete(2))  # ticket 2 retired instead of 3
    assert _clause(step_I7, p, act, wrong) == _CLAUSE
    for change in ({"holder": 3}, {"nbytes": 3}, {"priority": 5}):  # ticket 2 kept, but altered
        moved = attrs.evolve(q, tickets=q.tickets.set(2, attrs.evolve(q.tickets[2], **change)))
        assert _clause(step_I7, p, act, moved) == _CLAUSE, change
    press = P.Press(1, 1, 0, 9)
    opened, _ = P.step(p, press)
    granted = attrs.evolve(opened, tickets=opened.tickets.set(2, attrs.evolve(p.tickets[2], state=TicketState.GRANTED,
                                                                            grant=p.next_grant)),
                           next_grant=p.next_grant + 1)
    assert _clause(step_I7, p, press, opened) is None
    assert _clause(step_I7, p, press, granted) == _CLAUSE  # a press grants nothing
    pinned = P.step(P.step(p, P.Release(1, 1))[0], P.Claim(2, 2))[0]
    flagged = attrs.evolve(pinned, tickets=pinned.tickets.set(2, attrs.evolve(pinned.tickets[2], pinned=True)))
    assert _clause(step_I7, pinned, P.SetUse(3, 3, True, False), flagged) == _CLAUSE  # not ticket 2's SetUse


@pytest.mark.parametrize("mutant", [None, "cancel_retires_another_waiter"])
def test_refimpl_cancel_retires_only_its_ticket(mutant: str | None) -> None:
    with applied(MUTANTS[mutant]) if mutant else contextlib.nullcontext(), contracts.contracts(False):
        ad = PressureAdapter(PoolParams(capacity=10, fixed=0, holders=3, aging_bound=4, mailbox=8))
        for act in (P.TryReserve(1, 10, 0), P.Submit(2, 4, 0), P.Submit(3, 4, 0)):
            ad.execute(act)
        prev = ad.abstract()
        ad.execute(P.Cancel(3, 3))
        got = _clause(check_step, prev, P.Cancel(3, 3), ad.abstract())
    assert got == (None if mutant is None else _CLAUSE)


@pytest.mark.parametrize("mutant", [None, "cancel_retires_another_waiter"])
def test_drained_cancel_retires_only_its_ticket(mutant: str | None) -> None:
    """The finding's own path: a dropped handle's cancel applied by `drain`, checked by the drain's contract."""
    with applied(MUTANTS[mutant]) if mutant else contextlib.nullcontext(), contracts.contracts(True):
        ad = PressureAdapter(PoolParams(capacity=10, fixed=0, holders=3, aging_bound=4, mailbox=8))
        for act in (P.TryReserve(1, 10, 0), P.Submit(2, 4, 0), P.Submit(3, 4, 0)):
            ad.execute(act)
        ad.gov.drop(3, 3)
        try:
            ad.gov.drain()
            got = None
        except InvariantViolation as e:
            got = e.clause
        left = ad.abstract()
    assert got == (None if mutant is None else _CLAUSE)
    if mutant is None:
        assert sorted(left.tickets) == [1, 2] and left.tickets[2].state is TicketState.PENDING
