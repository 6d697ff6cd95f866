"""Adapter from `spec.pressure` actions to `ProcessMemoryManager` calls (for the focused pressure checker).

The focused pool is one ledger of the one manager: one canonical authority
of `capacity` bytes whose limit is lowered by `fixed` (the bytes outside
governance), and one registered manager holder per pool holder (ids 1 ..
holders, in registration order). Every action goes to the manager's
operation of the same name (`refimpl.manager.leases`, the arbitration and
pressure parts); `abstract()` is the manager's own refinement mapping of
that ledger (`abstract_pool`), read from its records: tickets, leases,
pressure tickets. The adapter keeps no state of the pool.

Each holder gets a recording pressure callback that observes I7 from outside
the manager: while the callback runs, another thread tries to take the
ledger lock (try-acquire with a short timeout) and the callback records
whether it could. The manager is never asked whether it holds its lock; a
callback run under the lock is seen as a lock another thread cannot take.
`take_deliveries()` hands the checker what was observed since it last asked
(`invariants.pressure.observed_I7_callbacks`).

Every ticket left pending by a step gets a requester thread parked in the
manager's own `wait`, as a real requester would be. After each step, each
such thread whose ticket the abstraction no longer shows pending (granted,
or retired by a cancel, timeout or reconfigure) is given a grace period to
return; whether it did is observed as a `Parked`
(`invariants.pressure.observed_I13_waiters`). The thread signals just
before it calls `wait`, which parks it within microseconds (the signal
releases the GIL to it); a thread that had not parked yet finds its ticket
resolved and returns at once, so the race can only hide a bug, never invent
one.
"""

from __future__ import annotations

import threading
from typing import Any

from invariants.pressure import Delivery, Parked, observed_I7_callbacks
from invariants.pressure_machine import PoolParams
from refimpl.manager import ProcessMemoryManager
from spec import pressure as P
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState
from spec.types import Tier

__all__ = ["PressureAdapter", "PROBE_TIMEOUT_S", "WAIT_S", "WAKE_GRACE_S", "probe_from_another_thread"]

#: How long the outside probe waits for the ledger lock. With the lock free the probe takes it at
#: once; only a lock held across the callback makes it wait this long (and then it reports so).
PROBE_TIMEOUT_S = 0.05
#: How long a parked requester waits at most (so a thread left parked by a bug, or at the end of a run,
#: ends on its own), and how long after a step its thread may take to return once its ticket is resolved.
WAIT_S, WAKE_GRACE_S = 3.0, 1.0  # generous: a loaded machine may be slow to schedule a woken thread


def probe_from_another_thread(gov: ProcessMemoryManager, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True iff a fresh thread could take `gov`'s ledger lock within `timeout` seconds."""
    took: list[bool] = []
    t = threading.Thread(target=lambda: took.append(gov.ledger_lock.probe(timeout)), name="ortmem-I7-probe",
                         daemon=True)
    t.start()
    t.join()
    return bool(took and took[0])


class PressureAdapter:
    def __init__(self, params: PoolParams, guards: GuardSet = ALL_ON, strict_callbacks: bool = False,
                 record_callbacks: bool = True) -> None:
        """`record_callbacks=False`: register no recording callbacks (a test registers its own)."""
        self.gov = ProcessMemoryManager(guards=guards, aging_bound=params.aging_bound, mailbox=params.mailbox)
        for h in range(1, params.holders + 1):
            assert self.gov.register_holder(f"holder-{h}") == h  # pool holder h is manager holder h
        self.pool = self.gov.register_authority("pressure-pool", Tier.DEVICE, params.capacity)
        if params.fixed:
            self.gov.lower_limit(self.pool, params.capacity - params.fixed)  # nothing is held: commits at once
        #: Every callback so far, as observed from outside.
        self.delivered: list[Delivery] = []
        self._read = 0  # how many of `delivered` the checker has taken
        self.strict = strict_callbacks
        self._waiters: dict[int, threading.Thread] = {}  # pending ticket -> the requester parked on it
        for h in range(1, params.holders + 1 if record_callbacks else 1):
            self.gov.register_callback(h, self._callback(h))
        a = self.pool
        g = self.gov
        # spec.pressure action -> the manager's operation (the pool's authority added where it names one).
        self._ops: dict[type, Any] = {
            P.Submit: lambda x: g.pool_submit(x.holder, a, x.nbytes, x.priority),
            P.TryReserve: lambda x: g.pool_try_reserve(x.holder, a, x.nbytes, x.priority),
            P.Claim: lambda x: g.pool_claim(x.holder, x.ticket),
            P.Release: lambda x: g.pool_release(x.holder, x.ticket),
            P.Cancel: lambda x: g.pool_cancel(x.holder, x.ticket),
            P.Timeout: lambda x: g.pool_timeout(x.holder, x.ticket),
            P.Reconfigure: lambda x: g.pool_reconfigure(a),
            P.SetUse: lambda x: g.pool_set_use(x.holder, x.ticket, x.pinned, x.in_flight),
            P.Press: lambda x: g.pool_press(x.holder, a, x.target, x.priority, x.deadline),
            P.Answer: lambda x: g.pool_answer(x.holder, x.pressure, x.victims, x.now),
            P.CancelPressure: lambda x: g.pool_cancel_pressure(x.pressure),
            P.ExpirePressure: lambda x: g.pool_expire_pressure(x.pressure, x.now),
        }

    def _callback(self, holder: int) -> Any:
        def on_pressure(gov: ProcessMemoryManager, pressure: int, target: int) -> None:
            d = Delivery(holder, pressure, target, probe_from_another_thread(gov))
            self.delivered.append(d)
            if self.strict:
                observed_I7_callbacks([d])
        return on_pressure

    def take_deliveries(self) -> list[Delivery]:
        """The callbacks observed since the last call."""
        new, self._read = self.delivered[self._read:], len(self.delivered)
        return new

    def execute(self, action: Any) -> Any:
        try:
            return self._ops[type(action)](action)
        finally:
            self._watch_waiters()

    def _watch_waiters(self) -> None:
        """Observe the waiters whose tickets this step resolved; park one on each newly pending ticket."""
        tickets = self.abstract().tickets
        for tid, thread in sorted(self._waiters.items()):
            t = tickets.get(tid)
            if t is not None and t.state is TicketState.PENDING:
                continue
            thread.join(WAKE_GRACE_S)
            resolved = "retired" if t is None else t.state.value
            self.delivered.append(Parked(tid, resolved, thread.is_alive()))
            del self._waiters[tid]
        for tid, t in sorted(tickets.items()):
            if t.state is TicketState.PENDING and tid not in self._waiters:
                self._waiters[tid] = self._park(tid)

    def _park(self, tid: int) -> threading.Thread:
        about_to_wait = threading.Event()

        def requester() -> None:
            about_to_wait.set()
            self.gov.wait(tid, WAIT_S)

        thread = threading.Thread(target=requester, name=f"ortmem-I13-waiter-{tid}", daemon=True)
        thread.start()
        about_to_wait.wait()
        return thread

    def abstract(self) -> P.Pool:
        return self.gov.abstract_pool(self.pool)
