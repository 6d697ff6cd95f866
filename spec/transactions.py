"""The abstract capacity-transaction coordinator: `step(state, action) -> (state, result)`.

Owns the model of C3 (context loss; removing a provider is `spec.manager`'s RemoveAuthority), C4 (ordered try-only
multi-authority transactions), C6 (model views keyed by allocation id and
mapping generation), I5 (failure scope), I9 (remap only when unused) and
I10 (state bundles commit or roll back as one unit). Pure: no I/O, no
clock, no threads, no ORT.

Theory of operation. Waiting and quota negotiation happen before `Plan`;
from then on nothing waits. `Reserve` is try-only and takes the lowest
needed authority id first; a miss aborts the whole transaction, releasing
every reservation and leaving a zero-byte intent that keeps the submit
sequence, priority and age for the retry. A transaction's id is also its
allocation id (process-unique, never reused); its provisional view is
published only when every need is held and may be bound only by its own
execution until commit. Device loss aborts the open work touching the lost
context, invalidates its views and moves its charge to `stranded`, which
only a confirmed termination refunds, once.

Validation order (the first failing check decides the typed error):
  1. argument shape                          -> InvalidBytes / InvalidArgument
  2. manager poisoned (grants only)          -> ManagerPoisoned       (I5)
  3. ids known                               -> Unknown* (InvalidTransition for a retired id)
  4. device context                          -> DeviceLost            (C3)
  5. lifecycle table                         -> InvalidTransition
  6. order / generation / use / pins / bundle-> ReservationOrder, StaleGeneration,
                                                ViewInUse, BundlePoisoned
  7. policy                                  -> CapacityDenied
A rejected action changes nothing. Guards are `if guards.on(...)` with their ID.
"""

from __future__ import annotations

from typing import Any

import immutables
from attrs import evolve as _evolve

from spec import transactions_actions as T
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    IdentityMismatch,
    InvalidArgument,
    InvalidTransition,
    ManagerPoisoned,
    ReservationOrder,
    StaleGeneration,
    UnknownAuthority,
    UnknownBundle,
    UnknownIntent,
    UnknownTransaction,
    UnknownView,
    ViewInUse,
)
from spec.guards import ALL_ON, GuardSet
from spec.lifecycle import next_context_state
from spec.ledger import check_bytes
from spec.transactions_lifecycle import (
    BundleEvent,
    BundlePart,
    BundleState,
    ManagerState,
    TxEvent,
    TxPhase,
    ViewKind,
    ViewState,
    next_bundle_state,
    next_tx_phase,
)
from spec.types import ContextEvent, ContextState
from spec.transactions_state import (  # noqa: F401  (the records, re-exported: `spec.transactions` names them too)
    TxAuthority, Transaction, View, Bundle, Intent, TxState, TX_EMPTY, MAX_NEEDS, MAX_PRIORITY,
)

__all__ = [
    "TxAuthority", "Transaction", "View", "Bundle", "Intent", "TxState", "TX_EMPTY",
    "MAX_NEEDS", "MAX_PRIORITY", "step",
]

def step(state: TxState, action: Any, guards: GuardSet = ALL_ON) -> tuple[TxState, Any]:
    """The next state and the action's result, or a typed rejection (state unchanged)."""
    try:
        handler = _HANDLERS[type(action)]
    except KeyError:
        raise InvalidArgument(f"not a transaction action: {action!r}") from None
    return handler(state, action, guards)


# --- validation helpers ------------------------------------------------------


def _id(v: object, what: str) -> int:
    if type(v) is not int:
        raise InvalidArgument(f"{what} must be an int id, got {v!r}")
    return v


def _lookup(m: immutables.Map, key: object, nxt: int, what: str, unknown: type, retired: str) -> Any:
    r = m.get(key) if type(key) is int else None
    if r is None:
        if type(key) is int and 1 <= key < nxt:
            raise InvalidTransition(f"{what} {key} is {retired}")
        raise unknown(f"{what} {key!r} is not known")
    return r


def _authority(s: TxState, aid: object) -> TxAuthority:
    return _lookup(s.authorities, aid, s.next_authority, "authority", UnknownAuthority, "removed")


