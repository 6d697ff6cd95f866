"""`ProcessMemoryManager`: the concrete, thread-safe governor core.

Owns authorities (one canonical ledger per physical pool, aliases for
unified-memory views), the holder registry, reservations -> leases,
settlement, device-loss settlement and allowances. It is a second,
independent implementation of `spec.machine`: mutable indexed records and
its own guards, sharing only vocabulary (enums, errors, value types) with the
spec. `abstract()` is the refinement mapping to `spec.state.State`.

Concurrency: one ledger lock, held only for the bookkeeping of one operation.
Nothing here waits, sleeps, or calls out (I7): no holder callbacks, no
allocator, no ORT.

Contracts: when `invariants.contracts` is on, every operation checks the
invariants incrementally on a partial view of what it touched
(`invariants.check_local`), and a refused operation must leave that view
unchanged (lease rule G4). Off, the cost is one flag read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import immutables

from invariants.contracts import SWITCH as _SWITCH
from invariants.predicates import check_local
from invariants._violation import InvariantViolation
from spec import actions as A
from spec.arith import available, oversubscribed
from spec.errors import (
    AllowanceExceeded,
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    GovernorError,
    IdentityMismatch,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    TierMismatch,
    UnknownAllocation,
    UnknownAllowance,
    UnknownAuthority,
    UnknownHolder,
)
from spec.guards import ALL_ON, GuardSet
from spec.state import Allocation, Allowance, Authority, Holder, Snapshot, State
from spec.types import MAX_BYTES, MAX_NAME, AllocState, ContextState, Origin, Role, Tier

__all__ = ["ProcessMemoryManager"]

T = TypeVar("T")

# Source states each holder event accepts (refimpl's own encoding of the lifecycle).
_ACCEPTS = {
    "commit": (AllocState.PROVISIONAL,),
    "cancel": (AllocState.PROVISIONAL,),
    "release": (AllocState.LIVE,),
    "quarantine": (AllocState.LIVE,),
}
_LOSABLE = (AllocState.PROVISIONAL, AllocState.LIVE, AllocState.QUARANTINED)


class _Auth:
    __slots__ = ("id", "pool", "tier", "capacity", "limit", "alias_of", "view", "context", "used",
                 "allocs", "allowances", "promised")

    def __init__(self, id: int, pool: str, tier: Tier, capacity: int, alias_of: int | None, view: str | None) -> None:
        self.id, self.pool, self.tier, self.capacity, self.limit = id, pool, tier, capacity, capacity
        self.alias_of, self.view = alias_of, view
        self.context = ContextState.ACTIVE
        self.used = 0
        self.allocs: dict[int, _Alloc] = {}
        self.allowances: dict[int, _Allow] = {}
        self.promised = 0  # sum of allowance limits


class _Alloc:
    __slots__ = ("id", "auth", "holder", "tier", "role", "reserved", "nbytes", "charge", "state", "origin")

    def __init__(self, id: int, auth: _Auth, holder: int, tier: Tier, role: Role, nbytes: int, state: AllocState, origin: Origin) -> None:
        self.id, self.auth, self.holder, self.tier, self.role = id, auth, holder, tier, role
        self.reserved = self.nbytes = self.charge = nbytes
        self.state, self.origin = state, origin


class _Allow:
    __slots__ = ("id", "auth", "holder", "limit", "reserved", "mapped")

    def __init__(self, id: int, auth: _Auth, holder: int, limit: int) -> None:
        self.id, self.auth, self.holder, self.limit = id, auth, holder, limit
        self.reserved = self.mapped = 0


def _nbytes(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int:
        raise InvalidBytes(f"{what} must be an int, got {type(n).__name__}")
    if n < 0 or n > MAX_BYTES or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be in [{0 if zero_ok else 1}, 2**63-1], got {n}")
    return n


def _text(s: object, what: str) -> str:
    if type(s) is not str or not s:
        raise InvalidArgument(f"{what} must be a non-empty str, got {s!r:.80}")
    if len(s) > MAX_NAME:  # names travel in traces, whose text is bounded
        raise InvalidArgument(f"{what} must be at most {MAX_NAME} characters, got {len(s)}")
    return s


class ProcessMemoryManager:
    """One per process: the authority for every governed pool (C1)."""

    def __init__(self, guards: GuardSet = ALL_ON, trace: Callable[[dict[str, Any]], None] | None = None) -> None:
        """`trace`: a sink receiving one JSONL-ready event per operation (issue #6, `refimpl.tracing`)."""
        self._guards = guards
        self._lock = threading.Lock()
        self._auths: dict[int, _Auth] = {}
        self._pools: dict[str, _Auth] = {}  # pool -> canonical authority
        self._views: dict[tuple[int, str], _Auth] = {}
        self._holders: dict[int, str] = {}
        self._allocs: dict[int, _Alloc] = {}
        self._allows: dict[int, _Allow] = {}
        self._next_auth = self._next_holder = self._next_alloc = self._next_allow = 1
        if trace is not None:
            from refimpl.tracing import attach

            attach(self, trace)

    # --- registration (C1, I1) -------------------------------------------

    def register_authority(self, pool: str, tier: Tier, capacity: int) -> int:
        """The canonical authority of `pool`; re-registering the same identity returns it."""
        if _SWITCH.on:
            return self._checked(A.RegisterAuthority(pool, tier, capacity), self._scope_all, None, self._register_authority, pool, tier, capacity)
        with self._lock:
            return self._register_authority(pool, tier, capacity)

    def _register_authority(self, pool: str, tier: Tier, capacity: int) -> int:
        _text(pool, "pool")
        if not isinstance(tier, Tier):
            raise InvalidArgument(f"tier must be a Tier, got {tier!r}")
        _nbytes(capacity, "capacity")
        g = self._guards
        existing = self._pools.get(pool)
        if existing is not None and g.on("single_authority_per_pool"):  # C1
            if (existing.tier is not tier or existing.capacity != capacity) and g.on("identity_check"):  # C1
                raise IdentityMismatch(
                    f"pool {pool!r} is already ({existing.tier.value}, {existing.capacity} B); got ({tier.value}, {capacity} B)"
                )
            return existing.id
        a = _Auth(self._next_auth, pool, tier, capacity, None, None)
        self._next_auth += 1
        self._auths[a.id] = a
        self._pools.setdefault(pool, a)
        return a.id

    def register_alias(self, of: int, view: str) -> int:
        """A unified-memory view of authority `of`; it resolves to the canonical ledger (I1)."""
        if _SWITCH.on:
            return self._checked(A.RegisterAlias(of, view), self._scope_all, None, self._register_alias, of, view)
        with self._lock:
            return self._register_alias(of, view)

    def _register_alias(self, of: int, view: str) -> int:
        _text(view, "view")
        base = self._auth(of)
        canonical = self._auths[base.alias_of] if base.alias_of is not None else base
        key = (canonical.id, view)
        if key in self._views:
            return self._views[key].id
        a = _Auth(self._next_auth, canonical.pool, canonical.tier, canonical.capacity, canonical.id, view)
        a.limit = canonical.limit
        self._next_auth += 1
        self._auths[a.id] = self._views[key] = a
        return a.id

    def register_holder(self, name: str) -> int:
        if _SWITCH.on:
            return self._checked(A.RegisterHolder(name), self._scope_none, None, self._register_holder, name)
        with self._lock:
            return self._register_holder(name)

    def _register_holder(self, name: str) -> int:
        _text(name, "holder name")
        hid = self._next_holder
        self._next_holder += 1
        self._holders[hid] = name
        return hid

    # --- reservations and leases (C2, I2, I4a, I6) -------------------------

    def reserve(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role) -> int:
        """Reserve and charge `nbytes` before allocating them; try-only, never waits."""
        if _SWITCH.on:
            return self._checked(A.Reserve(holder, authority, tier, nbytes, role), self._scope_auth, authority, self._admit, holder, authority, tier, nbytes, role, Origin.GRANTED)
        with self._lock:
            return self._admit(holder, authority, tier, nbytes, role, Origin.GRANTED)

    def record_committed(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role) -> int:
        """Record bytes already taken; may push used over the limit, which is then reported (I2)."""
        if _SWITCH.on:
            return self._checked(A.RecordCommitted(holder, authority, tier, nbytes, role), self._scope_auth, authority, self._admit, holder, authority, tier, nbytes, role, Origin.RECORDED)
        with self._lock:
            return self._admit(holder, authority, tier, nbytes, role, Origin.RECORDED)

    def _admit(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role, origin: Origin) -> int:
        _nbytes(nbytes, "nbytes")
        if not isinstance(tier, Tier):
            raise InvalidArgument(f"tier must be a Tier, got {tier!r}")
        if not isinstance(role, Role):
            raise InvalidArgument(f"role must be a Role, got {role!r}")
        self._holder(holder)
        a = self._ledger(authority)
        self._require_active(a)
        if tier is not a.tier and self._guards.on("tier_match"):  # C2
            raise TierMismatch(f"authority {a.id} is {a.tier.value}; a {tier.value} lease cannot live there")
        if origin is Origin.RECORDED and a.used + nbytes > MAX_BYTES:
            raise InvalidBytes(f"authority {a.id}: recording {nbytes} B would overflow the ledger")
        if origin is Origin.GRANTED and a.used + nbytes > a.limit and self._guards.on("limit_check"):  # I2, G1
            raise CapacityDenied(f"authority {a.id}: {nbytes} B asked, {max(0, a.limit - a.used)} B available")
        aid = self._fresh_alloc_id()
        state = AllocState.PROVISIONAL if origin is Origin.GRANTED else AllocState.LIVE
        rec = _Alloc(aid, a, holder, tier, role, nbytes, state, origin)
        self._allocs[aid] = a.allocs[aid] = rec
        a.used += nbytes
        return aid

    def _fresh_alloc_id(self) -> int:
        if not self._guards.on("fresh_ids"):  # I4a (negative control: reuse retired ids)
            for i in range(1, self._next_alloc):
                if i not in self._allocs:
                    return i
        aid = self._next_alloc
        self._next_alloc += 1
        return aid

    def commit(self, holder: int, allocation: int, nbytes: int) -> None:
        """Publish the backed bytes (<= reserved) as a lease; the excess is refunded."""
        if _SWITCH.on:
            self._checked(A.Commit(holder, allocation, nbytes), self._scope_alloc, allocation, self._commit, holder, allocation, nbytes)
            return
        with self._lock:
            self._commit(holder, allocation, nbytes)

    def _commit(self, holder: int, allocation: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        rec = self._owned_alloc(holder, allocation)
        self._step(rec, "commit")
        if nbytes > rec.reserved and self._guards.on("commit_within_reservation"):  # C2
            raise InvalidBytes(f"allocation {rec.id}: {nbytes} B committed but only {rec.reserved} B reserved")
        rec.auth.used += nbytes - rec.charge
        rec.nbytes = rec.charge = nbytes
        rec.state = AllocState.LIVE

    def cancel(self, holder: int, allocation: int) -> None:
        """Abort an unbacked reservation: full refund."""
        if _SWITCH.on:
            self._checked(A.Cancel(holder, allocation), self._scope_alloc, allocation, self._finish, holder, allocation, "cancel")
            return
        with self._lock:
            self._finish(holder, allocation, "cancel")

    def release(self, holder: int, allocation: int) -> None:
        """Release a lease, exactly once: full refund."""
        if _SWITCH.on:
            self._checked(A.Release(holder, allocation), self._scope_alloc, allocation, self._finish, holder, allocation, "release")
            return
        with self._lock:
            self._finish(holder, allocation, "release")

    def _finish(self, holder: int, allocation: int, event: str) -> None:
        rec = self._owned_alloc(holder, allocation)
        self._step(rec, event)
        self._retire(rec)

    def quarantine(self, holder: int, allocation: int, released: int) -> None:
        """Settle a lease only partly undone: refund `released` bytes, keep the residual charged."""
        if _SWITCH.on:
            self._checked(A.Quarantine(holder, allocation, released), self._scope_alloc, allocation, self._quarantine, holder, allocation, released)
            return
        with self._lock:
            self._quarantine(holder, allocation, released)

    def _quarantine(self, holder: int, allocation: int, released: int) -> None:
        _nbytes(released, "released", zero_ok=True)
        rec = self._owned_alloc(holder, allocation)
        self._step(rec, "quarantine")
        if released > rec.charge:
            raise InvalidBytes(f"allocation {rec.id}: cannot release {released} B of a {rec.charge} B charge")
        rec.auth.used -= released
        rec.charge -= released
        rec.state = AllocState.QUARANTINED

    def _step(self, rec: _Alloc, event: str) -> None:
        if rec.state is AllocState.DEVICE_LOST:
            raise DeviceLost(f"allocation {rec.id} is on a lost device; its charge stays until termination")
        if rec.state not in _ACCEPTS[event] and self._guards.on("lifecycle_table"):  # I4a
            raise InvalidTransition(f"allocation {rec.id}: cannot {event} in state {rec.state.value}")

    def _retire(self, rec: _Alloc) -> None:
        rec.auth.used -= rec.charge
        rec.charge = 0
        rec.state = AllocState.RELEASED
        del self._allocs[rec.id]
        del rec.auth.allocs[rec.id]

    # --- device loss (C3 settlement) ---------------------------------------

    def lose_device(self, authority: int) -> None:
        """Mark the device lost: admission stops; every charge stays until termination."""
        if _SWITCH.on:
            self._checked(A.LoseDevice(authority), self._scope_auth_all, authority, self._lose, authority)
            return
        with self._lock:
            self._lose(authority)

    def _lose(self, authority: int) -> None:
        a = self._canonical(authority)
        if a.context is ContextState.ACTIVE:
            a.context = ContextState.LOST
        if a.context is ContextState.LOST:
            for rec in a.allocs.values():
                if rec.state in _LOSABLE:
                    rec.state = AllocState.DEVICE_LOST

    def confirm_termination(self, authority: int) -> None:
        """The lost context is gone: refund its charges, exactly once (idempotent)."""
        if _SWITCH.on:
            self._checked(A.ConfirmTermination(authority), self._scope_auth_all, authority, self._terminate, authority)
            return
        with self._lock:
            self._terminate(authority)

    def _terminate(self, authority: int) -> None:
        a = self._canonical(authority)
        if a.context is ContextState.ACTIVE:
            raise InvalidTransition(f"authority {a.id}: termination confirmed for a context that was never lost")
        a.context = ContextState.TERMINATED
        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:
            self._retire(rec)

    # --- allowances (I4b) ---------------------------------------------------

    def open_allowance(self, holder: int, authority: int, limit: int) -> int:
        """A non-owning permission to map up to `limit` bytes of already-charged capacity."""
        if _SWITCH.on:
            return self._checked(A.OpenAllowance(holder, authority, limit), self._scope_auth, authority, self._open_allowance, holder, authority, limit)
        with self._lock:
            return self._open_allowance(holder, authority, limit)

    def _open_allowance(self, holder: int, authority: int, limit: int) -> int:
        _nbytes(limit, "limit")
        self._holder(holder)
        a = self._ledger(authority)
        self._require_active(a)
        if a.promised + limit > a.capacity and self._guards.on("allowance_capacity"):  # I4b
            raise AllowanceExceeded(f"authority {a.id}: {a.promised} B of {a.capacity} B already promised")
        w = _Allow(self._next_allow, a, holder, limit)
        self._next_allow += 1
        self._allows[w.id] = a.allowances[w.id] = w
        a.promised += limit
        return w.id

    def reserve_growth(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on:
            self._checked(A.ReserveGrowth(holder, allowance, nbytes), self._scope_allow, allowance, self._grow, holder, allowance, nbytes)
            return
        with self._lock:
            self._grow(holder, allowance, nbytes)

    def _grow(self, holder: int, allowance: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        self._require_active(w.auth)
        if nbytes > w.limit - w.reserved - w.mapped and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {w.id}: {nbytes} B asked, {w.limit - w.reserved - w.mapped} B free")
        w.reserved += nbytes

    def map_allowance(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on:
            self._checked(A.MapAllowance(holder, allowance, nbytes), self._scope_allow, allowance, self._map, holder, allowance, nbytes)
            return
        with self._lock:
            self._map(holder, allowance, nbytes)

    def _map(self, holder: int, allowance: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        self._require_active(w.auth)
        if nbytes > w.reserved and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {w.id}: {nbytes} B to map, {w.reserved} B reserved")
        w.reserved = max(0, w.reserved - nbytes)
        w.mapped += nbytes

    def unmap_allowance(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on:
            self._checked(A.UnmapAllowance(holder, allowance, nbytes), self._scope_allow, allowance, self._unmap, holder, allowance, nbytes)
            return
        with self._lock:
            self._unmap(holder, allowance, nbytes)

    def _unmap(self, holder: int, allowance: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        if nbytes > w.mapped:
            raise InvalidBytes(f"allowance {w.id}: {nbytes} B to unmap, {w.mapped} B mapped")
        w.mapped -= nbytes

    def transfer_allowance(self, holder: int, source: int, target: int, nbytes: int) -> None:
        """Move `nbytes` of limit between allowances of one authority; no charge moves (I4b)."""
        if _SWITCH.on:
            self._checked(A.TransferAllowance(holder, source, target, nbytes), self._scope_allow, source, self._transfer, holder, source, target, nbytes)
            return
        with self._lock:
            self._transfer(holder, source, target, nbytes)

    def _transfer(self, holder: int, source: int, target: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        src = self._owned_allow(holder, source)
        dst = self._allow(target)
        if dst is src or dst.auth is not src.auth:
            raise InvalidArgument(f"allowance {src.id} cannot transfer to {dst.id}: same allowance or another authority")
        free = src.limit - src.reserved - src.mapped
        if nbytes > free and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {src.id}: {nbytes} B to transfer, {free} B free")
        src.limit -= nbytes
        dst.limit += nbytes

    def close_allowance(self, holder: int, allowance: int) -> None:
        if _SWITCH.on:
            self._checked(A.CloseAllowance(holder, allowance), self._scope_allow, allowance, self._close, holder, allowance)
            return
        with self._lock:
            self._close(holder, allowance)

    def _close(self, holder: int, allowance: int) -> None:
        w = self._owned_allow(holder, allowance)
        if w.mapped:
            raise InvalidTransition(f"allowance {w.id} maps {w.mapped} B; unmap it first")
        w.auth.promised -= w.limit
        del self._allows[w.id]
        del w.auth.allowances[w.id]

    # --- observability -------------------------------------------------------

    def snapshot(self, authority: int) -> Snapshot:
        """Charge figures of one authority (aliases report their canonical ledger)."""
        with self._lock:
            a = self._canonical(authority)
            growth = sum(w.reserved for w in a.allowances.values())
            return Snapshot(a.id, a.pool, a.limit, a.used, growth, available(a.limit, a.used, growth),
                            oversubscribed(a.used, a.limit), a.promised)

    def abstract(self) -> State:
        """The refinement mapping: this governor's state as a `spec.state.State`."""
        with self._lock:
            return self._view()

    # --- lookups (validation order as in spec.machine) -----------------------

    def _holder(self, hid: object) -> None:
        if type(hid) is not int or hid not in self._holders:
            raise UnknownHolder(f"holder {hid!r} is not registered")

    def _auth(self, aid: object) -> _Auth:
        a = self._auths.get(aid) if type(aid) is int else None
        if a is None:
            raise UnknownAuthority(f"authority {aid!r} is not registered")
        return a

    def _canonical(self, aid: object) -> _Auth:
        a = self._auth(aid)
        return self._auths[a.alias_of] if a.alias_of is not None else a

    def _ledger(self, aid: object) -> _Auth:
        a = self._auth(aid)
        if a.alias_of is not None and self._guards.on("alias_resolution"):  # I1
            return self._auths[a.alias_of]
        return a

    @staticmethod
    def _require_active(a: _Auth) -> None:
        if a.context is not ContextState.ACTIVE:  # C3
            raise DeviceLost(f"authority {a.id} ({a.pool}) is {a.context.value}; no new work is admitted")

    def _alloc(self, aid: object) -> _Alloc:
        rec = self._allocs.get(aid) if type(aid) is int else None
        if rec is None:
            if type(aid) is int and 0 < aid < self._next_alloc:
                raise InvalidTransition(f"allocation {aid} was already released or terminated")
            raise UnknownAllocation(f"allocation {aid!r} was never issued")
        return rec

    def _owned_alloc(self, holder: int, aid: object) -> _Alloc:
        self._holder(holder)
        rec = self._alloc(aid)
        if rec.holder != holder and self._guards.on("owner_only"):  # I6
            raise ForeignHolder(f"allocation {rec.id} is held by holder {rec.holder}, not {holder}")
        return rec

    def _allow(self, wid: object) -> _Allow:
        w = self._allows.get(wid) if type(wid) is int else None
        if w is None:
            if type(wid) is int and 0 < wid < self._next_allow:
                raise InvalidTransition(f"allowance {wid} was already closed")
            raise UnknownAllowance(f"allowance {wid!r} was never opened")
        return w

    def _owned_allow(self, holder: int, wid: object) -> _Allow:
        self._holder(holder)
        w = self._allow(wid)
        if w.holder != holder and self._guards.on("owner_only"):  # I6
            raise ForeignHolder(f"allowance {w.id} is held by holder {w.holder}, not {holder}")
        return w

    # --- contracts -----------------------------------------------------------

    def _checked(self, action: Any, scope: Callable[[Any], tuple[Any, Any, Any]], key: Any,
                 body: Callable[..., T], *args: Any) -> T:
        """Run `body` under the lock, checking the invariants on what it touched."""
        with self._lock:
            auths, allocs, allows = scope(key)
            first_auth, first_alloc, first_allow = self._next_auth, self._next_alloc, self._next_allow
            before = self._partial(auths, allocs, allows)
            try:
                result = body(*args)
            except GovernorError:
                if self._partial(auths, allocs, allows) != before:  # G4: a refusal changes nothing
                    raise InvariantViolation("G4", f"{action!r} was refused but changed the ledger") from None
                raise
            new_allocs = list(range(first_alloc, self._next_alloc))
            if isinstance(action, (A.Reserve, A.RecordCommitted)):
                new_allocs.append(result)  # with fresh_ids off the id may be a reused one
            after = self._partial([*auths, *range(first_auth, self._next_auth)], [*allocs, *new_allocs],
                                  [*allows, *range(first_allow, self._next_allow)])
            check_local(before, action, after)
            return result

    def _scope_none(self, key: Any) -> tuple[Any, Any, Any]:
        return (), (), ()

    def _scope_all(self, key: Any) -> tuple[Any, Any, Any]:
        return list(self._auths), (), ()

    def _scope_auth(self, aid: object) -> tuple[Any, Any, Any]:
        a = self._auths.get(aid) if type(aid) is int else None
        if a is None:
            return (), (), ()
        return ([a.id] if a.alias_of is None else [a.id, a.alias_of]), (), ()

    def _scope_auth_all(self, aid: object) -> tuple[Any, Any, Any]:
        auths, _, _ = self._scope_auth(aid)
        return auths, [i for a in auths for i in self._auths[a].allocs], ()

    def _scope_alloc(self, aid: object) -> tuple[Any, Any, Any]:
        rec = self._allocs.get(aid) if type(aid) is int else None
        return ((rec.auth.id,), (rec.id,), ()) if rec else ((), (), ())

    def _scope_allow(self, wid: object) -> tuple[Any, Any, Any]:
        w = self._allows.get(wid) if type(wid) is int else None
        return ((w.auth.id,), (), ()) if w else ((), (), ())

    def _partial(self, auths: Any, allocs: Any, allows: Any) -> State:
        """A partial abstraction of the touched records (plain dicts: built per operation, never hashed)."""
        a_recs = {i: _auth_rec(self._auths[i]) for i in auths if i in self._auths}
        r_recs = {i: _alloc_rec(self._allocs[i]) for i in allocs if i in self._allocs}
        w_recs = {i: _allow_rec(self._allows[i]) for i in allows if i in self._allows}
        for i in a_recs:  # I4b needs every allowance of a viewed authority
            for w in self._auths[i].allowances.values():
                w_recs[w.id] = _allow_rec(w)
        holders = {r.holder for r in r_recs.values()} | {w.holder for w in w_recs.values()}
        return State(a_recs, {h: Holder(h, self._holders[h]) for h in holders if h in self._holders},
                     r_recs, w_recs, self._next_auth, self._next_holder, self._next_alloc, self._next_allow)

    def _view(self) -> State:
        return State(
            authorities=immutables.Map({i: _auth_rec(a) for i, a in self._auths.items()}),
            holders=immutables.Map({h: Holder(h, n) for h, n in self._holders.items()}),
            allocations=immutables.Map({i: _alloc_rec(r) for i, r in self._allocs.items()}),
            allowances=immutables.Map({i: _allow_rec(w) for i, w in self._allows.items()}),
            next_authority=self._next_auth,
            next_holder=self._next_holder,
            next_allocation=self._next_alloc,
            next_allowance=self._next_allow,
        )


def _auth_rec(a: _Auth) -> Authority:
    return Authority(a.id, a.pool, a.tier, a.capacity, a.limit, a.alias_of, a.view, a.context, a.used)


def _alloc_rec(r: _Alloc) -> Allocation:
    return Allocation(r.id, r.auth.id, r.holder, r.tier, r.role, r.reserved, r.nbytes, r.charge, r.state, r.origin)


def _allow_rec(w: _Allow) -> Allowance:
    return Allowance(w.id, w.auth.id, w.holder, w.limit, w.reserved, w.mapped)
