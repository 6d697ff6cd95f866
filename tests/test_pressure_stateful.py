"""The pressure campaign as a test: the manager (one ledger as a pool) refines spec.pressure (C5 I6 I7 I13).

After every step: refinement against `spec.pressure.step` (result, next pool,
error type), a rejection leaves the whole pool unchanged, step predicates on
accepted actions, state predicates always; trace predicates (exactly-once
credit, bounded overtaking) at the end of every example.
"""

from __future__ import annotations

from hypothesis import settings

from invariants import contracts
from invariants.campaign import campaign_settings
from invariants.pressure import Delivery
from invariants.pressure_machine import PoolParams, PressureMachine, SpecPoolAdapter, run_pressure_campaign
from refimpl.verify.pressure_adapter import PressureAdapter


class PressureRefinesSpec(PressureMachine):
    adapter_factory = PressureAdapter


TestPressureRefinesSpec = PressureRefinesSpec.TestCase
TestPressureRefinesSpec.settings = settings(TestPressureRefinesSpec.settings, deadline=None)


class PressureSpecAlone(PressureMachine):
    adapter_factory = SpecPoolAdapter
    check_refinement = False


TestPressureSpecInvariants = PressureSpecAlone.TestCase


def test_pressure_campaign_reaches_deep_states_and_rejects_bad_input() -> None:
    # Evidence only if the campaign both succeeds often and rejects with every pressure error.
    with contracts.contracts(True):
        stats = run_pressure_campaign(PressureAdapter, campaign_settings(150, 40))
    assert stats.examples >= 150
    assert stats.accepted > 1500
    for error in ("CapacityDenied", "ForeignHolder", "InvalidTransition", "InvalidBytes", "UnknownHolder",
                  "UnknownTicket", "StaleAnswer", "StaleGeneration", "PinnedVictim", "MailboxFull"):
        assert stats.rejected.get(error, 0) > 0, f"campaign never produced {error}"


def test_pressure_campaign_with_contracts_off_still_refines() -> None:
    with contracts.contracts(False):
        stats = run_pressure_campaign(PressureAdapter, campaign_settings(80, 40))
    assert stats.steps > 1500


def test_adapter_callbacks_run_without_the_lock() -> None:
    a = PressureAdapter(PoolParams(16, 0, 2, 2, 8), strict_callbacks=True)
    a.gov.pool_press(1, a.pool, 4, 0, 5)
    assert a.delivered == [Delivery(1, 1, 4, lock_free=True)]
