"""spec/pressure.py scripted step by step, asserting the whole pool (C5, I7, I13).

The Hypothesis campaigns reach these cases only now and then; each case
here is one script with hand-computed figures: the allocator path (TryReserve)
at its boundary, the exact credit of cancel and timeout by ticket state, the
order of a round in which a matured ticket meets a higher-priority newcomer,
and the figures with `grant_charges_ledger` switched off (the guard's harm: a
granted ticket that was never charged).
"""

from __future__ import annotations

import attrs
import pytest

from spec import pressure as P
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    UnknownHolder,
    UnknownTicket,
)
from spec.guards import ALL_ON, GuardSet
from spec.tickets import PressureState, TicketState

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


def test_grant_charges_ledger_off_grants_uncharged_bytes() -> None:
    # The guard's harm: a granted ticket whose bytes are still counted free, so a second grant
    # of the same bytes fits (8 B governed, 6 + 6 granted).
    off = GuardSet.without("grant_charges_ledger")
    pool, (a, b) = run(base(), P.Submit(1, 6, 0), P.Submit(2, 6, 0), guards=off)
    assert (pool.tickets[a].state, pool.tickets[b].state) == (_T.GRANTED, _T.GRANTED)
    assert pool.free == 8
    pool, _ = run(pool, P.Claim(1, a), guards=off)
    assert pool.free == 2  # charged only at claim


def test_equal_priority_is_fifo_past_the_map_order() -> None:
    # Tickets live in an immutables.Map, which iterates 32 before 2: FIFO must come from the submit
    # sequence, not from the table's order. Tickets 3..31 are submitted and cancelled to reach id 32.
    pool = P.initial(12, 0, 2, 100, 40)
    pool, (lease, early) = run(pool, P.Submit(1, 12, 0), P.Submit(2, 7, 0))
    for _ in range(29):
        pool, (t,) = run(pool, P.Submit(2, 7, 0))
        pool, _ = run(pool, P.Cancel(2, t))
    pool, (late,) = run(pool, P.Submit(2, 7, 0))
    assert (early, late) == (2, 32)
    pool, _ = run(pool, P.Claim(1, lease), P.Release(1, lease))
    assert (pool.tickets[early].state, pool.tickets[late].state) == (_T.GRANTED, _T.PENDING)


def test_try_reserve_without_try_only_is_granted_through_arbitration() -> None:
    # With the guard off the allocator path becomes a submit: granted, not claimed, and it went
    # through arbitration with the caller's guards (here grant_charges_ledger off too: not charged).
    new, t = P.step(base(), P.TryReserve(1, 4, 0), GuardSet.without("try_only"))
    assert (new.tickets[t].state, new.free) == (_T.GRANTED, 4)
    new, t = P.step(base(), P.TryReserve(1, 4, 0), GuardSet.without("try_only", "grant_charges_ledger"))
    assert (new.tickets[t].state, new.free) == (_T.GRANTED, 8)


@pytest.mark.parametrize("abandon", [P.Cancel, P.Timeout])
def test_abandon_granted_without_grant_charges_ledger_credits_once(abandon) -> None:
    # Granted but (guard off) never charged: abandoning it must not credit bytes nobody paid.
    off = GuardSet.without("grant_charges_ledger")
    pool, (t,) = run(base(), P.Submit(1, 6, 0), guards=off)
    assert pool.free == 8
    new, credit = P.step(pool, abandon(1, t), off)
    assert (credit, new.free) == (6, 8)


@pytest.mark.parametrize("abandon", [P.Cancel, P.Timeout])
def test_abandon_pending_without_grant_charges_ledger_credits_nothing(abandon) -> None:
    off = GuardSet.without("grant_charges_ledger")
    pool, _ = run(base(), P.Submit(1, 6, 0), P.Claim(1, 1), P.Submit(2, 7, 0), guards=off)
    assert (pool.tickets[2].state, pool.free) == (_T.PENDING, 2)
    new, credit = P.step(pool, abandon(2, 2), off)
    assert (credit, new.free) == (0, 2)


def _retired() -> P.Pool:
    pool, _ = run(base(), P.Submit(1, 3, 0), P.Claim(1, 1), P.Release(1, 1))
    return pool


@pytest.mark.parametrize("act", [P.Release(1, 1), P.Claim(1, 1), P.SetUse(1, 1, True, False)], ids=repr)
def test_invalid_action_on_a_retired_ticket(act) -> None:
    with pytest.raises(InvalidTransition, match=r"^ticket 1 is already completed, cancelled or failed$"):
        P.step(_retired(), act)


