"""refimpl/manager/transactions.py: `tx_reservation_order` and `tx_reserve_all`, the manager's own order (C4).

A transaction declares its needs in any order; the manager takes them in
ascending authority id (the order that keeps two transactions from each
holding what the other waits for). These two conveniences are the manager's
own (no spec action), so they are pinned here on whole `abstract_tx` states:
the order is the ascending ids of what is not yet held, and a miss part-way
gives every byte back and returns the retry intent. Pinned by the mutation
run of refimpl/manager/transactions.py (no other selected test called them).
"""

from __future__ import annotations

import pytest

from refimpl.governor import ProcessMemoryManager
from spec.errors import InvalidArgument, InvalidTransition, UnknownTransaction
from spec.guards import ALL_ON, GuardSet
from spec.transactions_lifecycle import ViewKind
from spec.types import Tier

C = ViewKind.CONTIGUOUS


def world(guards: GuardSet = ALL_ON) -> tuple[ProcessMemoryManager, int, tuple[int, int, int]]:
    """Three authorities (ids 1, 2, 3: 100, 100 and 10 B) and one holder."""
    pmm = ProcessMemoryManager(guards=guards)
    auths = (pmm.register_authority("device", Tier.DEVICE, 100), pmm.register_authority("host", Tier.DEVICE, 100), pmm.register_authority("staging", Tier.DEVICE, 10))
    assert auths == (1, 2, 3)
    return pmm, pmm.register_holder("engine"), auths


def test_order_is_ascending_ids_of_what_is_not_held() -> None:
    pmm, h, _ = world()
    tx = pmm.tx_plan(h, ((3, 5), (1, 40), (2, 30)), 0, C)
    assert pmm.tx_reservation_order(tx) == [1, 2, 3]
    assert pmm.tx_reserve(tx, 1) is None
    assert pmm.tx_reservation_order(tx) == [2, 3]


def test_order_without_the_guard_is_the_declared_one() -> None:
    # Negative control: with ordered_reservation off the manager follows the declaration (and C4 can break).
    pmm, h, _ = world(GuardSet.without("ordered_reservation"))
    tx = pmm.tx_plan(h, ((3, 5), (1, 40), (2, 30)), 0, C)
    assert pmm.tx_reservation_order(tx) == [3, 1, 2]


def test_reserve_all_holds_every_need_with_its_bytes() -> None:
    pmm, h, _ = world()
    tx = pmm.tx_plan(h, ((3, 5), (1, 40), (2, 30)), 0, C)
    assert pmm.tx_reserve_all(tx) is None
    s = pmm.abstract_tx()
    assert s.txs[tx].held == ((1, 40), (2, 30), (3, 5))
    assert [s.authorities[a].used for a in (1, 2, 3)] == [40, 30, 5]
    assert pmm.tx_reservation_order(tx) == []
    assert pmm.tx_reserve_all(tx) is None  # nothing left to take: no error, nothing moves
    assert pmm.abstract_tx() == s


def test_reserve_all_miss_gives_every_byte_back_and_returns_the_intent() -> None:
    pmm, h, _ = world()
    blocker = pmm.tx_plan(h, ((3, 8),), 0, C)
    assert pmm.tx_reserve_all(blocker) is None
    tx = pmm.tx_plan(h, ((3, 5), (1, 40), (2, 30)), 0, C)
    intent = pmm.tx_reserve_all(tx)  # takes 1 and 2, misses on 3 (2 B free): try-only, all back
    s = pmm.abstract_tx()
    assert type(intent) is int and intent in s.intents
    assert tx not in s.txs  # aborted: gone from the open and committed ones
    assert [s.authorities[a].used for a in (1, 2, 3)] == [0, 0, 8]


def test_order_of_a_bad_or_finished_tx_is_refused() -> None:
    pmm, h, _ = world()
    with pytest.raises(InvalidArgument, match=r"^tx must be an int id, got '1'$"):
        pmm.tx_reservation_order("1")  # type: ignore[arg-type]
    with pytest.raises(UnknownTransaction, match=r"^transaction 1 is not known$"):
        pmm.tx_reservation_order(1)
    tx = pmm.tx_plan(h, ((1, 10),), 0, C)
    pmm.tx_abort(tx)
    before = pmm.abstract_tx()
    with pytest.raises(InvalidTransition):
        pmm.tx_reserve_all(tx)
    assert pmm.abstract_tx() == before
