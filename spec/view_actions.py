"""The composed manager's model views (C4, C6, I9): the view record and the four view actions.

Vocabulary only (records and actions, shared with refimpl); the transitions
are `spec.manager_views`. Re-exported by `spec.manager_actions`, whose state
holds the views (`Manager.views`).

Semantics, per action (the first failing check decides the typed error; a
rejected action changes nothing):

  PublishView(tx) -> view id
    tx an int (InvalidArgument) ; issued (UnknownTransaction) ; retired ->
    InvalidTransition ; not every need held -> InvalidTransition (C4) ; a view
    already published -> InvalidTransition. A new MAPPED view over the tx's
    lowest needed authority and its reservation there (`allocation`),
    generation 1, bound by no execution.
  ExecuteView(tx, view, generation) -> None
    tx, view int ids, generation an int >= 1 (InvalidArgument) ; tx issued,
    live ; view known (UnknownView; dropped -> InvalidTransition) ; INVALID ->
    DeviceLost ; the tx has published no view -> InvalidTransition ; the view
    is another live tx's provisional view -> InvalidArgument ; already bound by
    the tx -> InvalidTransition ; generation not the view's -> StaleGeneration
    (C6). The view's users gain (tx, generation).
  RemapView(view) -> generation
    view known ; INVALID -> DeviceLost ; bound by an execution -> ViewInUse
    (I9). The view's generation + 1.
  DropView(view) -> None
    view an int (InvalidArgument) ; known (UnknownView; dropped ->
    InvalidTransition) ; its transaction still live -> InvalidTransition (a
    provisional view goes with AbortTx) ; bound by an execution -> ViewInUse
    (I9). The view goes; its lease is the holder's to release again.

CommitTx ends the tx's execution (it leaves every view's users; its own view
stays, over the leases, for later executions); AbortTx also drops its own
view. LoseDevice(a) also aborts every transaction bound to a view over `a`,
and every view over `a` becomes INVALID with no users (DropView removes it).
A view pins its authority (RemoveAuthority) and its lease: decided, a holder
may not release, cancel, quarantine, pin or give up under pressure the lease
a view is over (InvalidTransition, like bytes a part holds) until the view is
dropped, and a view bound by an execution cannot be dropped. So no execution
ever reads bytes the ledger has credited back (C6), and one action, DropView,
ends a committed view.
"""

from __future__ import annotations

import attrs

from spec.types import ViewState

__all__ = ["View", "PublishView", "ExecuteView", "RemapView", "DropView", "VIEW_ACTIONS"]


@attrs.frozen
class View:
    """A model view over a transaction's bytes (C6), keyed by id and mapping generation."""

    id: int
    tx: int  # the transaction that published it (retired once committed: the view is then over its leases)
    authority: int  # the transaction's lowest needed authority
    allocation: int | None  # its reservation there, a lease once committed (None only if published holding none)
    generation: int  # >= 1, advanced only by RemapView (I9)
    state: ViewState
    users: tuple[tuple[int, int], ...]  # (live transaction, generation it bound), ascending


@attrs.frozen
class PublishView:
    tx: int


@attrs.frozen
class ExecuteView:
    tx: int
    view: int
    generation: int


@attrs.frozen
class RemapView:
    view: int


@attrs.frozen
class DropView:
    view: int


VIEW_ACTIONS = (PublishView, ExecuteView, RemapView, DropView)
