"""I1's shrink clause (`step_I1_manager.shrink_credits_what_the_lease_loses`) judged exactly, and `check_step`'s
planned path (outside counting) running the predicates a step's action class selects.

Each row: the spec's own shrink (clean), then the step broken by hand in one way, with the whole message it fails
with. Written from the mutation survivors of `invariants/manager.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, judged, lease, run, start, with_allocs

from invariants import manager as IM
from invariants._violation import InvariantViolation
from spec import manager as MG
from spec import manager_actions as M


def _fails(before: M.Manager, act: Any, after: M.Manager) -> str | None:
    return judged(IM.step_I1_manager, before, act, after, None)[0]


def _shrink(nbytes: int = 1) -> tuple[M.Manager, Any, M.Manager, int, int]:
    """H1's 3 B lease and H2's 1 B lease on DEV (4 B); H1 gives back `nbytes` of its lease."""
    m, mine = lease(start(), H1, DEV, 3)
    m, other = lease(m, H2, DEV, 1)
    act = M.ShrinkLease(H1, mine, nbytes)
    return m, act, MG.step(m, act)[0], mine, other


def test_the_spec_s_shrink_is_clean_and_a_lease_left_with_nothing_is_named() -> None:
    m, act, after, mine, _ = _shrink()
    assert _fails(m, act, after) is None and after.ledger.allocations[mine].nbytes == 2
    p, led = m.ledger.allocations[mine], after.ledger
    empty = evolve(led.allocations[mine], nbytes=0, charge=0)
    assert _fails(m, act, with_allocs(after, led.allocations.set(mine, empty), used=1)) == (
        f"I1: {act!r} left no lease of at least one byte: {p!r} -> {empty!r}")
    assert _fails(m, act, with_allocs(after, led.allocations.delete(mine), used=1)) == (
        f"I1: {act!r} left no lease of at least one byte: {p!r} -> None")


def test_a_lease_that_lost_other_than_the_bytes_given_back_is_named() -> None:
    m, act, after, mine, _ = _shrink()
    kept = with_allocs(after, after.ledger.allocations.set(mine, m.ledger.allocations[mine]))
    assert _fails(m, act, kept) == f"I1: {act!r}: the lease lost 0 B of the 1 B its holder gave back"


def test_a_shrink_that_moves_another_lease_is_named() -> None:
    m, act, after, mine, other = _shrink()
    q = after.ledger.allocations[other]
    r = evolve(q, nbytes=2, charge=2)
    assert _fails(m, act, with_allocs(after, after.ledger.allocations.set(other, r))) == (
        f"I1: {act!r} also moved allocation {other}: {q!r} -> {r!r}")


def test_a_wrong_credit_names_the_authority_and_the_bytes() -> None:
    m, act, after, *_ = _shrink()
    assert _fails(m, act, with_allocs(after, after.ledger.allocations, used=2)) == (
        f"I1: {act!r}: authority {DEV} was credited 2 B; the lease on authority {DEV} lost 1 B")


def test_the_round_after_a_shrink_may_grant_several_waiters() -> None:
    m, mine = lease(start(), H1, DEV, 3)
    m, _ = lease(m, H2, DEV, 1)
    m, t1 = run(m, M.Submit(H2, DEV, 1))
    m, t2 = run(m, M.Submit(H2, DEV, 1))
    act = M.ShrinkLease(H1, mine, 2)
    after = MG.step(m, act)[0]
    assert {after.tickets[t].allocation is not None for t in (t1, t2)} == {True}  # both granted by the round
    assert _fails(m, act, after) is None  # the credit is what the lease lost, less what the round granted


def test_check_step_outside_counting_runs_the_predicates_the_action_selects(monkeypatch: pytest.MonkeyPatch) -> None:
    # An answer that reports more than its victims gave back: only predicates selected by the action's class
    # (step_C5_answers, step_I1_manager) judge it; the planned path must select them. The plan cache starts empty,
    # so the plan is computed here (a process that ran other tests first may hold it cached already).
    monkeypatch.setattr(IM, "_PLANS", {})
    m, a1 = lease(start(), H1, DEV, 1)
    m, a2 = lease(m, H1, DEV, 2)
    m, pid = run(m, M.Press(H1, DEV, 2))
    act = M.Answer(H1, pid, (a2,))
    right, got = MG.step(m, act)
    IM.check_step(m, act, right, got)  # the spec's own answer: clean
    with pytest.raises(InvariantViolation, match="reports 3 B"):
        IM.check_step(m, act, right, 3)
    IM.check_step(m, act, right, got)  # again, from the plan cached for (Answer, parts replaced)
