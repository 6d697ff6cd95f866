"""C5, I13 and I1's ticket table on the composed manager: each ticket and pressure harm its clause exists for, with its near miss.

Each test builds the harm with the spec's own actions or by breaking one record of a real step by hand (as
`test_manager_clauses.py` does), asserts the clause that states it fails with a report naming the records
(the answer, the pressure, the generations, the waiter, the overtaking grant), and, beside it, the nearest
harmless state or step, which must pass. The case counts of these clauses are pinned the same way
`test_manager_clause_cases.py` pins the others: counted exactly when their situation occurs. (C5 I13 I1)
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from clause_harness import violation
from manager_harness import DEV, H1, H2, HOST, clause_counts, lease, make_alloc, run, start, with_allocs

from invariants import manager as IM
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.guards import GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, Role, Tier


def _with_ticket(m: M.Manager, tid: int, **changes: Any) -> M.Manager:
    return evolve(m, tickets=m.tickets.set(tid, evolve(m.tickets[tid], **changes)))


# --- C5: stale_answer_credits_nothing --------------------------------------------------------------

_C5 = "step_C5_manager.stale_answer_credits_nothing"


def _pressed(deadline: int | None = 5) -> tuple[M.Manager, int, int, M.Manager]:
    """A 2 B lease under an open pressure, and the state where an answer released it."""
    m, alloc = lease(start(), H1, DEV, 2)
    m, pid = run(m, M.Press(H1, DEV, 2, 0, deadline))
    return m, alloc, pid, MG.step(m, A.Release(H1, alloc))[0]


def test_answer_after_a_reconfigure_names_both_generations() -> None:
    m, alloc, pid, released = _pressed()
    m = run(run(m, M.Reconfigure(DEV))[0], M.Reconfigure(DEV))[0]  # the pressure stays, opened at generation 0
    assert (m.pressures[pid].generation, m.generations[DEV]) == (0, 2)
    act = M.Answer(H1, pid, (alloc,), 5)
    e = violation(IM.step_C5_manager, m, act, evolve(released, generations=m.generations), 2)
    assert (e.clause, str(e)) == (_C5, f"C5: {act!r} released allocations [{alloc}] for pressure {pid} of "
                                       f"generation 0; authority {DEV} is at 2")


def test_answer_for_a_pressure_ahead_of_an_unconfigured_authority_reads_generation_0() -> None:
    # Broken by hand: the pressure claims generation 1 on an authority never reconfigured (no entry): stale.
    m, alloc, pid, released = _pressed()
    assert DEV not in m.generations
    m = evolve(m, pressures=m.pressures.set(pid, evolve(m.pressures[pid], generation=1)))
    act = M.Answer(H1, pid, (alloc,), 5)
    e = violation(IM.step_C5_manager, m, act, released, 2)
    assert (e.clause, str(e)) == (_C5, f"C5: {act!r} released allocations [{alloc}] for pressure {pid} of "
                                       f"generation 1; authority {DEV} is at 0")


def test_answer_at_the_current_generation_after_a_reconfigure_passes() -> None:
    m, alloc = lease(start(), H1, DEV, 2)
    m = run(m, M.Reconfigure(DEV))[0]
    m, pid = run(m, M.Press(H1, DEV, 2, 0, 5))  # opened at generation 1, the authority's
    act = M.Answer(H1, pid, (alloc,), 5)
    nxt, out = MG.step(m, act)
    assert alloc not in nxt.ledger.allocations
    IM.step_C5_manager(m, act, nxt, out)


def test_answer_to_a_closed_pressure_is_named() -> None:
    m, alloc, pid, released = _pressed()
    m = run(m, M.CancelPressure(pid))[0]
    act = M.Answer(H1, pid, (alloc,), 5)
    e = violation(IM.step_C5_manager, m, act, released, 2)
    assert (e.clause, str(e)) == (_C5, f"C5: {act!r} released allocations [{alloc}] for pressure {pid}, "
                                       f"which was not open")


def test_answer_after_the_deadline_is_named_with_both_times() -> None:
    m, alloc, pid, released = _pressed(deadline=5)
    act = M.Answer(H1, pid, (alloc,), 6)
    e = violation(IM.step_C5_manager, m, act, released, 2)
    assert (e.clause, str(e)) == (_C5, f"C5: {act!r} released allocations [{alloc}] at time 6 for pressure "
                                       f"{pid} due at 5")


def test_answer_at_the_deadline_passes() -> None:
    m, alloc, pid, released = _pressed(deadline=5)
    IM.step_C5_manager(m, M.Answer(H1, pid, (alloc,), 5), released, 2)


def test_stale_answer_that_releases_nothing_passes() -> None:
    # A closed pressure's answer names a lease it keeps and an id that never existed: no byte moved, no harm.
    m, alloc, pid, _ = _pressed()
    m = run(m, M.CancelPressure(pid))[0]
    act = M.Answer(H1, pid, (alloc, 99), 5)
    assert 99 not in m.ledger.allocations
    IM.step_C5_manager(m, act, m, 0)
    assert clause_counts(IM.step_C5_manager, m, act, m, 0)[_C5] == (1, 0)


def test_c5_counts_only_answers_that_release() -> None:
    m, alloc, pid, released = _pressed()
    assert clause_counts(IM.step_C5_manager, m, M.Answer(H1, pid, (alloc,), 5), released, 2)[_C5] == (1, 1)
    nxt, out = MG.step(m, M.CancelPressure(pid))  # no answer: nothing an answer could credit
    assert clause_counts(IM.step_C5_manager, m, M.CancelPressure(pid), nxt, out)[_C5] == (1, 0)


# --- I13: state_I13_manager (pending_holds_nothing, no_idle_fitting_waiter) ------------------------

_IDLE = "state_I13_manager.no_idle_fitting_waiter"
_NOTHING = "state_I13_manager.pending_holds_nothing"


def _granted_then_waiting() -> tuple[M.Manager, int, int]:
    """Ticket 1 granted 3 B of DEV's 4 (its reservation charged), ticket 2 waits for 4 B."""
    m, t1 = run(start(), M.Submit(H1, DEV, 3))
    m, t2 = run(m, M.Submit(H2, DEV, 4))
    assert (m.tickets[t1].state, m.tickets[t2].state) == (TicketState.GRANTED, TicketState.PENDING)
    return m, t1, t2


