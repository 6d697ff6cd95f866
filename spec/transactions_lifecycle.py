"""Capacity-transaction vocabulary and lifecycle tables (C4, C6, I5, I10).

Theory of operation. A capacity transaction moves through
plan -> reserve (try-only, one authority at a time, stable id order) ->
provisional view (publish) -> execute -> commit, or aborts from any open
phase, releasing everything and leaving a zero-byte retry intent. A
committed transaction is a lease set until it is released. Every phase
change is one lookup in `TRANSACTION_TABLE`; a miss is `InvalidTransition`
naming phase and event. Bundles (I10) and the manager itself (I5) have
tables of their own. Diagrams in docs/ are generated from these tables.

Enums only plus the tables: no behaviour besides the lookups.
"""

from __future__ import annotations

from collections.abc import Mapping

from spec.lifecycle import lookup
from spec.types import _ShortRepr

__all__ = [
    "TxPhase",
    "TxEvent",
    "ViewKind",
    "ViewState",
    "BundlePart",
    "BundleState",
    "BundleEvent",
    "ManagerState",
    "TRANSACTION_TABLE",
    "BUNDLE_TABLE",
    "OPEN_PHASES",
    "next_tx_phase",
    "next_bundle_state",
]


class TxPhase(_ShortRepr):
    PLANNED = "planned"  # needs known, nothing held; all waiting happened before this
    RESERVING = "reserving"  # some authorities held, in stable id order
    RESERVED = "reserved"  # every need held
    PUBLISHED = "published"  # provisional view exists over the new allocation
    EXECUTING = "executing"  # views bound to the consuming execution
    COMMITTED = "committed"  # a lease set; bundle advanced
    ABORTED = "aborted"  # terminal: everything released, intent left behind
    RELEASED = "released"  # terminal: lease set returned


class TxEvent(_ShortRepr):
    RESERVE = "reserve"
    RESERVE_LAST = "reserve-last"
    PUBLISH = "publish"
    EXECUTE = "execute"
    COMMIT = "commit"
    ABORT = "abort"
    RELEASE = "release"


class ViewKind(_ShortRepr):
    """Model memory view shapes (C6)."""

    CONTIGUOUS = "contiguous"
    BLOCKS_TABLE = "blocks-table"
    INDEXED = "indexed"
    OPAQUE = "opaque"


class ViewState(_ShortRepr):
    MAPPED = "mapped"
    INVALID = "invalid"  # its device was lost; dropped when termination is confirmed


class BundlePart(_ShortRepr):
    """Loop-carried state that commits or rolls back as one unit (I10)."""

    KV = "kv"
    RECURRENT = "recurrent"  # recurrent / conv state
    SAMPLER = "sampler"  # sampler / search state
    PROGRESS = "progress"  # request progress


class BundleState(_ShortRepr):
    ACTIVE = "active"
    POISONED = "poisoned"  # post-commit disagreement: the engine must rebuild it (I5)


class BundleEvent(_ShortRepr):
    MISMATCH = "mismatch"


class ManagerState(_ShortRepr):
    HEALTHY = "healthy"
    POISONED = "poisoned"  # ledger corruption: every grant fails (I5)


_P, _E = TxPhase, TxEvent

TRANSACTION_TABLE: Mapping[tuple[TxPhase, TxEvent], TxPhase] = {
    (_P.PLANNED, _E.RESERVE): _P.RESERVING,
    (_P.PLANNED, _E.RESERVE_LAST): _P.RESERVED,
    (_P.RESERVING, _E.RESERVE): _P.RESERVING,
    (_P.RESERVING, _E.RESERVE_LAST): _P.RESERVED,
    (_P.RESERVED, _E.PUBLISH): _P.PUBLISHED,
    (_P.PUBLISHED, _E.EXECUTE): _P.EXECUTING,
    (_P.EXECUTING, _E.EXECUTE): _P.EXECUTING,
    (_P.EXECUTING, _E.COMMIT): _P.COMMITTED,
    (_P.PLANNED, _E.ABORT): _P.ABORTED,
    (_P.RESERVING, _E.ABORT): _P.ABORTED,
    (_P.RESERVED, _E.ABORT): _P.ABORTED,
    (_P.PUBLISHED, _E.ABORT): _P.ABORTED,
    (_P.EXECUTING, _E.ABORT): _P.ABORTED,
    (_P.COMMITTED, _E.RELEASE): _P.RELEASED,
}

#: Phases of a transaction that has not committed: a failure here restores everything (I5).
OPEN_PHASES = frozenset({_P.PLANNED, _P.RESERVING, _P.RESERVED, _P.PUBLISHED, _P.EXECUTING})

BUNDLE_TABLE: Mapping[tuple[BundleState, BundleEvent], BundleState] = {
    (BundleState.ACTIVE, BundleEvent.MISMATCH): BundleState.POISONED,
    (BundleState.POISONED, BundleEvent.MISMATCH): BundleState.POISONED,
}


def next_tx_phase(phase: TxPhase, event: TxEvent, what: str = "transaction") -> TxPhase:
    """Look up the transaction table."""
    return lookup(TRANSACTION_TABLE, phase, event, what, noun="phase")


def next_bundle_state(state: BundleState, event: BundleEvent, what: str = "bundle") -> BundleState:
    """Look up the bundle table."""
    return lookup(BUNDLE_TABLE, state, event, what)
