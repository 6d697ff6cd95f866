"""The focused transaction view of `ProcessMemoryManager`: refinement mapping to `spec.transactions` and contracts.

`abstract_tx()` builds `spec.transactions.TxState` by reading the one set of
records: each authority's figures from its ledger (`used` is the ledger's;
`stranded` is the charge of its DEVICE_LOST records, kept until termination
is confirmed), each transaction's holdings from the ledger records it owns
(a record on a lost context is stranded, not held), the model views, bundles
and intents of `refimpl.manager.bundles` / `.transactions`. Nothing here keeps
a figure of its own.

Tracing: the focused operations have no trace revision (`ortmem-tx/1` was
retired, issue #21: `ortmem-manager/2` carries transactions as `plan_tx` ...
`commit_tx`), so on a traced manager they are refused (`InvalidTransition`)
before anything runs: a trace never misses an operation.

Contracts: focused operations run through `_run_tx`. When
`invariants.contracts` is on, the transaction predicates
(`invariants.transactions.check_step` / `check_all`) run on the abstraction
each operation produced, and a refused one must leave it unchanged (G4). Off,
the cost is one flag read. Waiters a credit granted are woken after the lock
is released (I7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import immutables

from invariants.contracts import SWITCH as _SWITCH
from invariants.transactions import check_all, check_step
from spec.errors import InvalidTransition
from spec.transactions_state import Bundle, Intent, Transaction, TxAuthority, TxState, View
from spec.transactions_lifecycle import BundleState, ManagerState
from spec.types import AllocState
from refimpl.manager.runner import contracted

__all__ = ["TxView"]

R = TypeVar("R")
_LOST = AllocState.DEVICE_LOST


def _composed_state(after: Any) -> None:
    from invariants import manager as IM

    IM.check_all(after)


def _tx_step(before: TxState, action: Any, after: TxState, result: Any) -> None:
    check_step(before, action, after)


class TxView:
    """The `spec.transactions` mapping and the focused operations' contract runner (a mixin of the manager)."""

    def abstract_tx(self) -> TxState:
        """This manager's transactions, views, bundles and authorities as `spec.transactions.TxState`."""
        with self._lock:
            return self._tx_view()

    def _run_tx(self, action: Any, body: Callable[..., R], *args: Any) -> R:
        if self._recorder is not None:
            raise InvalidTransition(f"{type(action).__name__}: the focused tx_* operations are not traced "
                                    "(ortmem-tx/1 is retired); a traced manager runs plan_tx ... commit_tx")
        if self._mailbox:
            self.drain()  # posted cancels first (`Leases.drop`): a dropped ticket is never granted, never kept
        # `body(*args)` under the lock; with contracts on, checked as `action` on the whole `TxState`
        # (`runner.contracted` with `invariants.transactions`' step and state predicates).
        try:
            with self._lock:
                if not _SWITCH.on:
                    return body(*args)
                self._books.forget()  # its check keeps no books: the local contract counts every ledger again
                if not self._tx_described():  # other front ends' records: the composed predicates, whole
                    return contracted(lambda: self._manager_view(None, None), None, _composed_state, lambda: action,
                                      "manager", body, args)
                return contracted(self._tx_view, _tx_step, check_all, lambda: action, "manager", body, args)
        finally:
            if self._wake:
                with self._lock:
                    wake, self._wake = self._wake, []
                self._wake_up(wake)

    def _tx_described(self) -> bool:
        """True iff `spec.transactions` describes every ledger whole: each charged row is held by a transaction
        (or stranded on a lost context), no ticket, allowance or lowered limit anywhere."""
        if self._tickets or self._leases or any(a.allowances or a.limit != a.capacity for a in self._auths.values()):
            return False
        held = {r.id for t in (*self._txs.values(), *self._settled.values()) for r in self._live_held(t)}
        return all(r.id in held or r.state is _LOST for r in self._allocs.values())

    def _tx_view(self) -> TxState:
        auths = {}
        for a in self._auths.values():
            if a.alias_of is None:
                stranded = sum(r.charge for r in a.allocs.values() if r.state is _LOST)
                auths[a.id] = TxAuthority(a.id, a.pool, a.capacity, a.used, stranded, a.context)
        txs = {}
        for t in (*self._txs.values(), *self._settled.values()):
            held = tuple((r.auth.id, r.charge) for r in self._live_held(t))
            txs[t.id] = Transaction(t.id, t.seq, t.priority, t.age, t.decl, held, t.phase, t.bundle, t.kind,
                                    tuple(t.bound.items()))
        views = {v.id: View(v.id, v.allocation, v.authority, v.kind, v.generation, v.state, tuple(sorted(v.users)))
                 for v in self._mviews.values()}
        bundles = {b.id: Bundle(b.id, tuple(b.versions), BundleState.POISONED if b.poisoned else BundleState.ACTIVE)
                   for b in self._bundles.values()}
        intents = {i: Intent(i, *x) for i, x in self._intents.items()}
        return TxState(immutables.Map(auths), immutables.Map(txs), immutables.Map(views), immutables.Map(bundles),
                       immutables.Map(intents), ManagerState.POISONED if self._poisoned else ManagerState.HEALTHY,
                       self._next_auth, self._next_tx, self._next_mview, self._next_bundle, self._next_intent,
                       self._next_seq)
