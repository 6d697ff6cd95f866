"""The abstract governor: `step(state, action) -> (state, result)`, pure.

Theory of operation. Each action is validated in one fixed order, and the
first failing check decides the typed error, so any implementation can be
compared with this one error for error:

  1. argument shape (bytes, names, enums)  -> InvalidBytes / InvalidArgument
  2. holder known                           -> UnknownHolder
  3. authority / allocation / allowance     -> Unknown* (or InvalidTransition for a retired id)
  4. ownership                              -> ForeignHolder            (I6)
  5. device context                         -> DeviceLost               (C3)
  6. tier                                   -> TierMismatch             (C2)
  7. lifecycle table                        -> InvalidTransition        (I4a)
  8. byte bounds against the record         -> InvalidBytes / AllowanceExceeded
  9. policy (limit)                         -> CapacityDenied           (I2)

This order makes the reference deterministic; the design orders none of
these checks, so every refusal whose precondition holds is legal:
`refusals(state, action)` lists them, derived from these same checks (each
refusal goes through `GuardSet.refuse(site, error)`; `spec.refusals`).

A rejected action changes nothing: `step` raises before building a state.
Every guard is an `if guards.on(...)` naming its registry entry and catalog
ID, so a negative control can switch exactly that check off.

No I/O, no clock, no threads, no ORT, no numpy.
"""

from __future__ import annotations

from typing import Any

import immutables
from spec.records import evolve as _evolve

from spec import ledger_actions as A
from spec.errors import (AllowanceExceeded, CapacityDenied, DeviceLost, ForeignHolder, GovernorError, IdentityMismatch,
                         InvalidArgument, InvalidBytes, InvalidTransition, TierMismatch, UnknownAllocation,
                         UnknownAllowance, UnknownAuthority, UnknownHolder)
from spec.guards import ALL_ON, GuardSet
from spec.refusals import every_refusal
from spec.lifecycle import TERMINAL, next_alloc_state, next_context_state
from spec.ledger_state import Allocation, Allowance, Authority, Holder, State
from spec.types import MAX_BYTES, MAX_NAME, AllocEvent, AllocState, ContextEvent, ContextState, Origin, Role, Tier

__all__ = ["step", "apply", "refusals", "alternatives"]


def apply(state: State, action: A.Action, guards: GuardSet = ALL_ON) -> State:
    """The next state, or a typed rejection (state unchanged)."""
    return step(state, action, guards)[0]


def step(state: State, action: A.Action, guards: GuardSet = ALL_ON) -> tuple[State, Any]:
    """The next state and the action's result (a new id, or None)."""
    try:
        handler = _HANDLERS[type(action)]
    except KeyError:
        raise InvalidArgument(f"not a governor action: {action!r}") from None
    return handler(state, action, guards)


def refusals(state: State, action: A.Action, guards: GuardSet = ALL_ON) -> tuple[Any, ...]:
    """Every refusal whose precondition holds for `action` in `state` (`spec.refusals`); () iff `step` accepts."""
    return every_refusal(step, state, action, guards)


def alternatives(state: State, action: A.Action, guards: GuardSet = ALL_ON) -> tuple[tuple[State, Any], ...]:
    """The other outcomes the design allows where `step` refuses: (next state, result) each, built from `step`.

    D8 (issue #21): mapping more than the reserved growth, within the allowance, is a growth reservation and
    its map in one locked step (DESIGN-FACTS section 10: each linearisation point is one locked step; I2: the
    map follows its grant). `step` keeps the two steps apart; a governor may fuse them."""
    if not isinstance(action, A.MapAllowance) or type(action.nbytes) is not int:
        return ()
    w = state.allowances.get(action.allowance) if type(action.allowance) is int else None
    if w is None or action.nbytes <= w.reserved:
        return ()
    try:
        grown = step(state, A.ReserveGrowth(action.holder, action.allowance, action.nbytes - w.reserved), guards)[0]
        return (step(grown, action, guards),)
    except GovernorError:
        return ()


# --- validation helpers ------------------------------------------------------