def test_waiter_behind_a_granted_ticket_that_would_fit_is_named_with_the_free_bytes() -> None:
    m, t1, t2 = _granted_then_waiting()
    IM.state_I13_manager(m)  # 4 B do not fit in the 1 B free: waiting is right
    bad = _with_ticket(m, t2, nbytes=1)  # 1 B fits in 4 - 3 = 1 B, and it still waits
    e = violation(IM.state_I13_manager, bad)
    assert (e.clause, str(e)) == (_IDLE, f"I13: authority {DEV}: ticket {t2} (1 B) is first in grant order and "
                                         f"fits in 1 B, but waits")


def test_waiter_behind_a_granted_ticket_holding_a_reservation_is_named() -> None:
    m, t1, t2 = _granted_then_waiting()
    bad = _with_ticket(m, t2, allocation=m.tickets[t1].allocation)
    e = violation(IM.state_I13_manager, bad)
    assert (e.clause, str(e)) == (_NOTHING, f"I13: pending ticket {t2} holds allocation "
                                            f"{m.tickets[t1].allocation}")


def test_state_i13_counts_its_cases() -> None:
    m, _, _ = _granted_then_waiting()
    assert clause_counts(IM.state_I13_manager, m) == {_IDLE: (1, 1), _NOTHING: (1, 1)}
    granted_only = run(start(), M.Submit(H1, DEV, 3))[0]  # a ticket, but none waiting
    assert clause_counts(IM.state_I13_manager, granted_only) == {_IDLE: (1, 0), _NOTHING: (1, 0)}


# --- I13: state_I13_generation ---------------------------------------------------------------------

_GEN = "state_I13_generation.no_waiter_of_an_older_generation"


def test_waiter_left_under_a_gone_generation_is_named_with_both() -> None:
    m, _, t2 = _granted_then_waiting()
    bad = evolve(m, generations=m.generations.set(DEV, 2))  # reconfigured twice, the waiter kept waiting
    e = violation(IM.state_I13_generation, bad)
    assert (e.clause, str(e)) == (_GEN, f"I13: ticket {t2} waits at generation 0; authority {DEV} is at 2")


