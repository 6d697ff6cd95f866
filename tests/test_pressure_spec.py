"""Unit scenarios of spec.pressure, each asserting the whole pool (C5, I6, I7, I13).

The same scenario runs against the spec and against the manager (one ledger as a pool), and
the two pools must be equal after every step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants.pressure import check_all, check_step, check_trace, overtakes
from invariants.pressure_machine import PoolParams, SpecPoolAdapter
from refimpl.verify.pressure_adapter import PressureAdapter
from spec import pressure as P
from spec.lifecycle import mermaid
from spec.tickets import PRESSURE_TABLE, TICKET_TABLE, PressureState, TicketState

ADAPTERS = [SpecPoolAdapter, PressureAdapter]


class Run:
    """Drive one adapter, checking every predicate and recording the trace."""

    def __init__(self, factory: Callable[..., Any], params: PoolParams) -> None:
        self.gov = factory(params)
        self.trace: list[Any] = []

    def __call__(self, action: Any) -> Any:
        prev = self.gov.abstract()
        result = self.gov.execute(action)
        nxt = self.gov.abstract()
        check_step(prev, action, nxt)
        check_all(nxt)
        self.trace.append((prev, action, nxt))
        return result

    @property
    def pool(self) -> P.Pool:
        return self.gov.abstract()


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
def test_matured_request_is_not_overtaken(factory) -> None:
    # I13: a 6 B request waits behind a 5 B lease; once matured (bound 3) small newcomers stop passing it.
    do = Run(factory, PoolParams(8, 0, 2, 3, 8))
    lease = do(P.Submit(1, 5, 0))
    do(P.Claim(1, lease))
    big = do(P.Submit(2, 6, 0))
    small = [do(P.Submit(2, 1, 0)) for _ in range(3)]
    states = {t: do.pool.tickets[t].state for t in small}
    # Rounds age it 1 (its submit), 2 (first newcomer passes), 3 = matured: later newcomers wait behind it.
    assert do.pool.tickets[big].age == 3
    assert states == {small[0]: TicketState.GRANTED, small[1]: TicketState.PENDING, small[2]: TicketState.PENDING}
    assert overtakes(do.trace) == {big: 1}
    do(P.Release(1, lease))  # 5 B return: they accumulate for the matured big request first
    assert do.pool.tickets[big].state is TicketState.GRANTED
    check_trace(do.trace)


def test_aging_off_lets_newcomers_pass_forever() -> None:
    from spec.guards import GuardSet

    p = P.initial(8, 0, 2, 1, 16)
    trace = []
    for act in [P.Submit(1, 5, 0), P.Claim(1, 1), P.Submit(2, 6, 0)] + [P.Submit(2, 1, 0)] * 3:
        nxt, _ = P.step(p, act, GuardSet.without("aging"))
        trace.append((p, act, nxt))
        p = nxt
    assert overtakes(trace) == {2: 3}
    with pytest.raises(AssertionError, match="I13: ticket 2 was overtaken in 3 rounds"):
        check_trace(trace)


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
@pytest.mark.parametrize("how", ["release", "cancel", "timeout"])
def test_exactly_one_credit_per_grant(factory, how) -> None:
    # I7: whichever of release / cancel-granted / timeout-granted comes first credits; the rest are no-ops.
    do = Run(factory, PoolParams(10, 2, 1, 2, 4))
    t = do(P.Submit(1, 5, 0))
    assert do.pool.free == 3 and do.pool.tickets[t].grant == 1
    if how == "release":
        do(P.Claim(1, t))
        assert do(P.Cancel(1, t)) == 0  # claim disarmed cancel
        do(P.Release(1, t))
    else:
        assert do((P.Cancel if how == "cancel" else P.Timeout)(1, t)) == 5
    assert do(P.Cancel(1, t)) == 0 and do(P.Timeout(1, t)) == 0
    assert do.pool == P.Pool(
        capacity=10, fixed=2, free=8, holders=1, aging_bound=2, mailbox=4, next_ticket=2, next_grant=2)
    check_trace(do.trace)


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
def test_zero_answer_is_legal_and_forces_nothing(factory) -> None:
    # C5, I6: the holder answers with nothing (its lease is pinned); the waiter keeps waiting, nothing is taken.
    do = Run(factory, PoolParams(8, 0, 2, 2, 8))
    lease = do(P.Submit(1, 6, 0))
    do(P.Claim(1, lease))
    do(P.SetUse(1, lease, True, False))
    waiter = do(P.Submit(2, 4, 0))
    r = do(P.Press(1, 4, 0, 10))
    assert do(P.Answer(1, r, (), 3)) == 0
    pool = do.pool
    assert pool.pressures[r].state is PressureState.ANSWERED and pool.pressures[r].released == 0
    assert pool.tickets[lease].state is TicketState.CLAIMED and pool.tickets[waiter].state is TicketState.PENDING
    assert pool.free == 2
    do(P.SetUse(1, lease, False, False))
    r2 = do(P.Press(1, 4, 0, 10))
    assert do(P.Answer(1, r2, (lease,), 10)) == 6  # unpinned and idle now: reclaimed, and the waiter is granted
    assert do.pool.tickets[waiter].state is TicketState.GRANTED and do.pool.free == 4


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
def test_reconfigure_fails_older_pending_tickets(factory) -> None:
    do = Run(factory, PoolParams(8, 0, 1, 2, 8))
    held = do(P.Submit(1, 8, 0))
    waiting = do(P.Submit(1, 2, 0))
    do(P.Reconfigure())
    assert do.pool.generation == 1 and waiting not in do.pool.tickets and held in do.pool.tickets
    assert do(P.Cancel(1, waiting)) == 0  # retired: a no-op


def test_tables_are_rendered_as_diagrams() -> None:
    assert "pending --> granted: grant" in mermaid(TICKET_TABLE)
    assert "open --> expired: expire" in mermaid(PRESSURE_TABLE)
