"""Refinement mappings, contract hooks and trace hooks of `ProcessMemoryManager`.

`_view()` maps the ledger to `spec.ledger_state.State` (the ledger campaign's
target); `_manager_view(None, None)` maps every part to
`spec.manager_actions.Manager`, reading each figure from the one set of
records (no part keeps bytes of its own, so there is nothing to reconcile).
Neither is a verb: checkers and tests read them, under the ledger lock, through
`refimpl.verify.manager_hooks.abstract_ledger` / `abstract_manager`.

Contracts, level "local" (the default): the hot ledger and ticket operations run through `_contract`, which
checks `refimpl.manager.local_contract` on the concrete records they touch (no frozen views). Level "full", every
other operation, and any operation while transactions or pressure tickets are open: ledger operations check
`invariants.ledger.check_local` on a partial view of the records they touch (`_checked`). Composed operations run
through `_run`: off (and untraced) it is the lock, the body and the wake-up; on, a partial `Manager` view of the
authorities and allocations the action touches is taken before and after, a refusal must leave it unchanged (G4),
and `invariants.manager.check_step` / `check_all` run on it when that module exists (it is looked up once per
manager, lazily): the one contract runner, `refimpl.manager.runner.contracted`, as the pool and transaction
operations use it. A trace sink's failure is settled by the recorder (`_Recorder.settle`).

Tracing: `refimpl.tracing.attach` uses the private hooks at the end of this module (`_attach_recorder`,
`_touched`, `_observed`, `_wake_waiters`; with `_lock`, `_recorder` and arbitration's `_take_grants`), none a
public verb. Composed operations emit their own event, numbered under the lock in the ledger's sequence.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

import immutables

from invariants._violation import InvariantViolation
from invariants.contracts import SWITCH as _SWITCH
from invariants.ledger import check_local
from invariants.manager_trace import encode_manager_event
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.ledger_state import Allocation, Allowance, Authority, Holder, State
from spec.types import AllocState
from refimpl.manager import contract_books as _B
from refimpl.manager import local_contract as _L
from refimpl.manager.ledger import _Alloc, _Allow, _Auth
from refimpl.manager.runner import contracted

__all__ = ["Views"]

T = TypeVar("T")
_NO_SCOPE: tuple[frozenset[int], tuple[int, ...]] = (frozenset(), ())


class Views:
    """Mappings and hooks over every part's records (a mixin of the composed manager)."""

    def _init_views(self) -> None:
        self._holder_recs: dict[int, Holder] = {}  # holders never change: one frozen record each
        self._recorder: Any = None
        self._mchecks: Any = None  # invariants.manager once looked up; False when it does not exist
        self._books = _B.Books()  # the local contract's own account of each ledger's rows (contract_books)

    def _holder_rec(self, h: int) -> Holder:
        r = self._holder_recs.get(h)
        if r is None or r.name != self._holders[h]:
            r = self._holder_recs[h] = Holder(h, self._holders[h])
        return r

    def leases(self, holder: int) -> tuple[Allocation, ...]:
        """What `holder` holds: its allocations (provisional, live, quarantined, on a lost device) as the spec's
        records, by id, read under the lock. The holder's reading of its own charges (I6), beside `snapshot`'s
        of an authority's figures."""
        with self._lock:
            self._holder(holder)
            return tuple(_alloc_rec(x) for _, x in sorted(self._allocs.items()) if x.holder == holder)

    def allowances(self, holder: int) -> tuple[Allowance, ...]:
        """`holder`'s open allowances as the spec's records, by id, read under the lock (as `leases`)."""
        with self._lock:
            self._holder(holder)
            return tuple(_allow_rec(w) for _, w in sorted(self._allows.items()) if w.holder == holder)

    # --- local contracts (level "local"): the harms on the concrete records touched, no frozen views ----

    def _contract(self, kind: Any, body: Callable[..., T], args: tuple[Any, ...], extra: tuple[Any, ...] = ()) -> T:
        """A hot operation with contracts on: the local contract (`refimpl.manager.local_contract`), or the
        frozen-view one at level "full", while transactions or pressure tickets are open (their parts'
        predicates) or a process quota is set (its room is a whole tier's) or, for a composed action, while a trace
        recorder is attached (it emits the event)."""
        if self._mailbox:
            self.drain()  # posted cancels first (`Leases.drop`): a dropped ticket is never granted, never kept
        run, cls, scope, composed = kind
        if (_SWITCH.full or self._txs or self._pressures or self._mviews or self._quotas
                or (composed and self._recorder is not None)):
            if composed:
                return self._run_full(cls, getattr(self, scope), body, args)
            return self._checked(cls(*args), getattr(self, scope), args[1], body, *args, *extra)
        try:
            return run(self, body, args, extra)  # takes the ledger lock: reading, body, harms (local_contract)
        except GovernorError:
            raise  # refused, and nothing moved (G4): the books stand
        except BaseException:
            with self._lock:
                self._books.forget()  # a violation, or a body that stopped half way: count again from the rows
            raise
        finally:
            if self._wake:
                self._wake_waiters()

    # --- ledger contracts, level "full" (issue #2: frozen partial views of what the operation touched) ----

    def _checked(self, action: Any, scope: Callable[[Any], tuple[Any, Any, Any]], key: Any,
                 body: Callable[..., T], *args: Any) -> T:
        """Run `body` under the lock, checking the invariants on what it touched; wake granted waiters after."""
        if self._mailbox:
            self.drain()  # posted cancels first, as in `_contract`
        try:
            return self._checked_locked(action, scope, key, body, *args)
        finally:
            with self._lock:
                wake, self._wake = self._wake, []
            self._wake_up(wake)

    def _checked_locked(self, action: Any, scope: Callable[[Any], tuple[Any, Any, Any]], key: Any,
                        body: Callable[..., T], *args: Any) -> T:
        with self._lock:
            auths, allocs, allows = scope(key)
            first_auth, first_alloc, first_allow = self._next_auth, self._next_alloc, self._next_allow
            local = not _SWITCH.full  # level "local": partial views and the books (contract_books); "full": every row
            before = self._partial(auths, allocs, allows)
            # Where other parts have records, a ledger action can reach them (a release runs a round, a loss
            # drops tickets and aborts transactions): then the composed predicates check it too.
            mine = (self._tickets or self._txs or self._pressures or self._mviews) and self._mchecks is not False
            if mine:
                m_auths = self._closed(self._auths[i].alias_of or i for i in auths if i in self._auths)
                m_ids = _B.view_ids(self, m_auths, allocs)  # at level "full" the view holds every row of m_auths anyway
                m_before = self._manager_view(m_auths, m_ids, local)
            try:
                if local:
                    _B.open_books(self, auths)  # m_auths' other ledgers: counted by check_state when first in view
                try:
                    result = body(*args)
                except GovernorError:
                    if self._partial(auths, allocs, allows) != before:  # G4: a refusal changes nothing
                        raise InvariantViolation("G4", f"{action!r} was refused but changed the ledger") from None
                    raise
                new_allocs = list(range(first_alloc, self._next_alloc))
                if isinstance(action, (A.Reserve, A.RecordCommitted)):
                    new_allocs.append(result)  # with fresh_ids off the id may be a reused one
                elif new_allocs:  # grants of rounds the operation ran: only those on the ledgers in view
                    seen = set(auths)
                    new_allocs = [i for i in new_allocs if i in self._allocs and self._allocs[i].auth.id in seen]
                after = self._partial([*auths, *range(first_auth, self._next_auth)], [*allocs, *new_allocs],
                                      [*allows, *range(first_allow, self._next_allow)])
                check_local(before, action, after)
                if mine:
                    # A ledger action gives no part an existing row: the parts' rows after are in m_ids or new.
                    m_after = self._manager_view(m_auths, [*m_ids, *new_allocs, *range(first_alloc, self._next_alloc)],
                                                 local)
                    if local:
                        _B.check_partial(self, m_before, action, m_after, result, m_auths)
                    else:
                        self._check_manager(m_before, action, m_after, result)
                elif local:
                    _B.settle(self, before.allocations, after.allocations, auths)
                if not local:  # level "full": conservation recomputed from every row of each touched ledger
                    for i in {self._auths[i].alias_of or i for i in auths if i in self._auths}:
                        _B.recount(self._auths[i])
                return result
            except BaseException as e:
                if not isinstance(e, GovernorError):  # a violation, or a body stopped half way: count again
                    self._books.forget()
                raise

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

    def _partial(self, auths: Any, allocs: Any, allows: Any, every_holder: bool = False) -> State:
        """A partial abstraction of the touched records (plain dicts: built per operation, never hashed)."""
        a_recs = {i: _auth_rec(self._auths[i]) for i in auths if i in self._auths}
        r_recs = {i: _alloc_rec(self._allocs[i]) for i in allocs if i in self._allocs}
        w_recs = {i: _allow_rec(self._allows[i]) for i in allows if i in self._allows}
        for i in a_recs:  # I4b needs every allowance of a viewed authority
            for w in self._auths[i].allowances.values():
                w_recs[w.id] = _allow_rec(w)
        if every_holder:
            holders: Any = self._holders
        else:
            holders = {r.holder for r in r_recs.values()} | {w.holder for w in w_recs.values()}
        return State(a_recs, {h: self._holder_rec(h) for h in holders if h in self._holders},
                     r_recs, w_recs, self._next_auth, self._next_holder, self._next_alloc, self._next_allow)

    # --- composed operations: lock, body, contracts, trace, wake ----------------

    def _run(self, cls: type, scope: Callable[..., tuple[Any, Any]], body: Callable[..., T], *args: Any) -> T:
        """Run `body(*args)` under the lock as the action `cls(*args)`; wake granted waiters after it."""
        if self._mailbox:
            self.drain()  # posted cancels first, as in `_contract`
        if not _SWITCH.on and self._recorder is None:
            with self._lock:
                result = body(*args)
                wake = self._wake
                if wake:
                    self._wake = []
            if wake:
                self._wake_up(wake)
            return result
        return self._run_checked(cls, scope, body, args)

    def _run_checked(self, cls: type, scope: Callable[..., tuple[Any, Any]], body: Callable[..., T],
                     args: tuple[Any, ...]) -> T:
        kind = _L.COMPOSED.get(cls) if _SWITCH.on else None
        if kind is not None:
            return self._contract(kind, body, args)
        return self._run_full(cls, scope, body, args)

    def _run_full(self, cls: type, scope: Callable[..., tuple[Any, Any]], body: Callable[..., T],
                  args: tuple[Any, ...]) -> T:
        """`_run_checked` with the frozen-view contract (level "full", `runner.contracted`) and the trace event."""
        on, rec = _SWITCH.on, self._recorder
        action = cls(*args)
        error: GovernorError | None = None
        result: Any = None
        with self._lock:
            auths, allocs = scope(*args)
            auths = self._closed(auths)
            first = self._next_alloc
            if rec is not None:
                named, first_bundle = self._bundles_named(action), self._next_bundle
            try:
                if on and _SWITCH.full:
                    mod = self._manager_checks()
                    # Every row of the ledgers `auths` is in view (new ones too): the same view before and after.
                    result = contracted(
                        lambda: self._manager_view(auths, allocs), mod and mod.check_step, mod and mod.check_all,
                        lambda: action, "manager", body, args)
                elif on:  # level "local": partial views of the rows it touches, and the books
                    result = _B.contracted_partial(self, auths, allocs, first, action, body, args)
                else:
                    result = body(*args)
            except GovernorError as e:
                if rec is None:
                    raise
                error = e
            except BaseException:
                self._books.forget()  # a violation, or a body that stopped half way: count again from the rows
                raise
            if rec is not None:
                used = rec.take_grants({i: self._auths[i].used for i in auths if i in self._auths})
                charges = self._charge_figures(allocs, first, rec.pending_grants)
                bundles = self._bundle_figures(named, first_bundle)
                seq = rec.record(lambda s, e: encode_manager_event(rec.source, s, e, action, result, error, used,
                                                                   bundles, charges))
            wake, self._wake = self._wake, []
        self._wake_up(wake)
        if rec is not None:
            return rec.settle(seq, cls.__name__, result, error)  # delivers outside the ledger lock (I7)
        return result

    def _charge_figures(self, allocs: Any, first: int, grants: Any) -> dict[int, int]:
        """The charge of each allocation still held in the operation's scope `allocs` or issued from id `first` on (it
        created or charged those), but its grants': their `grant` events observe them (`refimpl.tracing`)."""
        granted, mine = {g[1] for g in grants}, (*allocs, *range(first, self._next_alloc))
        return {i: self._allocs[i].charge for i in mine if i in self._allocs and i not in granted}

    def _manager_checks(self) -> Any:
        """`invariants.manager` (looked up once per manager), or None where that module does not exist."""
        mod = self._mchecks
        if mod is None:
            try:
                mod = importlib.import_module("invariants.manager")
            except ModuleNotFoundError as e:
                if e.name != "invariants.manager":
                    raise
                mod = False
            self._mchecks = mod
        return mod or None

    def _check_manager(self, before: M.Manager, action: Any, after: M.Manager, result: Any) -> None:
        mod = self._manager_checks()
        if mod is not None:
            mod.check_step(before, action, after, result)
            mod.check_all(after)

    # scopes of composed actions: (canonical authority ids, allocation ids) the action may touch
    def _ms_none(self, *args: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        return _NO_SCOPE

    def _ms_plan(self, holder: object, needs: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        if type(needs) is not tuple:
            return _NO_SCOPE
        auths: frozenset[int] = frozenset()
        for n in needs:
            if type(n) is tuple and len(n) == 2:
                auths |= self._ms_auth_of(n[0])
        return auths, ()

    def _ms_auth_of(self, aid: object) -> frozenset[int]:
        a = self._auths.get(aid) if type(aid) is int else None
        if a is None:
            return frozenset()
        return frozenset({a.id if a.alias_of is None else a.alias_of})

    def _ms_auth0(self, authority: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        return self._ms_auth_of(authority), ()

    def _ms_auth1(self, holder: object, authority: object, *rest: Any) -> tuple[frozenset[int], tuple[int, ...]]:
        return self._ms_auth_of(authority), ()

    def _ms_ticket(self, holder: object, ticket: object) -> tuple[frozenset[int], tuple[int, ...]]:
        t = self._tickets.get(ticket) if type(ticket) is int else None
        if t is None:
            return _NO_SCOPE
        return frozenset({t.auth.id}), ()  # its reservation is a row of that ledger, viewed with the ticket

    def _ms_tx(self, tx: object) -> tuple[frozenset[int], tuple[int, ...]]:
        t = self._txs.get(tx) if type(tx) is int else None
        if t is None:
            return _NO_SCOPE
        return frozenset(aid for aid, _ in t.needs), tuple(r.id for r in t.held)

    def _closed(self, auths: Any) -> frozenset[int]:
        """`auths` closed under transactions: a viewed transaction's ledgers, or one bound to a view over a viewed
        ledger (a loss there aborts it), are viewed too. Computed once before an operation, used for both views."""
        auths = set(auths)
        if self._quotas:  # a quota's room is its whole tier's: every ledger of a tier with one is viewed (I1)
            auths |= {a.id for a in self._auths.values() if a.alias_of is None and a.tier in self._quotas}
        grew = bool(self._txs)
        while grew:
            mv = self._mviews
            more = {aid for t in self._txs.values() if any(x in auths for x, _ in t.needs)
                    or any(v in mv and mv[v].authority in auths for v in t.bound) for aid, _ in t.needs}
            grew = not more <= auths
            auths |= more
        return frozenset(auths)

    def _manager_view(self, auths: Any, allocs: Any, partial: bool = False) -> M.Manager:
        """The `Manager` of every record (auths None) or of the given authorities and allocations only: with
        `partial`, of those allocations only (`contract_books.view_ids`), else of every row of those ledgers."""
        if auths is None:
            ledger = self._view()
            tickets, pressures = self._tickets.values(), self._pressures.values()
            txs = self._txs.values()
            changes = [a for a in self._auths.values() if a.change is not None]
        else:
            # Every allocation and holder of the viewed ledgers: the composed predicates sum per authority
            # (a partial view leaves the sum to the books: contract_books.check_state).
            ids = set(allocs)
            if not partial:
                for i in auths:
                    if i in self._auths:
                        ids.update(self._auths[i].allocs)
            ledger = self._partial(auths, ids, (), every_holder=True)
            tickets = [t for t in self._tickets.values() if t.auth.id in auths]
            pressures = [r for r in self._pressures.values() if r.auth.id in auths]
            txs = [t for t in self._txs.values() if any(aid in auths for aid, _ in t.needs)]
            changes = [self._auths[i] for i in auths if i in self._auths and self._auths[i].change is not None]
        wrap = immutables.Map if auths is None else _same  # partial views: plain dicts, built per check, never hashed
        return M.Manager(
            ledger=ledger, aging_bound=self._bound,
            tickets=wrap({t.id: _ticket_rec(t) for t in tickets}),
            pressures=wrap({r.id: M.Pressure(r.id, r.holder, r.auth.id, r.target, r.change, r.priority,
                                                             r.deadline, r.generation) for r in pressures}),
            **self._tx_parts(txs, wrap),
            changes=wrap({a.id: M.LimitChange(a.id, a.change.target, tuple(a.change.completed)) for a in changes}),
            next_ticket=self._next_ticket, next_pressure=self._next_pressure, next_tx=self._next_tx,
            bundles=wrap({b.id: M.Bundle(b.id, tuple(b.versions), b.poisoned) for b in self._bundles.values()}),
            next_bundle=self._next_bundle,
            uses=wrap({i: (r.pinned, r.in_flight) for i in ledger.allocations
                       if (r := self._allocs[i]).state is AllocState.LIVE and (r.pinned or r.in_flight)}),
            generations=wrap({a.id: a.generation for a in self._auths.values()
                              if a.generation and a.alias_of is None and (auths is None or a.id in auths)}),
            views=wrap(self._view_recs(auths)), next_view=self._next_mview, quotas=wrap(dict(self._quotas)))

    # --- private hooks for refimpl.tracing (checkers and tests: refimpl.verify.manager_hooks) ----------

    def _attach_recorder(self, recorder: Any) -> None:
        """Number every operation's event with `recorder` (`refimpl.tracing`), which names the aging bound; the ledger
        lock becomes re-entrant for the recorder's wrapper, which holds it across a whole ledger operation."""
        self._lock.allow_reentry()
        self._recorder, recorder.aging_bound = recorder, self._bound

    def _wake_waiters(self) -> None:
        """Wake the waiters an operation granted while an outer frame held the lock (call with it released)."""
        with self._lock:
            wake, self._wake = self._wake, []
        self._wake_up(wake)

    def _touched(self, act: Any) -> tuple[set[int], set[int]]:
        """(ledger ids, allocation ids) a ledger action names or may change, read before it runs (caller holds the
        lock): what its event observes, at least `invariants.manager_trace.touched`'s set (an alias's `of` too)."""
        auths: set[int] = set()
        allocs: set[int] = set()
        aid = act.of if isinstance(act, A.RegisterAlias) else getattr(act, "authority", None)
        a = self._auths.get(aid) if type(aid) is int else None
        if a is not None:
            auths.add(a.id)
            if a.alias_of is not None:
                auths.add(a.alias_of)
            if isinstance(act, (A.LoseDevice, A.ConfirmTermination)):
                for i in auths:
                    allocs |= set(self._auths[i].allocs)
                auths |= self._closed(auths)  # a loss aborts transactions: their other ledgers' used moves too
        rid = getattr(act, "allocation", None)
        rec = self._allocs.get(rid) if type(rid) is int else None
        if rec is not None:
            auths.add(rec.auth.id)
            allocs.add(rec.id)
        for field in ("allowance", "source", "target"):
            wid = getattr(act, field, None)
            w = self._allows.get(wid) if type(wid) is int else None
            if w is not None:
                auths.add(w.auth.id)
        return auths, allocs

    def _observed(self, auths: set[int], allocs: set[int], result: Any, act: Any) -> dict[str, dict[int, int]]:
        """`used` of each ledger in `auths`, the charge of each allocation still held, and a registration's physical
        device (C1): the one declared, else its pool's, else the pool (each undeclared pool its own device)."""
        if isinstance(act, (A.Reserve, A.RecordCommitted)) and type(result) is int and result in self._allocs:
            allocs = allocs | {result}  # its ledger (and the one named, through an alias) is in `auths` already
        out: dict[str, Any] = {"used": {i: self._auths[i].used for i in auths if i in self._auths},
                               "charges": {i: self._allocs[i].charge for i in allocs if i in self._allocs}}
        if isinstance(act, A.RegisterAuthority):  # caller holds the lock
            a = self._pools.get(act.pool) if type(act.pool) is str else None
            out["device"] = act.device if act.device is not None else getattr(a, "device", None) or act.pool
        return out

    def _view(self) -> State:
        return State(
            authorities=immutables.Map({i: _auth_rec(a) for i, a in self._auths.items()}),
            holders=immutables.Map({h: self._holder_rec(h) for h in self._holders}),
            allocations=immutables.Map({i: _alloc_rec(r) for i, r in self._allocs.items()}),
            allowances=immutables.Map({i: _allow_rec(w) for i, w in self._allows.items()}),
            next_authority=self._next_auth,
            next_holder=self._next_holder,
            next_allocation=self._next_alloc,
            next_allowance=self._next_allow,
        )


# Frozen records cost microseconds to build (attrs sets each field through object.__setattr__), so each
# concrete record keeps the last one it produced and reuses it while every field that code can change is
# unchanged: a before and an after view share the records an operation did not touch.

def _auth_rec(a: _Auth) -> Authority:
    r = a.rec
    if r is None or r.used != a.used or r.limit != a.limit or r.context is not a.context or r.alias_of != a.alias_of:
        r = a.rec = Authority(a.id, a.pool, a.tier, a.capacity, a.limit, a.alias_of, a.view, a.context, a.used,
                              a.device)
    return r


def _same(d: dict[int, Any]) -> dict[int, Any]:
    return d


def _ticket_rec(t: Any) -> M.Ticket:
    r = t.rec
    alloc = None if t.alloc is None else t.alloc.id
    if r is None or r.age != t.age or r.state is not t.state or r.allocation != alloc:
        r = t.rec = M.Ticket(t.id, t.holder, t.auth.id, t.nbytes, t.priority, t.role, t.age, t.state, alloc,
                             t.generation)
    return r


def _alloc_rec(x: _Alloc) -> Allocation:
    r = x.rec
    if (r is None or r.charge != x.charge or r.state is not x.state or r.nbytes != x.nbytes
            or r.reserved != x.reserved or r.holder != x.holder or r.authority != x.auth.id):
        r = x.rec = Allocation(x.id, x.auth.id, x.holder, x.tier, x.role, x.reserved, x.nbytes, x.charge, x.state,
                               x.origin)
    return r


def _allow_rec(w: _Allow) -> Allowance:
    r = w.rec
    if r is None or r.limit != w.limit or r.reserved != w.reserved or r.mapped != w.mapped or r.holder != w.holder:
        r = w.rec = Allowance(w.id, w.auth.id, w.holder, w.limit, w.reserved, w.mapped)
    return r