def check_bytes(n: object, what: str, *, allow_zero: bool = False, guards: GuardSet = ALL_ON) -> int:
    """Verify a caller-supplied byte count."""
    if type(n) is not int:
        raise InvalidBytes(f"{what} must be an int, got {type(n).__name__}")
    if n < 0 or (n == 0 and not allow_zero) or n > MAX_BYTES:
        low = 0 if allow_zero else 1
        guards.refuse(f"bytes:{what}", InvalidBytes(f"{what} must be in [{low}, 2**63-1], got {n}"))
    return n


def check_alignment(alignment: object, guards: GuardSet = ALL_ON) -> None:
    """Verify a request's stated alignment (section 6 Lifecycle: "validate (active context, holder/authority/tier,
    alignment)"; issue #21, D13): None (the allocator's own) or a power of two in [1, 2**62]. Nothing is charged
    for it: the ledger charges the bytes asked, and padding is the allocator's granule (I8)."""
    if alignment is None:
        return
    if type(alignment) is not int or not 0 < alignment <= 1 << 62 or alignment & (alignment - 1):
        guards.refuse("alignment", InvalidArgument(
            f"alignment must be None or a power of two in [1, 2**62], got {alignment!r:.40}"))


def _name(s: object, what: str) -> str:
    if type(s) is not str or not s:
        raise InvalidArgument(f"{what} must be a non-empty str, got {s!r:.80}")
    # Verify the name fits a trace's bounded text.
    if len(s) > MAX_NAME:
        raise InvalidArgument(f"{what} must be at most {MAX_NAME} characters, got {len(s)}")
    return s


def _enum(v: object, kind: type, what: str) -> Any:
    if not isinstance(v, kind):
        raise InvalidArgument(f"{what} must be a {kind.__name__}, got {v!r}")
    return v


def _holder(state: State, hid: object, guards: GuardSet = ALL_ON) -> Holder:
    h = state.holders.get(hid) if type(hid) is int else None
    if h is None:
        err = UnknownHolder(f"holder {hid!r} is not registered")
        if type(hid) is not int:
            raise err
        guards.refuse("holder", err)
        return Holder(hid, "unregistered")  # waived: the later checks see the id the caller named
    return h


def _authority(state: State, aid: object) -> Authority:
    a = state.authorities.get(aid) if type(aid) is int else None
    if a is None:
        if type(aid) is int and 1 <= aid < state.next_authority:  # removed (spec.manager's RemoveAuthority, C3)
            raise InvalidTransition(f"authority {aid} was removed")
        raise UnknownAuthority(f"authority {aid!r} is not registered")
    return a


def _ledger(state: State, aid: object, guards: GuardSet) -> Authority:
    """The authority whose ledger a request through `aid` charges."""
    a = _authority(state, aid)
    # Verify an alias resolves to its canonical authority: aliases add no charge (I1).
    if a.alias_of is not None and guards.on("alias_resolution"):
        return _authority(state, a.alias_of)
    return a


def _allocation(state: State, aid: object) -> Allocation:
    r = state.allocations.get(aid) if type(aid) is int else None
    if r is None:
        if type(aid) is int and 1 <= aid < state.next_allocation:
            raise InvalidTransition(f"allocation {aid} is already released or terminated")
        raise UnknownAllocation(f"allocation {aid!r} was never issued")
    return r


def _allowance(state: State, wid: object) -> Allowance:
    w = state.allowances.get(wid) if type(wid) is int else None
    if w is None:
        if type(wid) is int and 1 <= wid < state.next_allowance:
            raise InvalidTransition(f"allowance {wid} is already closed")
        raise UnknownAllowance(f"allowance {wid!r} was never opened")
    return w


def _owned(record: Allocation | Allowance, holder: Holder, guards: GuardSet, what: str) -> None:
    # Verify only the owning holder acts on its lease or allowance (I6).
    if record.holder != holder.id and guards.on("owner_only"):
        guards.refuse("owner", ForeignHolder(f"{what} {record.id} belongs to holder {record.holder}, "
                                             f"not holder {holder.id}"))


