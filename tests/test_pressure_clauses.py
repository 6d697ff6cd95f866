"""The pressure clauses state harms, and each can fail where the old predicates stayed silent (issue 9).

Every test here names the clause that must fail (`InvariantViolation.clause`)
and drives a deterministic script, so no verdict depends on Hypothesis'
history: starvation of a matured low-priority ticket by higher-priority
arrivals (I13), a LIFO grant order applied to both layers at once (I13), a
holder callback under the ledger lock seen only by an outside probe (I7),
an allocator-path grant owned by no one (I7), and a late pressure answer
that takes a holder's lease for no one (C5) -- while a zero-byte late
answer, which takes nothing, is not a harm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.clauses import CLAUSES, Coverage, clauses_of, collecting, recording
from invariants.mutation import Mutant, applied
from invariants.pressure import (
    Delivery,
    check_all,
    check_step,
    check_trace,
    observed_I7_callbacks,
    overtakes,
    step_I13,
    trace_I13,
)
from invariants.pressure_machine import PoolParams, SpecPoolAdapter
from refimpl.verify.pressure_adapter import PressureAdapter
from spec import pressure as P
from spec.guards import ALL_ON, GuardSet, Layer
from spec.tickets import TicketState


def _run(factory: Callable[[PoolParams, GuardSet], Any], params: PoolParams, guards: GuardSet,
         acts: list[Any]) -> list[tuple[P.Pool, Any, P.Pool]]:
    """Drive one adapter through `acts`; the accepted steps as (prev, action, next)."""
    gov = factory(params, guards)
    trace = []
    with contracts.contracts(False):  # the test checks the predicates itself, on every step
        for a in acts:
            prev = gov.abstract()
            gov.execute(a)
            trace.append((prev, a, gov.abstract()))
    return trace


def _clause_of(check: Callable[[], None]) -> str | None:
    try:
        check()
    except InvariantViolation as e:
        return e.clause or f"{e.id} (no clause)"
    return None


def _first_step_violation(trace: list[tuple[P.Pool, Any, P.Pool]]) -> str | None:
    def every() -> None:
        for prev, act, nxt in trace:
            check_step(prev, act, nxt)
            check_all(nxt)
    return _clause_of(every)


# --- I13: a matured ticket is overtaken by no one, of any priority --------------

# Ticket 2 (6 B, priority 0) waits behind a 5 B lease in an 8 B pool (bound 1: matured after its first
# round); a stream of 1 B priority-2 requests arrives and each is released at once. With aging off the
# stream passes it round after round, and only higher-priority tickets pass it.
_STARVE = [P.Submit(1, 5, 0), P.Claim(1, 1), P.Submit(2, 6, 0)]
for _i in range(4):
    _STARVE += [P.Submit(1, 1, 2), P.Claim(1, 3 + _i), P.Release(1, 3 + _i)]


@pytest.mark.parametrize("factory", [SpecPoolAdapter, PressureAdapter], ids=["spec", "refimpl"])
def test_higher_priority_stream_starving_a_matured_ticket_is_caught(factory) -> None:
    trace = _run(factory, PoolParams(8, 0, 2, 1, 16), GuardSet.without("aging"), _STARVE)
    assert all(nxt.tickets[2].state is TicketState.PENDING and nxt.tickets[2].age == 1 for _, _, nxt in trace[2:])
    # The old reading counted only equal-or-lower-priority overtakers: it saw nothing here.
    assert not [n for n in _equal_or_lower_overtakes(trace).values() if n]
    assert overtakes(trace) == {2: 4}
    assert _first_step_violation(trace) == "step_I13.matured_not_overtaken"
    assert _clause_of(lambda: trace_I13(trace)) == "trace_I13.bounded_overtaking"


def test_matured_ticket_blocks_the_higher_priority_stream_with_aging_on() -> None:
    trace = _run(SpecPoolAdapter, PoolParams(8, 0, 2, 1, 16), ALL_ON, _STARVE[:4])
    assert trace[-1][2].tickets[3].state is TicketState.PENDING  # waits behind the matured ticket 2
    assert _first_step_violation(trace) is None
    check_trace(trace)


# --- I13: a ticket passed over ages toward maturity (the starvation harm, not the cap's comparison) ----

_STOPS_SHORT = {"spec": (SpecPoolAdapter, "aging_stops_short"), "refimpl": (PressureAdapter, "age_cap_below_bound")}


@pytest.mark.parametrize("layer", sorted(_STOPS_SHORT))
@pytest.mark.parametrize("mutated", [False, True], ids=["real", "mutant"])
def test_an_age_capped_short_of_the_bound_fails_passed_over_ages_only(layer: str, mutated: bool) -> None:
    """Every guard on; the age capped one below the bound (issue #26 item 5). Ticket 2 (6 B) waits behind a
    5 B lease; the first 1 B newcomer is granted past it. Real: ticket 2 matures in that round and the
    newcomer waits behind it. Mutant: ticket 2 stays one round short, and the step is the only thing wrong."""
    from refimpl.verify.mutants import MUTANTS

    factory, name = _STOPS_SHORT[layer]
    acts = [P.Submit(1, 5, 0), P.Claim(1, 1), P.Submit(2, 6, 0), P.Submit(1, 1, 2)]
    from contextlib import nullcontext
    with applied(MUTANTS[name]) if mutated else nullcontext():
        trace = _run(factory, PoolParams(8, 0, 2, 2, 16), ALL_ON, acts)
    failing = set()
    for prev, act, nxt in trace:
        with collecting() as found:
            check_step(prev, act, nxt)
            check_all(nxt)
        failing |= set(found)
    assert trace[-1][2].tickets[3].state is (TicketState.GRANTED if mutated else TicketState.PENDING)
    assert failing == ({"step_I13.passed_over_ages"} if mutated else set())


def _equal_or_lower_overtakes(trace: list[tuple[P.Pool, Any, P.Pool]]) -> dict[int, int]:
    """The pre-issue-9 count: overtaking by later tickets of equal or lower priority only."""
    count: dict[int, int] = {}
    for prev, _, nxt in trace:
        granted = [t for tid, t in nxt.tickets.items() if t.state is not TicketState.PENDING
                   and (tid not in prev.tickets or prev.tickets[tid].state is TicketState.PENDING)]
        for tid, w in prev.tickets.items():
            if w.state is TicketState.PENDING and tid in nxt.tickets and nxt.tickets[tid].state is TicketState.PENDING:
                count[tid] = count.get(tid, 0) + any(g.id > w.id and g.priority <= w.priority for g in granted)
    return count


# --- I13: the grant order is stated from the tickets' fields --------------------

_LIFO_SPEC = Mutant("lifo_spec", ("I13",), "pressure", Layer.SPEC, "spec.pressure",
                    "    pending.sort(key=lambda t: arbitration_key(t.age >= bound, t.priority, t.id))\n",
                    "    pending.sort(key=lambda t: -t.id)\n", "the spec grants the newest ticket first")
_LIFO_IMPL = Mutant("lifo_refimpl", ("I13",), "pressure", Layer.REFIMPL, "refimpl.manager.arbitration",
                    "        for t in _grant_order(pend, bound):\n",
                    "        for t in sorted(pend.values(), key=lambda t: -t.id):\n",
                    "the manager grants the newest ticket first")


def _order(first: int = 0, second: int = 0) -> list[Any]:
    """Two 2 B tickets wait in a full 8 B pool; a 3 B release lets one through: the first in grant order.

    Built on demand: a mutant re-executes `spec.pressure`, and actions must be of its classes."""
    return [P.Submit(1, 5, 0), P.Claim(1, 1), P.Submit(1, 3, 0), P.Claim(1, 2),
            P.Submit(2, 2, first), P.Submit(2, 2, second), P.Release(1, 2)]


def test_lifo_grant_order_in_both_layers_is_caught_by_the_predicate() -> None:
    params = PoolParams(8, 0, 2, 8, 16)
    with contracts.contracts(False), applied(_LIFO_SPEC), applied(_LIFO_IMPL):
        spec = _run(SpecPoolAdapter, params, ALL_ON, _order())
        impl = _run(PressureAdapter, params, ALL_ON, _order())
        # Refinement is blind: both layers took the same wrong decision.
        assert [nxt for _, _, nxt in spec] == [nxt for _, _, nxt in impl]
        last = spec[-1][2].tickets
        assert last[3].state is TicketState.PENDING and last[4].state is TicketState.GRANTED  # newest first
        assert _first_step_violation(spec) == "step_I13.grant_order"
        assert _first_step_violation(impl) == "step_I13.grant_order"


def test_fifo_grant_order_passes_and_the_governor_orders_without_the_spec() -> None:
    import refimpl.manager.arbitration as R

    trace = _run(PressureAdapter, PoolParams(8, 0, 2, 8, 16), ALL_ON, _order())
    assert trace[-1][2].tickets[3].state is TicketState.GRANTED
    assert _first_step_violation(trace) is None
    assert "arbitration_key" not in vars(R)  # refimpl carries its own order (issue 9 item 7)


@pytest.mark.parametrize("priorities, granted", [((0, 2), 4), ((2, 0), 3), ((1, 1), 3)],
                         ids=["higher-later", "higher-first", "equal"])
def test_grant_order_by_priority_then_submit_order(priorities, granted) -> None:
    acts = _order(*priorities)
    for factory in (SpecPoolAdapter, PressureAdapter):
        trace = _run(factory, PoolParams(8, 0, 2, 8, 16), ALL_ON, acts)
        assert trace[-1][2].tickets[granted].state is TicketState.GRANTED
        assert _first_step_violation(trace) is None


# --- I7: the lock is probed from outside; the allocator's bytes are owned --------


def test_callback_under_the_lock_is_seen_by_an_outside_probe() -> None:
    on = PressureAdapter(PoolParams(16, 0, 2, 2, 8))
    on.gov.pool_press(1, on.pool, 4, 0, 5)
    assert on.take_deliveries() == [Delivery(1, 1, 4, lock_free=True)]
    off = PressureAdapter(PoolParams(16, 0, 2, 2, 8), GuardSet.without("unlock_before_callback"))
    with contracts.contracts(False):
        off.gov.pool_press(1, off.pool, 4, 0, 5)
    seen = off.take_deliveries()
    assert seen == [Delivery(1, 1, 4, lock_free=False)]
    assert _clause_of(lambda: observed_I7_callbacks(seen)) == "observed_I7_callbacks.callback_without_ledger_lock"


def test_no_guard_writes_the_lock_observation() -> None:
    # The spec has no lock: nothing in a pool says whether a callback ran under it, and the spec does
    # not read the guard at all (issue 9 item 5: no guard writes a value a predicate reads).
    import inspect

    assert "locked" not in attrs.fields_dict(P.Pressure)
    assert 'guards.on("unlock_before_callback")' not in inspect.getsource(P)


def test_allocator_grant_owned_by_no_one_is_caught() -> None:
    # try_only off: the allocator's request is left granted-unclaimed; its caller cannot come back for it.
    trace = _run(SpecPoolAdapter, PoolParams(8, 0, 2, 2, 16), GuardSet.without("try_only"), [P.TryReserve(1, 2, 0)])
    assert trace[0][2].tickets[1].state is TicketState.GRANTED
    assert _first_step_violation(trace) is None  # no step predicate restates "try-only"
    assert _clause_of(lambda: check_trace(trace)) == "trace_I7.allocator_bytes_owned"


def test_allocator_lease_taken_at_once_is_owned() -> None:
    trace = _run(SpecPoolAdapter, PoolParams(8, 0, 2, 2, 16), ALL_ON, [P.TryReserve(1, 2, 0), P.Release(1, 1)])
    check_trace(trace)


# --- C5: a closed demand takes nothing; a zero answer is no harm -------------------

_LATE = [P.TryReserve(1, 3, 0), P.Press(1, 3, 0, 2)]


@pytest.mark.parametrize("victims, harm", [((), None), ((1,), "step_C5.closed_demand_takes_nothing")],
                         ids=["zero-late-answer-is-no-harm", "late-answer-takes-a-lease"])
def test_late_answer_is_a_harm_only_when_it_takes_bytes(victims, harm) -> None:
    trace = _run(SpecPoolAdapter, PoolParams(8, 0, 2, 2, 16), GuardSet.without("answer_open_only"),
                 _LATE + [P.Answer(1, 1, victims, 5)])
    assert _first_step_violation(trace) == harm


def test_zero_answer_forces_nothing() -> None:
    trace = _run(SpecPoolAdapter, PoolParams(8, 0, 2, 2, 16), ALL_ON, _LATE + [P.Answer(1, 1, (), 1)])
    assert _first_step_violation(trace) is None
    assert trace[-1][2].tickets[1].state is TicketState.CLAIMED


# --- every clause of the pressure IDs is declared once and reached by a run --------


def test_pressure_clauses_are_declared_and_counted() -> None:
    keys = {c.key for i in ("C5", "I6", "I7", "I13") for c in clauses_of(i)}
    assert {"step_I13.grant_order", "step_I13.matured_not_overtaken", "trace_I7.allocator_bytes_owned",
            "observed_I7_callbacks.callback_without_ledger_lock", "step_C5.closed_demand_takes_nothing"} <= keys
    cov = Coverage()
    trace = _run(PressureAdapter, PoolParams(8, 0, 2, 8, 16), ALL_ON, _order())
    with recording(cov):
        step_I13(*trace[-1])
    assert cov.of("step_I13.grant_order") == (1, 1)
    assert all(k in CLAUSES for k in keys)
