"""Negative controls of the pressure guards (C5 I6 I7 I13) on the composed machine's pressure restriction
(`invariants.manager_pressure`): each finds the harm its guard prevents.

Spec layer: the spec alone, one guard off; the first failing clause must be
the guard's harm clause (never a restatement of the guard). Refimpl layer:
the governor with the guard off against the intact spec; a divergence in
state or result, or a harm clause, counts; an error-type-only difference
does not. `unlock_before_callback` has no spec-layer control: the spec has no
lock, and the checker says so instead of searching.
"""

from __future__ import annotations

import pytest

from refimpl.verify.checkers import CHECKERS
from refimpl.verify.pressure_scripts import SPEC_CANNOT_EXPRESS
from refimpl.verify import PROFILES
from spec.guards import GUARDS, Layer

PRESSURE_GUARDS = [g for g in GUARDS if g.model == "pressure"]

#: The harm clause each guard's spec-layer control must violate.
HARM = {
    "aging": "step_I13_manager.matured_not_overtaken",
    "try_only": ("step_I2_manager.grant_within_limit", "step_I13_manager.allocator_never_overtakes_a_waiter"),
    "answer_open_only": "step_C5_manager.stale_answer_credits_nothing",
    "victims_unpinned_idle": "step_I6_manager.pinned_never_reclaimed",
}


def test_every_pressure_guard_has_a_harm_or_a_reason() -> None:
    assert set(HARM) | set(SPEC_CANNOT_EXPRESS) == {g.name for g in PRESSURE_GUARDS}
    assert not set(HARM) & set(SPEC_CANNOT_EXPRESS)


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", PRESSURE_GUARDS, ids=lambda g: g.name)
def test_pressure_negative_control_finds_the_harm(guard, layer) -> None:
    r = CHECKERS["pressure"].control(guard, layer, PROFILES["quick"])
    if layer is Layer.SPEC and guard.name in SPEC_CANNOT_EXPRESS:
        assert not r.found and r.message.startswith("not expressible in the spec"), r.message
        return
    assert r.found, r.message
    if layer is Layer.SPEC:
        harms = HARM[guard.name] if isinstance(HARM[guard.name], tuple) else (HARM[guard.name],)
        assert r.violated in guard.ids and r.clause in harms, r.message
    else:
        assert r.violated != "refinement:error-type", r.message
    assert r.steps and r.steps == len(r.counterexample)


def test_callback_under_the_lock_is_found_in_refimpl_by_the_outside_probe() -> None:
    g = next(g for g in PRESSURE_GUARDS if g.name == "unlock_before_callback")
    r = CHECKERS["pressure"].control(g, Layer.REFIMPL, PROFILES["quick"])
    assert r.found and r.clause == "observed_I7_manager.callback_without_ledger_lock", r.message
