"""Grant order and aging (I13, `invariants.manager_order`) and the holder's answer (C5, `invariants.manager_answers`).

Each clause is shown to fail on a hand-mutated composed step and to hold on the spec's own steps along the same
scripts, including the D10 grant pass after a pending ticket is cancelled (which ages nobody).
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from clause_harness import broken
from manager_harness import DEV, H1, H2, lease, run, start

from invariants import manager as IM
from invariants.clauses import CLAUSES
from invariants.manager_order import rounds_to_maturity, served_before
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.tickets import TicketState

_T = TicketState


def _two_waiters() -> tuple[M.Manager, int, int, int]:
    """A 4 B lease holds DEV (capacity 4); tickets of 3 B at priority 0 and 1 wait."""
    m, alloc = lease(start(), H1, DEV, 4)
    m, low = run(m, M.Submit(H2, DEV, 3, 0))
    m, high = run(m, M.Submit(H2, DEV, 3, 1))
    return m, alloc, low, high


def _mut(name: str) -> tuple[M.Manager, Any, M.Manager, Any]:
    """(before, action, a wrong after, its result)."""
    if name == "press_moves_bytes":  # the press releases the holder's lease itself
        m, alloc = lease(start(), H1, DEV, 2)
        return m, M.Press(H1, DEV, 2), MG.step(m, A.Release(H1, alloc))[0], 1
    if name in ("unnamed_victim", "named_kept", "over_reported", "zero_takes"):
        m, a1 = lease(start(), H1, DEV, 1)
        m, a2 = lease(m, H1, DEV, 2)
        m, pid = run(m, M.Press(H1, DEV, 2))
        both = MG.step(MG.step(m, A.Release(H1, a1))[0], A.Release(H1, a2))[0]
        if name == "unnamed_victim":  # the holder named a2; a1 left too
            return m, M.Answer(H1, pid, (a2,)), both, 2
        if name == "named_kept":  # the holder named a2; it is still a live lease and nothing is reported
            return m, M.Answer(H1, pid, (a2,)), evolve(m, pressures=m.pressures.delete(pid)), 0
        right, got = MG.step(m, M.Answer(H1, pid, (a2,)))
        assert got == 2
        if name == "over_reported":  # the right bytes leave, but the answer reports more
            return m, M.Answer(H1, pid, (a2,)), right, 3
        return m, M.Answer(H1, pid, ()), MG.step(m, A.Release(H1, a1))[0], 0  # zero answer, a lease taken
    if name == "order_passed_over":  # the lease returns; the priority-0 ticket is granted, the priority-1 one waits
        m, alloc, low, high = _two_waiters()
        act = A.Release(H1, alloc)
        right = MG.step(m, act)[0]
        assert right.tickets[high].state is _T.GRANTED and right.tickets[low].state is _T.PENDING
        g, w = right.tickets[high], right.tickets[low]
        bad = evolve(right, tickets=right.tickets.set(low, evolve(g, id=low, priority=0))
                     .set(high, evolve(w, id=high, priority=1)))
        return m, act, bad, 4
    if name in ("age_lags", "age_falls"):
        m, _ = lease(start(), H1, DEV, 3)
        m, big = run(m, M.Submit(H2, DEV, 3))
        if name == "age_falls":  # a press changes no ticket, but the waiter's age drops
            return m, M.Press(H1, DEV, 1), evolve(m, tickets=m.tickets.set(big, evolve(m.tickets[big], age=0))), 1
        act = M.Submit(H2, DEV, 1)
        right, small = MG.step(m, act)
        assert right.tickets[small].state is _T.GRANTED and right.tickets[big].age == m.tickets[big].age + 1
        return m, act, evolve(right, tickets=right.tickets.set(big, m.tickets[big])), small  # passed over, not aged
    raise KeyError(name)


_MUTATIONS = {
    "press_moves_bytes": "step_C5_answers.press_takes_nothing",
    "unnamed_victim": "step_C5_answers.answer_is_holders_choice",
    "named_kept": "step_C5_answers.answer_is_holders_choice",
    "over_reported": "step_C5_answers.answer_is_holders_choice",
    "zero_takes": "step_C5_answers.zero_answer_takes_nothing",
    "order_passed_over": "step_I13_order.grant_order",
    "age_lags": "step_I13_order.passed_over_ages",
    "age_falls": "step_I13_order.passed_over_ages",
}


@pytest.mark.parametrize("name", sorted(_MUTATIONS))
def test_clause_fails_on_mutated_step(name: str) -> None:
    before, act, after, result = _mut(name)
    assert _MUTATIONS[name] in broken(IM.check_step, before, act, after, result)


@pytest.mark.parametrize("name", sorted(_MUTATIONS))
def test_the_spec_own_step_passes_where_the_mutation_fails(name: str) -> None:
    before, act, _, _ = _mut(name)
    after, result = MG.step(before, act)
    assert broken(IM.check_step, before, act, after, result) == []


def test_every_order_and_answer_clause_has_a_mutation() -> None:
    own = {k for k, c in CLAUSES.items() if c.predicate in ("step_C5_answers", "step_I13_order")}
    assert own == set(_MUTATIONS.values()) and len(own) == 5


def test_d10_grant_pass_ages_nobody_and_is_no_harm() -> None:
    # Bound 2: the 3 B ticket matures and stops every round; cancelling it (pending) runs a grant pass that
    # grants the matured 1 B ticket and leaves the younger one at its age (D10: not a round).
    m, _ = lease(start(aging_bound=2), H1, DEV, 3)
    m, big = run(m, M.Submit(H2, DEV, 3))
    m, t3 = run(m, M.Submit(H2, DEV, 1))
    m, t4 = run(m, M.Submit(H2, DEV, 1))
    assert [m.tickets[i].age for i in (big, t3, t4)] == [2, 2, 1]
    after, result = MG.step(m, M.CancelTicket(H2, big))
    assert after.tickets[t3].state is _T.GRANTED and after.tickets[t4].state is _T.PENDING
    assert after.tickets[t4].age == 1
    assert broken(IM.check_step, m, M.CancelTicket(H2, big), after, result) == []


def test_served_before_states_the_design_order() -> None:
    def t(id: int, age: int, priority: int) -> M.Ticket:
        return M.Ticket(id, H1, DEV, 1, priority, M.Role.STAGING if hasattr(M, "Role") else None, age,  # type: ignore
                        _T.PENDING, None)
    assert served_before(t(5, 2, 0), t(1, 0, 3), 2)  # matured first, whatever the priority
    assert served_before(t(5, 0, 1), t(1, 0, 0), 2)  # then higher priority
    assert served_before(t(1, 0, 0), t(5, 0, 0), 2) and not served_before(t(5, 0, 0), t(1, 0, 0), 2)
    assert served_before(t(1, 2, 0), t(5, 2, 3), 2)  # matured: oldest first, priority ignored
    assert [rounds_to_maturity(t(1, a, 0), 2) for a in (0, 1, 2)] == [2, 1, 0]