def _tx(s: TxState, tid: object) -> Transaction:
    return _lookup(s.txs, tid, s.next_tx, "transaction", UnknownTransaction, "already aborted or released")


def _view(s: TxState, vid: object) -> View:
    return _lookup(s.views, vid, s.next_view, "view", UnknownView, "already dropped")


def _bundle(s: TxState, bid: object) -> Bundle:
    return _lookup(s.bundles, bid, s.next_bundle, "bundle", UnknownBundle, "gone")


def _intent(s: TxState, iid: object) -> Intent:
    return _lookup(s.intents, iid, s.next_intent, "intent", UnknownIntent, "already used by a retry")


def _needs(raw: object) -> tuple[tuple[int, int], ...]:
    if type(raw) is not tuple or not 1 <= len(raw) <= MAX_NEEDS:
        raise InvalidArgument(f"needs must be a tuple of 1..{MAX_NEEDS} (authority, bytes) pairs, got {raw!r}")
    out = []
    for pair in raw:
        if type(pair) is not tuple or len(pair) != 2:
            raise InvalidArgument(f"needs must hold (authority, bytes) pairs, got {pair!r}")
        out.append((_id(pair[0], "needs authority"), check_bytes(pair[1], "needs bytes")))
    ids = [a for a, _ in out]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"needs name an authority twice: {ids}")
    return tuple(out)


def _grant_allowed(s: TxState, guards: GuardSet) -> None:
    # Verify a poisoned manager grants nothing (I5).
    if s.manager is ManagerState.POISONED and guards.on("poisoned_manager_refuses"):
        raise ManagerPoisoned("the ledger was found corrupt; the manager grants nothing")


def _active(a: TxAuthority) -> None:
    # Verify the context still admits work (C3).
    if a.context is not ContextState.ACTIVE:
        raise DeviceLost(f"authority {a.id} ({a.name}) context is {a.context.value}")


def _used(s: TxState, aid: int, delta: int, stranded: int = 0) -> immutables.Map:
    a = s.authorities[aid]
    return s.authorities.set(aid, _evolve(a, used=a.used + delta, stranded=a.stranded + stranded))


def _unbind(s: TxState, t: Transaction) -> immutables.Map:
    views = s.views
    for vid, _ in t.bound:
        v = views[vid]
        views = views.set(vid, _evolve(v, users=tuple(u for u in v.users if u != t.id)))
    return views


# --- registration and bundles ------------------------------------------------


def _add_authority(s: TxState, act: T.AddAuthority, guards: GuardSet) -> tuple[TxState, int]:
    if type(act.name) is not str or not act.name:
        raise InvalidArgument(f"name must be a non-empty str, got {act.name!r}")
    capacity = check_bytes(act.capacity, "capacity")
    for a in s.authorities.values():
        if a.name == act.name:
            # Verify the identity matches before binding to it; re-registering returns it (C1).
            if a.capacity != capacity:
                raise IdentityMismatch(f"pool {act.name!r} is registered with {a.capacity} B, not {capacity} B")
            return s, a.id
    aid = s.next_authority
    new = TxAuthority(aid, act.name, capacity, 0, 0, ContextState.ACTIVE)
    return _evolve(s, authorities=s.authorities.set(aid, new), next_authority=aid + 1), aid


def _open_bundle(s: TxState, act: T.OpenBundle, guards: GuardSet) -> tuple[TxState, int]:
    bid = s.next_bundle
    b = Bundle(bid, (0,) * len(BundlePart), BundleState.ACTIVE)
    return _evolve(s, bundles=s.bundles.set(bid, b), next_bundle=bid + 1), bid


def _report_mismatch(s: TxState, act: T.ReportMismatch, guards: GuardSet) -> tuple[TxState, None]:
    b = _bundle(s, act.bundle)
    # Post-commit disagreement poisons the smallest rebuildable unit: this bundle only (I5).
    new = next_bundle_state(b.state, BundleEvent.MISMATCH, f"bundle {b.id}")
    return _evolve(s, bundles=s.bundles.set(b.id, _evolve(b, state=new))), None


