"""The composed manager's lifetime actions: removing an authority (C3), unregistering a holder (I4a), shrinking a
lease (I1, I13).

Vocabulary only (actions, shared with refimpl); the transitions are
`spec.manager_parts`. Re-exported by `spec.manager_actions`.

Semantics, per action (the first failing check decides the typed error; a
rejected action changes nothing):

Provider lifetime (C3):
  RemoveAuthority(authority) -> None
    authority known (UnknownAuthority; a removed id -> InvalidTransition) ;
    anything referencing it -> ProviderPinned: an allocation charged on it
    (a lost device's stranded charge included), an allowance on it, an alias
    of it, a ticket, pressure or limit change on it, a transaction that needs
    it. The authority leaves `ledger.authorities`; its id is never reused and
    its pool may be registered again (a new id). An alias with nothing of its
    own may go first.

Lease shrink (I1, I13): the holder gives back part of its own idle lease (DESIGN-FACTS "Holder-side
pressure": it picks its own unpinned idle bytes, releases them and shrinks its lease).
  ShrinkLease(holder, allocation, nbytes) -> None
    nbytes bytes (InvalidBytes) ; holder known ; allocation known (UnknownAllocation, retired ->
    InvalidTransition) ; owner (ForeignHolder) ; referenced by a ticket, transaction or view ->
    InvalidTransition (as a Release) ; its device lost -> DeviceLost ; not LIVE -> InvalidTransition
    (the lifecycle's SHRINK: live -> live) ; pinned or in flight -> PinnedVictim (I6) ; nbytes >= the
    lease's bytes -> InvalidBytes (a shrink leaves at least one byte: giving back all is a Release).
    The lease's bytes and charge fall by nbytes, its authority's used with them; its reservation
    and everything else stay. Capacity returned: arbitration runs as after a Release (I13).

Holder lifetime (I4a):
  UnregisterHolder(holder) -> None
    holder known (UnknownHolder; an unregistered id is unknown from then on) ;
    anything naming it -> HolderInUse: an allocation (a lost device's
    stranded charge included), an allowance, a ticket, a pressure, a
    transaction. Its retry intents (zero bytes, a place only its own retry
    can take) go with it. The holder leaves `ledger.holders`; its id is never
    reused (a holder registered again gets a new id).
"""

from __future__ import annotations

import attrs

__all__ = ["RemoveAuthority", "UnregisterHolder", "ShrinkLease"]


@attrs.frozen
class RemoveAuthority:
    authority: int


@attrs.frozen
class UnregisterHolder:
    holder: int


@attrs.frozen
class ShrinkLease:
    holder: int
    allocation: int
    nbytes: int
