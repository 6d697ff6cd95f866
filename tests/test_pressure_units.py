"""spec/pressure.py scripted step by step, asserting the whole pool (C5, I7, I13).

The Hypothesis campaigns reach these cases only now and then; each case
here is one script with hand-computed figures: the allocator path (TryReserve)
at its boundary, the exact credit of cancel and timeout by ticket state, the
order of a round in which a matured ticket meets a higher-priority newcomer,
and the figures with `charge_before_wake` switched off (the guard's harm: a
granted ticket that was never charged).
"""

from __future__ import annotations

import attrs
import pytest

from spec import pressure as P
from spec.errors import CapacityDenied, InvalidTransition
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState

_T = TicketState


def run(pool: P.Pool, *actions, guards=ALL_ON) -> tuple[P.Pool, list]:
    results = []
    for act in actions:
        pool, r = P.step(pool, act, guards)
        results.append(r)
    return pool, results


def base(capacity: int = 10, aging_bound: int = 3) -> P.Pool:
    # 2 B fixed, 2 holders, 8 mailbox slots.
    return P.initial(capacity, 2, 2, aging_bound, 8)


# --- the allocator path (TryReserve, I7) ------------------------------------------


def test_try_reserve_grants_and_claims_at_once() -> None:
    pool, (t1, t2) = run(base(), P.Submit(1, 3, 0), P.TryReserve(2, 5, 4))
    granted = pool.tickets[t1]
    assert (t1, t2) == (1, 2)
    assert pool.tickets[t2] == P.Ticket(2, 2, 5, 4, 0, _T.CLAIMED, 0, 2)
    assert (granted.state, granted.grant) == (_T.GRANTED, 1)
    assert (pool.free, pool.next_ticket, pool.next_grant) == (0, 3, 3)


def test_try_reserve_of_exactly_the_free_bytes() -> None:
    pool, (t,) = run(base(), P.TryReserve(1, 8, 0))
    assert pool.tickets[t].state is _T.CLAIMED
    assert pool.free == 0


def test_invalid_try_reserve_would_block_leaves_the_pool() -> None:
    pool, _ = run(base(), P.TryReserve(1, 5, 0))
    with pytest.raises(CapacityDenied, match=r"^try-only: 4 B asked, 3 B free, would block$"):
        P.step(pool, P.TryReserve(2, 4, 0))


def test_invalid_try_reserve_behind_a_waiter() -> None:
    # A pending ticket: even a request that fits is refused, never overtaking the waiter (I13).
    pool, (lease, waiter) = run(base(), P.Submit(1, 6, 0), P.Submit(2, 7, 0))
    assert (pool.tickets[waiter].state, pool.free) == (_T.PENDING, 2)
    with pytest.raises(CapacityDenied, match=r"^try-only: 1 B asked, 2 B free, a ticket is waiting$"):
        P.step(pool, P.TryReserve(2, 1, 0))


def test_try_reserve_without_try_only_waits() -> None:
    # The guard's harm: the allocator path leaves a pending ticket behind (it would block).
    pool, _ = run(base(), P.TryReserve(1, 5, 0))
    new, t = P.step(pool, P.TryReserve(2, 4, 0), GuardSet.without("try_only"))
    assert new.tickets[t] == P.Ticket(t, 2, 4, 0, 0, _T.PENDING, 1, None)


# --- exact credit by state (C5: exactly once) -----------------------------------------


@pytest.mark.parametrize("abandon", [P.Cancel, P.Timeout])
def test_abandon_pending_credits_nothing(abandon) -> None:
    pool, (lease, waiter) = run(base(), P.Submit(1, 6, 0), P.Submit(2, 7, 0))
    new, credit = P.step(pool, abandon(2, waiter))
    assert credit == 0
    assert new.free == pool.free == 2
    assert waiter not in new.tickets


@pytest.mark.parametrize("abandon", [P.Cancel, P.Timeout])
def test_abandon_granted_credits_its_bytes(abandon) -> None:
    pool, (t,) = run(base(), P.Submit(1, 6, 0))
    new, credit = P.step(pool, abandon(1, t))
    assert (credit, new.free) == (6, 8)
    assert new.tickets == P.initial(10, 2, 2, 3, 8).tickets


def test_invalid_release_of_a_granted_ticket_names_it() -> None:
    pool, (t,) = run(base(), P.Submit(1, 6, 0))
    with pytest.raises(InvalidTransition, match=r"^ticket 1: no transition for event 'release' in state 'granted'$"):
        P.step(pool, P.Release(1, t))


# --- a round's order (I13: matured first, then priority, then FIFO) ----------------


def test_matured_ticket_is_granted_before_a_higher_priority_one() -> None:
    # bound 2: L (priority 0) waits two rounds, H (priority 9) one; the release round ages both to 2.
    pool, (lease, low, high) = run(base(aging_bound=2), P.Submit(1, 8, 0), P.Submit(2, 6, 0), P.Submit(2, 6, 9))
    assert (pool.tickets[low].age, pool.tickets[high].age) == (2, 1)
    pool, _ = run(pool, P.Claim(1, lease), P.Release(1, lease))
    assert (pool.tickets[low].state, pool.tickets[high].state) == (_T.GRANTED, _T.PENDING)
    assert pool.free == 2


def test_higher_priority_first_before_maturity() -> None:
    # bound 5: nobody matures; H (priority 9) is granted ahead of the earlier L.
    pool, (lease, low, high) = run(base(aging_bound=5), P.Submit(1, 8, 0), P.Submit(2, 6, 0), P.Submit(2, 6, 9))
    pool, _ = run(pool, P.Claim(1, lease), P.Release(1, lease))
    assert (pool.tickets[low].state, pool.tickets[high].state) == (_T.PENDING, _T.GRANTED)


def test_equal_priority_is_fifo() -> None:
    pool, (lease, first, second) = run(base(aging_bound=5), P.Submit(1, 8, 0), P.Submit(2, 6, 3), P.Submit(2, 6, 3))
    pool, _ = run(pool, P.Claim(1, lease), P.Release(1, lease))
    assert (pool.tickets[first].state, pool.tickets[second].state) == (_T.GRANTED, _T.PENDING)


# --- charge before wake (I7) ---------------------------------------------------------


def test_grant_is_charged_before_claim() -> None:
    pool, (t,) = run(base(), P.Submit(1, 6, 0))
    assert (pool.tickets[t].state, pool.free) == (_T.GRANTED, 2)
    pool, _ = run(pool, P.Claim(1, t))
    assert pool.free == 2


def test_charge_before_wake_off_grants_uncharged_bytes() -> None:
    # The guard's harm: a granted ticket whose bytes are still counted free, so a second grant
    # of the same bytes fits (8 B governed, 6 + 6 granted).
    off = GuardSet.without("charge_before_wake")
    pool, (a, b) = run(base(), P.Submit(1, 6, 0), P.Submit(2, 6, 0), guards=off)
    assert (pool.tickets[a].state, pool.tickets[b].state) == (_T.GRANTED, _T.GRANTED)
    assert pool.free == 8
    pool, _ = run(pool, P.Claim(1, a), guards=off)
    assert pool.free == 2  # charged only at claim
