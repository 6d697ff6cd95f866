"""The focused pool view of `ProcessMemoryManager`: refinement mapping to `spec.pressure` and its contract runner.

`abstract_pool(authority)` builds `spec.pressure.Pool` by reading the one set
of records of that ledger: its requester tickets (`refimpl.manager.arbitration`),
its claimed leases by ticket id (`refimpl.manager.leases`), its pressure
tickets (`refimpl.manager.pressure`). Nothing here keeps a figure of its own.

Contracts: the single-pool operations of `refimpl.manager.leases` run through
`_run_pool` (`runner.contracted`). With `invariants.contracts` on, each checks
`invariants.pressure`'s step and state predicates on the pool view of the
ledger it touched and the composed state predicates (`invariants.manager`) on
every part's records of that ledger; a refusal must leave the view unchanged
(G4). Waiters a credit granted are woken after the lock is released (I7).
The counterpart for transactions is `refimpl.manager.tx_view`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import immutables

from invariants.contracts import SWITCH as _SWITCH
from refimpl.manager.arbitration import _Tkt
from refimpl.manager.ledger import _Auth
from refimpl.manager.runner import contracted
from spec import pressure_state as P
from spec.errors import GovernorError
from spec.tickets import TicketState
from spec.types import AllocState

__all__ = ["PoolView"]

T = TypeVar("T")
_CLAIMED = TicketState.CLAIMED
_POOL_ROWS = (AllocState.PROVISIONAL, AllocState.LIVE)


def _composed_state(after: Any) -> None:
    from invariants import manager as IM

    IM.check_all(after)


def _pool_step(before: P.Pool, action: Any, after: P.Pool, result: Any) -> None:
    from invariants.pressure import check_step

    check_step(before, action, after)


class PoolView:
    """The `spec.pressure` mapping and the single-pool operations' contract runner (a mixin of the manager)."""

    def _run_pool(self, act: Callable[[], Any], where: Callable[[], _Auth | None], body: Callable[..., T],
                  *args: Any) -> T:
        """`body(*args)` under the lock; with contracts on, checked as `act()` on the pool view of `where()`
        (`runner.contracted`; a refusal where no one ledger is named is checked on the whole manager).

        With a trace recorder, the operation's event (`ortmem-pool/1`) is numbered under the lock, before the
        events of the mailbox cancels it applies, and delivered after the lock is released (I7)."""
        if self._mailbox:
            self.drain()  # posted cancels first (`Leases.drop`): a dropped ticket is never granted, never kept
        rec, error, result = self._recorder, None, None
        try:
            with self._lock:
                on = _SWITCH.on
                if on or rec is not None:
                    a = where()
                if on and a is not None:
                    self._books.forget(a.id)  # its check keeps no books: the local contract counts `a` again
                try:
                    if not on:
                        result = body(*args)
                    elif a is None:
                        result = contracted(lambda: self._manager_view(None, None), None, None, act, "pool", body,
                                            args)
                    elif not self._described(a):  # other front ends' records there: the composed predicates
                        scope = self._closed((a.id,))
                        result = contracted(lambda: self._manager_view(scope, ()), None, _composed_state, act,
                                            "ledger", body, args)
                    else:
                        result = contracted(lambda: self._pool_view(a), _pool_step, self._pool_state(a), act, "pool",
                                            body, args)
                except GovernorError as e:
                    if rec is None:
                        raise
                    error = e
                if rec is not None:  # trace hook (refimpl.tracing); a refusal is raised by `finish`
                    seq = self._record_pool(rec, act(), a, args, result, error)
                if self._mailbox and error is None:
                    self._drain()  # after an accepted operation: a refused one changes nothing (G4)
                if rec is None:
                    return result
        finally:
            # Read without the lock, and safe: every writer of `_wake` after `_init_ledger` (which runs before
            # the manager is shared) holds the ledger lock: the appends in arbitration's `_round` and
            # `_drop_ticket`, leases' `_reconfigure`, devices' `_lose_all`, the re-entrant extend in `_wake_up`;
            # every swap to [] is under `with self._lock` and followed by that thread's `_wake_up`. What this call
            # appended, it appended under the lock before releasing it, so this thread sees it (program order)
            # unless another thread has since swapped the list out, and then that thread wakes it. A stale read
            # either costs one lock round trip (the list was already emptied) or leaves entries another thread
            # appended later to that thread's own drain (every entry point ends in one): a wake-up is delayed
            # at worst, never lost (and a parked waiter re-reads its ticket every `arbitration.RECHECK_S`).
            if self._wake:
                with self._lock:
                    wake, self._wake = self._wake, []
                self._wake_up(wake)  # charged under the lock, woken here: outside it (I7)
        from refimpl.tracing import finish

        return finish(rec, seq, type(act()).__name__, result, error)

    def _described(self, a: _Auth) -> bool:
        """True iff `spec.pressure`'s pool describes ledger `a` whole: every allocation on it is a requester
        ticket's grant or lease (provisional or live: not quarantined, lost or terminated), and no allowance, alias, limit change or deadline-free (composed) pressure
        ticket is on it. Otherwise a pool operation there is checked with the composed predicates only."""
        if a.allowances or a.change is not None:
            return False
        if any(r.state not in _POOL_ROWS or r.ticket is None and not isinstance(r.part, _Tkt)
               for r in a.allocs.values()):
            return False
        return (not any(x.alias_of == a.id for x in self._auths.values())
                and not any(r.auth is a and r.deadline is None for r in self._pressure_log.values()))

    def _pool_state(self, a: _Auth) -> Callable[[P.Pool], None]:
        """The state predicates after a pool operation on ledger `a`: the pool's, then the composed ones on every
        part's records of that ledger."""
        def state(after: P.Pool) -> None:
            from invariants import manager as IM
            from invariants.pressure import check_all

            check_all(after)
            IM.check_all(self._manager_view(self._closed((a.id,)), ()))
        return state

    def abstract_pool(self, authority: int) -> P.Pool:
        """Ledger `authority` as a `spec.pressure.Pool`, read from the manager's records."""
        with self._lock:
            return self._pool_view(self._canonical(authority))

    def _pool_view(self, a: _Auth) -> P.Pool:
        tickets: dict[int, P.Ticket] = {}
        for t in self._tickets.values():
            if t.auth is a:
                grant = t.alloc.id if t.alloc is not None else None
                tickets[t.id] = P.Ticket(t.id, t.holder, t.nbytes, t.priority, t.generation, t.state, t.age, grant)
        for tid, rec in self._leases.items():
            if rec.auth is a:
                t = rec.ticket
                tickets[tid] = P.Ticket(tid, t.holder, rec.nbytes, t.priority, t.generation, _CLAIMED, t.age, rec.id,
                                        rec.pinned, rec.in_flight)
        # A composed pressure ticket (`press`, a limit change: no deadline) shows while open with deadline -1,
        # since spec.pressure has no "no deadline"; `pool_answer` never refuses it as late, so a ledger holding
        # one is outside what the focused spec describes (its campaign opens only `pool_press` tickets).
        pressures = {i: P.Pressure(i, r.holder, r.target, r.priority, -1 if r.deadline is None else r.deadline,
                                   r.generation, r.state, r.released)
                     for i, r in self._pressure_log.items() if r.auth is a}
        return P.Pool(capacity=a.capacity, fixed=a.capacity - a.limit, free=a.limit - a.used,
                      holders=len(self._holders), aging_bound=self._bound, mailbox=self._slots,
                      generation=a.generation, tickets=immutables.Map(tickets), pressures=immutables.Map(pressures),
                      next_ticket=self._next_ticket, next_grant=self._next_alloc, next_pressure=self._next_pressure)
