"""Negative controls of the transaction guards (C3 C4 C6 I5 I9 I10).

Each guard registered with `model="transactions"`, switched off, must yield a
counterexample: in the spec an invariant of an ID it protects fails; in the
coordinator refinement against the intact spec (or an invariant) fails.
"""

from __future__ import annotations

import pytest

from invariants.campaign import campaign_settings
from invariants.transactions_machine import find_tx_counterexample
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.transactions_adapter import TxRefimplAdapter
from refimpl.verify import PROFILES
from spec.guards import GUARDS, Layer

TX_GUARDS = [g for g in GUARDS if g.model == "transactions"]

EXPECTED = {  # the required controls, by the ID that must be violated
    "ordered_reservation": "C4", "full_abort": "I5", "remap_when_idle": "I9", "atomic_bundle": "I10",
    "refund_after_termination": "C3",
}


#: The harm clause(s) each guard's spec-layer control must violate (issue 9: a control counts only on a harm).
HARM: dict[str, str | tuple[str, ...]] = {
    "ordered_reservation": "state_C4.no_circular_holding",
    "publish_after_all_held": "state_C4.runs_on_reserved_bytes",
    "retry_keeps_identity": "step_C4.retry_keeps_identity",
    "full_abort": ("step_I5.abort_restores_ledgers", "state_I5.ledger_matches_holdings"),
    "poisoned_manager_refuses": "step_I5.corrupt_ledger_charges_nothing",
    "current_generation": "state_C6.no_stale_view_read",
    "remap_when_idle": "step_I9.remap_fences_users",
    "atomic_bundle": "step_I10.bundle_moves_as_unit",
    "refund_after_termination": "step_C3.loss_refunds_nothing",
}


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", TX_GUARDS, ids=lambda g: g.name)
def test_tx_negative_control_finds_counterexample(guard, layer) -> None:
    r = find_tx_counterexample(guard, layer, campaign_settings(200, 30, shrink=False), TxRefimplAdapter)
    assert r.found, r.message
    if layer is Layer.SPEC:
        assert r.violated in guard.ids
        if guard.name in EXPECTED:
            assert r.violated == EXPECTED[guard.name]
        harms = HARM[guard.name] if isinstance(HARM[guard.name], tuple) else (HARM[guard.name],)
        assert r.clause in harms, r.message  # the harm the guard prevents, not the guard restated
    else:
        assert r.violated != "refinement:error-type", r.message
    assert r.steps and r.steps == len(r.counterexample)


def test_tx_checker_is_registered_for_every_tx_guard() -> None:
    assert CHECKERS["transactions"].name == "transactions"
    assert set(EXPECTED) <= {g.name for g in TX_GUARDS}


def test_tx_checker_control_uses_the_verify_budget() -> None:
    g = next(g for g in TX_GUARDS if g.name == "atomic_bundle")
    r = CHECKERS["transactions"].control(g, Layer.SPEC, PROFILES["quick"])
    assert r.found and r.violated == "I10"


def test_unordered_reservation_counterexample_is_short_when_shrunk() -> None:
    g = next(g for g in TX_GUARDS if g.name == "ordered_reservation")
    r = find_tx_counterexample(g, Layer.SPEC, campaign_settings(200, 30, shrink=True))
    assert r.found and r.violated == "C4" and r.clause == "state_C4.no_circular_holding", r.message
    assert r.counterexample[-1].startswith("Reserve("), r.counterexample
    # The harm needs contention: setup (3), two plans, one reservation each, in opposite order (+1 slack).
    assert sum(a.startswith("Plan(") for a in r.counterexample) >= 2, r.counterexample
    assert r.steps is not None and r.steps <= 8, r.counterexample
