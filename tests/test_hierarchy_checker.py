"""The hierarchy checker (C10, I11): real-process campaign with refinement, deterministic controls."""

from __future__ import annotations

import pytest

from invariants.campaign import campaign_settings
from invariants.hierarchy_machine import model, to_campaign
from invariants.hierarchy_scope import SCRIPTS
from invariants.model_machine import run_model_campaign
from refimpl.checkers import CHECKERS
from refimpl.hierarchy.adapter import HierarchyAdapter
from refimpl.hierarchy.driver import leftovers
from refimpl.hierarchy.mutants import MUTANTS
from refimpl.hierarchy_checker import replay_refimpl
from refimpl.verify import PROFILES
from spec.guards import ALL_ON, GUARDS, Layer

HIERARCHY_GUARDS = [g for g in GUARDS if g.model == "hierarchy"]


def test_real_hierarchy_refines_spec() -> None:
    stats = run_model_campaign(model(lambda c, g: HierarchyAdapter(c, g)), campaign_settings(4, 15))
    assert stats.examples >= 4 and stats.accepted > 10
    assert leftovers() == []


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_scripts_refine_spec_with_every_guard_on(name: str) -> None:
    violated, message, _ = replay_refimpl(to_campaign(SCRIPTS[name]), ALL_ON)
    assert violated is None, message


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("g", HIERARCHY_GUARDS, ids=lambda g: g.name)
def test_hierarchy_negative_control_is_found(g: object, layer: Layer) -> None:
    r = CHECKERS["hierarchy"].control(g, layer, PROFILES["quick"])  # type: ignore[arg-type]
    assert r.found, r.message
    if layer is Layer.REFIMPL:
        assert "refuses" in r.message or " != " in r.message  # a divergence in acceptance or state
    assert leftovers() == []


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_hierarchy_mutant_is_killed_with_every_guard_on(name: str) -> None:
    core, script = MUTANTS[name]
    violated, message, _ = replay_refimpl(script, ALL_ON, core=core)
    assert violated is not None, f"mutant {name} survived"
    assert "refuses" in message or " != " in message or violated in ("C10", "I11"), message
    violated, message, _ = replay_refimpl(script, ALL_ON)  # the same script on the intact coordinator is clean
    assert violated is None, message