def _corrupt_ledger(s: TxState, act: T.CorruptLedger, guards: GuardSet) -> tuple[TxState, None]:
    return _evolve(s, manager=ManagerState.POISONED), None


# --- the transaction ---------------------------------------------------------


def _plan(s: TxState, act: T.Plan, guards: GuardSet) -> tuple[TxState, int]:
    needs = _needs(act.needs)
    if type(act.priority) is not int or not 0 <= act.priority <= MAX_PRIORITY:
        raise InvalidArgument(f"priority must be an int in [0, {MAX_PRIORITY}], got {act.priority!r}")
    if not isinstance(act.kind, ViewKind):
        raise InvalidArgument(f"kind must be a ViewKind, got {act.kind!r}")
    bid = None if act.bundle is None else _id(act.bundle, "bundle")
    iid = None if act.retry is None else _id(act.retry, "retry")
    _grant_allowed(s, guards)
    auths = [_authority(s, a) for a, _ in needs]
    bundle = None if bid is None else _bundle(s, bid)
    intent = None if iid is None else _intent(s, iid)
    for a in auths:
        _active(a)
    if bundle is not None and bundle.state is BundleState.POISONED:
        raise BundlePoisoned(f"bundle {bundle.id} is poisoned; the engine must rebuild it")
    for a, (_, n) in zip(auths, needs):
        if n > a.capacity:
            raise CapacityDenied(f"authority {a.id}: {n} B needed, capacity is {a.capacity} B")
    # Verify a retry keeps its arbitration identity: submit sequence, priority, age (C4).
    if intent is not None and guards.on("retry_keeps_identity"):
        seq, priority, age, next_seq = intent.seq, intent.priority, intent.age, s.next_seq
    else:
        seq, priority, age, next_seq = s.next_seq, act.priority, 0, s.next_seq + 1
    tid = s.next_tx
    t = Transaction(tid, seq, priority, age, needs, (), TxPhase.PLANNED, bid, act.kind, ())
    intents = s.intents if intent is None else s.intents.delete(intent.id)
    return _evolve(s, txs=s.txs.set(tid, t), intents=intents, next_tx=tid + 1, next_seq=next_seq), tid


def _abort_tx(s: TxState, t: Transaction, guards: GuardSet, lost: int | None = None) -> tuple[TxState, int]:
    """Release everything `t` holds and leave its intent; holdings on a `lost` context are stranded."""
    authorities = s.authorities
    for i, (aid, n) in enumerate(t.held):
        # Verify an abort releases every reservation, not just some (I5).
        if i > 0 and not guards.on("full_abort"):
            continue
        a = authorities[aid]
        if aid == lost:  # nothing is refunded before termination is confirmed (C3)
            authorities = authorities.set(aid, _evolve(a, stranded=a.stranded + n))
        else:
            authorities = authorities.set(aid, _evolve(a, used=a.used - n))
    views = _unbind(s, t)
    for v in list(views.values()):
        if v.allocation == t.id:
            views = views.delete(v.id)  # its provisional view: only its own execution used it
    iid = s.next_intent
    intent = Intent(iid, t.seq, t.priority, t.age + 1)
    return _evolve(s, authorities=authorities, views=views, txs=s.txs.delete(t.id),
                   intents=s.intents.set(iid, intent), next_intent=iid + 1), iid


def _reserve(s: TxState, act: T.Reserve, guards: GuardSet) -> tuple[TxState, int | None]:
    _id(act.tx, "tx")
    _id(act.authority, "authority")
    _grant_allowed(s, guards)
    t = _tx(s, act.tx)
    a = _authority(s, act.authority)
    need = dict(t.needs).get(a.id)
    if need is None:
        raise InvalidArgument(f"transaction {t.id} does not need authority {a.id}")
    held = [h for h, _ in t.held]
    if a.id in held:
        raise InvalidTransition(f"transaction {t.id} already holds authority {a.id}")
    _active(a)
    last = len(held) + 1 == len(t.needs)
    phase = next_tx_phase(t.phase, TxEvent.RESERVE_LAST if last else TxEvent.RESERVE, f"transaction {t.id}")
    # Verify authorities are taken in stable id order, lowest needed first (C4).
    lowest = min(x for x, _ in t.needs if x not in held)
    if a.id != lowest and guards.on("ordered_reservation"):
        raise ReservationOrder(f"transaction {t.id} must reserve authority {lowest} before {a.id}")
    if a.used + need > a.capacity:
        # Try-only: a miss never waits; it releases everything and leaves an intent (C4).
        return _abort_tx(s, t, guards)
    nt = _evolve(t, held=t.held + ((a.id, need),), phase=phase)
    return _evolve(s, txs=s.txs.set(t.id, nt), authorities=_used(s, a.id, need)), None