def test_waiter_ahead_of_an_unconfigured_authority_reads_generation_0() -> None:
    m, _, t2 = _granted_then_waiting()
    assert DEV not in m.generations
    e = violation(IM.state_I13_generation, _with_ticket(m, t2, generation=1))
    assert (e.clause, str(e)) == (_GEN, f"I13: ticket {t2} waits at generation 1; authority {DEV} is at 0")


def test_waiter_submitted_after_a_reconfigure_passes_and_counts() -> None:
    m, _ = run(start(), M.Submit(H1, DEV, 3))
    assert clause_counts(IM.state_I13_generation, m)[_GEN] == (1, 0)  # never reconfigured: no generation to outlive
    m = run(m, M.Reconfigure(DEV))[0]
    m, t2 = run(m, M.Submit(H2, DEV, 4))
    assert (m.tickets[t2].state, m.tickets[t2].generation) == (TicketState.PENDING, 1)
    IM.state_I13_generation(m)
    assert clause_counts(IM.state_I13_generation, m)[_GEN] == (1, 1)


# --- I1: state_I1_tickets ---------------------------------------------------------------------------

_GONE = "state_I1_tickets.retired_ticket_gone"


@pytest.mark.parametrize("state", [s for s in TicketState if s not in (TicketState.PENDING, TicketState.GRANTED)])
def test_a_retired_ticket_left_in_the_table_is_named_with_its_state(state: TicketState) -> None:
    m, t1, _ = _granted_then_waiting()
    e = violation(IM.state_I1_tickets, _with_ticket(m, t1, state=state))
    assert (e.clause, str(e)) == (_GONE, f"I1: ticket {t1} (holder {H1}, authority {DEV}) is {state.value} but "
                                         "still in the ticket table")


def test_state_i1_tickets_counts_a_table_with_tickets_only() -> None:
    m, t1, t2 = _granted_then_waiting()  # one granted, one pending: both live, the near miss
    assert clause_counts(IM.state_I1_tickets, m) == {_GONE: (1, 1)}
    gone = run(run(m, M.CancelTicket(H1, t1))[0], M.CancelTicket(H2, t2))[0]  # run judges each step
    assert len(gone.tickets) == 0 and clause_counts(IM.state_I1_tickets, gone) == {_GONE: (1, 0)}


# --- I13: step_I13_manager (allocator_never_overtakes_a_waiter, matured_not_overtaken) ---------------

_TRY = "step_I13_manager.allocator_never_overtakes_a_waiter"
_MATURED = "step_I13_manager.matured_not_overtaken"


def _waiting_behind_a_lease() -> tuple[M.Manager, int]:
    """H1 leases 3 B of DEV's 4; H2's 4 B ticket waits."""
    m, _ = lease(start(), H1, DEV, 3)
    return run(m, M.Submit(H2, DEV, 4))


def test_try_reserve_past_a_waiter_is_named_with_the_bytes_taken() -> None:
    m, w = _waiting_behind_a_lease()
    nxt, alloc = MG.step(m, A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING))  # the bytes taken anyway
    act = M.TryReserve(H1, DEV, 1)
    e = violation(IM.step_I13_manager, m, act, nxt, alloc)
    assert (e.clause, str(e)) == (_TRY, f"I13: {act!r} took 1 B as allocation {alloc} while tickets [{w}] wait")


def test_try_reserve_with_no_waiter_passes_and_counts() -> None:
    m, _ = lease(start(), H1, DEV, 3)
    act = M.TryReserve(H1, DEV, 1)
    nxt, alloc = MG.step(m, act)
    IM.step_I13_manager(m, act, nxt, alloc)
    assert clause_counts(IM.step_I13_manager, m, act, nxt, alloc)[_TRY] == (1, 1)
    nxt, tid = MG.step(m, M.Submit(H2, DEV, 1))  # not the allocator path: no try case
    assert clause_counts(IM.step_I13_manager, m, M.Submit(H2, DEV, 1), nxt, tid)[_TRY] == (1, 0)


def _matured() -> tuple[M.Manager, int]:
    m, w = _waiting_behind_a_lease()
    return _with_ticket(m, w, age=m.aging_bound), w


