"""The composed manager's state and actions: one ledger, every part's records beside it.

`spec.manager` is the composition of the concern models into one
`ProcessMemoryManager`: the ledger (`spec.ledger`, unchanged, as a
component), requester tickets with arbitration, holder pressure tickets,
capacity transactions, device loss and limit changes. **Every byte lives in
the ledger**: a granted ticket is a provisional allocation of its holder,
a transaction's reservation is a provisional allocation of its holder, and a
pressure answer releases the holder's own live leases. The other parts keep
only what is not bytes (queue order, age, phase, links to allocation ids).
This module holds the records and the actions; `spec.manager.step` is the
transition function; refimpl's composed refinement mapping
(`refimpl.verify.manager_hooks.abstract_manager(pmm)`) must produce exactly `Manager`.

Semantics, per action (the first failing check decides `step`'s typed error,
but any refusal whose precondition holds is legal: `spec.manager.refusals`;
a rejected action changes nothing):

Ledger actions (`spec.ledger_actions.*`) are `spec.ledger.step` on `ledger`, except:
  * `Commit` / `Cancel` / `Release` / `Quarantine` of an allocation that a
    live ticket or transaction references, or that a model view is over ->
    InvalidTransition (after the ledger's own lookups and ownership checks
    pass; the part owns it; a view's lease is free again once DropView).
  * `LoseDevice(a)` also, after the ledger step: drops every pending and
    granted ticket on `a` (a granted ticket's allocation is now DEVICE_LOST and
    stays charged until `ConfirmTermination`, credited exactly once there);
    drops every open pressure on `a` and any limit change on `a`; aborts every
    transaction that needs `a`: its held reservations on other authorities are
    cancelled (credited), its reservation on `a` stays charged (DEVICE_LOST).

Requester tickets (all bytes through the ledger). Priorities are int64s (in [-2**63, 2**63-1]) and times
ints in [0, 2**63-1], as bytes are: a trace carries every accepted value exactly.
  Submit(holder, authority, nbytes, priority, role) -> ticket id
    bytes (InvalidBytes) ; priority an int64 (InvalidArgument) ; role Role
    (InvalidArgument) ; holder known (UnknownHolder) ; authority known
    (UnknownAuthority) ; alias -> InvalidArgument ; context ACTIVE (DeviceLost) ;
    nbytes > authority.limit -> CapacityDenied (can never fit). New PENDING
    ticket, age 0, no allocation.
  Claim(holder, ticket) -> allocation id
    holder known ; ticket issued (UnknownTicket) ; retired -> InvalidTransition ;
    owner (ForeignHolder) ; PENDING -> InvalidTransition. Ledger Commit of the
    ticket's allocation with its full bytes (a LIVE lease); ticket retired.
  TryReserve(holder, authority, nbytes, priority, role) -> allocation id
    The allocator path (I7): Submit's checks in Submit's order, then a
    pending ticket on the authority (I13: never ahead of a waiter) or
    `nbytes > limit - used` -> CapacityDenied (never pending). A ledger
    Reserve and Commit of `nbytes`: a LIVE lease now; no ticket is issued.
  SetUse(holder, allocation, pinned, in_flight) -> None
    pinned and in_flight bools (InvalidArgument) ; holder known ; allocation
    known (UnknownAllocation, retired -> InvalidTransition) ; owner
    (ForeignHolder) ; LIVE and referenced by no part (InvalidTransition).
    The lease's use flags (`uses`) become (pinned, in_flight); a lease with
    neither flag is absent from `uses`, and a lease leaves `uses` when it
    stops being LIVE (released, quarantined, its device lost).
  Reconfigure(authority) -> None
    authority known ; alias -> InvalidArgument ; ACTIVE (DeviceLost). The
    authority's generation + 1 (`generations`); every PENDING ticket on it
    fails (retired, holding nothing). Granted tickets, leases and open
    pressures stay; an open pressure of an older generation is answered
    with StaleGeneration (C5). Not a round: no waiter is left to age.
  CancelTicket(holder, ticket) / TimeoutTicket(holder, ticket) -> bytes credited
    holder known ; ticket issued (UnknownTicket) ; retired -> 0, no change ;
    owner (ForeignHolder). PENDING -> retired, 0. GRANTED -> ledger Cancel of
    its allocation, retired, returns its bytes.

Arbitration (I13). After every accepted action, for each canonical
authority `a` in ascending id that has pending tickets, a *round* runs when
`a.limit - a.used` rose in the action, the action was a `Submit` on `a`, or
the action retired a granted ticket on `a` (CancelTicket / TimeoutTicket).
A round: every pending ticket on `a` ages by one (capped at `aging_bound`);
they are ordered by `spec.arith.arbitration_key(age >= aging_bound, priority,
id)`; each in turn is granted when `nbytes <= a.limit - a.used` (a ledger
Reserve of `nbytes` on `a`'s tier with the ticket's role, charged before any
waiter could see the grant: the ticket becomes GRANTED with that allocation);
a matured ticket that does not fit ends the round.
Retiring a *pending* ticket (CancelTicket / TimeoutTicket) is not a round
(D10, DESIGN-FACTS section 6: "Cancel: Pending -> cancelled"): nobody ages.
A grant pass follows instead (the same order and stop rule, no ageing): the
retired ticket may have been the matured misfit that ended the last round,
and then the next waiter may fit (found by the explorer: without it a fitting
waiter stays pending); otherwise the pass grants nothing.

Holder pressure (C5, I6):
  Press(holder, authority, target, priority, deadline) -> pressure id
    target bytes (InvalidBytes) ; priority an int64, deadline None or an int
    in [0, 2**63-1] (InvalidArgument) ; holder known ; authority known ; alias
    -> InvalidArgument ; ACTIVE (DeviceLost). A new OPEN pressure carrying its
    priority and deadline (C5); deadline None: answerable until it retires.
  Answer(holder, pressure, victims, now) -> bytes released
    victims a tuple of distinct ints (InvalidArgument) ; now None or in
    [0, 2**63-1] (InvalidArgument) ; holder known ; pressure issued
    (UnknownTicket) ; retired -> StaleAnswer (C5: a cancelled, expired or
    answered pressure's answer credits nothing) ; owner (ForeignHolder) ; the pressure has a deadline and
    `now` is None -> InvalidArgument ; the pressure's generation is older than
    its authority's -> StaleGeneration ; `now > deadline` -> StaleAnswer (C5) ;
    per victim in order: allocation known (UnknownAllocation, retired ->
    InvalidTransition), owner (ForeignHolder), on the pressure's authority
    (InvalidArgument), LIVE and referenced by no part (InvalidTransition),
    neither pinned nor in flight (PinnedVictim, I6).
    Each victim is released in the ledger; the pressure retires; zero victims
    is a legal answer. If the pressure belongs to a limit change, (id,
    released) is appended to the change's `completed`.
  CancelPressure(pressure) -> None
    issued (UnknownTicket) ; retired -> InvalidTransition. Retires, records nothing.
  ExpirePressure(pressure, now) -> None
    now in [0, 2**63-1] (InvalidArgument) ; issued (UnknownTicket) ; retired ->
    InvalidTransition ; no deadline, or `now <= deadline` -> InvalidTransition.
    Retires, records nothing (a limit change's `completed` gains nothing).

Capacity transactions (C4, I5): try-only, in authority id order (`spec.manager_tx`).
  PlanTx(holder, needs, priority, retry) -> tx id
    poisoned -> ManagerPoisoned ; needs a non-empty tuple of (int authority,
    int nbytes) pairs with distinct authorities (InvalidArgument) ; priority
    an int64 (InvalidArgument) ; each nbytes (InvalidBytes) ; holder known ;
    each authority known, canonical (InvalidArgument), ACTIVE (DeviceLost) ;
    retry None or an intent: issued (UnknownIntent), not yet retried
    (InvalidTransition), the holder's own (ForeignHolder). Stored sorted by
    authority id; nothing is held. A fresh tx's submit sequence is its id, age
    0; a retry takes its intent's (seq, priority, age) and spends the intent.
  ReserveTx(tx) -> allocation id
    poisoned -> ManagerPoisoned ; tx issued (UnknownTransaction) ; retired -> InvalidTransition ; every need
    already held -> InvalidTransition ; the next need's authority ACTIVE
    (DeviceLost) ; `nbytes > limit - used` -> CapacityDenied (never waits).
    A ledger Reserve by the tx's holder, role STATE; appended to `held`.
  CommitTx(tx) -> tuple of allocation ids
    issued ; retired ; not every need held -> InvalidTransition. Every held
    reservation is committed in the ledger with its full bytes; tx retires.
  AbortTx(tx) -> bytes credited
    issued ; retired. Every held reservation is cancelled; tx retires and
    leaves the zero-byte intent `tx` (holder, seq, priority, age + 1 capped at
    the aging bound): what a retry names to keep its place (C4, I13).
  CorruptLedger() -> None   (the environment: the shared ledger found corrupt)
    The manager is poisoned for good (I5); every PENDING ticket fails. While
    poisoned, Submit, TryReserve, PlanTx, ReserveTx and the ledger's Reserve,
    RecordCommitted and ReserveGrowth -> ManagerPoisoned, checked first: no
    new charge is granted. Claims, cancels, commits and releases still run.

State bundles (I5, I10): KV, recurrent/conv, sampler and progress advance as one unit.
  OpenBundle() -> bundle id
    A new ACTIVE bundle, every part at version 0. Bundles never retire.
  JoinBundle(tx, bundle) -> None
    tx issued (UnknownTransaction) ; retired -> InvalidTransition ; bundle
    known (UnknownBundle) ; tx already in a bundle -> InvalidTransition ;
    bundle poisoned -> BundlePoisoned. The transaction now commits the bundle's step.
  ReportMismatch(bundle) -> None
    bundle known (UnknownBundle). A post-commit state/view disagreement poisons
    that bundle only (I5): no transaction joins it or commits it again.
  CommitTx of a transaction in a bundle: after CommitTx's own checks, a
    poisoned bundle -> BundlePoisoned (nothing commits); else every part of
    the bundle advances by one, in the same step as the leases (I10).

Lifetimes (C3 provider, I4a holder, I1/I13 lease shrink and grow): `spec.lifetime_actions` (RemoveAuthority,
UnregisterHolder, ShrinkLease, GrowLease; re-exported here).

Limits (C8, I2): prepare -> pressure -> commit, or keep the old limit.
  PrepareLimit(authority, limit) -> tuple of pressure ids
    limit bytes, zero allowed (InvalidBytes) ; authority known ; alias ->
    InvalidArgument ; ACTIVE (DeviceLost) ; limit > capacity -> InvalidBytes ; a
    change already pending on it -> InvalidTransition. If `used > limit`, one
    pressure with target `used - limit` is opened for each holder (ascending
    id) that has a LIVE allocation on the authority. The change is recorded.
  CommitLimit(authority) -> LimitOutcome
    authority known ; no change pending -> InvalidTransition. The change's
    open pressures retire. If `used <= target` the limit becomes the target
    (committed=True); otherwise the old limit stays (committed=False). Either
    way the outcome lists the completed answers.

Process quota (I1 "process quota used = live leases + delegation slices", section 3 "enforces the worker's
quota"; `spec.quota`): a second bound, per tier, over the bytes its canonical authorities charge.
  SetProcessQuota(tier, nbytes) -> None
    tier a Tier (InvalidArgument) ; nbytes None (the quota is removed) or bytes, zero allowed
    (InvalidBytes) ; below the tier's charge -> CapacityDenied (C8: no bound below what is used).
    From then on every grant path admits a charge only within `spec.quota.headroom` (Reserve, a
    ticket's grant and the rounds, TryReserve, GrowLease, ReserveTx: CapacityDenied past it), and a
    Submit or TryReserve of more than the quota can never fit (CapacityDenied). RecordCommitted is
    recorded, not admitted. Rounds run where the headroom rose (a raised or removed quota).

Clarifications (spec.manager's reading, where the text above left a choice):
  * Commit / Cancel / Release / Quarantine: "the ledger's own lookups and
    ownership checks" are the ledger's steps 1-4 (byte shape of `nbytes` /
    `released`, holder known, allocation known or retired, owner). The
    part check comes next, before the ledger's device, lifecycle and byte-bound
    checks (so a Commit past `reserved` of a ticket's allocation is
    InvalidTransition, not InvalidBytes).
  * PlanTx checks `needs` in passes, in the given order: every pair's types,
    every nbytes, then (after the holder) every authority (known, canonical,
    ACTIVE, need by need).
  * Rounds: "rose" compares `limit - used` before the action with the value
    after the action's own effect, before any round. An action that changes
    nothing (cancel or timeout of a retired ticket) runs no round. A Submit's
    own round may grant the new ticket at once.
  * CommitLimit sets the `limit` of the canonical authority only; its alias
    records keep their registration-time copy (they own no ledger). An alias
    id given to CommitLimit has no change pending -> InvalidTransition.
  * Ownership of tickets and pressures (ForeignHolder) is checked
    unconditionally; the ledger guard `owner_only` applies to leases only.
  * CancelTicket / TimeoutTicket of a GRANTED ticket returns the ticket's
    bytes (the charge of its allocation); AbortTx and Answer return the sum
    of the charges of the allocations they cancel or release.
  * LoseDevice: the ledger step comes first (its checks decide the error);
    reservations of aborted transactions on other authorities are cancelled
    by the transaction's holder, and rounds then run where headroom rose.

Model views (C4, C6, I9): `spec.view_actions` (records and actions, re-exported here) and
`spec.manager_views` (their transitions).

The cancellation mailbox is no state of the spec: a posted cancel (`drop`) is
applied, before any other operation, as the CancelTicket it stands for.
"""