def _publish(s: TxState, act: T.Publish, guards: GuardSet) -> tuple[TxState, int]:
    t = _tx(s, _id(act.tx, "tx"))
    # Verify the provisional view is published only when every authority is held (C4).
    if guards.on("publish_after_all_held") or t.phase not in (TxPhase.PLANNED, TxPhase.RESERVING):
        phase = next_tx_phase(t.phase, TxEvent.PUBLISH, f"transaction {t.id}")
    else:
        phase = TxPhase.PUBLISHED
    vid = s.next_view
    v = View(vid, t.id, min(a for a, _ in t.needs), t.kind, 1, ViewState.MAPPED, ())
    return _evolve(s, txs=s.txs.set(t.id, _evolve(t, phase=phase)), views=s.views.set(vid, v),
                   next_view=vid + 1), vid


def _execute(s: TxState, act: T.Execute, guards: GuardSet) -> tuple[TxState, None]:
    _id(act.tx, "tx")
    _id(act.view, "view")
    if type(act.generation) is not int or act.generation < 1:
        raise InvalidArgument(f"generation must be an int >= 1, got {act.generation!r}")
    t = _tx(s, act.tx)
    v = _view(s, act.view)
    if v.state is not ViewState.MAPPED:
        raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
    phase = next_tx_phase(t.phase, TxEvent.EXECUTE, f"transaction {t.id}")
    if v.allocation != t.id and s.txs[v.allocation].phase is not TxPhase.COMMITTED:
        raise InvalidArgument(f"view {v.id} is the provisional view of transaction {v.allocation}")
    if any(b == v.id for b, _ in t.bound):
        raise InvalidTransition(f"transaction {t.id} already binds view {v.id}")
    # Verify the view is named by its current mapping generation (C6).
    if act.generation != v.generation and guards.on("current_generation"):
        raise StaleGeneration(f"view {v.id} is at generation {v.generation}, not {act.generation}")
    nt = _evolve(t, phase=phase, bound=t.bound + ((v.id, act.generation),))
    nv = _evolve(v, users=tuple(sorted(v.users + (t.id,))))
    return _evolve(s, txs=s.txs.set(t.id, nt), views=s.views.set(v.id, nv)), None


def _commit(s: TxState, act: T.Commit, guards: GuardSet) -> tuple[TxState, None]:
    t = _tx(s, _id(act.tx, "tx"))
    phase = next_tx_phase(t.phase, TxEvent.COMMIT, f"transaction {t.id}")
    bundles = s.bundles
    if t.bundle is not None:
        b = bundles[t.bundle]
        if b.state is BundleState.POISONED:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; abort and rebuild")
        # Verify every part of the bundle commits together (I10).
        if guards.on("atomic_bundle"):
            versions = tuple(x + 1 for x in b.versions)
        else:
            versions = (b.versions[0] + 1,) + b.versions[1:]
        bundles = bundles.set(b.id, _evolve(b, versions=versions))
    nt = _evolve(t, phase=phase, bound=())
    return _evolve(s, txs=s.txs.set(t.id, nt), views=_unbind(s, t), bundles=bundles), None


def _abort(s: TxState, act: T.Abort, guards: GuardSet) -> tuple[TxState, int]:
    t = _tx(s, _id(act.tx, "tx"))
    next_tx_phase(t.phase, TxEvent.ABORT, f"transaction {t.id}")
    return _abort_tx(s, t, guards)


