"""Negative controls: each registered guard, switched off, must yield a counterexample.

Spec layer: the spec alone is driven and an invariant of an ID the guard
protects must fail. Refimpl layer: refimpl runs with contracts off against
the intact spec, and refinement (or an invariant) must fail.
"""

from __future__ import annotations

import pytest

from invariants.campaign import campaign_settings
from invariants.manager_ledger_machine import LedgerMachine
from invariants.manager_machine import find_counterexample
from refimpl.verify.checkers import CHECKERS, Budget
from spec.guards import GUARDS, GuardSet, Layer


_BUDGET = Budget(campaign_examples=0, campaign_steps=0, control_examples=400, control_steps=30, shrink=False)


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", [g for g in GUARDS if g.model in ("ledger", "manager")], ids=lambda g: g.name)
def test_negative_control_finds_counterexample(guard, layer) -> None:
    # Through the checker registry: each guard is hunted by the checker of its model.
    r = CHECKERS[guard.model].control(guard, layer, _BUDGET)
    assert r.found, r.message
    if layer is Layer.SPEC:
        assert r.violated in guard.ids
    assert r.steps and r.steps == len(r.counterexample)


def test_every_guard_protects_a_catalog_id() -> None:
    from spec.catalog import IDS

    assert GUARDS and all(g.ids and set(g.ids) <= set(IDS) for g in GUARDS)


def test_invalid_guard_name_rejected() -> None:
    with pytest.raises(ValueError, match="unknown guard"):
        GuardSet.without("no_such_guard")


def test_counterexample_is_shrunk_when_asked() -> None:
    g = next(g for g in GUARDS if g.name == "limit_check")
    raw = find_counterexample(LedgerMachine, g, Layer.SPEC, campaign_settings(200, 30, shrink=False))
    short = find_counterexample(LedgerMachine, g, Layer.SPEC, campaign_settings(200, 30, shrink=True))
    assert raw.found and short.found
    assert short.steps is not None and raw.steps is not None and short.steps < raw.steps, short.counterexample
    # The violating step is an over-limit reserve, and it ends the shrunk script.
    assert short.counterexample[-1].startswith("Reserve(") and short.violated == "I2"


def test_guard_names_are_unique() -> None:
    """One registry entry per guard: a duplicate would run its controls twice and hide a missing one."""
    from collections import Counter

    from spec.guards import GUARDS

    assert [n for n, k in Counter(g.name for g in GUARDS).items() if k > 1] == []


def test_every_checker_has_guards_to_switch_off() -> None:
    """A checker whose guards went missing would report its controls as found by having none."""
    models = {g.model for g in GUARDS}
    assert set(CHECKERS) <= models, sorted(set(CHECKERS) - models)


def test_an_implementation_that_crashes_is_reported_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A control whose implementation raises an untyped error (a mutant can break its own bookkeeping so that a
    later call raises KeyError) ends with that crash reported and the control not found, not the whole run down."""
    from refimpl.manager import ProcessMemoryManager

    def crash(self, holder, authority, *args, **kwargs):
        raise KeyError(authority)

    # A ticket's submission: the guard's harm (the allocator path overtaking a waiter) needs one first.
    monkeypatch.setattr(ProcessMemoryManager, "submit", crash)
    guard = next(g for g in GUARDS if g.name == "try_only")
    r = CHECKERS[guard.model].control(guard, Layer.REFIMPL, _BUDGET)
    assert not r.found and r.violated == "crash", r
    assert r.message.startswith("the implementation crashed: KeyError: "), r.message
    assert r.counterexample and "Submit" in r.counterexample[-1], r.counterexample