from __future__ import annotations

import attrs
import immutables

from spec.ledger_state import State
from spec.lifetime_actions import GrowLease, RemoveAuthority, ShrinkLease, UnregisterHolder
from spec.tickets import TicketState
from spec.view_actions import VIEW_ACTIONS, DropView, ExecuteView, PublishView, RemapView, View
from spec.types import Role, Tier

__all__ = [
    "Ticket", "Pressure", "Tx", "LimitChange", "LimitOutcome", "Manager", "initial",
    "Submit", "Claim", "CancelTicket", "TimeoutTicket", "Press", "Answer", "CancelPressure",
    "ExpirePressure", "TryReserve", "SetUse", "Reconfigure", "PlanTx", "ReserveTx", "CommitTx", "AbortTx",
    "PrepareLimit", "CommitLimit", "SetProcessQuota", "MANAGER_ACTIONS", "Bundle", "OpenBundle", "JoinBundle", "ReportMismatch",
    "RemoveAuthority", "UnregisterHolder", "ShrinkLease", "GrowLease", "Intent", "CorruptLedger", "View",
    "PublishView", "ExecuteView", "RemapView", "DropView",
]


# --- records -------------------------------------------------------------------


@attrs.frozen
class Ticket:
    """A live requester ticket: PENDING (no allocation) or GRANTED (a provisional allocation)."""

    id: int  # also the submit sequence
    holder: int
    authority: int
    nbytes: int
    priority: int
    role: Role
    age: int  # arbitration rounds waited, capped at the aging bound
    state: TicketState
    allocation: int | None  # the ledger reservation once granted
    generation: int = 0  # Invariant: a PENDING ticket carries its authority's current generation