def _active(a: Authority, guards: GuardSet = ALL_ON) -> None:
    # Verify the device context still admits work (C3).
    if a.context is not ContextState.ACTIVE:
        guards.refuse("context", DeviceLost(f"authority {a.id} ({a.pool}) context is {a.context.value}"))


def _charge(state: State, aid: int, delta: int) -> immutables.Map:
    a = _authority(state, aid)  # a charge whose book was removed (provider_pinned off) is refused, typed
    if not delta:  # (a commit of the bytes reserved) the same map: a step that moved no `used` keeps its authorities
        return state.authorities
    return state.authorities.set(aid, _evolve(a, used=a.used + delta))


# --- registration (C1, I1) ---------------------------------------------------


def _register_authority(state: State, act: A.RegisterAuthority, guards: GuardSet) -> tuple[State, int]:
    pool = _name(act.pool, "pool")
    tier = _enum(act.tier, Tier, "tier")
    capacity = check_bytes(act.capacity, "capacity")
    device = None if act.device is None else _name(act.device, "device")
    # Verify one canonical authority per pool, and per declared (device, tier) whatever the pool is called;
    # re-registering returns it (C1).
    if guards.on("single_authority_per_pool"):
        for a in state.authorities.values():
            if a.alias_of is None and (a.pool == pool or (device is not None and (a.device, a.tier) == (device, tier))):
                # Verify the identity matches before binding to it (C1).
                if (a.tier, a.capacity) != (tier, capacity) and guards.on("identity_check"):
                    raise IdentityMismatch(
                        f"pool {pool!r} is registered as ({a.tier.value}, {a.capacity} B), "
                        f"not ({tier.value}, {capacity} B)"
                    )
                if None not in (device, a.device) and a.device != device and guards.on("identity_check"):
                    raise IdentityMismatch(f"pool {pool!r} is registered on device {a.device}, not {device}")
                return state, a.id
    aid = state.next_authority
    new = Authority(aid, pool, tier, capacity, capacity, None, None, ContextState.ACTIVE, 0, device)
    return _evolve(state, authorities=state.authorities.set(aid, new), next_authority=aid + 1), aid


def _register_alias(state: State, act: A.RegisterAlias, guards: GuardSet) -> tuple[State, int]:
    view = _name(act.view, "view")
    base = _authority(state, act.of)
    canonical = _authority(state, base.alias_of) if base.alias_of is not None else base
    for a in state.authorities.values():
        if a.alias_of == canonical.id and a.view == view:
            return state, a.id
    aid = state.next_authority
    new = Authority(aid, canonical.pool, canonical.tier, canonical.capacity, canonical.limit,
                    canonical.id, view, ContextState.ACTIVE, 0)
    return _evolve(state, authorities=state.authorities.set(aid, new), next_authority=aid + 1), aid


def _register_holder(state: State, act: A.RegisterHolder, guards: GuardSet) -> tuple[State, int]:
    name = _name(act.name, "holder name")
    hid = state.next_holder
    return _evolve(state, holders=state.holders.set(hid, Holder(hid, name)), next_holder=hid + 1), hid


# --- reservations and leases (C2, I2, I4a, I6) -------------------------------


def _new_allocation_id(state: State, guards: GuardSet) -> int:
    # Verify ids are never reused, even after release (I4a).
    if not guards.on("fresh_ids"):
        for i in range(1, state.next_allocation):
            if i not in state.allocations:
                return i
    return state.next_allocation