def test_invalid_set_use_needs_bools() -> None:
    pool, _ = run(base(), P.Submit(1, 3, 0), P.Claim(1, 1))
    with pytest.raises(InvalidArgument, match=r"^pinned and in_flight must be bools, got 1, False$"):
        P.step(pool, P.SetUse(1, 1, 1, False))  # type: ignore[arg-type]


def test_invalid_set_use_of_a_granted_ticket() -> None:
    pool, _ = run(base(), P.Submit(1, 3, 0))
    with pytest.raises(InvalidTransition, match=r"^ticket 1 is granted; only a claimed lease is pinned or in flight$"):
        P.step(pool, P.SetUse(1, 1, True, False))


def test_set_use_flags_the_lease() -> None:
    pool, _ = run(base(), P.Submit(1, 3, 0), P.Claim(1, 1), P.SetUse(1, 1, False, True))
    assert (pool.tickets[1].pinned, pool.tickets[1].in_flight) == (False, True)
    assert P.buckets(pool) == {"fixed": 2, "free": 5, "reclaimable": 0, "granted": 0, "claimed": 3}


# --- holder pressure (C5) ---------------------------------------------------------------


@pytest.mark.parametrize(("act", "msg"), [
    (P.Press(1, 0, 0, 5), r"^target must be "),
    (P.Press(1, 4, "0", 5), r"^priority must be an int, got '0'$"),
    (P.Press(1, 4, 0, -1), r"^deadline must be an int >= 0, got -1$"),
], ids=["target", "priority", "deadline"])
def test_invalid_press_names_the_field(act, msg) -> None:
    with pytest.raises(InvalidArgument if "target" not in msg else InvalidBytes, match=msg):
        P.step(base(), act)


def test_press_opens_a_ticket() -> None:
    pool, (pid,) = run(base(), P.Press(2, 4, 1, 9))
    assert pool.pressures[pid] == P.Pressure(1, 2, 4, 1, 9, 0, PressureState.OPEN, 0)
    assert pool.next_pressure == 2


@pytest.mark.parametrize(("first", "second", "msg"), [
    (P.CancelPressure(1), P.CancelPressure(1), r"^pressure ticket 1: no transition for event 'cancel' in state 'cancelled'$"),
    (P.CancelPressure(1), P.ExpirePressure(1, 10), r"^pressure ticket 1: no transition for event 'expire' in state 'cancelled'$"),
])
def test_invalid_pressure_transition_names_the_ticket(first, second, msg) -> None:
    pool, _ = run(base(), P.Press(2, 4, 1, 9), first)
    with pytest.raises(InvalidTransition, match=msg):
        P.step(pool, second)


def test_invalid_expire_before_the_deadline() -> None:
    pool, _ = run(base(), P.Press(2, 4, 1, 9))
    with pytest.raises(InvalidTransition, match=r"^pressure ticket 1 is due at 9; not expired at 9$"):
        P.step(pool, P.ExpirePressure(1, 9))


def test_expire_just_after_the_deadline() -> None:
    pool, _ = run(base(), P.Press(2, 4, 1, 9), P.ExpirePressure(1, 10))
    assert pool.pressures[1].state is PressureState.EXPIRED


def test_invalid_expire_time() -> None:
    pool, _ = run(base(), P.Press(2, 4, 1, 9))
    with pytest.raises(InvalidArgument, match=r"^now must be an int >= 0, got -1$"):
        P.step(pool, P.ExpirePressure(1, -1))


# --- every refusal names what was wrong (STYLE 6) ------------------------------------------

_CLAIMED = (P.Submit(1, 3, 0), P.Claim(1, 1))
_PRESSED = (*_CLAIMED, P.Press(1, 3, 0, 9))

