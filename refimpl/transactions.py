"""`CapacityTransactionCoordinator`: the concrete, thread-safe transaction coordinator.

Owns capacity transactions across several authorities (device, host,
staging): plan -> try-reserve in stable authority-id order -> provisional
view -> execute -> commit, with exact abort, zero-byte retry intents, model
views keyed (allocation id, mapping generation), state bundles, provider
pinning, device loss and idempotent termination, and the failure scope of
I5 (poisoned bundle, poisoned manager).

A second, independent implementation of `spec.transactions`: mutable
records and its own guards and phase encoding, sharing only vocabulary
(enums, errors, value types) with the spec. `abstract()` is the refinement
mapping to `spec.transactions.TxState`.

Concurrency: one lock, held only for the bookkeeping of one operation.
Reservations are try-only: nothing here waits, sleeps or calls out (C4, I7),
so two transactions can never wait on each other while holding. Waiting for
capacity happens in the caller, holding nothing, before `plan`.

Contracts: when `invariants.contracts` is on, each operation checks the
transaction predicates on the abstraction it produced (the model is small,
so the full conjunction is affordable in debug builds), and a refused one
must leave the abstraction unchanged (G4). Off, the cost is one flag read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import immutables

from invariants._violation import InvariantViolation
from invariants.contracts import SWITCH as _SWITCH
from invariants.transactions import check_all, check_step
from spec import tx_actions as T
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    GovernorError,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ManagerPoisoned,
    ProviderPinned,
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
from spec.transactions import Bundle, Intent, Transaction, TxAuthority, TxState, View
from spec.tx_lifecycle import BundlePart, BundleState, ManagerState, TxPhase, ViewKind, ViewState
from spec.types import MAX_BYTES, ContextState

__all__ = ["CapacityTransactionCoordinator"]

R = TypeVar("R")
_P = TxPhase
# Phases each operation accepts (refimpl's own encoding of the transaction lifecycle).
_RESERVABLE = (_P.PLANNED, _P.RESERVING)
_EXECUTABLE = (_P.PUBLISHED, _P.EXECUTING)
_ABORTABLE = (_P.PLANNED, _P.RESERVING, _P.RESERVED, _P.PUBLISHED, _P.EXECUTING)
_MAX_NEEDS, _MAX_PRIORITY = 8, 9


class _Auth:
    __slots__ = ("id", "name", "capacity", "used", "stranded", "context")

    def __init__(self, id: int, name: str, capacity: int) -> None:
        self.id, self.name, self.capacity = id, name, capacity
        self.used = self.stranded = 0
        self.context = ContextState.ACTIVE


class _Tx:
    __slots__ = ("id", "seq", "priority", "age", "needs", "need", "held", "phase", "bundle", "kind", "bound")

    def __init__(self, id: int, seq: int, priority: int, age: int, needs: list[tuple[int, int]],
                 bundle: int | None, kind: ViewKind) -> None:
        self.id, self.seq, self.priority, self.age = id, seq, priority, age
        self.needs = needs
        self.need = dict(needs)
        self.held: dict[int, int] = {}  # insertion order == reservation order
        self.phase = _P.PLANNED
        self.bundle, self.kind = bundle, kind
        self.bound: dict[int, int] = {}  # view -> generation, in binding order


class _View:
    __slots__ = ("id", "allocation", "authority", "kind", "generation", "state", "users")

    def __init__(self, id: int, allocation: int, authority: int, kind: ViewKind) -> None:
        self.id, self.allocation, self.authority, self.kind = id, allocation, authority, kind
        self.generation = 1
        self.state = ViewState.MAPPED
        self.users: set[int] = set()


class _Bundle:
    __slots__ = ("id", "versions", "poisoned")

    def __init__(self, id: int) -> None:
        self.id = id
        self.versions = [0] * len(BundlePart)
        self.poisoned = False


def _int_id(v: object, what: str) -> int:
    if type(v) is not int:
        raise InvalidArgument(f"{what} must be an int id, got {v!r}")
    return v


def _nbytes(n: object, what: str) -> int:
    if type(n) is not int:
        raise InvalidBytes(f"{what} must be an int, got {type(n).__name__}")
    if n <= 0 or n > MAX_BYTES:
        raise InvalidBytes(f"{what} must be in [1, 2**63-1], got {n}")
    return n


class CapacityTransactionCoordinator:
    """Ordered, try-only, exactly-aborting capacity transactions over several authorities (C4)."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self._g = guards
        self._lock = threading.Lock()
        self._auths: dict[int, _Auth] = {}
        self._by_name: dict[str, int] = {}
        self._txs: dict[int, _Tx] = {}
        self._views: dict[int, _View] = {}
        self._bundles: dict[int, _Bundle] = {}
        self._intents: dict[int, tuple[int, int, int]] = {}  # id -> (seq, priority, age), no bytes
        self._poisoned = False
        self._n_auth = self._n_tx = self._n_view = self._n_bundle = self._n_intent = self._n_seq = 1

    # --- the checked-operation wrapper -------------------------------------

    def _run(self, action: Any, fn: Callable[..., R], *args: Any) -> R:
        with self._lock:
            if not _SWITCH.on:
                return fn(*args)
            before = self._abstract()
            try:
                result = fn(*args)
            except GovernorError:
                if self._abstract() != before:
                    raise InvariantViolation("G4", f"{action!r} was refused but changed the coordinator") from None
                raise
            after = self._abstract()
            check_step(before, action, after)
            check_all(after)
            return result

    # --- lookups (validation steps 3-4) ------------------------------------

    def _find(self, table: dict, key: object, nxt: int, what: str, unknown: type, retired: str) -> Any:
        r = table.get(key) if type(key) is int else None
        if r is None:
            if type(key) is int and 1 <= key < nxt:
                raise InvalidTransition(f"{what} {key} is {retired}")
            raise unknown(f"{what} {key!r} is not known")
        return r

    def _auth(self, aid: object) -> _Auth:
        return self._find(self._auths, aid, self._n_auth, "authority", UnknownAuthority, "removed")

    def _tx(self, tid: object) -> _Tx:
        return self._find(self._txs, tid, self._n_tx, "transaction", UnknownTransaction, "already aborted or released")

    def _view(self, vid: object) -> _View:
        return self._find(self._views, vid, self._n_view, "view", UnknownView, "already dropped")

    def _grants(self) -> None:
        # I5: a poisoned manager grants nothing.
        if self._poisoned and self._g.on("poisoned_manager_refuses"):
            raise ManagerPoisoned("the ledger was found corrupt; the manager grants nothing")

    @staticmethod
    def _live(a: _Auth) -> None:
        # C3: a lost or terminated context admits no new work.
        if a.context is not ContextState.ACTIVE:
            raise DeviceLost(f"authority {a.id} ({a.name}) context is {a.context.value}")

    @staticmethod
    def _phase(t: _Tx, accepts: tuple[TxPhase, ...], event: str) -> None:
        if t.phase not in accepts:
            raise InvalidTransition(f"transaction {t.id}: no transition for event {event!r} in phase {t.phase.value!r}")

    # --- registration, bundles, poisoning ----------------------------------

    def add_authority(self, name: str, capacity: int) -> int:
        """The authority called `name` (registered on first use); its id is its place in the order."""
        return self._run(T.AddAuthority(name, capacity), self._add_authority, name, capacity)

    def _add_authority(self, name: str, capacity: int) -> int:
        if type(name) is not str or not name:
            raise InvalidArgument(f"name must be a non-empty str, got {name!r}")
        _nbytes(capacity, "capacity")
        if name in self._by_name:
            return self._by_name[name]
        aid, self._n_auth = self._n_auth, self._n_auth + 1
        self._auths[aid] = _Auth(aid, name, capacity)
        self._by_name[name] = aid
        return aid

    def _pins(self, aid: int) -> list[str]:
        refs = []
        for t in self._txs.values():
            if aid in t.held or (aid in t.need and t.phase is not _P.COMMITTED):
                refs.append(f"transaction {t.id}")
        refs += [f"view {v.id}" for v in self._views.values() if v.authority == aid]
        if self._auths[aid].stranded:
            refs.append(f"{self._auths[aid].stranded} B stranded charge")
        return refs

    def remove_authority(self, authority: int) -> None:
        """Deregister a provider; refused while a lease, reservation, view or stranded charge pins it (C3)."""
        return self._run(T.RemoveAuthority(authority), self._remove_authority, authority)

    def _remove_authority(self, authority: int) -> None:
        a = self._auth(authority)
        refs = self._pins(a.id)
        if refs and self._g.on("provider_pinned"):  # C3
            raise ProviderPinned(f"authority {a.id} is pinned by {', '.join(refs)}")
        del self._auths[a.id]
        del self._by_name[a.name]

    def open_bundle(self) -> int:
        return self._run(T.OpenBundle(), self._open_bundle)

    def _open_bundle(self) -> int:
        bid, self._n_bundle = self._n_bundle, self._n_bundle + 1
        self._bundles[bid] = _Bundle(bid)
        return bid

    def report_mismatch(self, bundle: int) -> None:
        """A post-commit state/view disagreement: poison that bundle only (I5)."""
        return self._run(T.ReportMismatch(bundle), self._report_mismatch, bundle)

    def _report_mismatch(self, bundle: int) -> None:
        b = self._find(self._bundles, bundle, self._n_bundle, "bundle", UnknownBundle, "gone")
        b.poisoned = True

    def corrupt_ledger(self) -> None:
        """The shared ledger was found corrupt: poison the manager (I5)."""
        return self._run(T.CorruptLedger(), self._corrupt_ledger)

    def _corrupt_ledger(self) -> None:
        self._poisoned = True

    # --- the transaction ----------------------------------------------------

    def plan(self, needs: Any, priority: int, kind: ViewKind, bundle: int | None = None,
             retry: int | None = None) -> int:
        """Open a transaction; all waiting and quota negotiation must already be done (C4)."""
        return self._run(T.Plan(needs, priority, kind, bundle, retry), self._plan, needs, priority, kind, bundle, retry)

    def _plan(self, needs: Any, priority: int, kind: ViewKind, bundle: Any, retry: Any) -> int:
        if type(needs) is not tuple or not 1 <= len(needs) <= _MAX_NEEDS:
            raise InvalidArgument(f"needs must be a tuple of 1..{_MAX_NEEDS} (authority, bytes) pairs, got {needs!r}")
        parsed: list[tuple[int, int]] = []
        for pair in needs:
            if type(pair) is not tuple or len(pair) != 2:
                raise InvalidArgument(f"needs must hold (authority, bytes) pairs, got {pair!r}")
            parsed.append((_int_id(pair[0], "needs authority"), _nbytes(pair[1], "needs bytes")))
        if len({a for a, _ in parsed}) != len(parsed):
            raise InvalidArgument(f"needs name an authority twice: {[a for a, _ in parsed]}")
        if type(priority) is not int or not 0 <= priority <= _MAX_PRIORITY:
            raise InvalidArgument(f"priority must be an int in [0, {_MAX_PRIORITY}], got {priority!r}")
        if not isinstance(kind, ViewKind):
            raise InvalidArgument(f"kind must be a ViewKind, got {kind!r}")
        if bundle is not None:
            _int_id(bundle, "bundle")
        if retry is not None:
            _int_id(retry, "retry")
        self._grants()
        auths = [self._auth(a) for a, _ in parsed]
        b = None if bundle is None else self._find(self._bundles, bundle, self._n_bundle, "bundle", UnknownBundle, "gone")
        intent = None if retry is None else self._find(self._intents, retry, self._n_intent, "intent", UnknownIntent,
                                                      "already used by a retry")
        for a in auths:
            self._live(a)
        if b is not None and b.poisoned:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; the engine must rebuild it")
        for a, (_, n) in zip(auths, parsed):
            if n > a.capacity:
                raise CapacityDenied(f"authority {a.id}: {n} B needed, capacity is {a.capacity} B")
        if intent is not None and self._g.on("retry_keeps_identity"):  # C4
            seq, priority, age = intent
        else:
            seq, age = self._n_seq, 0
            self._n_seq += 1
        if intent is not None:
            del self._intents[retry]
        tid, self._n_tx = self._n_tx, self._n_tx + 1
        self._txs[tid] = _Tx(tid, seq, priority, age, parsed, bundle, kind)
        return tid

    def reservation_order(self, tx: int) -> list[int]:
        """The authorities `tx` still needs, in the order this coordinator takes them."""
        with self._lock:
            t = self._tx(tx)
            todo = [a for a, _ in t.needs if a not in t.held]
            return sorted(todo) if self._g.on("ordered_reservation") else todo

    def reserve(self, tx: int, authority: int) -> int | None:
        """Try-reserve one authority; None when held, else the transaction aborted and this is its intent."""
        return self._run(T.Reserve(tx, authority), self._reserve, tx, authority)

    def _reserve(self, tx: Any, authority: Any) -> int | None:
        _int_id(tx, "tx")
        _int_id(authority, "authority")
        self._grants()
        t = self._tx(tx)
        a = self._auth(authority)
        if a.id not in t.need:
            raise InvalidArgument(f"transaction {t.id} does not need authority {a.id}")
        if a.id in t.held:
            raise InvalidTransition(f"transaction {t.id} already holds authority {a.id}")
        self._live(a)
        self._phase(t, _RESERVABLE, "reserve-last" if len(t.held) + 1 == len(t.needs) else "reserve")
        lowest = min(x for x in t.need if x not in t.held)
        if a.id != lowest and self._g.on("ordered_reservation"):  # C4
            raise ReservationOrder(f"transaction {t.id} must reserve authority {lowest} before {a.id}")
        n = t.need[a.id]
        if a.used + n > a.capacity:
            return self._abort_tx(t, None)  # try-only: a miss releases everything (C4)
        a.used += n
        t.held[a.id] = n
        t.phase = _P.RESERVED if len(t.held) == len(t.needs) else _P.RESERVING
        return None

    def reserve_all(self, tx: int) -> int | None:
        """Reserve every need in this coordinator's order; None when all held, else the retry intent."""
        for aid in self.reservation_order(tx):
            intent = self.reserve(tx, aid)
            if intent is not None:
                return intent
        return None

    def _abort_tx(self, t: _Tx, lost: int | None) -> int:
        for i, (aid, n) in enumerate(list(t.held.items())):
            if i > 0 and not self._g.on("full_abort"):  # I5
                continue
            a = self._auths[aid]
            if aid == lost and self._g.on("refund_after_termination"):  # C3
                a.stranded += n
            else:
                a.used -= n
        for vid in t.bound:
            self._views[vid].users.discard(t.id)
        for vid in [v.id for v in self._views.values() if v.allocation == t.id]:
            del self._views[vid]
        del self._txs[t.id]
        iid, self._n_intent = self._n_intent, self._n_intent + 1
        self._intents[iid] = (t.seq, t.priority, t.age + 1)
        return iid

    def publish(self, tx: int) -> int:
        """Publish the provisional view over the transaction's allocation (C4: only when all held)."""
        return self._run(T.Publish(tx), self._publish, tx)

    def _publish(self, tx: Any) -> int:
        t = self._tx(_int_id(tx, "tx"))
        if self._g.on("publish_after_all_held") or t.phase not in _RESERVABLE:
            self._phase(t, (_P.RESERVED,), "publish")  # C4: only once every need is held
        t.phase = _P.PUBLISHED
        vid, self._n_view = self._n_view, self._n_view + 1
        self._views[vid] = _View(vid, t.id, min(t.need), t.kind)
        return vid

    def execute(self, tx: int, view: int, generation: int) -> None:
        """Bind view (id, generation) to the transaction's execution (C6)."""
        return self._run(T.Execute(tx, view, generation), self._execute, tx, view, generation)

    def _execute(self, tx: Any, view: Any, generation: Any) -> None:
        _int_id(tx, "tx")
        _int_id(view, "view")
        if type(generation) is not int or generation < 1:
            raise InvalidArgument(f"generation must be an int >= 1, got {generation!r}")
        t = self._tx(tx)
        v = self._view(view)
        if v.state is not ViewState.MAPPED:
            raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
        self._phase(t, _EXECUTABLE, "execute")
        if v.allocation != t.id and self._txs[v.allocation].phase is not _P.COMMITTED:
            raise InvalidArgument(f"view {v.id} is the provisional view of transaction {v.allocation}")
        if v.id in t.bound:
            raise InvalidTransition(f"transaction {t.id} already binds view {v.id}")
        if generation != v.generation and self._g.on("current_generation"):  # C6
            raise StaleGeneration(f"view {v.id} is at generation {v.generation}, not {generation}")
        t.phase = _P.EXECUTING
        t.bound[v.id] = generation
        v.users.add(t.id)

    def commit(self, tx: int) -> None:
        """End the execution and commit; the bundle advances as one unit (I10)."""
        return self._run(T.Commit(tx), self._commit, tx)

    def _commit(self, tx: Any) -> None:
        t = self._tx(_int_id(tx, "tx"))
        self._phase(t, (_P.EXECUTING,), "commit")
        if t.bundle is not None:
            b = self._bundles[t.bundle]
            if b.poisoned:
                raise BundlePoisoned(f"bundle {b.id} is poisoned; abort and rebuild")
            if self._g.on("atomic_bundle"):  # I10
                b.versions = [x + 1 for x in b.versions]
            else:
                b.versions[0] += 1
        for vid in t.bound:
            self._views[vid].users.discard(t.id)
        t.bound = {}
        t.phase = _P.COMMITTED

    def abort(self, tx: int) -> int:
        """Pre-commit failure: release everything exactly and return the retry intent (I5)."""
        return self._run(T.Abort(tx), self._abort, tx)

    def _abort(self, tx: Any) -> int:
        t = self._tx(_int_id(tx, "tx"))
        self._phase(t, _ABORTABLE, "abort")
        return self._abort_tx(t, None)

    def release(self, tx: int) -> None:
        """Return a committed lease set and drop its views (refused while another execution binds one)."""
        return self._run(T.Release(tx), self._release, tx)

    def _release(self, tx: Any) -> None:
        t = self._tx(_int_id(tx, "tx"))
        self._phase(t, (_P.COMMITTED,), "release")
        mine = [v for v in self._views.values() if v.allocation == t.id]
        for v in mine:
            if v.users:
                raise ViewInUse(f"view {v.id} of transaction {t.id} is bound to execution(s) {sorted(v.users)}")
        for aid, n in t.held.items():
            self._auths[aid].used -= n
        for v in mine:
            del self._views[v.id]
        del self._txs[t.id]

    def remap(self, view: int) -> int:
        """Advance a view's mapping generation; only while no execution uses it (I9)."""
        return self._run(T.Remap(view), self._remap, view)

    def _remap(self, view: Any) -> int:
        v = self._view(_int_id(view, "view"))
        if v.state is not ViewState.MAPPED:
            raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
        if v.users and self._g.on("remap_when_idle"):  # I9
            raise ViewInUse(f"view {v.id} is bound to execution(s) {sorted(v.users)}")
        v.generation += 1
        return v.generation

    # --- device loss and termination (C3) ------------------------------------

    def lose_device(self, authority: int) -> None:
        """Context lost: abort the work touching it, invalidate its views, refund nothing (C3)."""
        return self._run(T.LoseDevice(authority), self._lose_device, authority)

    def _lose_device(self, authority: Any) -> None:
        a = self._auth(_int_id(authority, "authority"))
        if a.context is not ContextState.ACTIVE:
            return None  # lost stays lost, terminated stays terminated
        on_lost = {v.id for v in self._views.values() if v.authority == a.id}
        for tid in sorted(self._txs):
            t = self._txs[tid]
            if t.phase is not _P.COMMITTED and (a.id in t.need or on_lost.intersection(t.bound)):
                self._abort_tx(t, a.id)
        for t in self._txs.values():
            n = t.held.pop(a.id, 0) if t.phase is _P.COMMITTED else 0
            if n:
                if self._g.on("refund_after_termination"):  # C3
                    a.stranded += n
                else:
                    a.used -= n
        a.context = ContextState.LOST
        for v in self._views.values():
            if v.authority == a.id:
                v.state, v.users = ViewState.INVALID, set()

    def confirm_termination(self, authority: int) -> None:
        """The lost context is gone: refund its stranded charge, once; repeats are no-ops."""
        return self._run(T.ConfirmTermination(authority), self._confirm_termination, authority)

    def _confirm_termination(self, authority: Any) -> None:
        a = self._auth(_int_id(authority, "authority"))
        if a.context is ContextState.ACTIVE:
            raise InvalidTransition(f"authority {a.id}: no transition for event 'confirm-termination' in state 'active'")
        if a.context is ContextState.LOST:
            a.used -= a.stranded
            a.stranded = 0
            a.context = ContextState.TERMINATED

    # --- the refinement mapping -----------------------------------------------

    def abstract(self) -> TxState:
        """This coordinator's state as `spec.transactions.TxState`."""
        with self._lock:
            return self._abstract()

    def _abstract(self) -> TxState:
        auths = {a.id: TxAuthority(a.id, a.name, a.capacity, a.used, a.stranded, a.context)
                 for a in self._auths.values()}
        txs = {t.id: Transaction(t.id, t.seq, t.priority, t.age, tuple(t.needs), tuple(t.held.items()), t.phase,
                                 t.bundle, t.kind, tuple(t.bound.items())) for t in self._txs.values()}
        views = {v.id: View(v.id, v.allocation, v.authority, v.kind, v.generation, v.state, tuple(sorted(v.users)))
                 for v in self._views.values()}
        bundles = {b.id: Bundle(b.id, tuple(b.versions), BundleState.POISONED if b.poisoned else BundleState.ACTIVE)
                   for b in self._bundles.values()}
        intents = {i: Intent(i, *x) for i, x in self._intents.items()}
        return TxState(immutables.Map(auths), immutables.Map(txs), immutables.Map(views), immutables.Map(bundles),
                       immutables.Map(intents), ManagerState.POISONED if self._poisoned else ManagerState.HEALTHY,
                       self._n_auth, self._n_tx, self._n_view, self._n_bundle, self._n_intent, self._n_seq)
