"""The transaction clauses state harms, not guards (issue 9), on deterministic scripts.

For each guard-restating clause that was dropped, two scripts with the guard
off: the guarded action alone, which harms no one and must now pass (the old
predicate fired here), and the script continued until the harm the guard
prevents happens, which must fail with the named harm clause. Both layers
run the same script (the coordinator with contracts off), so the verdict
comes from the predicates, not from refinement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.clauses import CLAUSES, clauses_of
from invariants.transactions import check_all, check_step, wait_for_cycle
from invariants.transactions_machine import TxSpecAdapter
from refimpl.verify.transactions_adapter import TxRefimplAdapter
from spec import transactions_actions as T
from spec.guards import GuardSet
from spec.transactions_lifecycle import ViewKind

C = ViewKind.CONTIGUOUS
ADAPTERS: list[Callable[[GuardSet], Any]] = [TxSpecAdapter, TxRefimplAdapter]
SETUP = [T.AddAuthority("device", 10), T.AddAuthority("host", 10)]


def _violation(factory: Callable[[GuardSet], Any], guard: str, acts: list[Any]) -> str | None:
    """The clause the first failing predicate names, or None; every action must be accepted."""
    gov = factory(GuardSet.without(guard))
    with contracts.contracts(False):
        try:
            for a in SETUP + acts:
                prev = gov.abstract()
                gov.execute(a)
                nxt = gov.abstract()
                check_step(prev, a, nxt)
                check_all(nxt)
        except InvariantViolation as e:
            return e.clause or f"{e.id} (no clause)"
    return None


# guard -> (the guarded action alone: no harm yet, the script continued to the harm, the harm clause)
CASES: dict[str, tuple[list[Any], list[Any], str]] = {
    "ordered_reservation": (
        [T.Plan(((2, 1), (1, 1)), 0, C), T.Reserve(1, 2)],  # out of order, nobody else around
        # Each holds 6 B of one 10 B authority and needs 6 B of the other: a blocking coordinator deadlocks.
        [T.Plan(((2, 6), (1, 6)), 0, C), T.Plan(((1, 6), (2, 6)), 0, C), T.Reserve(2, 1), T.Reserve(1, 2)],
        "state_C4.no_circular_holding"),
    "publish_after_all_held": (
        [T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1), T.Publish(1)],
        [T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 1)],
        "state_C4.runs_on_reserved_bytes"),
    "poisoned_manager_refuses": (
        [T.CorruptLedger(), T.Plan(((1, 1),), 0, C)],  # a plan charges nothing
        [T.CorruptLedger(), T.Plan(((1, 1),), 0, C), T.Reserve(1, 1)],
        "step_I5.corrupt_ledger_charges_nothing"),
    "remap_when_idle": (
        [T.Plan(((1, 2),), 0, C), T.Reserve(1, 1), T.Publish(1), T.Remap(1)],  # no execution uses it yet
        [T.Plan(((1, 2),), 0, C), T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 1), T.Remap(1)],
        "step_I9.remap_fences_users"),
    "current_generation": (
        [T.Plan(((1, 2),), 0, C), T.Reserve(1, 1), T.Publish(1)],
        [T.Plan(((1, 2),), 0, C), T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 2)],  # a mapping never current
        "state_C6.no_stale_view_read"),
    "full_abort": (
        [T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1), T.Abort(1)],  # held one: nothing left behind
        [T.Plan(((1, 1), (2, 1)), 0, C), T.Reserve(1, 1), T.Reserve(1, 2), T.Abort(1)],
        "step_I5.abort_restores_ledgers"),
}


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
@pytest.mark.parametrize("guard", sorted(CASES), ids=str)
def test_guarded_action_alone_is_no_harm(guard, factory) -> None:
    alone, _, _ = CASES[guard]
    assert _violation(factory, guard, alone) is None


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
@pytest.mark.parametrize("guard", sorted(CASES), ids=str)
def test_guard_off_reaches_its_harm_clause(guard, factory) -> None:
    _, harm, key = CASES[guard]
    assert _violation(factory, guard, harm) == key
    assert CLAUSES[key].id in {"ordered_reservation": "C4", "publish_after_all_held": "C4",
                               "poisoned_manager_refuses": "I5", "remap_when_idle": "I9",
                               "current_generation": "C6", "full_abort": "I5"}[guard]


def test_opposite_orders_close_a_circle_of_holds() -> None:
    # Each holds 6 B of one 10 B authority and needs 6 B of the other: a blocking coordinator deadlocks.
    gov = TxSpecAdapter(GuardSet.without("ordered_reservation"))
    for a in SETUP + [T.Plan(((2, 6), (1, 6)), 0, C), T.Plan(((1, 6), (2, 6)), 0, C),
                      T.Reserve(1, 2), T.Reserve(2, 1)]:
        gov.execute(a)
    assert wait_for_cycle(gov.abstract()) == [1, 2, 1]
    with pytest.raises(InvariantViolation) as e:
        check_all(gov.abstract())
    assert e.value.clause == "state_C4.no_circular_holding"


def test_opposite_orders_that_both_fit_are_no_harm() -> None:
    # The old "waits only upward" clause fired here: out of order, but each can still get the other's
    # authority (1 B of 10 B), so no one is blocked. It restated the guard, and shadowed the cycle.
    assert _violation(TxSpecAdapter, "ordered_reservation",
                      [T.Plan(((2, 1), (1, 1)), 0, C), T.Plan(((1, 1), (2, 1)), 0, C),
                       T.Reserve(2, 1), T.Reserve(1, 2)]) is None


@pytest.mark.parametrize("factory", ADAPTERS, ids=["spec", "refimpl"])
def test_consistent_descending_order_is_no_harm(factory) -> None:
    # Both reserve the higher id first (a consistent order, just not the guard's): no cycle can close.
    acts = [T.Plan(((2, 6), (1, 6)), 0, C), T.Plan(((2, 6), (1, 6)), 0, C), T.Reserve(1, 2), T.Reserve(2, 2)]
    assert _violation(factory, "ordered_reservation", acts) is None


def test_dropped_guard_restating_clauses_are_gone() -> None:
    keys = {c.key for i in ("C3", "C4", "C6", "I5", "I9", "I10") for c in clauses_of(i)}
    assert not any(k.startswith("step_C6.") for k in keys)  # Execute-binds-current-generation restated its guard
    assert "state_C4.waits_only_upward" not in keys  # restated ordered_reservation and shadowed the cycle
    assert {"state_C4.no_circular_holding", "state_C4.runs_on_reserved_bytes",
            "state_C6.no_stale_view_read", "step_I9.remap_fences_users", "step_I5.corrupt_ledger_charges_nothing",
            "step_I5.abort_restores_ledgers"} <= keys