MESSAGES = [
    ("not-an-action", (), object(), InvalidArgument, r"^not a pressure action: <object object at "),
    ("nbytes", (), P.Submit(1, 0, 0), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("priority", (), P.Submit(1, 3, 1.5), InvalidArgument, r"^priority must be an int, got 1\.5$"),
    ("holder", (), P.Submit(3, 3, 0), UnknownHolder, r"^holder 3 is not registered$"),
    ("never-fits", (), P.Submit(1, 9, 0), CapacityDenied, r"^9 B asked of a pool that governs 8 B$"),
    ("unknown-ticket", (), P.Claim(1, 5), UnknownTicket, r"^ticket 5 was never issued$"),
    ("foreign-ticket", _CLAIMED, P.Release(2, 1), ForeignHolder, r"^ticket 1 belongs to holder 1, not 2$"),
    ("claim-twice", _CLAIMED, P.Claim(1, 1), InvalidTransition,
     r"^ticket 1: no transition for event 'claim' in state 'claimed'$"),
    ("unknown-pressure", (), P.CancelPressure(4), UnknownTicket, r"^pressure ticket 4 was never issued$"),
    ("victims", _PRESSED, P.Answer(1, 1, [1], 0), InvalidArgument,
     r"^victims must be a tuple of distinct ticket ids, got \[1\]$"),
    ("now", _PRESSED, P.Answer(1, 1, (1,), -2), InvalidArgument, r"^now must be an int >= 0, got -2$"),
    ("foreign-pressure", _PRESSED, P.Answer(2, 1, (), 0), ForeignHolder,
     r"^pressure ticket 1 was sent to holder 1, not 2$"),
    ("stale-generation", (*_PRESSED, P.Reconfigure()), P.Answer(1, 1, (1,), 0), StaleGeneration,
     r"^pressure ticket 1 is of generation 0, pool is at 1$"),
    ("cancelled", (*_PRESSED, P.CancelPressure(1)), P.Answer(1, 1, (1,), 0), StaleAnswer,
     r"^pressure ticket 1 is cancelled; its answer credits nothing$"),
    ("late", _PRESSED, P.Answer(1, 1, (1,), 10), StaleAnswer, r"^pressure ticket 1 expired at 9; answered at 10$"),
    ("victim-unknown", _PRESSED, P.Answer(1, 1, (7,), 0), PinnedVictim, r"^victim 7 is not a claimed lease of holder 1$"),
    ("victim-pinned", (*_PRESSED, P.SetUse(1, 1, True, False)), P.Answer(1, 1, (1,), 0), PinnedVictim,
     r"^victim 1 is pinned; it cannot be reclaimed$"),
    ("victim-in-flight", (*_PRESSED, P.SetUse(1, 1, False, True)), P.Answer(1, 1, (1,), 0), PinnedVictim,
     r"^victim 1 is in flight; it cannot be reclaimed$"),
]


@pytest.mark.parametrize(("setup", "act", "error", "msg"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_invalid_pressure_action_message(setup, act, error, msg) -> None:
    pool, _ = run(base(), *setup)
    with pytest.raises(error, match=msg):
        P.step(pool, act)


def test_invalid_submit_when_the_mailbox_is_full() -> None:
    pool, _ = run(P.initial(10, 0, 2, 3, 2), P.Submit(1, 1, 0), P.Submit(1, 1, 0))
    with pytest.raises(MailboxFull, match=r"^all 2 cancellation-mailbox slots are reserved by live tickets$"):
        P.step(pool, P.Submit(1, 1, 0))


@pytest.mark.parametrize("bad_id", [1.0, "1"], ids=repr)
def test_invalid_ticket_and_pressure_id_types(bad_id) -> None:
    # 1.0 == 1 and hashes like it: only the type check keeps it from naming ticket / pressure 1.
    pool, _ = run(base(), *_PRESSED)
    with pytest.raises(UnknownTicket, match=r"^ticket .* was never issued$"):
        P.step(pool, P.Claim(1, bad_id))
    with pytest.raises(UnknownTicket, match=r"^pressure ticket .* was never issued$"):
        P.step(pool, P.CancelPressure(bad_id))


def test_invalid_victim_claimed_by_another_holder() -> None:
    pool, _ = run(base(), P.Submit(2, 3, 0), P.Claim(2, 1), P.Press(1, 3, 0, 9))
    with pytest.raises(PinnedVictim, match=r"^victim 1 is not a claimed lease of holder 1$"):
        P.step(pool, P.Answer(1, 1, (1,), 0))


def test_answer_credits_the_victims_once() -> None:
    pool, _ = run(base(), *_PRESSED)
    new, released = P.step(pool, P.Answer(1, 1, (1,), 9))
    assert released == 3
    assert new.pressures[1] == attrs.evolve(pool.pressures[1], state=PressureState.ANSWERED, released=3)
    assert (new.free, 1 in new.tickets) == (8, False)


def test_answer_open_only_off_credits_a_cancelled_ticket() -> None:
    # The guard's harm: a stale answer is credited (here after cancel) and the ticket's state is kept.
    pool, _ = run(base(), *_PRESSED, P.CancelPressure(1))
    new, released = P.step(pool, P.Answer(1, 1, (1,), 50), GuardSet.without("answer_open_only"))
    assert released == 3
    assert (new.pressures[1].state, new.pressures[1].released, new.free) == (PressureState.CANCELLED, 3, 8)


def test_victims_unpinned_idle_off_reclaims_a_pinned_lease() -> None:
    pool, _ = run(base(), *_PRESSED, P.SetUse(1, 1, True, False))
    new, released = P.step(pool, P.Answer(1, 1, (1,), 0), GuardSet.without("victims_unpinned_idle"))
    assert (released, 1 in new.tickets) == (3, False)
