"""The transaction part of `ProcessMemoryManager`: try-only capacity transactions over ledger authorities (C4, I5).

A transaction plans its needs (authority, bytes) and reserves them one at a
time in ascending authority id, each a ledger reservation of the holder,
role STATE, granted now or refused now with `CapacityDenied` (it never
waits, so two transactions never wait on each other while holding). Commit
turns every held reservation into a lease with its full bytes; abort cancels
each, crediting it exactly once. The part keeps only the plan and the links
to its ledger records (`_Alloc.part` is the transaction until it settles).

Waiting for capacity, if a caller wants it, happens before `plan_tx`,
holding nothing (`reserve_all` is the try-everything-now convenience).
"""

from __future__ import annotations

from spec import manager_actions as M
from spec.errors import CapacityDenied, InvalidArgument, InvalidTransition, UnknownTransaction
from spec.types import Origin, Role
from refimpl.manager.ledger import _Alloc, _nbytes

__all__ = ["Transactions"]


class _Tx:
    __slots__ = ("id", "holder", "needs", "held")

    def __init__(self, id: int, holder: int, needs: tuple[tuple[int, int], ...]) -> None:
        self.id, self.holder, self.needs = id, holder, needs
        self.held: list[_Alloc] = []  # held[i] is the reservation for needs[i]

    def __repr__(self) -> str:
        return f"transaction {self.id}"


class Transactions:
    """Capacity transactions; needs the ledger part's tables, lookups, `_enter`, `_commit_rec` and `_retire`."""

    def _init_transactions(self) -> None:
        self._txs: dict[int, _Tx] = {}  # live only
        self._next_tx = 1

    def plan_tx(self, holder: int, needs: tuple[tuple[int, int], ...]) -> int:
        """Plan a transaction; nothing is held yet. Needs are kept in ascending authority id (C4)."""
        return self._run(M.PlanTx, self._ms_plan, self._plan, holder, needs)

    def _plan(self, holder: int, needs: tuple[tuple[int, int], ...]) -> int:
        self._holder(holder)
        if (type(needs) is not tuple or not needs
                or any(type(n) is not tuple or len(n) != 2 for n in needs)):
            raise InvalidArgument(f"needs must be a non-empty tuple of (authority, nbytes) pairs, got {needs!r:.80}")
        # Pairwise equality, not a set: an unhashable authority is then refused by the lookup below.
        if any(needs[i][0] == needs[j][0] for i in range(len(needs)) for j in range(i + 1, len(needs))):
            raise InvalidArgument(f"needs must name distinct authorities, got {needs!r:.80}")
        for aid, _ in needs:
            a = self._auth(aid)
            if a.alias_of is not None:
                raise InvalidArgument(f"authority {a.id} is a view of {a.alias_of}; a transaction names canonical ledgers")
            self._require_active(a)
        for _, n in needs:
            _nbytes(n, "nbytes")
        t = _Tx(self._next_tx, holder, tuple(sorted(needs)))
        self._next_tx += 1
        self._txs[t.id] = t
        return t.id

    def reserve_tx(self, tx: int) -> int:
        """Reserve the next need (lowest authority id not yet held): granted now or CapacityDenied now."""
        return self._run(M.ReserveTx, self._ms_tx, self._reserve, tx)

    def _reserve(self, tx: int) -> int:
        t = self._live_tx(tx)
        if len(t.held) == len(t.needs):
            raise InvalidTransition(f"transaction {t.id} already holds every need")
        aid, n = t.needs[len(t.held)]
        a = self._auths[aid]
        self._require_active(a)
        headroom = a.limit - a.used
        if not self._guards.on("tx_counts_granted"):  # I1, I2 (negative control): granted tickets' bytes look free
            headroom += sum(k.nbytes for k in self._tickets.values() if k.auth is a and k.alloc is not None)
        if n > headroom:
            raise CapacityDenied(f"authority {a.id}: {n} B asked, {max(0, a.limit - a.used)} B free (try-only)")
        rec = self._enter(t.holder, a, a.tier, Role.STATE, n, Origin.GRANTED)
        rec.part = t
        t.held.append(rec)
        return rec.id

    def commit_tx(self, tx: int) -> tuple[int, ...]:
        """Every need held: each reservation becomes a lease of its full bytes; returns their allocation ids."""
        return self._run(M.CommitTx, self._ms_tx, self._commit_tx, tx)

    def _commit_tx(self, tx: int) -> tuple[int, ...]:
        t = self._live_tx(tx)
        if len(t.held) != len(t.needs):
            raise InvalidTransition(f"transaction {t.id} holds {len(t.held)} of {len(t.needs)} needs; it cannot commit")
        del self._txs[t.id]
        for rec in t.held:
            rec.part = None
            self._commit_rec(rec, rec.reserved)
        return tuple(rec.id for rec in t.held)

    def abort_tx(self, tx: int) -> int:
        """Cancel every held reservation, each credited once (I5); returns the bytes credited."""
        return self._run(M.AbortTx, self._ms_tx, self._abort_tx, tx)

    def _abort_tx(self, tx: int) -> int:
        t = self._live_tx(tx)
        before: dict[int, int] = {}
        credited = self._unwind(t, None, before)
        self._rounds(before)
        return credited

    def _unwind(self, t: _Tx, keep: object, before: dict[int, int]) -> int:
        """Retire `t`, cancelling its held reservations except those on ledger `keep`; notes headroom in `before`.

        The caller runs the rounds (once per ledger, after the whole operation)."""
        del self._txs[t.id]
        credited = 0
        for rec in t.held:
            rec.part = None
            a = rec.auth
            if a is keep or rec.id not in self._allocs:
                continue  # on the lost device: stays charged until termination (C3)
            before.setdefault(a.id, a.limit - a.used)
            credited += rec.charge
            self._retire(rec)
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

    def _live_tx(self, tx: object) -> _Tx:
        if type(tx) is not int or not 1 <= tx < self._next_tx:
            raise UnknownTransaction(f"transaction {tx!r} was never planned")
        t = self._txs.get(tx)
        if t is None:
            raise InvalidTransition(f"transaction {tx} was already committed or aborted")
        return t
