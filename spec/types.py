"""Value vocabulary shared by every layer: tiers, roles, lifecycle states, limits.

Enums only, plus the bound on byte counts. No behaviour lives here.
"""

from __future__ import annotations

import enum

__all__ = [
    "MAX_BYTES",
    "MAX_NAME",
    "Tier",
    "Role",
    "AllocState",
    "AllocEvent",
    "ContextState",
    "ContextEvent",
    "Origin",
    "TxPhase",
    "ViewState",
    "BundlePart",
]

#: Largest byte count any operation accepts (int64, as ORT's size_t crosses a C ABI).
MAX_BYTES = 2**63 - 1
#: Longest pool, view or holder name (characters): names travel in traces, which bound their text.
MAX_NAME = 256


class _ShortRepr(enum.Enum):
    # Readable counterexamples: `Tier.DEVICE`, not `<Tier.DEVICE: 'device'>`.
    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    # A member is a singleton equal only to itself, so identity is a valid hash, and a C slot:
    # `Enum.__hash__` hashes the name in Python on every dict or set lookup (lifecycle tables, replay).
    __hash__ = object.__hash__


class Tier(_ShortRepr):
    """Independently exhaustible capacity class of a pool."""

    DEVICE = "device"
    HOST = "host"
    DISK = "disk"


class Role(_ShortRepr):
    """What a lease's bytes are for; reported in snapshots, never used for policy here."""

    WEIGHTS = "weights"
    KV = "kv"
    STATE = "state"
    PREFIX = "prefix"
    ARENA = "arena"
    STAGING = "staging"
    KERNEL = "kernel"


class AllocState(_ShortRepr):
    """Lifecycle of one physical allocation (DESIGN-FACTS section 6, I4a)."""

    PROVISIONAL = "provisional"  # reserved and charged, not yet backed
    LIVE = "live"  # committed: a lease owned by exactly one holder
    RELEASED = "released"  # terminal: fully refunded
    QUARANTINED = "quarantined"  # terminal for the holder: residual stays charged
    DEVICE_LOST = "device-lost"  # charge kept until termination is confirmed
    CONTEXT_TERMINATED = "context-terminated"  # terminal: refunded exactly once


class AllocEvent(_ShortRepr):
    COMMIT = "commit"
    CANCEL = "cancel"
    RELEASE = "release"
    QUARANTINE = "quarantine"
    SHRINK = "shrink"  # a lease gives back part of its bytes and stays live (spec.manager's ShrinkLease)
    GROW = "grow"  # a lease takes more bytes, admitted as a TryReserve, and stays live (spec.manager's GrowLease)
    LOSE = "lose"
    TERMINATE = "terminate"


class ContextState(_ShortRepr):
    """Device context behind an authority (C3)."""

    ACTIVE = "active"
    LOST = "lost"
    TERMINATED = "terminated"


class ContextEvent(_ShortRepr):
    LOSE = "lose"
    CONFIRM_TERMINATION = "confirm-termination"


class Origin(_ShortRepr):
    """How an allocation's charge entered the ledger (I2)."""

    GRANTED = "granted"  # reserve -> commit: charged before the bytes existed
    RECORDED = "recorded"  # record-committed: the bytes were already taken


class TxPhase(_ShortRepr):
    """Where an open capacity transaction is (C4, C6): the governor's own encoding; `spec.manager` keeps none."""

    PLANNED = "planned"  # needs known, nothing held; all waiting happened before this
    RESERVING = "reserving"  # some authorities held, in stable id order
    RESERVED = "reserved"  # every need held
    PUBLISHED = "published"  # provisional view exists over the new allocation
    EXECUTING = "executing"  # views bound to the consuming execution
    COMMITTED = "committed"  # its reservations are the holder's leases; bundle advanced


class ViewState(_ShortRepr):
    """A model view (C6, I9)."""

    MAPPED = "mapped"
    INVALID = "invalid"  # its device was lost; dropped when termination is confirmed


class BundlePart(_ShortRepr):
    """Loop-carried state that commits or rolls back as one unit (I10)."""

    KV = "kv"
    RECURRENT = "recurrent"  # recurrent / conv state
    SAMPLER = "sampler"  # sampler / search state
    PROGRESS = "progress"  # request progress
