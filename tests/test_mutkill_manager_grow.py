"""The clauses that judge a lease grow, judged exactly: I1's `grow_charges_what_the_lease_gains`
(`invariants.manager_grow`), I13's `allocator_never_overtakes_a_waiter` and I5's `poisoned_grants_nothing` on a
GrowLease.

Each row: the spec's own grow (clean), then the step broken by hand in one way, with the whole message it fails
with; and the steps a clause must pass over without failing (a lease gone or appeared is I1's to name, a grow
that took nothing overtakes nobody). Written from the mutation survivors of `invariants/manager_grow.py`,
`invariants/manager.py` and `invariants/manager_tx.py`.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve
from manager_harness import DEV, H1, H2, judged, lease, run, start, with_allocs

from invariants.manager import step_I13_manager
from invariants.manager_grow import step_I1_grow
from invariants.manager_tx import step_I5_poisoned
from spec import manager as MG
from spec import manager_actions as M


def _grow(nbytes: int = 1) -> tuple[M.Manager, Any, M.Manager, int, int]:
    """H1's 2 B lease and H2's 1 B lease on DEV (4 B); H1's lease grows by `nbytes`."""
    m, mine = lease(start(), H1, DEV, 2)
    m, other = lease(m, H2, DEV, 1)
    act = M.GrowLease(H1, mine, nbytes)
    return m, act, MG.step(m, act)[0], mine, other


def _i1(before: M.Manager, act: Any, after: M.Manager) -> str | None:
    return judged(step_I1_grow, before, act, after)[0]


def test_the_spec_s_grow_is_clean_and_a_lease_gone_or_appeared_is_named() -> None:
    m, act, after, mine, _ = _grow()
    assert _i1(m, act, after) is None and after.ledger.allocations[mine].nbytes == 3
    p, n = m.ledger.allocations[mine], after.ledger.allocations[mine]
    gone = with_allocs(after, after.ledger.allocations.delete(mine), used=1)
    assert _i1(m, act, gone) == f"I1: {act!r} left no live lease within its reservation: {p!r} -> None"
    appeared = with_allocs(m, m.ledger.allocations.delete(mine), used=1)
    assert _i1(appeared, act, after) == f"I1: {act!r} left no live lease within its reservation: None -> {n!r}"


def test_a_lease_that_gained_other_than_the_bytes_asked_is_named() -> None:
    m, act, after, mine, _ = _grow()
    n = after.ledger.allocations[mine]
    double = with_allocs(after, after.ledger.allocations.set(mine, evolve(n, charge=n.charge + 1)), used=5)
    assert _i1(m, act, double) == f"I1: {act!r}: the lease gained 1 B and 2 B of charge for the 1 B its holder asked"


def test_another_lease_moved_and_another_charge_are_named() -> None:
    m, act, after, mine, other = _grow()
    o = after.ledger.allocations[other]
    moved = with_allocs(after, after.ledger.allocations.set(other, evolve(o, charge=0)))
    assert _i1(m, act, moved) == (f"I1: {act!r} also moved allocation {other}: {o!r} -> "
                                  f"{moved.ledger.allocations[other]!r}")
    over = with_allocs(after, after.ledger.allocations, used=after.ledger.authorities[DEV].used + 1)
    assert _i1(m, act, over) == (f"I1: {act!r}: authority {DEV} was charged 2 B; the lease on authority {DEV} "
                                 "gained 1 B")


def _behind_a_waiter() -> tuple[M.Manager, Any, M.Manager, int, int]:
    """DEV full (H1 2 B + 2 B); H2 waits for 1 B; H1's first lease is grown past the waiter by hand."""
    m, mine = lease(start(), H1, DEV, 2)
    m, _ = lease(m, H1, DEV, 2)
    m, t = run(m, M.Submit(H2, DEV, 1, 0))
    act = M.GrowLease(H1, mine, 1)
    p = m.ledger.allocations[mine]
    grown = with_allocs(m, m.ledger.allocations.set(mine, evolve(p, nbytes=3, reserved=3, charge=3)), used=5)
    return m, act, grown, mine, t


def test_a_grow_past_a_waiter_names_what_it_took() -> None:
    m, act, grown, mine, t = _behind_a_waiter()
    assert judged(step_I13_manager, m, act, grown, None)[0] == (
        f"I13: {act!r} took 1 B as allocation {mine} while tickets [{t}] wait")


def test_a_grow_that_took_nothing_or_whose_lease_is_gone_overtakes_nobody() -> None:
    m, act, _, mine, _ = _behind_a_waiter()
    assert judged(step_I13_manager, m, act, m, None)[0] is None  # nothing charged: I1 names a grow that did not grow
    gone = with_allocs(m, m.ledger.allocations.delete(mine))
    assert judged(step_I13_manager, m, act, gone, None)[0] is None  # a lease gone is I1's harm to name


def test_a_try_reserve_with_no_new_allocation_is_passed_over() -> None:
    m, _, _, _, _ = _behind_a_waiter()
    act = M.TryReserve(H1, DEV, 1)
    assert judged(step_I13_manager, m, act, m, None)[0] is None  # a refused step: no result, no allocation


def test_a_poisoned_manager_that_grows_a_lease_is_named() -> None:
    m, act, after, mine, _ = _grow()
    poisoned = evolve(m, poisoned=True)
    assert judged(step_I5_poisoned, poisoned, act, evolve(after, poisoned=True))[0] == (
        f"I5: {act!r} on a poisoned manager created allocation(s) [] and granted ticket(s) [], "
        f"and grew lease(s) [{mine}]")