@attrs.frozen
class Pressure:
    """An open pressure ticket on one holder's leases on one authority."""

    id: int
    holder: int
    authority: int
    target: int
    change: bool  # opened by the authority's limit change
    priority: int = 0
    deadline: int | None = None  # None: answerable until it retires (C5)
    generation: int = 0  # its authority's generation when opened; an answer after a Reconfigure is stale


@attrs.frozen
class Tx:
    """A live capacity transaction; `held[i]` is the reservation for `needs[i]`."""

    id: int
    holder: int
    needs: tuple[tuple[int, int], ...]  # (authority, nbytes), ascending authority
    held: tuple[int, ...]  # allocation ids, a prefix of `needs`
    bundle: int | None = None  # the state bundle whose step it commits (I10)
    # Arbitration identity (C4): submit sequence (a fresh tx's is its id), priority, age in aborts (capped).
    seq: int = attrs.field(default=attrs.Factory(lambda self: self.id, takes_self=True))
    priority: int = 0
    age: int = 0


@attrs.frozen
class Intent:
    """A zero-byte retry intent left by an aborted transaction (keyed by its id): its place, no bytes (C4)."""

    id: int
    holder: int
    seq: int
    priority: int
    age: int


@attrs.frozen
class Bundle:
    """A state bundle: one version per part (KV, recurrent/conv, sampler, progress), advanced together."""

    id: int
    versions: tuple[int, ...]
    poisoned: bool = False


