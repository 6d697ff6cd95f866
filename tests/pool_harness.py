"""One manager ledger as a pressure pool, for the focused pressure tests.

`pool(...)` builds a `ProcessMemoryManager` the way the focused checker's
adapter does (`refimpl.verify.pressure_adapter.PressureAdapter`: one authority,
holders 1 .. n, `fixed` taken off the limit) and returns a `Pool`: the
manager's single-pool operations with the pool's authority filled in. A
`Pool` keeps no state of its own: every figure is read from the manager
(`abstract_pool`).
"""

from __future__ import annotations

from typing import Any

from refimpl.manager import ProcessMemoryManager
from refimpl.verify.pressure_adapter import PressureAdapter
from invariants.pressure_machine import PoolParams
from spec import pressure as P
from spec.guards import ALL_ON, GuardSet

__all__ = ["Pool", "pool"]


class Pool:
    def __init__(self, adapter: PressureAdapter) -> None:
        self.adapter = adapter
        self.mgr: ProcessMemoryManager = adapter.gov
        self.aid: int = adapter.pool

    # the pool protocol, authority filled in
    def submit(self, holder: Any, nbytes: Any, priority: Any = 0) -> int:
        return self.mgr.pool_submit(holder, self.aid, nbytes, priority)

    def pool_try_reserve(self, holder: Any, nbytes: Any, priority: Any = 0) -> int:
        return self.mgr.pool_try_reserve(holder, self.aid, nbytes, priority)

    def claim(self, holder: Any, ticket: Any) -> int:
        return self.mgr.pool_claim(holder, ticket)

    def release(self, holder: Any, ticket: Any) -> None:
        self.mgr.pool_release(holder, ticket)

    def cancel(self, holder: Any, ticket: Any) -> int:
        return self.mgr.pool_cancel(holder, ticket)

    def timeout(self, holder: Any, ticket: Any) -> int:
        return self.mgr.pool_timeout(holder, ticket)

    def reconfigure(self) -> None:
        self.mgr.pool_reconfigure(self.aid)

    def pool_set_use(self, holder: Any, ticket: Any, pinned: Any, in_flight: Any) -> None:
        self.mgr.pool_set_use(holder, ticket, pinned, in_flight)

    # spec.pressure's action names (`method_name(P.TryReserve)`, `P.SetUse`) for the scenario tests
    try_reserve, set_use = pool_try_reserve, pool_set_use
    pool_reconfigure = reconfigure

    def press(self, holder: Any, target: Any, priority: Any = 0, deadline: Any = 0) -> int:
        return self.mgr.pool_press(holder, self.aid, target, priority, deadline)

    def answer(self, holder: Any, pressure: Any, victims: Any, now: Any) -> int:
        return self.mgr.pool_answer(holder, pressure, victims, now)

    def cancel_pressure(self, pressure: Any) -> None:
        self.mgr.pool_cancel_pressure(pressure)

    def expire_pressure(self, pressure: Any, now: Any) -> None:
        self.mgr.pool_expire_pressure(pressure, now)

    def wait(self, ticket: Any, timeout: Any) -> bool:
        return self.mgr.wait(ticket, timeout)

    def acquire(self, holder: Any, nbytes: Any, priority: Any = 0, timeout: Any = None) -> int | None:
        """The manager's `acquire`; returns the ticket id that names the lease (None on timeout)."""
        lease = self.mgr.acquire(holder, self.aid, nbytes, priority, timeout=timeout)
        if lease is None:
            return None
        return next(t.id for t in self.abstract().tickets.values() if t.grant == lease)

    def register_callback(self, holder: Any, fn: Any) -> None:
        """`fn(pool, pressure, target, deadline)`, called by the manager (with no lock held) when pressed."""
        if callable(fn):
            def call(mgr: Any, pressure: int, target: int, fn: Any = fn) -> None:
                fn(self, pressure, target, self.abstract().pressures[pressure].deadline)
            self.mgr.register_callback(holder, call)
        else:
            self.mgr.register_callback(holder, fn)  # refused by the manager, typed

    def drop(self, holder: Any, ticket: Any) -> None:
        self.mgr.drop(holder, ticket)

    def drain(self) -> None:
        self.mgr.drain()

    # observation
    def abstract(self) -> P.Pool:
        return self.mgr.abstract_pool(self.aid)

    def free(self) -> int:
        return self.abstract().free

    @property
    def ledger_lock(self) -> Any:
        return self.mgr.ledger_lock

    def lock_held_by_me(self) -> bool:
        return self.mgr.lock_held_by_me()


def pool(capacity: int, fixed: int = 0, holders: int = 1, aging_bound: int = 8, mailbox: int = 64,
         guards: GuardSet = ALL_ON) -> Pool:
    """A fresh manager holding one pool (the focused checker's setup); callbacks are the test's to register."""
    return Pool(PressureAdapter(PoolParams(capacity, fixed, holders, aging_bound, mailbox), guards,
                                record_callbacks=False))