def _release(s: TxState, act: T.Release, guards: GuardSet) -> tuple[TxState, None]:
    t = _tx(s, _id(act.tx, "tx"))
    next_tx_phase(t.phase, TxEvent.RELEASE, f"transaction {t.id}")
    mine = [v for v in s.views.values() if v.allocation == t.id]
    for v in mine:
        if v.users:
            raise ViewInUse(f"view {v.id} of transaction {t.id} is bound to execution(s) {list(v.users)}")
    authorities = s.authorities
    for aid, n in t.held:
        authorities = authorities.set(aid, _evolve(authorities[aid], used=authorities[aid].used - n))
    views = s.views
    for v in mine:
        views = views.delete(v.id)
    return _evolve(s, txs=s.txs.delete(t.id), authorities=authorities, views=views), None


def _remap(s: TxState, act: T.Remap, guards: GuardSet) -> tuple[TxState, int]:
    v = _view(s, _id(act.view, "view"))
    if v.state is not ViewState.MAPPED:
        raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
    # Verify a view is remapped only while no execution uses it (I9).
    if v.users and guards.on("remap_when_idle"):
        raise ViewInUse(f"view {v.id} is bound to execution(s) {list(v.users)}")
    nv = _evolve(v, generation=v.generation + 1)
    return _evolve(s, views=s.views.set(v.id, nv)), nv.generation


# --- device loss and termination (C3) ----------------------------------------


def _lose_device(s: TxState, act: T.LoseDevice, guards: GuardSet) -> tuple[TxState, None]:
    a = _authority(s, act.authority)
    ctx = next_context_state(a.context, ContextEvent.LOSE, f"authority {a.id}")
    if a.context is not ContextState.ACTIVE:
        return s, None  # a repeated loss report changes nothing
    on_lost = {v.id for v in s.views.values() if v.authority == a.id}
    for t in sorted(s.txs.values(), key=lambda t: t.id):
        if t.phase is TxPhase.COMMITTED:
            continue
        if any(x == a.id for x, _ in t.needs) or any(v in on_lost for v, _ in t.bound):
            s, _ = _abort_tx(s, t, guards, lost=a.id)
    txs, authorities = s.txs, s.authorities
    for t in s.txs.values():
        lost = sum(n for x, n in t.held if x == a.id)
        if t.phase is TxPhase.COMMITTED and lost:
            txs = txs.set(t.id, _evolve(t, held=tuple(h for h in t.held if h[0] != a.id)))
            b = authorities[a.id]
            # Nothing is refunded before termination is confirmed (C3).
            authorities = authorities.set(a.id, _evolve(b, stranded=b.stranded + lost))
    authorities = authorities.set(a.id, _evolve(authorities[a.id], context=ctx))
    views = s.views
    for v in s.views.values():  # what the aborts left: views of committed lease sets
        if v.authority == a.id:
            views = views.set(v.id, _evolve(v, state=ViewState.INVALID, users=()))
    return _evolve(s, txs=txs, authorities=authorities, views=views), None


def _confirm_termination(s: TxState, act: T.ConfirmTermination, guards: GuardSet) -> tuple[TxState, None]:
    a = _authority(s, act.authority)
    ctx = next_context_state(a.context, ContextEvent.CONFIRM_TERMINATION, f"authority {a.id}")
    if a.context is ContextState.TERMINATED:
        return s, None  # idempotent: never a second refund
    # The one refund of a lost context's charge; invalid views stay until their lease set is released.
    na = _evolve(a, context=ctx, used=a.used - a.stranded, stranded=0)
    return _evolve(s, authorities=s.authorities.set(a.id, na)), None


_HANDLERS: dict[type, Any] = {
    T.AddAuthority: _add_authority,
    T.OpenBundle: _open_bundle,
    T.Plan: _plan,
    T.Reserve: _reserve,
    T.Publish: _publish,
    T.Execute: _execute,
    T.Commit: _commit,
    T.Abort: _abort,
    T.Release: _release,
    T.Remap: _remap,
    T.LoseDevice: _lose_device,
    T.ConfirmTermination: _confirm_termination,
    T.ReportMismatch: _report_mismatch,
    T.CorruptLedger: _corrupt_ledger,
}