@attrs.frozen
class LimitChange:
    authority: int
    target: int
    completed: tuple[tuple[int, int], ...] = ()  # (pressure id, bytes released), in answer order


@attrs.frozen
class LimitOutcome:
    committed: bool
    limit: int  # the authority's limit after the commit
    completed: tuple[tuple[int, int], ...]


@attrs.frozen(cache_hash=True)  # hashed again and again by explorers' seen-sets and memo keys; immutable, so safe
class Manager:
    ledger: State = State()
    aging_bound: int = 4
    tickets: immutables.Map = immutables.Map()  # id -> Ticket (live only)
    pressures: immutables.Map = immutables.Map()  # id -> Pressure (open only)
    txs: immutables.Map = immutables.Map()  # id -> Tx (live only)
    changes: immutables.Map = immutables.Map()  # authority id -> LimitChange (pending only)
    next_ticket: int = 1
    next_pressure: int = 1
    next_tx: int = 1
    bundles: immutables.Map = immutables.Map()  # id -> Bundle (bundles never retire)
    next_bundle: int = 1
    # LIVE allocation id -> (pinned, in_flight), only leases with a flag set: never a victim (I6)
    uses: immutables.Map = immutables.Map()
    generations: immutables.Map = immutables.Map()  # canonical authority id -> generation (absent: 0)
    views: immutables.Map = immutables.Map()  # id -> View (dropped by its transaction's abort or DropView)
    next_view: int = 1
    intents: immutables.Map = immutables.Map()  # aborted tx id -> Intent, until a retry spends it
    poisoned: bool = False  # True iff the shared ledger was found corrupt: nothing new is granted (I5)
    quotas: immutables.Map = immutables.Map()  # Tier -> the process quota of its charge, B (absent: none; I1)


