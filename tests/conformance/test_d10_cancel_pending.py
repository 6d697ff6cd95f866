"""D10 (issue #21, docs/conformance.md): retiring a pending ticket is not an arbitration round.

Cancelling or timing out a *pending* ticket ages nobody (the design's table: "Cancel: Pending -> cancelled",
no arbitrate; upstream does the same). It is followed by a grant pass (the round's order and stop rule, no
ageing): when the retired ticket was the matured misfit that ended the last round, the next waiter that fits is
granted at once. Cancelling a *granted* ticket credits its bytes and is a round (everyone ages).

The same scenarios run on both layers of that rule, with the same expected tickets (state, age):
`spec.manager` (every clause of `invariants.manager` judged per step) and refimpl's composed `cancel_ticket`,
read back through its abstract view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from manager_harness import DEV, H1, H2, run, start
from invariants import manager_order as IO
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_manager
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import Tier

_T = TicketState
PEND, GRANT = _T.PENDING, _T.GRANTED


class _SpecManager:
    def __init__(self, cap: int, bound: int) -> None:
        self.m = start(dev=cap, aging_bound=bound)

    def submit(self, h: int, n: int) -> int:
        self.m, t = run(self.m, M.Submit(h, DEV, n))
        return t

    def cancel(self, h: int, t: int, timeout: bool = False) -> int:
        self.m, credit = run(self.m, (M.TimeoutTicket if timeout else M.CancelTicket)(h, t))
        return credit

    def tickets(self) -> dict[int, tuple[TicketState, int]]:
        return {i: (t.state, t.age) for i, t in self.m.tickets.items()}


class _RefComposed:
    def __init__(self, cap: int, bound: int) -> None:
        self.pmm = ProcessMemoryManager(aging_bound=bound)
        self.a = self.pmm.register_authority("gpu0", Tier.DEVICE, cap)
        self.h = {H1: self.pmm.register_holder("h1"), H2: self.pmm.register_holder("h2")}

    def submit(self, h: int, n: int) -> int:
        return self.pmm.submit(self.h[h], self.a, n)

    def cancel(self, h: int, t: int, timeout: bool = False) -> int:
        return (self.pmm.timeout_ticket if timeout else self.pmm.cancel_ticket)(self.h[h], t)

    def tickets(self) -> dict[int, tuple[TicketState, int]]:
        return {i: (t.state, t.age) for i, t in abstract_manager(self.pmm).tickets.items()}


FRONTS: dict[str, Callable[[int, int], Any]] = {"spec.manager": _SpecManager, "refimpl.composed": _RefComposed}


@pytest.fixture(params=sorted(FRONTS))
def front(request: pytest.FixtureRequest) -> Callable[[int, int], Any]:
    return FRONTS[request.param]


@pytest.mark.parametrize("timeout", [False, True], ids=["cancel", "timeout"])
def test_retiring_a_pending_ticket_ages_nobody(front: Callable[[int, int], Any], timeout: bool) -> None:
    g = front(2, 4)
    assert [g.submit(H1, 2), g.submit(H1, 1), g.submit(H2, 1)] == [1, 2, 3]
    before = g.tickets()
    assert before == {1: (GRANT, 1), 2: (PEND, 2), 3: (PEND, 1)}
    assert g.cancel(H2, 3, timeout) == 0
    assert g.tickets() == {1: (GRANT, 1), 2: (PEND, 2)}  # ticket 2 did not age: no round ran


def test_retiring_the_matured_misfit_grants_the_next_waiter_that_fits_without_ageing(
        front: Callable[[int, int], Any]) -> None:
    g = front(2, 2)
    assert [g.submit(H1, 1), g.submit(H1, 2), g.submit(H2, 1)] == [1, 2, 3]
    # Ticket 2 matured (age 2) and does not fit in the 1 B left: the round stopped before ticket 3, which fits.
    assert g.tickets() == {1: (GRANT, 1), 2: (PEND, 2), 3: (PEND, 1)}
    assert g.cancel(H1, 2) == 0
    assert g.tickets() == {1: (GRANT, 1), 3: (GRANT, 1)}  # granted by the pass, at the age it had


def test_cancelling_a_granted_ticket_is_a_round_and_ages_the_waiters(front: Callable[[int, int], Any]) -> None:
    g = front(3, 4)
    assert [g.submit(H1, 2), g.submit(H1, 1), g.submit(H2, 3)] == [1, 2, 3]
    assert g.tickets() == {1: (GRANT, 1), 2: (GRANT, 1), 3: (PEND, 1)}
    assert g.cancel(H1, 2) == 1
    assert g.tickets() == {1: (GRANT, 1), 3: (PEND, 2)}  # 2 B free, ticket 3 (3 B) waits one round older


def _matured_misfit_ahead_of_a_fit_and_a_misfit() -> M.Manager:
    """4 B, bound 2: ticket 2 (3 B) matured and misfit stops the round; behind it ticket 3 (1 B) fits, ticket 4
    (3 B) does not."""
    m = start(dev=4, aging_bound=2)
    for act in (M.Submit(H1, DEV, 2), M.Submit(H1, DEV, 3), M.Submit(H1, DEV, 1), M.Submit(H2, DEV, 3)):
        m, _ = run(m, act)
    assert {i: (t.state, t.age) for i, t in m.tickets.items()} == {
        1: (GRANT, 1), 2: (PEND, 2), 3: (PEND, 2), 4: (PEND, 1)}
    return m


def test_the_grant_pass_is_no_round_for_passed_over_ages_but_a_round_still_must_age() -> None:
    from spec import manager as MG

    prev = _matured_misfit_ahead_of_a_fit_and_a_misfit()
    nxt, _ = MG.step(prev, M.CancelTicket(H1, 2))
    assert {i: (t.state, t.age) for i, t in nxt.tickets.items()} == {1: (GRANT, 1), 3: (GRANT, 2), 4: (PEND, 1)}
    IO.step_I13_order(prev, M.CancelTicket(H1, 2), nxt)  # ticket 4 passed over by a pass, not by a round: no harm
    # The same grants and ages after an action that is a round (a granted ticket's cancel): ticket 4 was passed
    # over without ageing, the starvation the clause names.
    with pytest.raises(InvariantViolation, match="passed over by a round"):
        IO.step_I13_order(prev, M.CancelTicket(H1, 1), nxt)
