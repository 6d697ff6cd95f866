"""refimpl/manager/transactions.py: a transaction's try-only headroom and what an abort gives back (I1, I2, I5).

A granted-but-unclaimed ticket's bytes are already charged (a ledger
reservation of the ticket): a transaction of the composed front end must
see them as taken (the focused one's model has no tickets), or `used` passes
the limit (guard `tx_counts_granted`, its negative control shown here with
the contracts off). A composed abort
returns the bytes of every held reservation, credited once. Pinned by the
mutation run of refimpl/manager/transactions.py.
"""

from __future__ import annotations

import pytest

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from spec.errors import CapacityDenied
from spec.guards import ALL_ON, GuardSet
from spec.types import Tier


def world(guards: GuardSet = ALL_ON) -> tuple[ProcessMemoryManager, int, int, int]:
    """gpu0 (100 B) with a granted, unclaimed 60 B ticket of holder 1; host0 (100 B), empty."""
    pmm = ProcessMemoryManager(guards=guards)
    a, b = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_authority("host0", Tier.HOST, 100)
    h = pmm.register_holder("engine")
    t = pmm.submit(h, a, 60)
    assert pmm.abstract_manager().tickets[t].allocation is not None  # granted at once: 60 B charged, 40 B free
    assert pmm.snapshot(a).used == 60
    return pmm, h, a, b


@pytest.mark.parametrize("checked", [False, True], ids=["contracts-off", "contracts-on"])
def test_composed_reserve_sees_granted_ticket_bytes_as_taken(checked: bool) -> None:
    contracts.enable() if checked else contracts.disable()
    pmm, h, a, _ = world()
    tx = pmm.plan_tx(h, ((a, 41),))
    before = pmm.abstract_manager()
    with pytest.raises(CapacityDenied, match=r"^authority 1: 41 B asked, 40 B free \(try-only\)$"):
        pmm.reserve_tx(tx)
    assert pmm.abstract_manager() == before
    fits = pmm.plan_tx(h, ((a, 40),))
    pmm.reserve_tx(fits)
    assert pmm.snapshot(a).used == 100


def test_tx_counts_granted_off_lets_used_pass_the_limit() -> None:
    # Negative control: without the guard the ticket's 60 B look free and the ledger is overcommitted (I2).
    contracts.disable()
    pmm, h, a, _ = world(GuardSet.without("tx_counts_granted"))
    tx = pmm.plan_tx(h, ((a, 100),))  # headroom = 40 free + the ticket's 60
    pmm.reserve_tx(tx)
    assert pmm.snapshot(a).used == 160


@pytest.mark.parametrize("checked", [False, True], ids=["contracts-off", "contracts-on"])
def test_composed_abort_credits_every_held_reservation_once(checked: bool) -> None:
    contracts.enable() if checked else contracts.disable()
    pmm, h, a, b = world()
    tx = pmm.plan_tx(h, ((b, 20), (a, 10)))
    pmm.reserve_tx(tx)
    pmm.reserve_tx(tx)
    assert (pmm.snapshot(a).used, pmm.snapshot(b).used) == (70, 20)
    assert pmm.abort_tx(tx) == 30
    assert (pmm.snapshot(a).used, pmm.snapshot(b).used) == (60, 0)
