"""The pressure pool's exploration scope: a deterministic control for C5, I6, I7 and I13 (rule R4).

`pressure_model(guards, scope)` turns `spec.pressure` into an `explore.Model`
over a fixed small pool: capacity 2 (nothing fixed), aging bound 2, two
cancellation-mailbox slots, one holder, at most three requester tickets, one
pressure ticket (due at 1, answered at 1 or 2) and one reconfiguration;
requests of 1 or 2 bytes. `QUICK_SCOPE` (every guard on) uses one priority
and is exhausted to depth 7 in about 16,000 states; `CONTROL_SCOPE` (one
guard off) adds a second priority, so grant order has a choice to get wrong.
Every well-typed action the scope allows is tried in every state, in a fixed
order, and judged by the pool's state and step predicates. (A second holder
multiplies the states by about ten and no guard's harm needs one; ownership
refusals are the stateful campaign's job.)

The pool's trace predicates (exactly-once credit and owned allocator bytes,
I7; bounded overtaking, I13) are properties of a whole run. The explorer
carries what they remember of the run so far (`invariants.pressure.
TraceMemory`) in its state and applies their step forms
(`step_trace_I7`, `step_trace_I13`, the very functions the trace predicates
fold), so a breadth-first counterexample to a trace clause is a shortest one
too. The memory is part of the deduplicated state: two runs reaching the same
pool with different histories are explored separately, as they must be.

`unlock_before_callback` has no explorer control: the spec has no lock and
calls no one (see `refimpl.verify.pressure_checker.SPEC_CANNOT_EXPRESS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from invariants import pressure as PI
from invariants._violation import InvariantViolation
from invariants.clauses import conjunction
from invariants.explore import Model
from spec import pressure as P
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState

__all__ = ["PressureScope", "QUICK_SCOPE", "CONTROL_SCOPE", "Explored", "pressure_actions", "pressure_model"]


@attrs.frozen
class PressureScope:
    capacity: int = 2
    holders: int = 2
    aging_bound: int = 2
    mailbox: int = 2
    tickets: int = 3  # requester tickets ever issued
    pressures: int = 2  # pressure tickets ever issued
    reconfigurations: int = 1
    nbytes: tuple[int, ...] = (1, 2)
    priorities: tuple[int, ...] = (0, 1)
    deadline: int = 1  # pressure tickets are due at 1; answers come at 1 (on time) or 2 (late)


QUICK_SCOPE = PressureScope(holders=1, pressures=1, priorities=(0,))
CONTROL_SCOPE = PressureScope(holders=1, pressures=1)


@attrs.frozen
class Explored:
    """One explorer state: the pool and what the trace predicates remember of the run that reached it."""

    pool: P.Pool
    memory: PI.TraceMemory = PI.TraceMemory()


def pressure_actions(scope: PressureScope, p: P.Pool) -> Iterator[Any]:
    """Every action the scope allows on pool `p`, in a fixed order."""
    holders = range(1, scope.holders + 1)
    if p.next_ticket <= scope.tickets:
        for h in holders:
            for n in scope.nbytes:
                for prio in scope.priorities:
                    yield P.Submit(h, n, prio)
                yield P.TryReserve(h, n, scope.priorities[0])
    for tid in sorted(p.tickets):
        t = p.tickets[tid]
        for h in holders:
            yield P.Claim(h, tid)
            yield P.Release(h, tid)
            yield P.Cancel(h, tid)
            yield P.Timeout(h, tid)
        if t.state is TicketState.CLAIMED:
            for pinned, in_flight in ((True, False), (False, True), (False, False)):
                yield P.SetUse(t.holder, tid, pinned, in_flight)
    if p.generation < scope.reconfigurations:
        yield P.Reconfigure()
    if p.next_pressure <= scope.pressures:
        for h in holders:
            yield P.Press(h, 1, 0, scope.deadline)
    claimed = [tid for tid in sorted(p.tickets) if p.tickets[tid].state is TicketState.CLAIMED]
    for pid in sorted(p.pressures):
        r = p.pressures[pid]
        for victims in ((), *((v,) for v in claimed)):
            for now in (scope.deadline, scope.deadline + 1):
                yield P.Answer(r.holder, pid, victims, now)
        yield P.CancelPressure(pid)
        yield P.ExpirePressure(pid, scope.deadline + 1)


def _check_state(s: Explored) -> None:
    PI.check_all(s.pool)


#: The trace predicates' step forms, as a registry so a control credits every clause a step breaks.
_TRACE_STEPS = {"I7": (PI.step_trace_I7,), "I13": (PI.step_trace_I13,)}


def _check_step(s: Explored, act: Any, n: Explored) -> None:
    PI.check_step(s.pool, act, n.pool)
    conjunction(_TRACE_STEPS, s.memory, s.pool, act, n.pool)


def _remember(mem: PI.TraceMemory, prev: P.Pool, act: Any, nxt: P.Pool) -> PI.TraceMemory:
    try:
        mem = PI.step_trace_I7(mem, prev, act, nxt)
        return PI.step_trace_I13(mem, prev, act, nxt)
    except InvariantViolation:
        return mem  # `_check_step` reports it on this very step; exploration stops there


def _step(scope: PressureScope, guards: GuardSet, s: Explored, act: Any) -> Explored:
    nxt = P.step(s.pool, act, guards)[0]
    return Explored(nxt, _remember(s.memory, s.pool, act, nxt))


def pressure_model(guards: GuardSet = ALL_ON, scope: PressureScope = CONTROL_SCOPE) -> Model:
    """The spec's pressure pool as an explorable model (guards as given, every pool predicate checked)."""
    initial = Explored(P.initial(scope.capacity, 0, scope.holders, scope.aging_bound, scope.mailbox))
    return Model(
        name="pressure",
        initial=initial,
        step=lambda s, a: _step(scope, guards, s, a),
        actions=lambda s: pressure_actions(scope, s.pool),
        check_state=_check_state,
        check_step=_check_step,
        rejects=(GovernorError,),
    )
