"""The mutant registry and the harness that applies a mutant (issue #9, item 4)."""

from __future__ import annotations

import sys

import pytest

from invariants import InvariantViolation, contracts
from invariants.mutation import Mutant, StaleMutant, applied
from spec.types import Role, Tier
from refimpl.verify.mutants import MUTANTS
from spec.catalog import IDS
from spec.guards import Layer


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_matches_its_code_exactly_once(name: str) -> None:
    m = MUTANTS[name]
    assert set(m.ids) <= set(IDS)
    src = m.patched_source()  # raises StaleMutant when the snippet is gone or ambiguous
    assert src != open(sys.modules[m.module].__file__, encoding="utf-8").read()
    compile(src, m.module, "exec")
    with applied(m):  # the snippet lies in one top-level definition, which the harness can swap
        pass


def test_objects_made_before_a_patch_keep_their_classes() -> None:
    """Only the patched definition changes: values built earlier still match the module's classes."""
    from spec import sessions as S

    facts = S.ModelFacts(10, 20, 1, frozenset(), 0, 0, 0)
    with applied(MUTANTS["lowering_ignores_headroom"]):
        assert isinstance(facts, S.ModelFacts) and S.Mode.MANAGED is S.Mode("managed")
        assert S.step_sessions.__name__ == "step_sessions"


def test_a_stale_mutant_is_refused() -> None:
    m = Mutant("gone", ("I1",), "ledger", Layer.REFIMPL, "refimpl.manager.ledger", "this text is not in the module",
               "x", "stale")
    with pytest.raises(StaleMutant, match="occurs 0 times"):
        with applied(m):
            pass


def test_applied_patches_every_importer_and_restores_exactly() -> None:
    import refimpl.verify.manager_adapter
    import refimpl.manager as manager
    import refimpl.manager.ledger as ledger

    m = MUTANTS["release_without_refund"]
    before_mod = dict(vars(ledger))
    before_part = ledger.Ledger
    before_bases = manager.ProcessMemoryManager.__bases__
    with applied(m):
        # the part is patched where it is defined and imported, and the composed class takes it
        assert ledger.Ledger is not before_part and manager.Ledger is ledger.Ledger
        assert ledger.Ledger in refimpl.verify.manager_adapter.ProcessMemoryManager.__mro__
        assert before_part not in refimpl.verify.manager_adapter.ProcessMemoryManager.__mro__
        with contracts.contracts(False):
            p = refimpl.verify.manager_adapter.ManagerAdapter().pmm
            h = p.register_holder("h")
            a = p.register_authority("gpu", Tier.DEVICE, 64)
            p.cancel(h, p.reserve(h, a, Tier.DEVICE, 8, Role.KV))
            assert p.snapshot(a).used == 8  # the bug is live: the bytes stayed charged
        with contracts.contracts(True), pytest.raises(InvariantViolation, match="^I1"):
            p.cancel(h, p.reserve(h, a, Tier.DEVICE, 8, Role.KV))  # and a debug build's contracts catch it
    assert manager.ProcessMemoryManager.__bases__ == before_bases
    assert vars(ledger) == before_mod
    p = refimpl.verify.manager_adapter.ManagerAdapter().pmm
    h = p.register_holder("h")
    a = p.register_authority("gpu", Tier.DEVICE, 64)
    p.cancel(h, p.reserve(h, a, Tier.DEVICE, 8, Role.KV))
    assert p.snapshot(a).used == 0
