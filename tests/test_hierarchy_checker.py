"""The hierarchy checker (C10, I11): real-process campaign with refinement, deterministic controls."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from invariants.campaign import campaign_settings
from invariants.hierarchy_machine import model, to_campaign
from invariants.hierarchy_scope import SCRIPTS
from invariants.model_machine import run_model_campaign
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.hierarchy_adapter import HierarchyAdapter
from refimpl.hierarchy.driver import leftovers
from refimpl.verify.hierarchy_mutants import MUTANTS
from refimpl.verify.hierarchy_checker import replay_refimpl
from refimpl.verify import PROFILES
from spec.guards import ALL_ON, GUARDS, Layer

HIERARCHY_GUARDS = [g for g in GUARDS if g.model == "hierarchy"]


def test_real_hierarchy_refines_spec() -> None:
    stats = run_model_campaign(model(lambda c, g: HierarchyAdapter(c, g)), campaign_settings(4, 15, shrink=False))
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


# --- mutation controls in `ortmem verify` (refimpl.verify.mutants, source patches of refimpl.hierarchy) ---------------

from invariants.clauses import clauses_of  # noqa: E402
from invariants.hierarchy_machine import SpawnHeld  # noqa: E402
from invariants.mutation import applied  # noqa: E402
from refimpl.hierarchy.core import Core  # noqa: E402
from refimpl.verify.hierarchy_mutants import MUTANT_SCRIPTS  # noqa: E402
from refimpl.verify.hierarchy_checker import replay_predicates  # noqa: E402
from refimpl.verify.mutants import MUTANTS as REGISTRY  # noqa: E402
from spec import hierarchy as H  # noqa: E402
from spec.errors import AuthenticationFailed  # noqa: E402

HIERARCHY_MUTANTS = sorted(n for n, m in REGISTRY.items() if m.model == "hierarchy")


def test_every_hierarchy_mutant_has_a_script_and_back() -> None:
    assert set(HIERARCHY_MUTANTS) == set(MUTANT_SCRIPTS)


@functools.cache
def _mutation_control(name: str) -> Any:
    """One mutant's control, run once per test process (the aggregate test below reuses it)."""
    m = REGISTRY[name]
    with applied(m):
        return CHECKERS["hierarchy"].control(m, m.layer, PROFILES["quick"])


@pytest.mark.parametrize("name", HIERARCHY_MUTANTS)
def test_hierarchy_mutation_control_makes_a_clause_fail(name: str) -> None:
    m = REGISTRY[name]
    r = _mutation_control(name)
    assert r.found, r.message
    mine = {c.key for i in m.ids for c in clauses_of(i)}
    assert r.clauses and set(r.clauses) & mine, r.clauses  # a clause of its own IDs, not refinement
    assert leftovers() == []
    violated, message, _, clauses = replay_predicates(MUTANT_SCRIPTS[name], Core)  # intact: nothing fails
    assert violated is None and clauses == (), message


def test_every_hierarchy_clause_is_failed_by_some_mutant() -> None:
    """R3 for C10 and I11 from mutation controls alone (the table each mutant's control reports)."""
    failed: set[str] = set()
    for name in HIERARCHY_MUTANTS:
        failed |= set(_mutation_control(name).clauses)
    wanted = {c.key for i in ("C10", "I11") for c in clauses_of(i)}
    assert wanted - failed == set()


def test_held_worker_is_unauthenticated_and_a_forged_hello_gets_nothing() -> None:
    gov = HierarchyAdapter((8, 12, 2), ALL_ON)
    try:
        wid = gov.execute(SpawnHeld())
        before = gov.abstract()
        assert before.workers[wid].state is H.WorkerState.SPAWNED
        with pytest.raises(AuthenticationFailed, match="challenge failed"):
            gov.execute(H.Hello(wid, authentic=False))  # a real connection with a wrong key
        assert gov.abstract() == before
        assert any(e["event"] == "refused-hello" for e in gov.h.op("events"))
        gov.execute(H.Hello(wid))
        assert gov.abstract().workers[wid].state is H.WorkerState.ACTIVE
        assert gov.execute(H.Request(wid, 1, 1, 3)) == ("granted", 3)
    finally:
        gov.close()
    assert leftovers() == []
