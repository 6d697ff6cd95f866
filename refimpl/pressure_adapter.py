"""Adapter from `spec.pressure` actions to `PressureGovernor` calls (for the stateful checker).

Method names are the actions' names in snake case, keywords the field names.
Each holder gets a recording pressure callback that observes I7 from outside
the governor: while the callback runs, another thread tries to take the
ledger lock (try-acquire with a short timeout) and the callback records
whether it could. The governor is never asked whether it holds its lock; a
callback run under the lock is seen as a lock another thread cannot take.
`take_deliveries()` hands the checker what was observed since it last asked
(`invariants.pressure.observed_I7_callbacks`).

Every ticket left pending by a step gets a requester thread parked in the
governor's own `wait`, as a real requester would be. After each step, each
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

import attrs

from invariants.pressure import Delivery, Parked, observed_I7_callbacks
from invariants.pressure_machine import PoolParams
from refimpl.adapter import method_name
from refimpl.pressure import PressureGovernor
from spec import pressure as P
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState

__all__ = ["PressureAdapter", "PROBE_TIMEOUT_S", "WAIT_S", "WAKE_GRACE_S", "probe_from_another_thread"]

#: How long the outside probe waits for the ledger lock. With the lock free the probe takes it at
#: once; only a lock held across the callback makes it wait this long (and then it reports so).
PROBE_TIMEOUT_S = 0.05
#: How long a parked requester waits at most (so a thread left parked by a bug, or at the end of a run,
#: ends on its own), and how long after a step its thread may take to return once its ticket is resolved.
WAIT_S, WAKE_GRACE_S = 3.0, 1.0  # generous: a loaded machine may be slow to schedule a woken thread


def probe_from_another_thread(gov: PressureGovernor, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True iff a fresh thread could take `gov`'s ledger lock within `timeout` seconds."""
    took: list[bool] = []
    t = threading.Thread(target=lambda: took.append(gov.ledger_lock.probe(timeout)), name="ortmem-I7-probe",
                         daemon=True)
    t.start()
    t.join()
    return bool(took and took[0])


class PressureAdapter:
    def __init__(self, params: PoolParams, guards: GuardSet = ALL_ON, strict_callbacks: bool = False) -> None:
        self.gov = PressureGovernor(params.capacity, params.fixed, params.holders, params.aging_bound,
                                    params.mailbox, guards=guards)
        #: Every callback so far, as observed from outside.
        self.delivered: list[Delivery] = []
        self._read = 0  # how many of `delivered` the checker has taken
        self.strict = strict_callbacks
        self._waiters: dict[int, threading.Thread] = {}  # pending ticket -> the requester parked on it
        for h in range(1, params.holders + 1):
            self.gov.register_callback(h, self._callback(h))

    def _callback(self, holder: int) -> Any:
        def on_pressure(gov: PressureGovernor, pressure: int, target: int, deadline: int) -> None:
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
            return getattr(self.gov, method_name(action))(**attrs.asdict(action, recurse=False))
        finally:
            self._watch_waiters()

    def _watch_waiters(self) -> None:
        """Observe the waiters whose tickets this step resolved; park one on each newly pending ticket."""
        tickets = self.gov.abstract().tickets
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
        return self.gov.abstract()