def test_matured_waiter_overtaken_is_named_with_the_step_and_the_grant() -> None:
    m, w = _matured()
    act = M.Submit(H1, DEV, 1)
    nxt, tid = MG.step(m, act, GuardSet.without("aging"))
    assert nxt.tickets[tid].state is TicketState.GRANTED
    e = violation(IM.step_I13_manager, m, act, nxt, tid)
    t = m.tickets[w]
    assert (e.clause, str(e)) == (_MATURED, f"I13: {act!r}: matured ticket {w} (4 B, priority 0, age "
                                            f"{t.age}) waits on authority {DEV} while later ticket(s) [{tid}] "
                                            f"were granted")


def test_matured_waiter_not_overtaken_by_an_earlier_grant() -> None:
    # The matured waiter arrived after a ticket granted in this step: nothing later overtook it.
    m, _ = lease(start(), H1, DEV, 3)
    m, t1 = run(m, M.Submit(H1, DEV, 1))  # granted at once: the 1 B left
    m, w = run(m, M.Submit(H2, DEV, 4))
    m = _with_ticket(m, w, age=m.aging_bound)
    before = _with_ticket(m, t1, state=TicketState.PENDING, allocation=None)  # t1 was still waiting before
    assert clause_counts(IM.step_I13_manager, before, M.Submit(H2, DEV, 4), m, w)[_MATURED] == (1, 1)
    IM.step_I13_manager(before, M.Submit(H2, DEV, 4), m, w)


# --- the records the h-tx2 rewrite reads: C3's naming of what a removal left, I6's per-holder sums --------------


def test_removal_names_only_the_records_on_the_removed_authority() -> None:
    # One of each kind on DEV and on HOST: the report names DEV's allocation, ticket, pressure and transaction only.
    m, a_dev = lease(start(), H1, DEV, 4)
    m, _ = lease(m, H2, HOST, 4)
    m, t_dev = run(m, M.Submit(H2, DEV, 1))
    m = run(m, M.Submit(H1, HOST, 1))[0]
    m, p_dev = run(m, M.Press(H1, DEV, 1))
    m = run(m, M.Press(H2, HOST, 1))[0]
    m, x_dev = run(m, M.PlanTx(H1, ((DEV, 1),)))
    m = run(m, M.PlanTx(H2, ((HOST, 1),)))[0]
    act = M.RemoveAuthority(DEV)
    e = violation(IM.step_C3_manager, m, act, evolve(m, ledger=evolve(
        m.ledger, authorities=m.ledger.authorities.delete(DEV))), None)
    assert (e.clause, str(e)) == ("step_C3_manager.removal_drops_no_charge",
                                  f"C3: {act!r}: authority {DEV} is gone but allocation {a_dev}, ticket {t_dev}, "
                                  f"pressure {p_dev}, transaction {x_dev} still name it")


_OWN = "step_I6_manager.charge_falls_by_own_action"


def test_a_holders_lease_swapped_for_a_smaller_record_by_nobody_is_named() -> None:
    # Broken by hand: a limit commit (no holder) replaces H2's 2 B lease with a 1 B record under a lower id (0):
    # the new record is read first, and H2's charge still fell 2 -> 1 B.
    m, mine = lease(start(), H2, DEV, 2)
    allocs = m.ledger.allocations.delete(mine).set(0, make_alloc(0, DEV, H2, 1, AllocState.LIVE))
    act = M.CommitLimit(DEV)
    e = violation(IM.step_I6_manager, m, act, with_allocs(m, allocs), None)
    assert (e.clause, str(e)) == (_OWN, f"I6: {act!r} (by None) lowered holder {H2}'s charge 2 -> 1 B")


def test_bytes_moved_between_one_holders_records_in_anothers_step_pass() -> None:
    # H2's first lease grows by the 1 B its second one gave up, in H1's step: H2's total charge did not fall.
    m, first = lease(start(), H2, DEV, 1)
    m, second = lease(m, H2, DEV, 1)
    assert first < second
    allocs = m.ledger.allocations.delete(second)
    allocs = allocs.set(first, evolve(allocs[first], nbytes=2, charge=2))
    moved = with_allocs(m, allocs)
    act = M.Press(H1, DEV, 1)
    IM.step_I6_manager(m, act, moved, 1)
    assert clause_counts(IM.step_I6_manager, m, act, moved, 1)[_OWN] == (1, 0)
