"""The composed manager's lifetime actions: removing an authority (C3), unregistering a holder (I4a), shrinking and
growing a lease (I1, I2, I13).

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

Lease grow (I1, I2, I13): the holder's lease takes more bytes (DESIGN-FACTS "KV growth": the old bucket stays
live while the new tokens are charged). A grow is a charge, admitted exactly as a TryReserve of the lease's
holder and authority for nbytes would be at that instant.
  GrowLease(holder, allocation, nbytes) -> None
    manager poisoned -> ManagerPoisoned (first, as every charging action: I5) ; nbytes bytes (InvalidBytes) ;
    holder known ; allocation known (UnknownAllocation, retired -> InvalidTransition) ; owner (ForeignHolder) ;
    referenced by a ticket, transaction or view -> InvalidTransition (as a Release) ; its device lost ->
    DeviceLost ; not LIVE -> InvalidTransition (the lifecycle's GROW: live -> live) ; its authority's context
    not ACTIVE -> DeviceLost ; a pending ticket on the authority (I13: never ahead of a waiter) or
    `nbytes > limit - used` (I2) -> CapacityDenied. A pinned or in-flight lease may grow (nothing is taken
    from it). The lease's bytes and charge rise by nbytes, its authority's used with them, and its
    reservation to cover it (C2: the larger of what was reserved and the new bytes); everything else stays
    (no id is issued). No capacity is returned: no round runs.

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

__all__ = ["RemoveAuthority", "UnregisterHolder", "ShrinkLease", "GrowLease"]


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


@attrs.frozen
class GrowLease:
    holder: int
    allocation: int
    nbytes: int
