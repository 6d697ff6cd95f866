# Contracts on a Pool with one guard switched off (C5, I6, I7, I13).
#
# Each pressure guard has a short, deterministic scenario. With every guard on
# the scenario is refused with a typed error at a known step (or, for aging,
# the overtaking stays within the bound); with the guard off and contracts on
# the governor's own checks (or, for the temporal I13, the trace predicate
# over the refimpl's abstractions) raise InvariantViolation naming an ID the
# guard protects.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.pressure import check_trace, overtakes
from refimpl.verify.ledger_adapter import method_name
from pool_harness import Pool, pool as make_pool
from spec import pressure as P
from spec.errors import CapacityDenied, GovernorError, PinnedVictim, StaleAnswer
from spec.guards import ALL_ON, GUARDS, GuardSet

PRESSURE_GUARDS = [g for g in GUARDS if g.model == "pressure"]


def _traced(gov: Pool, calls: list[Callable[[Pool], Any]]) -> list[Any]:
    trace = []
    for call in calls:
        prev = gov.abstract()
        call(gov)
        trace.append((prev, call, gov.abstract()))
    return trace


def aging(gov: Pool) -> None:
    calls = [lambda g: g.submit(1, 5), lambda g: g.claim(1, 1), lambda g: g.submit(2, 6)]
    calls += [lambda g: g.submit(2, 1)] * 4
    check_trace(_traced(gov, calls))


def try_only(gov: Pool) -> None:
    # The trace predicate must know which call was the allocator's: trace the actions themselves.
    acts = [P.Submit(1, 8, 0),
            P.TryReserve(2, 1, 0),  # a ticket is waiting: must be refused, never left pending
            P.Cancel(1, 1)]  # 8 B come back: the allocator's leftover ticket is granted to no one
    trace = []
    for a in acts:
        prev = gov.abstract()
        getattr(gov, method_name(a))(**attrs.asdict(a, recurse=False))
        trace.append((prev, a, gov.abstract()))
    check_trace(trace)


def unlock_before_callback(gov: Pool) -> None:
    gov.register_callback(1, lambda g, pid, target, deadline: None)
    gov.press(1, 4, 0, 5)


def answer_open_only(gov: Pool) -> None:
    t = gov.pool_try_reserve(1, 4)
    p = gov.press(1, 4, 0, 5)
    gov.answer(1, p, (t,), 6)  # after the deadline: the holder would give up its lease for no one


def victims_unpinned_idle(gov: Pool) -> None:
    t = gov.pool_try_reserve(1, 4)
    gov.pool_set_use(1, t, True, False)
    p = gov.press(1, 4, 0, 5)
    gov.answer(1, p, (t,), 1)


SCENARIOS: dict[str, tuple[Callable[[Pool], None], type[GovernorError] | None, str]] = {
    "aging": (aging, None, ""),
    "try_only": (try_only, CapacityDenied, "waiting"),
    "unlock_before_callback": (unlock_before_callback, None, ""),
    "answer_open_only": (answer_open_only, StaleAnswer, "answered at 6"),
    "victims_unpinned_idle": (victims_unpinned_idle, PinnedVictim, "pinned"),
}


def _gov(guards: GuardSet) -> Pool:
    return make_pool(8, holders=2, aging_bound=1, mailbox=16, guards=guards)


def test_every_pressure_guard_has_a_scenario() -> None:
    assert set(SCENARIOS) == {g.name for g in PRESSURE_GUARDS}


@pytest.mark.parametrize("guard", PRESSURE_GUARDS, ids=lambda g: g.name)
def test_invalid_pressure_guard_off_raises_invariant_violation(guard) -> None:
    scenario, _, _ = SCENARIOS[guard.name]
    with contracts.contracts(True):
        with pytest.raises(InvariantViolation, match="|".join(rf"^{i}:" for i in guard.ids)) as exc:
            scenario(_gov(GuardSet.without(guard.name)))
    assert exc.value.id in guard.ids


@pytest.mark.parametrize("guard", PRESSURE_GUARDS, ids=lambda g: g.name)
def test_pressure_guard_on_refuses_or_holds(guard) -> None:
    scenario, error, match = SCENARIOS[guard.name]
    gov = _gov(ALL_ON)
    with contracts.contracts(True):
        if error is None:
            scenario(gov)  # every invariant (and, for aging, the trace bound) holds
        else:
            with pytest.raises(error, match=match):
                scenario(gov)


@pytest.mark.parametrize("guards, expected", [(ALL_ON, {}), (GuardSet.without("aging"), {2: 3})],
                         ids=["aging", "no-aging"])
def test_aging_bound_is_what_limits_overtaking(guards, expected) -> None:
    # Ticket 2 (6 B) waits behind a 5 B lease; four 1 B newcomers follow (3 B free, bound 1).
    gov = _gov(guards)
    with contracts.contracts(False):
        calls = [lambda g: g.submit(1, 5), lambda g: g.claim(1, 1), lambda g: g.submit(2, 6)]
        trace = _traced(gov, calls + [lambda g: g.submit(2, 1)] * 4)
    assert overtakes(trace) == expected
