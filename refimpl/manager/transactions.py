"""The transaction part of `ProcessMemoryManager`: try-only capacity transactions over ledger authorities (C4, I5).

A transaction plans its needs (authority, bytes) and reserves them one at a
time in ascending authority id, each a ledger reservation of the holder,
role STATE, granted now or refused now (it never waits, so two transactions
never wait on each other while holding). Commit turns every held reservation
into a lease with its full bytes; abort cancels each, crediting it exactly
once, and leaves a zero-byte retry intent (submit sequence, priority, age:
no bytes). The part keeps only the plan and the links to its ledger records
(`_Alloc.part` is the transaction while it owns them).

Two front ends, one implementation:

  * the composed operations (`plan_tx`, `reserve_tx`, `commit_tx`,
    `abort_tx`; `spec.manager`): a miss raises `CapacityDenied` and leaves
    the transaction open; commit hands the leases to the holder.
  * the focused operations (`tx_plan`, `tx_reserve`, ..., `spec.transactions`;
    registering, device loss and bundles are the composed verbs,
    run through `_run_tx` in `refimpl.manager.tx_view`): a miss aborts the
    whole transaction and returns its intent; commit keeps the lease set as
    the transaction's (COMMITTED, in `_settled`) until `tx_release`, with
    provisional and model views and state bundles (`refimpl.manager.bundles`).

Both take bytes with `_take`, settle with `_settle` and abort with `_unwind`.
Waiting for capacity, if a caller wants it, happens before planning, holding
nothing (`reserve_all` is the try-everything-now convenience).
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec import transactions_actions as T
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    InvalidArgument,
    InvalidTransition,
    ManagerPoisoned,
    ReservationOrder,
    UnknownIntent,
    UnknownTransaction,
    ViewInUse,
)
from spec.transactions_lifecycle import TxPhase, ViewKind
from spec.types import AllocState, ContextState, Origin, Role, Tier
from refimpl.manager.ledger import _Alloc, _Auth, _nbytes

__all__ = ["Transactions"]

_P = TxPhase
# Phases each focused operation accepts (refimpl's own encoding of the transaction lifecycle).
_RESERVABLE = (_P.PLANNED, _P.RESERVING)
_ABORTABLE = (_P.PLANNED, _P.RESERVING, _P.RESERVED, _P.PUBLISHED, _P.EXECUTING)
_MAX_NEEDS, _MAX_PRIORITY = 8, 9
_LOST = AllocState.DEVICE_LOST


class _Tx:
    __slots__ = ("id", "holder", "decl", "needs", "need", "held", "seq", "priority", "age", "phase", "bundle",
                 "kind", "bound", "retries")

    def __init__(self, id: int, holder: int, decl: tuple[tuple[int, int], ...], seq: int, priority: int, age: int,
                 bundle: int | None, kind: ViewKind) -> None:
        self.id, self.holder, self.decl = id, holder, decl  # decl: the needs in declared order
        self.needs = tuple(sorted(decl))  # ascending authority id: the reservation order (C4)
        self.need = dict(decl)
        self.held: list[_Alloc] = []  # in reservation order (composed: held[i] is the reservation for needs[i])
        self.seq, self.priority, self.age = seq, priority, age
        self.phase = _P.PLANNED
        self.bundle, self.kind = bundle, kind
        self.bound: dict[int, int] = {}  # model view -> generation bound to this execution, in binding order
        self.retries = False  # focused: an abort leaves a retry intent (composed callers retry by planning anew)

    def __repr__(self) -> str:
        return f"transaction {self.id}"


def _int_id(v: object, what: str) -> int:
    if type(v) is not int:
        raise InvalidArgument(f"{what} must be an int id, got {v!r}")
    return v


class Transactions:
    """Capacity transactions; needs the ledger part's tables, lookups, `_enter`, `_commit_rec` and `_retire`."""

    def _init_transactions(self) -> None:
        self._txs: dict[int, _Tx] = {}  # open only
        self._settled: dict[int, _Tx] = {}  # focused, committed: lease sets the transaction still owns
        self._intents: dict[int, tuple[int, int, int]] = {}  # id -> (seq, priority, age): no bytes (C4)
        self._places: dict[int, tuple[int, int, int, int]] = {}  # composed intents: aborted tx -> (holder, seq, ...)
        self._next_tx = self._next_intent = self._next_seq = 1

    # --- the shared implementation ---------------------------------------------

    def _open_tx(self, holder: int, decl: tuple[tuple[int, int], ...], priority: int, kind: ViewKind,
              bundle: int | None, intent: int | None, retries: bool = False) -> _Tx:
        """A new open transaction; a retry takes its intent's arbitration identity and spends the intent (C4)."""
        if intent is not None and self._guards.on("retry_keeps_identity"):  # C4
            seq, priority, age = self._intents[intent]
        else:
            seq, age = self._next_seq, 0
            self._next_seq += 1
        if intent is not None:
            del self._intents[intent]
        t = _Tx(self._next_tx, holder, decl, seq, priority, age, bundle, kind)
        t.retries = retries
        self._next_tx += 1
        self._txs[t.id] = t
        return t

    def _headroom(self, a: _Auth) -> int:
        headroom = a.limit - a.used
        if not self._guards.on("tx_counts_granted"):  # I1, I2 (negative control): granted tickets' bytes look free
            headroom += sum(k.nbytes for k in self._tickets.values() if k.auth is a and k.alloc is not None)
        return headroom

    def _take(self, t: _Tx, a: _Auth, n: int) -> _Alloc:
        """Book `n` bytes on ledger `a` for `t`: a ledger reservation of its holder, owned by `t`."""
        rec = self._enter(t.holder, a, a.tier, Role.STATE, n, Origin.GRANTED)
        rec.part = t
        t.held.append(rec)
        t.phase = _P.RESERVED if len(t.held) == len(t.needs) else _P.RESERVING
        return rec

    def _settle(self, t: _Tx) -> None:
        """Every held reservation becomes a lease of its full bytes; `t` leaves the open table."""
        del self._txs[t.id]
        for rec in t.held:
            self._commit_rec(rec, rec.reserved)
        t.phase = _P.COMMITTED

    def _unwind(self, t: _Tx, keep: object, before: dict[int, int]) -> tuple[int, int]:
        """Abort `t`: cancel its held reservations except those on ledger `keep`, drop its views, leave its intent.

        Returns (bytes credited, intent id; 0 for a composed transaction, which keeps none); notes headroom in `before` (the caller runs the rounds, once per
        ledger, after the whole operation)."""
        del self._txs[t.id]
        credited = 0
        for i, rec in enumerate(t.held):
            rec.part = None
            if i > 0 and not self._guards.on("full_abort"):  # I5 (negative control): only the first is returned
                continue
            a = rec.auth
            if a is keep or self._allocs.get(rec.id) is not rec:
                continue  # on the lost device: stays charged until termination (C3)
            before.setdefault(a.id, a.limit - a.used)
            credited += rec.charge
            self._retire(rec)
        self._drop_views(t)
        if not t.retries:
            return credited, 0  # a composed transaction: no intent is kept (nothing would ever spend it)
        iid = self._next_intent
        self._next_intent += 1
        self._intents[iid] = (t.seq, t.priority, t.age + 1)
        return credited, iid

    # --- the composed front end (spec.manager) -----------------------------------

    def plan_tx(self, holder: int, needs: tuple[tuple[int, int], ...], priority: int = 0,
                retry: int | None = None) -> int:
        """Plan a transaction; nothing is held yet. Needs are kept in ascending authority id (C4). `retry`
        names the intent an abort of this holder left: the new transaction takes back its place."""
        return self._run(M.PlanTx, self._ms_plan, self._plan, holder, needs, priority, retry)

    def _plan(self, holder: int, needs: tuple[tuple[int, int], ...], priority: int, retry: int | None) -> int:
        self._grants()
        self._holder(holder)
        if (type(needs) is not tuple or not needs
                or any(type(n) is not tuple or len(n) != 2 for n in needs)):
            raise InvalidArgument(f"needs must be a non-empty tuple of (authority, nbytes) pairs, got {needs!r:.80}")
        # Pairwise equality, not a set: an unhashable authority is then refused by the lookup below.
        if any(needs[i][0] == needs[j][0] for i in range(len(needs)) for j in range(i + 1, len(needs))):
            raise InvalidArgument(f"needs must name distinct authorities, got {needs!r:.80}")
        if type(priority) is not int:
            raise InvalidArgument(f"priority must be an int, got {priority!r:.80}")
        for aid, _ in needs:
            a = self._auth(aid)
            if a.alias_of is not None:
                raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; a transaction names canonical ledgers")
            self._require_active(a)
        for _, n in needs:
            _nbytes(n, "nbytes")
        place = None if retry is None else self._place(holder, retry)
        t = self._open_tx(holder, needs, priority, ViewKind.CONTIGUOUS, None, None)
        t.seq = t.id  # a fresh transaction's submit sequence is its own (never reused) id
        if not self._guards.on("ordered_reservation"):  # C4 (negative control): reserved in declared order
            t.needs = tuple(needs)
        if place is not None:
            del self._places[retry]
            if self._guards.on("retry_keeps_identity"):  # C4: the retry takes back its place
                t.seq, t.priority, t.age = place[1:]
        return t.id

    def _place(self, holder: int, retry: object) -> tuple[int, int, int, int]:
        """The intent `retry`: (holder, seq, priority, age), left by an abort of `holder` and not yet retried."""
        place = self._places.get(retry) if type(retry) is int else None
        if place is None:
            if type(retry) is int and 1 <= retry < self._next_tx and retry not in self._txs:
                raise InvalidTransition(f"intent {retry} was already retried (or its transaction committed)")
            raise UnknownIntent(f"intent {retry!r} was never left by an abort")
        if place[0] != holder:
            raise ForeignHolder(f"intent {retry} belongs to holder {place[0]}, not {holder}")
        return place

    def reserve_tx(self, tx: int) -> int:
        """Reserve the next need (lowest authority id not yet held): granted now or CapacityDenied now."""
        return self._run(M.ReserveTx, self._ms_tx, self._reserve, tx)

    def _reserve(self, tx: int) -> int:
        self._grants()
        t = self._live_tx(tx)
        if len(t.held) == len(t.needs):
            raise InvalidTransition(f"transaction {t.id} already holds every need")
        aid, n = t.needs[len(t.held)]
        a = self._auths[aid]
        self._require_active(a)
        if n > self._headroom(a):
            raise CapacityDenied(f"authority {a.id}: {n} B asked, {max(0, a.limit - a.used)} B free (try-only)")
        return self._take(t, a, n).id

    def commit_tx(self, tx: int) -> tuple[int, ...]:
        """Every need held: each reservation becomes a lease of its full bytes; returns their allocation ids."""
        return self._run(M.CommitTx, self._ms_tx, self._commit_tx, tx)

    def _commit_tx(self, tx: int) -> tuple[int, ...]:
        t = self._live_tx(tx)
        if len(t.held) != len(t.needs):
            raise InvalidTransition(f"transaction {t.id} holds {len(t.held)} of {len(t.needs)} needs; it cannot commit")
        self._advance_bundle(t)  # BundlePoisoned before anything moves (I5); else one step with the leases (I10)
        self._unbind(t)  # its execution ends; its own view stays, over the leases (C6)
        self._settle(t)
        for rec in t.held:
            rec.part = None  # the leases are the holder's now
        for v in self._views_of(t):
            if v.lease is not None:
                v.lease.part = v  # but the one under its view stays pinned until DropView (C6)
        return tuple(rec.id for rec in t.held)

    def abort_tx(self, tx: int) -> int:
        """Cancel every held reservation, each credited once (I5); returns the bytes credited."""
        return self._run(M.AbortTx, self._ms_tx, self._abort_tx, tx)

    def _abort_tx(self, tx: int) -> int:
        t = self._live_tx(tx)
        before: dict[int, int] = {}
        credited, _ = self._unwind(t, None, before)
        self._places[t.id] = (t.holder, t.seq, t.priority, min(t.age + 1, self._bound))  # its place, 0 B (C4)
        self._rounds(before)
        return credited

    def reserve_all(self, tx: int) -> tuple[int, ...]:
        """Reserve every remaining need now, in order; on a refusal abort the transaction and re-raise."""
        try:
            while True:
                with self._lock:
                    t = self._txs.get(tx) if type(tx) is int else None
                    done = t is not None and len(t.held) == len(t.needs)
                    held = tuple(r.id for r in t.held) if done else ()
                if done:
                    return held
                self.reserve_tx(tx)
        except CapacityDenied:
            self.abort_tx(tx)
            raise

    def _tx_parts(self, txs: Any, wrap: Any) -> dict[str, Any]:
        """The refinement mapping of the transaction part: `txs` as `Manager.txs`, every intent, the poison flag."""
        return {"txs": wrap({t.id: M.Tx(t.id, t.holder, t.needs, tuple(r.id for r in t.held), t.bundle, t.seq,
                                        t.priority, t.age) for t in txs}),
                "intents": wrap({i: M.Intent(i, *p) for i, p in self._places.items()}), "poisoned": self._poisoned}

    def _live_tx(self, tx: object) -> _Tx:
        if type(tx) is not int or not 1 <= tx < self._next_tx:
            raise UnknownTransaction(f"transaction {tx!r} was never planned")
        t = self._txs.get(tx)
        if t is None:
            raise InvalidTransition(f"transaction {tx} was already committed or aborted")
        return t

    # --- the focused front end (spec.transactions) --------------------------------

    def tx_plan(self, holder: int, needs: Any, priority: int, kind: ViewKind, bundle: int | None = None,
                retry: int | None = None) -> int:
        """Open a transaction for `holder`; all waiting and quota negotiation must already be done (C4)."""
        return self._run_tx(T.Plan(needs, priority, kind, bundle, retry), self._tx_plan, holder, needs, priority,
                            kind, bundle, retry)

    def _tx_plan(self, holder: int, needs: Any, priority: Any, kind: Any, bundle: Any, retry: Any) -> int:
        self._holder(holder)
        if type(needs) is not tuple or not 1 <= len(needs) <= _MAX_NEEDS:
            raise InvalidArgument(f"needs must be a tuple of 1..{_MAX_NEEDS} (authority, bytes) pairs, got {needs!r:.80}")
        for pair in needs:
            if type(pair) is not tuple or len(pair) != 2:
                raise InvalidArgument(f"needs must hold (authority, bytes) pairs, got {pair!r:.80}")
            _int_id(pair[0], "needs authority")
            _nbytes(pair[1], "needs bytes")
        if len({a for a, _ in needs}) != len(needs):
            raise InvalidArgument(f"needs name an authority twice: {[a for a, _ in needs]}")
        if type(priority) is not int or not 0 <= priority <= _MAX_PRIORITY:
            raise InvalidArgument(f"priority must be an int in [0, {_MAX_PRIORITY}], got {priority!r}")
        if not isinstance(kind, ViewKind):
            raise InvalidArgument(f"kind must be a ViewKind, got {kind!r}")
        if bundle is not None:
            _int_id(bundle, "bundle")
        if retry is not None:
            _int_id(retry, "retry")
        self._grants()
        auths = [self._tx_auth(a) for a, _ in needs]
        b = None if bundle is None else self._bundle(bundle)
        if retry is not None and retry not in self._intents:
            if 1 <= retry < self._next_intent:
                raise InvalidTransition(f"intent {retry} is already used by a retry")
            raise UnknownIntent(f"intent {retry!r} is not known")
        for a in auths:
            if a.alias_of is not None:
                raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; a transaction names canonical ledgers")
            self._live(a)
        if b is not None and b.poisoned:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; the engine must rebuild it")
        for a, (_, n) in zip(auths, needs):
            if n > a.capacity:
                raise CapacityDenied(f"authority {a.id}: {n} B needed, capacity is {a.capacity} B")
        return self._open_tx(holder, needs, priority, kind, bundle, retry, retries=True).id

    def tx_reserve(self, tx: int, authority: int) -> int | None:
        """Try-reserve one authority; None when held, else the transaction aborted and this is its intent (C4)."""
        return self._run_tx(T.Reserve(tx, authority), self._tx_reserve, tx, authority)

    def _tx_reserve(self, tx: Any, authority: Any) -> int | None:
        _int_id(tx, "tx")
        _int_id(authority, "authority")
        self._grants()
        t = self._any_tx(tx)
        a = self._tx_auth(authority)
        if a.id not in t.need:
            raise InvalidArgument(f"transaction {t.id} does not need authority {a.id}")
        held = [r.auth.id for r in self._live_held(t)]
        if a.id in held:
            raise InvalidTransition(f"transaction {t.id} already holds authority {a.id}")
        self._live(a)
        self._phase(t, _RESERVABLE, "reserve-last" if len(held) + 1 == len(t.needs) else "reserve")
        lowest = min(x for x in t.need if x not in held)
        if a.id != lowest and self._guards.on("ordered_reservation"):  # C4
            raise ReservationOrder(f"transaction {t.id} must reserve authority {lowest} before {a.id}")
        n = t.need[a.id]
        if n > self._headroom(a):
            before: dict[int, int] = {}
            _, iid = self._unwind(t, None, before)  # try-only: a miss releases everything (C4)
            self._rounds(before)
            return iid
        self._take(t, a, n)
        return None

    def tx_commit(self, tx: int) -> None:
        """End the execution and commit: the lease set stays the transaction's; the bundle advances as one (I10)."""
        return self._run_tx(T.Commit(tx), self._tx_commit, tx)

    def _tx_commit(self, tx: Any) -> None:
        t = self._any_tx(_int_id(tx, "tx"))
        self._phase(t, (_P.EXECUTING,), "commit")
        self._advance_bundle(t)
        self._unbind(t)
        self._settle(t)
        self._settled[t.id] = t

    def tx_abort(self, tx: int) -> int:
        """Pre-commit failure: release everything exactly and return the retry intent (I5)."""
        return self._run_tx(T.Abort(tx), self._tx_abort, tx)

    def _tx_abort(self, tx: Any) -> int:
        t = self._any_tx(_int_id(tx, "tx"))
        self._phase(t, _ABORTABLE, "abort")
        before: dict[int, int] = {}
        _, iid = self._unwind(t, None, before)
        self._rounds(before)
        return iid

    def tx_release(self, tx: int) -> None:
        """Return a committed lease set and drop its views (refused while another execution binds one)."""
        return self._run_tx(T.Release(tx), self._tx_release, tx)

    def _tx_release(self, tx: Any) -> None:
        t = self._any_tx(_int_id(tx, "tx"))
        self._phase(t, (_P.COMMITTED,), "release")
        for v in self._views_of(t):
            if v.users:
                raise ViewInUse(f"view {v.id} of transaction {t.id} is bound to execution(s) {sorted(v.users)}")
        before: dict[int, int] = {}
        for rec in t.held:
            rec.part = None
            if self._allocs.get(rec.id) is rec and rec.state is not _LOST:
                before.setdefault(rec.auth.id, rec.auth.limit - rec.auth.used)
                self._retire(rec)  # a lost device's lease stays charged until termination (C3)
        self._drop_views(t)
        del self._settled[t.id]
        self._rounds(before)

    def _tx_pins(self, a: _Auth) -> tuple[list[str], set[int]]:
        """What pins ledger `a` in this part (C3): transactions holding bytes on it or, while open, needing it;
        model views over it. Returns the references and the allocation ids they account for."""
        refs, covered = [], set()
        for t in (*self._txs.values(), *self._settled.values()):
            mine = [r.id for r in self._live_held(t) if r.auth is a]
            covered.update(r.id for r in t.held if r.auth is a and r.state is not _LOST)
            if mine or (a.id in t.need and t.phase is not _P.COMMITTED):
                refs.append(f"transaction {t.id}")
        refs += [f"view {v.id}" for v in self._mviews.values() if v.authority == a.id]
        return refs, covered

    # --- focused lookups and checks (validation steps 2-5) ------------------------

    def _any_tx(self, tid: int) -> _Tx:
        t = self._txs.get(tid)
        if t is None:
            t = self._settled.get(tid)
        if t is None:
            if 1 <= tid < self._next_tx:
                raise InvalidTransition(f"transaction {tid} is already aborted or released")
            raise UnknownTransaction(f"transaction {tid!r} is not known")
        return t

    def _tx_auth(self, aid: object) -> _Auth:
        _int_id(aid, "authority")
        return self._auth(aid)  # a removed id is refused as retired (InvalidTransition)

    def _live_held(self, t: _Tx) -> list[_Alloc]:
        """What `t` holds now: its records still charged on a live context (a lost one's are stranded, C3)."""
        return [r for r in t.held if self._allocs.get(r.id) is r and r.state is not _LOST]

    def _grants(self) -> None:
        if self._poisoned and self._guards.on("poisoned_manager_refuses"):  # I5: a poisoned manager grants nothing
            raise ManagerPoisoned("the ledger was found corrupt; the manager grants nothing")

    @staticmethod
    def _live(a: _Auth) -> None:
        if a.context is not ContextState.ACTIVE:  # C3: a lost or terminated context admits no new work
            raise DeviceLost(f"authority {a.id} ({a.pool}) context is {a.context.value}")

    @staticmethod
    def _phase(t: _Tx, accepts: tuple[TxPhase, ...], event: str) -> None:
        if t.phase not in accepts:
            raise InvalidTransition(f"transaction {t.id}: no transition for event {event!r} in phase {t.phase.value!r}")
