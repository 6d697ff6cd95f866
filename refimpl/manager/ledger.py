"""The ledger part of `ProcessMemoryManager`: authorities, holders, reservations -> leases (C1, C2, I1, I2, I4a, I6).

Owns authorities (one canonical ledger per physical pool, aliases for
unified-memory views), the holder registry, reservations -> leases,
settlement and the ledger's half of device loss. It is a second,
independent implementation of `spec.ledger`: mutable indexed records and
its own guards, sharing only vocabulary (enums, errors, value types) with the
spec. Every other part books its bytes here: a requester ticket's grant and a
transaction's reservation are `_Alloc` records of this table (`part` names
the ticket or transaction that owns one until it is claimed or committed).

Concurrency: one ledger lock (`LedgerLock`), held only for the bookkeeping of
one operation. Nothing here waits, sleeps, or calls out (I7): no holder
callbacks, no allocator, no ORT. Waiters whose tickets a credit granted are
woken after the lock is released.

Contracts: when `invariants.contracts` is on, every operation checks the invariants incrementally
on a partial view of what it touched (`invariants.check_local`, in `refimpl.manager.views`), and a
refused operation must leave that view unchanged (lease rule G4). Off, the cost is one flag read.
"""

from __future__ import annotations

from typing import Any

from invariants.contracts import SWITCH as _SWITCH
from spec import ledger_actions as A
from spec.arith import available, oversubscribed
from spec.errors import (
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    IdentityMismatch,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    TierMismatch,
    UnknownAllocation,
    UnknownAuthority,
    UnknownHolder,
)
from spec.guards import GUARDS, GuardSet
from spec.ledger_state import Snapshot
from spec.types import MAX_BYTES, MAX_NAME, AllocState, ContextState, Origin, Role, Tier
from refimpl.manager import local_contract as _L
from refimpl.manager.lock import LedgerLock

__all__ = ["Ledger"]

# Source states each holder event accepts (refimpl's own encoding of the lifecycle).
_ACCEPTS = {
    "commit": (AllocState.PROVISIONAL,),
    "cancel": (AllocState.PROVISIONAL,),
    "release": (AllocState.LIVE,),
    "quarantine": (AllocState.LIVE,),
    "shrink": (AllocState.LIVE,),
    "grow": (AllocState.LIVE,),
}
_ACCEPTED = {event: states[0] for event, states in _ACCEPTS.items()}  # the one source state, for the hot path
_ACTIVE = ContextState.ACTIVE
# Enum members read on the hot path, bound once (a member lookup through its class costs ~0.14 us).
_PROVISIONAL, _LIVE, _RELEASED = AllocState.PROVISIONAL, AllocState.LIVE, AllocState.RELEASED
_O_GRANTED, _O_RECORDED = Origin.GRANTED, Origin.RECORDED


class _Auth:
    __slots__ = ("id", "pool", "tier", "capacity", "limit", "alias_of", "view", "context", "used",
                 "allocs", "allowances", "promised", "pending", "change", "generation", "rec", "device")

    def __init__(self, id: int, pool: str, tier: Tier, capacity: int, alias_of: int | None, view: str | None) -> None:
        self.id, self.pool, self.tier, self.capacity, self.limit = id, pool, tier, capacity, capacity
        self.alias_of, self.view, self.device = alias_of, view, None  # device: declared at registration (C1)
        self.context = ContextState.ACTIVE
        self.used = 0
        self.allocs: dict[int, _Alloc] = {}
        self.allowances: dict[int, _Allow] = {}
        self.promised = 0  # sum of allowance limits
        self.pending: dict[int, Any] = {}  # arbitration: pending tickets on this ledger, in submit (id) order
        self.change: Any = None  # the pending limit change, if any (refimpl.manager.limits)
        self.generation = 0  # bumped by a reconfigure (refimpl.manager.arbitration); tickets and pressures carry it
        self.rec: Any = None  # the last frozen record made of it (refimpl.manager.views)


class _Alloc:
    """An allocation row, made and filled by `Ledger._enter` (an `__init__` costs a second interpreter frame: ~0.1 us)."""

    __slots__ = ("id", "auth", "holder", "tier", "role", "reserved", "nbytes", "charge", "state", "origin", "part", "ticket",
                 "pinned", "in_flight", "rec")