def _admit(state: State, act: A.Reserve | A.RecordCommitted, guards: GuardSet, origin: Origin) -> tuple[State, int]:
    nbytes = check_bytes(act.nbytes, "nbytes", guards=guards)
    tier = _enum(act.tier, Tier, "tier")
    role = _enum(act.role, Role, "role")
    holder = _holder(state, act.holder, guards)
    ledger = _ledger(state, act.authority, guards)
    _active(ledger, guards)
    # Verify the lease's tier is its pool's tier (C2).
    if tier is not ledger.tier and guards.on("tier_match"):
        guards.refuse("tier", TierMismatch(f"authority {ledger.id} is tier {ledger.tier.value}, not {tier.value}"))
    if origin is Origin.GRANTED:
        check_alignment(act.alignment, guards)  # type: ignore[union-attr]
    if origin is Origin.RECORDED and ledger.used + nbytes > MAX_BYTES:
        guards.refuse("overflow", InvalidBytes(f"authority {ledger.id}: recording {nbytes} B would overflow the "
                                               "ledger"))
    # Verify a grant never pushes used past the limit (I2, lease rule G1); recording may.
    if origin is Origin.GRANTED and ledger.used + nbytes > ledger.limit and guards.on("limit_check"):
        guards.refuse("limit", CapacityDenied(
            f"authority {ledger.id}: {nbytes} B requested, {max(0, ledger.limit - ledger.used)} B available"
        ))
    aid = _new_allocation_id(state, guards)
    st = AllocState.PROVISIONAL if origin is Origin.GRANTED else AllocState.LIVE
    rec = Allocation(aid, ledger.id, holder.id, tier, role, nbytes, nbytes, nbytes, st, origin)
    return (
        _evolve(
            state,
            authorities=_charge(state, ledger.id, nbytes),
            allocations=state.allocations.set(aid, rec),
            next_allocation=max(state.next_allocation, aid + 1),
        ),
        aid,
    )


def _reserve(state: State, act: A.Reserve, guards: GuardSet) -> tuple[State, int]:
    return _admit(state, act, guards, Origin.GRANTED)


def _record_committed(state: State, act: A.RecordCommitted, guards: GuardSet) -> tuple[State, int]:
    return _admit(state, act, guards, Origin.RECORDED)


def _settle(state: State, rec: Allocation, new: AllocState, charge: int, **changes: Any) -> State:
    """Move `rec` to `new` with `charge` bytes charged; terminal records leave the ledger."""
    authorities = _charge(state, rec.authority, charge - rec.charge)
    if new in TERMINAL:
        allocations = state.allocations.delete(rec.id)
    else:
        allocations = state.allocations.set(rec.id, _evolve(rec, state=new, charge=charge, **changes))
    return _evolve(state, authorities=authorities, allocations=allocations)


def _transition(rec: Allocation, event: AllocEvent, target: AllocState, guards: GuardSet) -> AllocState:
    if rec.state in (AllocState.DEVICE_LOST,):
        guards.refuse("lost", DeviceLost(f"allocation {rec.id} is on a lost device; nothing is refunded until "
                                         "termination"))
    # Verify the transition is in the lifecycle table (I4a).
    if guards.on("lifecycle_table"):
        try:
            return next_alloc_state(rec.state, event, f"allocation {rec.id}")
        except InvalidTransition as e:
            guards.refuse("lifecycle", e)
    return target


def _holder_allocation(state: State, act: Any, guards: GuardSet) -> Allocation:
    holder = _holder(state, act.holder, guards)
    rec = _allocation(state, act.allocation)
    _owned(rec, holder, guards, "allocation")
    return rec


def _commit(state: State, act: A.Commit, guards: GuardSet) -> tuple[State, None]:
    nbytes = check_bytes(act.nbytes, "nbytes", guards=guards)
    rec = _holder_allocation(state, act, guards)
    new = _transition(rec, AllocEvent.COMMIT, AllocState.LIVE, guards)
    # Verify the lease is covered by its reservation (C2).
    if nbytes > rec.reserved and guards.on("commit_within_reservation"):
        guards.refuse("reserved", InvalidBytes(f"allocation {rec.id}: commit of {nbytes} B exceeds the "
                                               f"{rec.reserved} B reserved"))
    return _settle(state, rec, new, nbytes, nbytes=nbytes), None


def _cancel(state: State, act: A.Cancel, guards: GuardSet) -> tuple[State, None]:
    rec = _holder_allocation(state, act, guards)
    new = _transition(rec, AllocEvent.CANCEL, AllocState.RELEASED, guards)
    return _settle(state, rec, new, 0), None


