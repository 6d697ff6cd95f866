"""The transaction model's state records (`spec.transactions`' vocabulary): records only, no transition code."""

from __future__ import annotations

import attrs
import immutables

from spec.transactions_lifecycle import BundleState, ManagerState, TxPhase, ViewKind, ViewState
from spec.types import ContextState

__all__ = [
    "TxAuthority", "Transaction", "View", "Bundle", "Intent", "TxState", "TX_EMPTY", "MAX_NEEDS",
    "MAX_PRIORITY",
]

MAX_NEEDS = 8
MAX_PRIORITY = 9


@attrs.frozen
class TxAuthority:
    id: int
    name: str
    capacity: int
    # Invariant (I5): used == held by transactions on this authority + stranded.
    used: int
    stranded: int  # charge of a lost context, kept until termination is confirmed (C3)
    context: ContextState


@attrs.frozen
class Transaction:
    id: int  # also the allocation id of what it commits
    seq: int  # submit sequence: arbitration identity, kept across retries (C4)
    priority: int
    age: int
    needs: tuple[tuple[int, int], ...]  # (authority, bytes) in declared order
    held: tuple[tuple[int, int], ...]  # (authority, bytes) in reservation order: ids strictly increase
    phase: TxPhase
    bundle: int | None
    kind: ViewKind
    bound: tuple[tuple[int, int], ...]  # (view, generation) bound to this execution (C6)


@attrs.frozen
class View:
    id: int
    allocation: int  # the transaction that owns the bytes
    authority: int
    kind: ViewKind
    generation: int  # mapping generation, >= 1, advanced only by Remap (I9)
    state: ViewState
    users: tuple[int, ...]  # executing transactions bound to it, ascending


@attrs.frozen
class Bundle:
    id: int
    versions: tuple[int, ...]  # one per BundlePart; all equal (I10)
    state: BundleState


@attrs.frozen
class Intent:
    """A deferred transaction's arbitration identity; it holds no bytes (C4)."""

    id: int
    seq: int
    priority: int
    age: int


@attrs.frozen
class TxState:
    authorities: immutables.Map = immutables.Map()
    txs: immutables.Map = immutables.Map()  # open and committed transactions
    views: immutables.Map = immutables.Map()
    bundles: immutables.Map = immutables.Map()
    intents: immutables.Map = immutables.Map()
    manager: ManagerState = ManagerState.HEALTHY
    next_authority: int = 1
    next_tx: int = 1
    next_view: int = 1
    next_bundle: int = 1
    next_intent: int = 1
    next_seq: int = 1


TX_EMPTY = TxState()
