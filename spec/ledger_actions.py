"""Actions of the abstract governor: one frozen value per public operation.

Actions carry raw caller input (possibly invalid: negative bytes, unknown
ids); `spec.ledger.step` validates them. Their reprs read as a script so a
Hypothesis counterexample is readable. Refimpl exposes the same operations as
methods; the adapter in `refimpl.verify.manager_adapter` maps one to the other.
"""

from __future__ import annotations

import attrs

from spec.types import Role, Tier

__all__ = [
    "Action",
    "RegisterAuthority",
    "RegisterAlias",
    "RegisterHolder",
    "Reserve",
    "Commit",
    "Cancel",
    "Release",
    "Quarantine",
    "RecordCommitted",
    "LoseDevice",
    "ConfirmTermination",
    "OpenAllowance",
    "ReserveGrowth",
    "MapAllowance",
    "UnmapAllowance",
    "TransferAllowance",
    "CloseAllowance",
]

_frozen = attrs.frozen


@_frozen
class RegisterAuthority:
    """Register the canonical authority of a physical pool (C1); `device`: the physical device, if declared."""

    pool: str
    tier: Tier
    capacity: int
    #: Not in the repr: the explorer never declares devices, so its counterexamples read as before the field.
    device: str | None = attrs.field(default=None, repr=False)


@_frozen
class RegisterAlias:
    """Register a unified-memory view that resolves to an existing authority (C1, I1)."""

    of: int
    view: str


@_frozen
class RegisterHolder:
    name: str


@_frozen
class Reserve:
    """Reserve (and charge) bytes before allocating them (C2, I2); `alignment`: None or a power of two (D13)."""

    holder: int
    authority: int
    tier: Tier
    nbytes: int
    role: Role
    alignment: int | None = attrs.field(default=None, repr=False)


@_frozen
class Commit:
    """Turn a reservation into a lease of `nbytes` <= reserved; the rest is refunded (C2)."""

    holder: int
    allocation: int
    nbytes: int


@_frozen
class Cancel:
    """Abort a reservation before it was backed: full refund."""

    holder: int
    allocation: int


@_frozen
class Release:
    """Release a lease exactly once: full refund (I6: only its holder may)."""

    holder: int
    allocation: int


@_frozen
class Quarantine:
    """Settle a lease that could only be partly undone: refund only `released` bytes."""

    holder: int
    allocation: int
    released: int


@_frozen
class RecordCommitted:
    """Record bytes that were already taken, even past the limit (I2)."""

    holder: int
    authority: int
    tier: Tier
    nbytes: int
    role: Role


@_frozen
class LoseDevice:
    """The device behind an authority is lost: admission stops, nothing is refunded (C3)."""

    authority: int


@_frozen
class ConfirmTermination:
    """The lost context is confirmed gone: its charges are refunded, exactly once."""

    authority: int


@_frozen
class OpenAllowance:
    """Open a non-owning allowance to map already-charged capacity (I4b)."""

    holder: int
    authority: int
    limit: int


@_frozen
class ReserveGrowth:
    """Move allowance bytes free -> reserved."""

    holder: int
    allowance: int
    nbytes: int


@_frozen
class MapAllowance:
    """Move allowance bytes reserved -> mapped."""

    holder: int
    allowance: int
    nbytes: int


@_frozen
class UnmapAllowance:
    """Move allowance bytes mapped -> free."""

    holder: int
    allowance: int
    nbytes: int


@_frozen
class TransferAllowance:
    """Shift `nbytes` of limit from `source` (owned by holder) to `target`; no charge moves."""

    holder: int
    source: int
    target: int
    nbytes: int


@_frozen
class CloseAllowance:
    holder: int
    allowance: int


Action = (
    RegisterAuthority | RegisterAlias | RegisterHolder | Reserve | Commit | Cancel | Release
    | Quarantine | RecordCommitted | LoseDevice | ConfirmTermination | OpenAllowance
    | ReserveGrowth | MapAllowance | UnmapAllowance | TransferAllowance | CloseAllowance
)