def _release(state: State, act: A.Release, guards: GuardSet) -> tuple[State, None]:
    rec = _holder_allocation(state, act, guards)
    new = _transition(rec, AllocEvent.RELEASE, AllocState.RELEASED, guards)
    return _settle(state, rec, new, 0), None


def _quarantine(state: State, act: A.Quarantine, guards: GuardSet) -> tuple[State, None]:
    released = check_bytes(act.released, "released", allow_zero=True, guards=guards)
    rec = _holder_allocation(state, act, guards)
    new = _transition(rec, AllocEvent.QUARANTINE, AllocState.QUARANTINED, guards)
    if released > rec.charge:
        guards.refuse("charged", InvalidBytes(f"allocation {rec.id}: released {released} B exceeds the "
                                              f"{rec.charge} B charged"))
        released = rec.charge
    # Settlement: quarantine refunds only the released part.
    return _settle(state, rec, new, rec.charge - released), None


# --- device loss and termination (C3 settlement) -----------------------------


def _lose_device(state: State, act: A.LoseDevice, guards: GuardSet) -> tuple[State, None]:
    a = _ledger(state, act.authority, ALL_ON)
    ctx = next_context_state(a.context, ContextEvent.LOSE, f"authority {a.id}")
    allocations = state.allocations
    for rec in state.allocations.values():
        if rec.authority == a.id and rec.state is not AllocState.DEVICE_LOST:
            # No refund on loss: the charge stays until termination is confirmed.
            allocations = allocations.set(rec.id, _evolve(rec, state=next_alloc_state(rec.state, AllocEvent.LOSE)))
    authorities = state.authorities.set(a.id, _evolve(a, context=ctx))
    return _evolve(state, authorities=authorities, allocations=allocations), None


def _confirm_termination(state: State, act: A.ConfirmTermination, guards: GuardSet) -> tuple[State, None]:
    a = _ledger(state, act.authority, ALL_ON)
    ctx = next_context_state(a.context, ContextEvent.CONFIRM_TERMINATION, f"authority {a.id}")
    refund = 0
    allocations = state.allocations
    for rec in state.allocations.values():
        if rec.authority == a.id and rec.state is AllocState.DEVICE_LOST:
            next_alloc_state(rec.state, AllocEvent.TERMINATE)
            refund += rec.charge
            allocations = allocations.delete(rec.id)
    authorities = state.authorities.set(a.id, _evolve(a, context=ctx, used=a.used - refund))
    return _evolve(state, authorities=authorities, allocations=allocations), None


# --- allowances (I4b) --------------------------------------------------------


def _open_allowance(state: State, act: A.OpenAllowance, guards: GuardSet) -> tuple[State, int]:
    limit = check_bytes(act.limit, "limit", guards=guards)
    holder = _holder(state, act.holder, guards)
    ledger = _ledger(state, act.authority, guards)
    _active(ledger, guards)
    promised = sum(w.limit for w in state.allowances.values() if w.authority == ledger.id)
    # Verify allowance limits never exceed the pool's capacity (I4b).
    if promised + limit > ledger.capacity and guards.on("allowance_capacity"):
        guards.refuse("capacity", AllowanceExceeded(
            f"authority {ledger.id}: allowances already promise {promised} B of {ledger.capacity} B"
        ))
    wid = state.next_allowance
    w = Allowance(wid, ledger.id, holder.id, limit, 0, 0)
    return _evolve(state, allowances=state.allowances.set(wid, w), next_allowance=wid + 1), wid


def _holder_allowance(state: State, holder_id: object, wid: object, guards: GuardSet) -> Allowance:
    holder = _holder(state, holder_id, guards)
    w = _allowance(state, wid)
    _owned(w, holder, guards, "allowance")
    return w


def _set_allowance(state: State, w: Allowance) -> State:
    return _evolve(state, allowances=state.allowances.set(w.id, w))


