"""The stateful campaign as a test: refimpl refines spec, invariants after every step.

Checks (a) check_all on every abstraction and check_step on accepted steps,
(b) refinement: refimpl's step equals spec.manager.step on the previous
abstraction, (c) a rejected action raises the spec's error type and leaves
the whole abstraction unchanged, on the composed machine's ledger restriction.
IDs: C1 C2 I1 I2 I4a I4b I6.
"""

from __future__ import annotations

from hypothesis import settings

from invariants import contracts
from invariants.campaign import campaign_settings, run_machine
from invariants.manager_ledger_machine import LedgerMachine
from invariants.manager_machine import ManagerSpecAdapter
from refimpl.verify.manager_adapter import ManagerAdapter


class RefimplRefinesSpec(LedgerMachine):
    adapter_factory = ManagerAdapter


TestRefimplRefinesSpec = RefimplRefinesSpec.TestCase
TestRefimplRefinesSpec.settings = settings(TestRefimplRefinesSpec.settings, deadline=None)


class SpecAlone(LedgerMachine):
    """The spec driven on its own: every reachable state satisfies the invariants."""

    adapter_factory = ManagerSpecAdapter
    check_refinement = False


TestSpecInvariants = SpecAlone.TestCase


def test_campaign_reaches_deep_states_and_rejects_bad_input() -> None:
    # The campaign is only evidence if it both succeeds often and rejects often.
    with contracts.contracts(True):
        stats = run_machine(LedgerMachine, ManagerAdapter, campaign_settings(150, 30))
    assert stats.examples >= 150
    assert stats.accepted > 1000
    for error in ("CapacityDenied", "ForeignHolder", "InvalidTransition", "InvalidBytes", "UnknownHolder",
                  "IdentityMismatch", "TierMismatch", "DeviceLost", "AllowanceExceeded"):
        assert stats.rejected.get(error, 0) > 0, f"campaign never produced {error}"
    # The verdict's R1 asks each clause's case 20 times: an oversubscribed ledger observed (steered by `observe`).
    evaluated, held = stats.coverage["observe_snapshot.oversubscription_reported"]
    assert held >= 20, (evaluated, held)


def test_campaign_with_contracts_off_still_refines() -> None:
    with contracts.contracts(False):
        stats = run_machine(LedgerMachine, ManagerAdapter, campaign_settings(100, 30))
    assert stats.steps > 1000


def test_the_ledger_campaign_finds_a_commit_that_rehomes_a_lease() -> None:
    """A consumer's commit of a producer's reservation, accepted and the lease handed to the consumer (mutant
    `commit_rehomes_lease`), is found within 50 examples: the steered `handoff` commits an open reservation as
    another holder. (Without it, the quick profile's mutant budget, 600 examples of 40 steps, never did.)"""
    from invariants.manager_machine import find_counterexample
    from invariants.mutation import applied
    from refimpl.verify.mutants import MUTANTS

    mutant = MUTANTS["commit_rehomes_lease"]
    with applied(mutant):
        r = find_counterexample(LedgerMachine, mutant, mutant.layer, campaign_settings(50, 30, shrink=False),
                                ManagerAdapter)
    assert r.found and "step_I4a.holder_fixed" in r.clauses, r.message
