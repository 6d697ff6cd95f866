"""What a holder loses when the cancellation mailbox (`refimpl/manager/mailbox.py`) goes wrong.

Written from the mutation survivors of `drop`, `drain`, `_drain` and `wait`, each from its harm: a thread
waiting on a ticket another thread dropped wakes once the drop is applied (it does not sleep to its deadline).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from spec.types import Role, Tier


def _full() -> tuple[ProcessMemoryManager, int, int, int, int]:
    """A 100 B ledger filled by holder `w`'s lease; holder `kv` has a pending 60 B ticket."""
    pmm = ProcessMemoryManager(aging_bound=2)
    w, kv = pmm.register_holder("w"), pmm.register_holder("kv")
    a = pmm.register_authority("hbm", Tier.DEVICE, 100)
    lease = pmm.reserve(w, a, Tier.DEVICE, 100, Role.WEIGHTS)
    pmm.commit(w, lease, 100)
    return pmm, w, kv, a, pmm.submit(kv, a, 60)


def _waiting(pmm: ProcessMemoryManager, ticket: int) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(pmm.wait(ticket, 20.0)), daemon=True)
    t.start()
    while not (pmm._tickets[ticket].event is not None):  # parked on the ticket's own event
        threading.Event().wait(0.001)
    return t, got


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_on_a_dropped_ticket_wakes_when_the_drop_is_drained(on: bool) -> None:
    with contracts.contracts(on):
        pmm, _, kv, a, ticket = _full()
        waiter, got = _waiting(pmm, ticket)
        pmm.drop(kv, ticket)
        pmm.drain()
        waiter.join(10)  # well before the waiter's own 20 s deadline
        assert not waiter.is_alive() and got == [True]
        assert not pmm.abstract_manager().tickets