def initial(aging_bound: int = 4) -> Manager:
    return Manager(aging_bound=aging_bound)


# --- actions ---------------------------------------------------------------------


@attrs.frozen
class Submit:
    holder: int
    authority: int
    nbytes: int
    priority: int = 0
    role: Role = Role.STAGING
    alignment: int | None = attrs.field(default=None, repr=False)  # D13: None or a power of two


@attrs.frozen
class TryReserve:
    holder: int
    authority: int
    nbytes: int
    priority: int = 0
    role: Role = Role.STAGING
    alignment: int | None = attrs.field(default=None, repr=False)  # D13: None or a power of two


@attrs.frozen
class SetUse:
    holder: int
    allocation: int
    pinned: bool
    in_flight: bool


@attrs.frozen
class Reconfigure:
    authority: int


@attrs.frozen
class Claim:
    holder: int
    ticket: int


@attrs.frozen
class CancelTicket:
    holder: int
    ticket: int


@attrs.frozen
class TimeoutTicket:
    holder: int
    ticket: int


@attrs.frozen
class Press:
    holder: int
    authority: int
    target: int
    priority: int = 0
    deadline: int | None = None


@attrs.frozen
class Answer:
    holder: int
    pressure: int
    victims: tuple[int, ...]
    now: int | None = None  # the holder's time of answering; required when the pressure has a deadline


@attrs.frozen
class CancelPressure:
    pressure: int


@attrs.frozen
class ExpirePressure:
    pressure: int
    now: int


@attrs.frozen
class PlanTx:
    holder: int
    needs: tuple[tuple[int, int], ...]
    priority: int = 0
    retry: int | None = None  # the intent (an aborted tx's id) whose place this transaction takes


@attrs.frozen
class ReserveTx:
    tx: int


@attrs.frozen
class CommitTx:
    tx: int


@attrs.frozen
class AbortTx:
    tx: int


@attrs.frozen
class PrepareLimit:
    authority: int
    limit: int


@attrs.frozen
class CommitLimit:
    authority: int


@attrs.frozen
class SetProcessQuota:
    tier: Tier
    nbytes: int | None


@attrs.frozen
class OpenBundle:
    pass


@attrs.frozen
class JoinBundle:
    tx: int
    bundle: int


@attrs.frozen
class ReportMismatch:
    bundle: int


@attrs.frozen
class CorruptLedger:
    pass


MANAGER_ACTIONS = (Submit, Claim, CancelTicket, TimeoutTicket, Press, Answer, CancelPressure,
                   ExpirePressure, TryReserve, SetUse, Reconfigure, PlanTx, ReserveTx, CommitTx, AbortTx,
                   PrepareLimit, CommitLimit, OpenBundle, JoinBundle, ReportMismatch, RemoveAuthority,
                   UnregisterHolder, ShrinkLease, GrowLease, SetProcessQuota, *VIEW_ACTIONS)
"""Every action a governor's trace records; `CorruptLedger` is the environment's, not a governor verb: refimpl
reaches it through a test hook (`refimpl.verify.manager_hooks`), and no trace event carries it."""
