"""What a requester loses when `acquire` parks wrongly or a submit drops a wake-up (refimpl/manager/arbitration.py).

The mutation survivors of `Arbitration._park`, `acquire` and `submit`'s hot path, each written from its harm:
  * a waiter whose ticket was granted or retired while its wake-up was lost (the waker interrupted before it
    set the event) returns at its next recheck; it does not sleep on until its deadline, or forever;
  * an `acquire` whose bytes fit at once never parks (a park sleeps up to `RECHECK_S`);
  * a submit made by a thread that already holds the ledger lock (the trace recorder's protocol: the lock held
    across operations, `wake_waiters` after) keeps the waiters an earlier operation granted, and raises nothing.
A fake `Event` stands for the waiter's event so the lost wake-up and the parking are deterministic: its `set`
is the lost wake-up (it does nothing) and its `wait` counts the waiter's sleeps.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import lease, make

from invariants.contracts import contracts
from refimpl.manager import arbitration as _arbitration


class _LostWakeUp:
    """A waiter's event whose wake-up never lands; `during` runs in the waiter's first sleep (another party's
    operation meanwhile). After three sleeps it reports a wake-up, so a waiter that sleeps on still ends."""

    made: list[_LostWakeUp] = []

    def __init__(self, during: Callable[[], None] | None) -> None:
        self.during, self.sleeps = during, 0
        _LostWakeUp.made.append(self)

    def set(self) -> None:
        """The waker was interrupted before it set this event: the wake-up is lost."""

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        self.sleeps += 1
        if self.sleeps == 1 and self.during is not None:
            self.during()
        return self.sleeps >= 3


def _fake_events(monkeypatch: pytest.MonkeyPatch, during: Callable[[], None] | None) -> list[_LostWakeUp]:
    _LostWakeUp.made = []
    monkeypatch.setattr(_arbitration, "threading", types.SimpleNamespace(Event=lambda: _LostWakeUp(during)))
    return _LostWakeUp.made


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_granted_while_its_wake_up_was_lost_claims_at_its_next_recheck(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        blocker = lease(pmm, w.h2, w.a, 100)
        events = _fake_events(monkeypatch, lambda: pmm.release(w.h2, blocker))  # grants the parked 40 B
        got = pmm.acquire(w.h1, w.a, 40, timeout=None)
        assert [e.sleeps for e in events] == [1], "the waiter slept on past its granted ticket"
        m = pmm.abstract_manager()
        assert m.ledger.allocations[got].nbytes == 40 and m.ledger.authorities[w.a].used == 40
        assert not m.tickets


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_retired_while_its_wake_up_was_lost_returns_at_its_next_recheck(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        lease(pmm, w.h2, w.a, 100)
        events = _fake_events(monkeypatch, lambda: pmm.reconfigure(w.a))  # the pending ticket fails
        assert pmm.acquire(w.h1, w.a, 40, timeout=None) is None
        assert [e.sleeps for e in events] == [1], "the waiter slept on past its retired ticket"
        m = pmm.abstract_manager()
        assert not m.tickets and m.ledger.authorities[w.a].used == 100


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_an_acquire_that_fits_at_once_never_parks(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        events = _fake_events(monkeypatch, None)
        got = pmm.acquire(w.h1, w.a, 40, timeout=None)
        assert events == [], "a ticket granted at its submit was parked on"
        assert pmm.abstract_manager().ledger.allocations[got].nbytes == 40


def test_a_submit_under_the_held_ledger_lock_keeps_the_wake_ups_of_earlier_grants() -> None:
    # Contracts off, no recorder: submit and release take their hot paths.
    with contracts(on=False):
        pmm, w = make()
        blocker = lease(pmm, w.h2, w.a, 100)
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(pmm.acquire(w.h1, w.a, 40, timeout=None)), daemon=True)
        waiter.start()
        while not pmm.abstract_manager().tickets:  # parked: its ticket is pending
            threading.Event().wait(0.001)
        with pmm.ledger_lock:  # as the trace recorder's wrapper holds it across operations
            pmm.release(w.h2, blocker)  # grants the parked ticket: its wake-up waits for the lock's release
            tid = pmm.submit(w.h2, w.b, 8)  # another ledger's lone ticket, granted at once
        pmm.wake_waiters()
        waiter.join(10)
        assert not waiter.is_alive() and len(got) == 1 and got[0] is not None
        m = pmm.abstract_manager()
        assert m.ledger.allocations[got[0]].nbytes == 40 and m.tickets[tid].allocation is not None
