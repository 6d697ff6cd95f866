"""The pressure campaign as a test: the composed machine restricted to pressure (C5 I6 I7 I13).

`invariants.manager_pressure.PressureMachine` is `ManagerMachine` with only the ticket, release, allocator,
pressure and environment rules and two steered ones; after every step, refinement of the one manager
against `spec.manager.step`, a rejection leaves the whole state unchanged, and the composed predicates.
"""

from __future__ import annotations

from hypothesis import settings

from invariants import contracts
from invariants.campaign import campaign_settings, run_machine
from invariants.manager_machine import ManagerMachine, ManagerSpecAdapter
from invariants.manager_pressure import PRESSURE_RULES, PRESSURE_SITUATIONS, PressureMachine
from refimpl.verify.manager_adapter import ManagerAdapter


class PressureRefinesSpec(PressureMachine):
    adapter_factory = ManagerAdapter


TestPressureRefinesSpec = PressureRefinesSpec.TestCase
TestPressureRefinesSpec.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def _rules(machine: type) -> set[str]:
    return {name for name in dir(machine) if hasattr(getattr(machine, name), "hypothesis_stateful_rule")}


def test_the_pressure_campaign_is_a_restriction_of_the_composed_machine() -> None:
    # A subset of the composed machine's rules plus its own steered ones; the same spec and predicates.
    assert _rules(PressureMachine) == set(PRESSURE_RULES)
    assert _rules(PressureMachine) - _rules(ManagerMachine) == {"answer_late"}  # `burst`, `order_among_waiters` shared
    assert PressureMachine.spec_step is ManagerMachine.spec_step and PressureMachine.check_step is ManagerMachine.check_step
    assert {"plan_and_reserve", "view", "allowance", "lower_limit"} <= _rules(ManagerMachine) - _rules(PressureMachine)


def test_pressure_campaign_reaches_every_situation_and_rejects_bad_input() -> None:
    # Evidence only if the campaign reaches what it is steered to and rejects with every pressure error.
    with contracts.contracts(True):
        stats = run_machine(PressureMachine, ManagerAdapter, campaign_settings(60, 40))
    assert stats.accepted > 1500
    for case in PRESSURE_SITUATIONS:
        assert stats.events.get(case, 0) > 0, f"campaign never reached {case!r}: {stats.events}"
    for error in ("CapacityDenied", "ForeignHolder", "InvalidTransition", "UnknownTicket", "StaleAnswer",
                  "StaleGeneration", "PinnedVictim"):
        assert stats.rejected.get(error, 0) > 0, f"campaign never produced {error}"


def test_pressure_campaign_with_contracts_off_still_refines() -> None:
    with contracts.contracts(False):
        stats = run_machine(PressureMachine, ManagerAdapter, campaign_settings(40, 40))
    assert stats.steps > 1000


def test_the_spec_alone_meets_the_composed_predicates() -> None:
    stats = run_machine(PressureMachine, ManagerSpecAdapter, campaign_settings(40, 40), refine=False)
    assert stats.coverage["step_I13_order.grant_order"][1] > 0
    assert stats.coverage["step_C5_answers.zero_answer_takes_nothing"][1] > 0
