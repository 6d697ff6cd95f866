"""spec/transactions_lifecycle.py: the transaction table through its lookup, default names, short reprs.

The transaction lifecycle's misses name record, event and *phase*; the
vocabulary's enums print as `TxPhase.PLANNED` so a Hypothesis falsifying
example reads as a script (STYLE 11).
"""

from __future__ import annotations

import itertools

import pytest

from spec.errors import InvalidTransition
from spec.transactions_lifecycle import (
    BUNDLE_TABLE,
    BundleEvent,
    BundlePart,
    BundleState,
    ManagerState,
    TRANSACTION_TABLE,
    TxEvent,
    TxPhase,
    ViewKind,
    ViewState,
    next_bundle_state,
    next_tx_phase,
)

TX_PAIRS = list(itertools.product(TxPhase, TxEvent))


def _pid(pair) -> str:
    return f"{pair[0].value}+{pair[1].value}"


@pytest.mark.parametrize("pair", [p for p in TX_PAIRS if p not in TRANSACTION_TABLE], ids=_pid)
def test_invalid_tx_transition(pair) -> None:
    phase, event = pair
    msg = rf"^transaction: no transition for event '{event.value}' in phase '{phase.value}'$"
    with pytest.raises(InvalidTransition, match=msg):
        next_tx_phase(phase, event)


@pytest.mark.parametrize("pair", [p for p in TX_PAIRS if p in TRANSACTION_TABLE], ids=_pid)
def test_tx_transition(pair) -> None:
    assert next_tx_phase(*pair) is TRANSACTION_TABLE[pair]


@pytest.mark.parametrize("state", list(BundleState))
def test_bundle_mismatch_poisons(state) -> None:
    assert next_bundle_state(state, BundleEvent.MISMATCH) is BundleState.POISONED is BUNDLE_TABLE[(state, BundleEvent.MISMATCH)]


@pytest.mark.parametrize(("member", "expected"), [
    (TxPhase.PLANNED, "TxPhase.PLANNED"),
    (TxEvent.RESERVE_LAST, "TxEvent.RESERVE_LAST"),
    (ViewKind.BLOCKS_TABLE, "ViewKind.BLOCKS_TABLE"),
    (ViewState.INVALID, "ViewState.INVALID"),
    (BundlePart.KV, "BundlePart.KV"),
    (BundleState.POISONED, "BundleState.POISONED"),
    (ManagerState.HEALTHY, "ManagerState.HEALTHY"),
], ids=str)
def test_short_repr(member, expected: str) -> None:
    assert repr(member) == expected
