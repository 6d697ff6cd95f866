"""Actions of the capacity-transaction model: one frozen value per operation.

Actions carry raw caller input (possibly invalid); `spec.transactions.step`
validates them. Their reprs read as a script, so a counterexample does too.
`refimpl.manager.ProcessMemoryManager` exposes the same operations as
methods named `tx_` + the snake-case names, same keywords (`tx_plan` also takes
the holder whose ledger records the reservations are), except those it has one
composed verb for: `AddAuthority` is `register_authority` (device tier),
`LoseDevice`, `ConfirmTermination`, `OpenBundle`, `ReportMismatch` are
`lose_device`, `confirm_termination`, `open_bundle`, `report_mismatch`.
"""

from __future__ import annotations

from typing import Any

import attrs

from spec.transactions_lifecycle import ViewKind

__all__ = [
    "AddAuthority",
    "OpenBundle",
    "Plan",
    "Reserve",
    "Publish",
    "Execute",
    "Commit",
    "Abort",
    "Release",
    "Remap",
    "LoseDevice",
    "ConfirmTermination",
    "ReportMismatch",
    "CorruptLedger",
    "TxAction",
    "GRANTS",
]

_frozen = attrs.frozen


@_frozen
class AddAuthority:
    """Register an authority (device, host, staging); its id fixes its place in the reservation order."""

    name: str
    capacity: int


@_frozen
class OpenBundle:
    """Open a state bundle: KV, recurrent/conv, sampler and progress as one unit (I10)."""


@_frozen
class Plan:
    """Open a transaction with its needs, after all waiting and quota negotiation (C4).

    `needs` is ((authority, bytes), ...) in any declared order; `retry` names the
    zero-byte intent a failed attempt left behind, whose arbitration identity it keeps.
    """

    needs: Any
    priority: int
    kind: ViewKind
    bundle: int | None = None
    retry: int | None = None


@_frozen
class Reserve:
    """Try-reserve one authority (never waits); a miss aborts the transaction and returns its intent."""

    tx: int
    authority: int


@_frozen
class Publish:
    """Publish the provisional view over the new allocation, only once every need is held (C4, C6)."""

    tx: int


@_frozen
class Execute:
    """Bind a view, named by (id, mapping generation), to the transaction's execution (C6)."""

    tx: int
    view: int
    generation: int


@_frozen
class Commit:
    """End the execution and commit: the lease set stays, the bundle advances as one unit (I10)."""

    tx: int


@_frozen
class Abort:
    """Pre-commit failure: release everything, restore every ledger exactly, leave an intent (I5)."""

    tx: int


@_frozen
class Release:
    """Return a committed transaction's lease set and drop its views."""

    tx: int


@_frozen
class Remap:
    """Remap a view: its mapping generation advances; only while no execution uses it (I9)."""

    view: int


@_frozen
class LoseDevice:
    """The context behind an authority is lost: views invalid, work aborted, nothing refunded (C3)."""

    authority: int


@_frozen
class ConfirmTermination:
    """Termination of a lost context is confirmed: its charge is refunded once (idempotent)."""

    authority: int


@_frozen
class ReportMismatch:
    """A post-commit state/view disagreement in one bundle: poison that bundle only (I5)."""

    bundle: int


@_frozen
class CorruptLedger:
    """The shared ledger was found corrupt: poison the manager (I5)."""


TxAction = (
    AddAuthority | OpenBundle | Plan | Reserve | Publish | Execute | Commit | Abort
    | Release | Remap | LoseDevice | ConfirmTermination | ReportMismatch | CorruptLedger
)

#: Actions that grant capacity: refused once the manager is poisoned (I5).
GRANTS = (Plan, Reserve)