def _reserve_growth(state: State, act: A.ReserveGrowth, guards: GuardSet) -> tuple[State, None]:
    n = check_bytes(act.nbytes, "nbytes", guards=guards)
    w = _holder_allowance(state, act.holder, act.allowance, guards)
    _active(_authority(state, w.authority), guards)
    # Verify growth stays within the allowance (I4b).
    if w.reserved + w.mapped + n > w.limit and guards.on("allowance_bounds"):
        guards.refuse("allowance", AllowanceExceeded(f"allowance {w.id}: {n} B requested, "
                                                     f"{w.limit - w.reserved - w.mapped} B free"))
    return _set_allowance(state, _evolve(w, reserved=w.reserved + n)), None


def _map_allowance(state: State, act: A.MapAllowance, guards: GuardSet) -> tuple[State, None]:
    n = check_bytes(act.nbytes, "nbytes", guards=guards)
    w = _holder_allowance(state, act.holder, act.allowance, guards)
    _active(_authority(state, w.authority), guards)
    # Verify only reserved growth is mapped (I4b).
    if n > w.reserved and guards.on("allowance_bounds"):
        guards.refuse("allowance", AllowanceExceeded(f"allowance {w.id}: mapping {n} B, only {w.reserved} B "
                                                     "reserved"))
    return _set_allowance(state, _evolve(w, reserved=max(0, w.reserved - n), mapped=w.mapped + n)), None


def _unmap_allowance(state: State, act: A.UnmapAllowance, guards: GuardSet) -> tuple[State, None]:
    n = check_bytes(act.nbytes, "nbytes", guards=guards)
    w = _holder_allowance(state, act.holder, act.allowance, guards)
    if n > w.mapped:
        guards.refuse("mapped", InvalidBytes(f"allowance {w.id}: unmapping {n} B, only {w.mapped} B mapped"))
    return _set_allowance(state, _evolve(w, mapped=max(0, w.mapped - n))), None


def _transfer_allowance(state: State, act: A.TransferAllowance, guards: GuardSet) -> tuple[State, None]:
    n = check_bytes(act.nbytes, "nbytes", guards=guards)
    src = _holder_allowance(state, act.holder, act.source, guards)
    dst = _allowance(state, act.target)
    if dst.id == src.id or dst.authority != src.authority:
        raise InvalidArgument(f"allowance {src.id} cannot transfer to allowance {dst.id}: "
                              "same allowance or other authority")
    # Verify only free limit moves (I4b); a transfer moves limits, never charge.
    if n > src.limit - src.reserved - src.mapped and guards.on("allowance_bounds"):
        guards.refuse("allowance", AllowanceExceeded(f"allowance {src.id}: {n} B to transfer, "
                                                     f"{src.limit - src.reserved - src.mapped} B free"))
    allowances = state.allowances.set(src.id, _evolve(src, limit=src.limit - n))
    allowances = allowances.set(dst.id, _evolve(dst, limit=dst.limit + n))
    return _evolve(state, allowances=allowances), None


def _close_allowance(state: State, act: A.CloseAllowance, guards: GuardSet) -> tuple[State, None]:
    w = _holder_allowance(state, act.holder, act.allowance, guards)
    if w.mapped:
        guards.refuse("mapped", InvalidTransition(f"allowance {w.id} still maps {w.mapped} B; unmap before "
                                                  "closing"))
    return _evolve(state, allowances=state.allowances.delete(w.id)), None


_HANDLERS: dict[type, Any] = {
    A.RegisterAuthority: _register_authority,
    A.RegisterAlias: _register_alias,
    A.RegisterHolder: _register_holder,
    A.Reserve: _reserve,
    A.Commit: _commit,
    A.Cancel: _cancel,
    A.Release: _release,
    A.Quarantine: _quarantine,
    A.RecordCommitted: _record_committed,
    A.LoseDevice: _lose_device,
    A.ConfirmTermination: _confirm_termination,
    A.OpenAllowance: _open_allowance,
    A.ReserveGrowth: _reserve_growth,
    A.MapAllowance: _map_allowance,
    A.UnmapAllowance: _unmap_allowance,
    A.TransferAllowance: _transfer_allowance,
    A.CloseAllowance: _close_allowance,
}