class _Allow:
    __slots__ = ("id", "auth", "holder", "limit", "reserved", "mapped", "rec")

    def __init__(self, id: int, auth: _Auth, holder: int, limit: int) -> None:
        self.id, self.auth, self.holder, self.limit = id, auth, holder, limit
        self.reserved = self.mapped = 0
        self.rec: Any = None


def _nbytes(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int:
        raise InvalidBytes(f"{what} must be an int, got {type(n).__name__}")
    if n < 0 or n > MAX_BYTES or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be in [{0 if zero_ok else 1}, 2**63-1], got {n}")
    return n


def _alignment(n: object) -> None:
    """A stated alignment is a power of two in [1, 2**62] (D13); the caller passes None for the allocator's own."""
    if type(n) is not int or n < 1 or n.bit_count() != 1 or n.bit_length() > 63:
        raise InvalidArgument(f"alignment must be None or a power of two in [1, 2**62], got {n!r:.40}")


def _text(s: object, what: str) -> str:
    if type(s) is not str or not s:
        raise InvalidArgument(f"{what} must be a non-empty str, got {s!r:.80}")
    if len(s) > MAX_NAME:  # names travel in traces, whose text is bounded
        raise InvalidArgument(f"{what} must be at most {MAX_NAME} characters, got {len(s)}")
    return s


class _Guards:
    """A `GuardSet` read at C speed: `on(name)` is one frozenset lookup (tests check every name is registered)."""

    __slots__ = ("on", "guards")

    def __init__(self, guards: GuardSet) -> None:
        self.guards = guards
        self.on = frozenset(g.name for g in GUARDS if guards.on(g.name)).__contains__


class Ledger:
    """The ledger part: authorities, holders, reservations -> leases, settlement (C1, C2, I1, I2, I4a, I6)."""

    def _init_ledger(self, guards: GuardSet) -> None:
        self._guards = _Guards(guards)
        self._lock = LedgerLock()
        self._auths: dict[int, _Auth] = {}
        self._pools: dict[str, _Auth] = {}  # pool -> canonical authority
        self._views: dict[tuple[int, str], _Auth] = {}
        self._holders: dict[int, str] = {}
        self._allocs: dict[int, _Alloc] = {}
        self._allows: dict[int, _Allow] = {}
        self._next_auth = self._next_holder = self._next_alloc = self._next_allow = 1
        self._wake: list[Any] = []  # waiters' events to set once the lock is released (I7)
        self._leases: dict[int, _Alloc] = {}  # ticket id -> the live lease its claim made (an index of this table)
        self._fresh = self._guards.on("fresh_ids")  # I4a: allocation ids are never reused
        self._quotas: dict[Tier, int] = {}  # tier -> its process quota (I1; `Limits.set_process_quota`)
        self._credited: dict[int, int] = {}  # this operation's credited ledgers -> their headroom before (`_credit`)
        # The topology's number (`invariants.manager_trace.topology_changed`): + 1, under the lock, by each operation
        # that registers, removes, loses or terminates an authority; each trace event carries the one it was decided in.
        self._topology_epoch = 0

    # --- registration (C1, I1) -------------------------------------------

    def register_authority(self, pool: str, tier: Tier, capacity: int, device: str | None = None) -> int:
        """The canonical authority of `pool` (or of a declared device's tier, whatever the pool is called)."""
        if _SWITCH.on or self._mailbox:
            return self._checked(A.RegisterAuthority(pool, tier, capacity, device), self._scope_all, None,
                                 self._register_authority, pool, tier, capacity, device)
        with self._lock:
            return self._register_authority(pool, tier, capacity, device)

    def _register_authority(self, pool: str, tier: Tier, capacity: int, device: str | None = None) -> int:
        _text(pool, "pool")
        if not isinstance(tier, Tier):
            raise InvalidArgument(f"tier must be a Tier, got {tier!r}")
        _nbytes(capacity, "capacity")
        g, existing = self._guards, self._pools.get(pool)
        if device is not None and _text(device, "device") and existing is None:  # C1: one ledger per physical pool
            existing = next((a for a in self._pools.values() if (a.device, a.tier) == (device, tier)), None)
        if existing is not None and g.on("single_authority_per_pool"):  # C1
            if (existing.tier is not tier or existing.capacity != capacity) and g.on("identity_check"):  # C1
                raise IdentityMismatch(f"pool {pool!r} is already ({existing.tier.value}, {existing.capacity} B); "
                                       f"got ({tier.value}, {capacity} B)")
            if None not in (device, existing.device) and existing.device != device and g.on("identity_check"):
                raise IdentityMismatch(f"pool {pool!r} is on device {existing.device}, not {device}")
            return existing.id
        a = _Auth(self._next_auth, pool, tier, capacity, None, None)
        self._next_auth, self._auths[a.id], a.device = self._next_auth + 1, a, device
        self._pools.setdefault(pool, a)
        self._topology_epoch += 1
        return a.id

    def register_alias(self, of: int, view: str) -> int:
        """A unified-memory view of authority `of`; it resolves to the canonical ledger (I1)."""
        if _SWITCH.on or self._mailbox:
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
        self._topology_epoch += 1
        return a.id

    def register_holder(self, name: str) -> int:
        if _SWITCH.on or self._mailbox:
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

    def reserve(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role,
                alignment: int | None = None) -> int:
        """Reserve and charge `nbytes` before allocating them; try-only, never waits. `alignment`: None or a power
        of two (validated, never charged: padding is the allocator's granule, I8)."""
        if _SWITCH.on or self._mailbox:
            return self._contract(_L.RESERVE, self._admit, (holder, authority, tier, nbytes, role, alignment),
                                  (_O_GRANTED,))
        with self._lock:
            return self._admit(holder, authority, tier, nbytes, role, alignment, _O_GRANTED)

    def record_committed(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role) -> int:
        """Record bytes already taken; may push used over the limit, which is then reported (I2)."""
        if _SWITCH.on or self._mailbox:
            return self._contract(_L.RECORD, self._admit, (holder, authority, tier, nbytes, role), (None, _O_RECORDED))
        with self._lock:
            return self._admit(holder, authority, tier, nbytes, role, None, _O_RECORDED)

    def _admit(self, holder: int, authority: int, tier: Tier, nbytes: int, role: Role, alignment: int | None,
               origin: Origin) -> int:
        # Hot path: each lookup is tried inline; the full check (with its typed error) runs only on a miss.
        if self._poisoned:
            self._grants()  # I5: a poisoned manager charges nothing new
        if type(nbytes) is not int or not 0 < nbytes <= MAX_BYTES:
            _nbytes(nbytes, "nbytes")
        if not isinstance(tier, Tier):
            raise InvalidArgument(f"tier must be a Tier, got {tier!r}")
        if not isinstance(role, Role):
            raise InvalidArgument(f"role must be a Role, got {role!r}")
        if type(holder) is not int or holder not in self._holders:
            self._holder(holder)
        a = self._auths.get(authority) if type(authority) is int else None
        if a is None or a.alias_of is not None:
            a = self._ledger(authority)
        if a.context is not _ACTIVE:
            self._require_active(a)
        if tier is not a.tier and self._guards.on("tier_match"):  # C2
            raise TierMismatch(f"authority {a.id} is {a.tier.value}; a {tier.value} lease cannot live there")
        if alignment is not None:
            _alignment(alignment)
        if origin is _O_GRANTED:
            if a.used + nbytes > a.limit and self._guards.on("limit_check"):  # I2, G1
                raise CapacityDenied(f"authority {a.id}: {nbytes} B asked, {max(0, a.limit - a.used)} B available")
            if self._quotas:
                self._within_quota(a, nbytes)  # I1: the tier's process quota
        elif a.used + nbytes > MAX_BYTES:  # recorded bytes
            raise InvalidBytes(f"authority {a.id}: recording {nbytes} B would overflow the ledger")
        return self._enter(holder, a, tier, role, nbytes, origin).id

    def _enter(self, holder: int, a: _Auth, tier: Tier, role: Role, nbytes: int, origin: Origin) -> _Alloc:
        """Book a new allocation on ledger `a` (every part's reservations enter here)."""
        if self._fresh:
            aid = self._next_alloc
            self._next_alloc += 1
        else:
            aid = self._fresh_alloc_id()
        rec = _Alloc()  # every row is made here, in the booking frame (a second frame costs ~0.06 us)
        rec.id = aid  # one store per line: ~10% cheaper than a tuple assignment
        rec.auth = a
        rec.holder = holder
        rec.tier = tier
        rec.role = role
        rec.reserved = rec.nbytes = rec.charge = nbytes
        rec.state = _PROVISIONAL if origin is _O_GRANTED else _LIVE
        rec.origin = origin
        # The live ticket or transaction whose reservation this is (it owns the record); the requester ticket
        # whose claim made this lease (`acquire` finds the lease by it).
        rec.part = rec.ticket = None
        rec.pinned = rec.in_flight = False  # the holder's use flags: such a lease is never a victim (I6)
        rec.rec = None  # the last frozen record made of it (refimpl.manager.views)
        self._allocs[aid] = a.allocs[aid] = rec
        a.used += nbytes
        return rec

    def _fresh_alloc_id(self) -> int:
        for i in range(1, self._next_alloc):  # I4a negative control (fresh_ids off): reuse retired ids
            if i not in self._allocs:
                return i
        aid = self._next_alloc
        self._next_alloc += 1
        return aid

    def commit(self, holder: int, allocation: int, nbytes: int) -> None:
        """Publish the backed bytes (<= reserved) as a lease; the excess is refunded."""
        if _SWITCH.on or self._mailbox:
            self._contract(_L.COMMIT, self._commit, (holder, allocation, nbytes))
            return
        with self._lock:
            self._commit(holder, allocation, nbytes)
            wake = self._wake
            if wake:
                self._wake = []
        if wake:
            self._wake_up(wake)

    def _commit(self, holder: int, allocation: int, nbytes: int) -> None:
        if type(nbytes) is not int or not 0 < nbytes <= MAX_BYTES:
            _nbytes(nbytes, "nbytes")
        rec = self._allocs.get(allocation) if type(allocation) is int else None
        if rec is None or rec.holder != holder or type(holder) is not int:
            rec = self._owned_alloc(holder, allocation)
        if rec.part is not None:
            _owned_by_part(rec)
        if rec.state is not _PROVISIONAL:
            self._step(rec, "commit")
        if nbytes > rec.reserved and self._guards.on("commit_within_reservation"):  # C2
            raise InvalidBytes(f"allocation {rec.id}: {nbytes} B committed but only {rec.reserved} B reserved")
        self._commit_rec(rec, nbytes)
        if self._credited:
            self._rounds()  # I13: returned capacity goes to the waiters first

    def _commit_rec(self, rec: _Alloc, nbytes: int) -> None:
        if nbytes < rec.charge:
            self._credit(rec, rec.charge - nbytes)  # the excess is refunded
        else:
            rec.auth.used += nbytes - rec.charge  # 0 B (more only with commit_within_reservation off)
        rec.nbytes = rec.charge = nbytes
        rec.state = _LIVE

    def cancel(self, holder: int, allocation: int) -> None:
        """Abort an unbacked reservation: full refund."""
        if _SWITCH.on or self._mailbox:
            self._contract(_L.CANCEL, self._finish, (holder, allocation), ("cancel",))
            return
        with self._lock:
            self._finish(holder, allocation, "cancel")
            wake = self._wake
            if wake:
                self._wake = []
        if wake:
            self._wake_up(wake)

    def release(self, holder: int, allocation: int) -> None:
        """Release a lease, exactly once: full refund."""
        if _SWITCH.on or self._mailbox:
            self._contract(_L.RELEASE, self._finish, (holder, allocation), ("release",))
            return
        with self._lock:
            self._finish(holder, allocation, "release")
            wake = self._wake
            if wake:
                self._wake = []
        if wake:
            self._wake_up(wake)

    def _finish(self, holder: int, allocation: int, event: str) -> None:
        rec = self._allocs.get(allocation) if type(allocation) is int else None
        if rec is None or rec.holder != holder or type(holder) is not int:
            rec = self._owned_alloc(holder, allocation)
        if rec.part is not None:
            _owned_by_part(rec)
        if rec.state is not _ACCEPTED[event]:
            self._step(rec, event)
        self._retire(rec)
        if self._credited:
            self._rounds()  # I13

    def quarantine(self, holder: int, allocation: int, released: int) -> None:
        """Settle a lease only partly undone: refund `released` bytes, keep the residual charged."""
        if _SWITCH.on or self._mailbox:
            self._checked(A.Quarantine(holder, allocation, released), self._scope_alloc, allocation, self._quarantine, holder, allocation, released)
            return
        with self._lock:
            self._quarantine(holder, allocation, released)
            wake = self._wake
            if wake:
                self._wake = []
        if wake:
            self._wake_up(wake)

    def _quarantine(self, holder: int, allocation: int, released: int) -> None:
        _nbytes(released, "released", zero_ok=True)
        rec = self._owned_alloc(holder, allocation)
        if rec.part is not None:
            _owned_by_part(rec)
        self._step(rec, "quarantine")
        if released > rec.charge:
            raise InvalidBytes(f"allocation {rec.id}: cannot release {released} B of a {rec.charge} B charge")
        self._credit(rec, released)
        rec.state = AllocState.QUARANTINED
        self._rounds()  # I13

    def _wake_up(self, wake: list[Any]) -> None:
        """Set the events of waiters whose tickets were granted or retired: never under the lock (I7).

        If an outer frame of this thread still holds the (re-entrant) lock, the trace recorder's
        wrapper does, and it wakes them once it has released it (`_wake_waiters`)."""
        if self._lock.held_by_me():
            self._wake.extend(wake)
            return
        # A KeyboardInterrupt landing here (after the lock is released, before every event is set) loses the
        # remaining wake-ups; each parked waiter re-reads its ticket every `arbitration.RECHECK_S`, so a granted
        # or retired one still returns (tests/test_manager_faults.py::test_a_lost_wake_up_costs_a_waiter_one_recheck).
        for ev in wake:
            ev.set()

    def _step(self, rec: _Alloc, event: str) -> None:
        if rec.state is AllocState.DEVICE_LOST:
            raise DeviceLost(f"allocation {rec.id} is on a lost device; its charge stays until termination")
        if rec.state not in _ACCEPTS[event] and self._guards.on("lifecycle_table"):  # I4a
            raise InvalidTransition(f"allocation {rec.id}: cannot {event} in state {rec.state.value}")

    def _credit(self, rec: _Alloc, n: int) -> None:
        """Give `n` B of `rec`'s charge back to its ledger: the one place bytes are credited. The operation's first
        credit on a ledger notes its headroom before; every operation that credits ends in `_rounds`, which reads
        the notes (I13: the ledger's own round, then the rounds its tier's process quota owes)."""
        a = rec.auth
        if a.pending or self._quotas:  # a round may be owed: to its waiters, or to its tier's (I13)
            self._credited.setdefault(a.id, a.limit - a.used)
        rec.charge -= n
        a.used -= n

    def _retire(self, rec: _Alloc) -> None:
        self._credit(rec, rec.charge)
        rec.state = _RELEASED
        del self._allocs[rec.id]
        del rec.auth.allocs[rec.id]
        t = rec.ticket
        if t is not None:
            del self._leases[t.id]  # a retired lease is no ticket's any more

    # --- observability -------------------------------------------------------

    def snapshot(self, authority: int) -> Snapshot:
        """Charge figures of one authority (aliases report their canonical ledger)."""
        with self._lock:
            a = self._canonical(authority)
            growth = sum(w.reserved for w in a.allowances.values())
            snap = Snapshot(a.id, a.pool, a.limit, a.used, growth, available(a.limit, a.used, growth),
                            oversubscribed(a.used, a.limit), a.promised, a.tier)
            if _SWITCH.on:
                _L.check_snapshot(a, snap)  # the figures are a reading of the ledger (I2, C8)
            return snap

    # --- lookups (validation order as in spec.ledger) -----------------------

    def _holder(self, hid: object) -> None:
        if type(hid) is not int or hid not in self._holders:
            raise UnknownHolder(f"holder {hid!r} is not registered")

    def _auth(self, aid: object) -> _Auth:
        a = self._auths.get(aid) if type(aid) is int else None
        if a is None:
            if type(aid) is int and 1 <= aid < self._next_auth:
                raise InvalidTransition(f"authority {aid} was removed")
            raise UnknownAuthority(f"authority {aid!r} is not known (not registered)")
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


def _owned_by_part(rec: _Alloc) -> None:
    raise InvalidTransition(f"allocation {rec.id} is {rec.part!r}'s reservation; that part settles it")
