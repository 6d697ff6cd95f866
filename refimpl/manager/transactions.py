"""The transaction part of `ProcessMemoryManager`: try-only capacity transactions over ledger authorities (C4, I5).

A transaction plans its needs (authority, bytes) and reserves them one at a
time in ascending authority id, each a ledger reservation of the holder,
role STATE, granted now or refused now (it never waits, so two transactions
never wait on each other while holding). Commit turns every held reservation
into a lease with its full bytes; abort cancels each, crediting it exactly
once, and leaves a zero-byte retry intent (submit sequence, priority, age:
no bytes). The part keeps only the plan and the links to its ledger records
(`_Alloc.part` is the transaction while it owns them).

The operations (`plan_tx`, `reserve_all`, `commit_tx`, `abort_tx`): `reserve_all` takes the spec's
`ReserveTx` steps one at a time, and a miss aborts the transaction; commit hands the leases to the holder;
an abort leaves the transaction's place as a zero-byte retry intent (`_places`). Views and
state bundles are `refimpl.manager.bundles`'.

Waiting for capacity, if a caller wants it, happens before planning, holding
nothing: that is why the single step is no public verb (a caller holding part of
its needs while it waits for the rest is the circle C4 rules out).
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidTransition,
    ManagerPoisoned,
    UnknownIntent,
    UnknownTransaction,
)
from spec.types import Origin, Role, TxPhase
from refimpl.manager.ledger import _Alloc, _Auth, _nbytes
from refimpl.pressure_args import check_priority

__all__ = ["Transactions"]

_P = TxPhase


class _Tx:
    __slots__ = ("id", "holder", "decl", "needs", "need", "held", "seq", "priority", "age", "phase", "bundle", "bound")

    def __init__(self, id: int, holder: int, decl: tuple[tuple[int, int], ...], priority: int) -> None:
        self.id, self.holder, self.decl = id, holder, decl  # decl: the needs in declared order
        self.needs = tuple(sorted(decl))  # ascending authority id: the reservation order (C4)
        self.need = dict(decl)
        self.held: list[_Alloc] = []  # in reservation order: held[i] is the reservation for needs[i]
        self.seq, self.priority, self.age = id, priority, 0  # submit sequence: its own id, never reused
        self.phase = _P.PLANNED
        self.bundle: int | None = None
        self.bound: dict[int, int] = {}  # model view -> generation bound to this execution, in binding order

    def __repr__(self) -> str:
        return f"transaction {self.id}"


class Transactions:
    """Capacity transactions; needs the ledger part's tables, lookups, `_enter`, `_commit_rec` and `_retire`."""

    def _init_transactions(self) -> None:
        self._txs: dict[int, _Tx] = {}  # open only
        self._places: dict[int, tuple[int, int, int, int]] = {}  # retry intents: aborted tx -> (holder, seq, ...)
        self._next_tx = 1

    def _headroom(self, a: _Auth) -> int:
        headroom = self._room(a)
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

    def _unwind(self, t: _Tx, keep: object) -> int:
        """Abort `t`: cancel its held reservations except those on ledger `keep`, drop its views.

        Returns the bytes credited (the caller runs the rounds, `_rounds`, once per ledger, after the whole
        operation)."""
        del self._txs[t.id]
        credited = 0
        for i, rec in enumerate(t.held):
            rec.part = None
            if i > 0 and not self._guards.on("full_abort"):  # I5 (negative control): only the first is returned
                continue
            a = rec.auth
            if a is keep or self._allocs.get(rec.id) is not rec:
                continue  # on the lost device: stays charged until termination (C3)
            credited += rec.charge
            self._retire(rec)
        self._drop_views(t)
        return credited

    # --- the operations (spec.manager) -----------------------------------------------

    def plan_tx(self, holder: int, needs: tuple[tuple[int, int], ...], priority: int = 0,
                retry: int | None = None) -> int:
        """Plan a transaction; nothing is held yet. Needs are kept in ascending authority id (C4). `retry`
        names the intent an abort of this holder left: the new transaction takes back its place."""
        return self._run(M.PlanTx, self._ms_plan, self._plan, holder, needs, priority, retry)

    def _plan(self, holder: int, needs: tuple[tuple[int, int], ...], priority: int, retry: int | None) -> int:
        self._grants()
        # The arguments first, before any state is looked at (the spec's order for ill-typed input).
        if (type(needs) is not tuple or not needs
                or any(type(n) is not tuple or len(n) != 2 or type(n[0]) is not int or type(n[1]) is not int
                       for n in needs)):
            raise InvalidArgument(f"needs must be a non-empty tuple of (int authority, int nbytes) pairs, "
                                  f"got {needs!r:.80}")
        if len({aid for aid, _ in needs}) != len(needs):
            raise InvalidArgument(f"needs must name distinct authorities, got {needs!r:.80}")
        check_priority(priority)
        for _, n in needs:
            _nbytes(n, "nbytes")
        self._holder(holder)
        for aid, _ in needs:
            a = self._auth(aid)
            if a.alias_of is not None:
                raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; a transaction names canonical ledgers")
            self._require_active(a)
        place = None if retry is None else self._place(holder, retry)
        t = _Tx(self._next_tx, holder, needs, priority)
        self._next_tx += 1
        self._txs[t.id] = t
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

    # The `ReserveTx` step (`reserve_all`'s; the checkers': `refimpl.verify.manager_adapter.reserve_tx`).
    def _reserve(self, tx: int) -> int:
        self._grants()
        t = self._live_tx(tx)
        if len(t.held) == len(t.needs):
            raise InvalidTransition(f"transaction {t.id} already holds every need")
        aid, n = t.needs[len(t.held)]
        a = self._auths[aid]
        self._require_active(a)
        if n > self._headroom(a):
            raise CapacityDenied(f"authority {a.id}: {n} B asked, {max(0, self._room(a))} B free (try-only)")
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
        credited = self._unwind(t, None)
        self._places[t.id] = (t.holder, t.seq, t.priority, min(t.age + 1, self._bound))  # its place, 0 B (C4)
        self._rounds()
        return credited

    def reserve_all(self, tx: int) -> tuple[int, ...]:
        """Reserve every remaining need now, in ascending authority id, each a traced `ReserveTx` step; on a
        refusal (CapacityDenied) abort the transaction (its place stays as a retry intent) and raise it, saying so."""
        try:
            while True:
                with self._lock:
                    t = self._txs.get(tx) if type(tx) is int else None
                    done = t is not None and len(t.held) == len(t.needs)
                    held = tuple(r.id for r in t.held) if done else ()
                if done:
                    return held
                self._run(M.ReserveTx, self._ms_tx, self._reserve, tx)
        except CapacityDenied as e:
            self.abort_tx(tx)
            raise CapacityDenied(f"{e}; transaction {tx} aborted: each reservation it held credited, its place kept as "
                                 "a retry intent (C4)") from e

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

    def _tx_pins(self, a: _Auth) -> tuple[list[str], set[int]]:
        """What pins ledger `a` in this part (C3): transactions holding bytes on it or, while open, needing it;
        model views over it. Returns the references and the allocation ids they account for."""
        refs, covered = [], set()
        for t in self._txs.values():
            covered.update(r.id for r in t.held)  # the caller looks up only a's records, lost ones apart
            if a.id in t.need:
                refs.append(f"transaction {t.id}")
        refs += [f"view {v.id}" for v in self._mviews.values() if v.authority == a.id]
        return refs, covered

    # --- checks shared by the parts ----------------------------------------------

    def _grants(self) -> None:
        if self._poisoned and self._guards.on("poisoned_manager_refuses"):  # I5: a poisoned manager grants nothing
            raise ManagerPoisoned("the ledger was found corrupt; the manager grants nothing")

    @staticmethod
    def _phase(t: _Tx, accepts: tuple[TxPhase, ...], event: str) -> None:
        if t.phase not in accepts:
            raise InvalidTransition(f"transaction {t.id}: no transition for event {event!r} in phase {t.phase.value!r}")
