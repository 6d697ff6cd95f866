# A cancel posted by `drop` (refimpl.manager.mailbox) is applied, as the composed CancelTicket, before the next
# operation of any front end (composed, tx_*), so a dropped ticket is never granted and no byte stays charged to it (issue #21:
# a composed release granted the dropped ticket, and its 60 B stayed charged through 1,500 composed operations).
# The harm checked: bytes charged on the ledger to the dropped ticket's holder, and the ledger's `used`.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.types import AllocState, Role, Tier


def _charged_to(m: ProcessMemoryManager, holder: int) -> int:
    """Bytes the ledger charges to `holder` (any state: provisional grants included)."""
    return sum(r.charge for r in abstract_ledger(m).allocations.values() if r.holder == holder)


def _full() -> tuple[ProcessMemoryManager, int, int, int, int]:
    """A 100 B ledger filled by holder `w`'s one lease; holder `kv` will drop a 60 B ticket."""
    m = ProcessMemoryManager(aging_bound=2, mailbox=8)
    w, kv = m.register_holder("w"), m.register_holder("kv")
    a = m.register_authority("hbm", Tier.DEVICE, 100)
    lease = m.reserve(w, a, Tier.DEVICE, 100, Role.WEIGHTS)
    m.commit(w, lease, 100)
    return m, w, kv, a, lease


# Each front end's release of the lease that fills the ledger: the round it runs must not grant a dropped ticket.
RELEASES: dict[str, Callable[[ProcessMemoryManager, int, int], Any]] = {
    "composed-release": lambda m, w, lease: m.release(w, lease),
    "composed-cancel-after-pressure": lambda m, w, lease: m.answer(w, m.open_pressure(w, 1, 100), (lease,)),
}


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_a_dropped_waiting_ticket_is_never_granted(on: bool, release: str) -> None:
    m, w, kv, a, lease = _full()
    with contracts.contracts(on):
        t = m.submit(kv, a, 60, 0)  # waits: the ledger is full
        m.drop(kv, t)
        RELEASES[release](m, w, lease)  # a round on `a`: the old code granted ticket t here
        assert _charged_to(m, kv) == 0, abstract_ledger(m).allocations
        assert m.snapshot(a).used == 0
        assert t not in abstract_manager(m).tickets
        # ... and through many composed operations after it
        for _ in range(20):
            m.cancel(w, m.reserve(w, a, Tier.DEVICE, 10, Role.WEIGHTS))
        assert _charged_to(m, kv) == 0 and m.snapshot(a).used == 0


# The first operation after the drop, one per front end (each touches something unrelated to the ticket).
NEXT: dict[str, Callable[[ProcessMemoryManager, int, int], Any]] = {
    "composed-reserve": lambda m, w, a: m.reserve(w, a, Tier.DEVICE, 5, Role.WEIGHTS),
    "composed-submit": lambda m, w, a: m.submit(w, a, 5, 0, Role.KV),
    "composed-plan-tx": lambda m, w, a: m.plan_tx(w, ((a, 5),)),
    "composed-register-holder": lambda m, w, a: m.register_holder("late"),
    "composed-try-reserve": lambda m, w, a: m.try_reserve(w, a, 5),
    "tx-open-bundle": lambda m, w, a: m.open_bundle(),
}


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("nxt", sorted(NEXT))
def test_a_dropped_granted_ticket_is_credited_by_the_next_operation(on: bool, nxt: str) -> None:
    m = ProcessMemoryManager(aging_bound=2, mailbox=8)
    w, kv = m.register_holder("w"), m.register_holder("kv")
    a = m.register_authority("hbm", Tier.DEVICE, 100)
    with contracts.contracts(on):
        t = m.submit(kv, a, 60, 0, Role.KV)  # granted at once: 60 B charged to kv
        assert _charged_to(m, kv) == 60
        m.drop(kv, t)
        NEXT[nxt](m, w, a)
        assert _charged_to(m, kv) == 0, abstract_ledger(m).allocations
        assert t not in abstract_manager(m).tickets
        assert all(r.state is not AllocState.PROVISIONAL or r.holder != kv
                   for r in abstract_ledger(m).allocations.values())
