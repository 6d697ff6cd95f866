"""The arbitration part's paths that no scripted suite pinned (mutation survivors of
`refimpl/manager/arbitration.py`): the live-ticket bound, typed errors on the hot path, what a fast-path
grant records, a claim with `grant_charges_ledger` off, and `acquire`'s clean-up when interrupted.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from invariants._violation import InvariantViolation
from invariants.contracts import contracts
from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.manager.arbitration import RECHECK_S
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import GovernorError, MailboxFull, UnknownTicket
from spec.guards import GuardSet
from spec.types import Origin, Role, Tier


def _mgr(**kw: Any) -> tuple[ProcessMemoryManager, int, int]:
    p = ProcessMemoryManager(**kw)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.HOST, 64)
    return p, h, a


def _free(p: ProcessMemoryManager, a: int) -> int:
    auth = abstract_manager(p).ledger.authorities[a]
    return auth.limit - auth.used


@pytest.mark.parametrize("on", [True, False])
def test_live_tickets_are_bounded_by_the_mailbox(on: bool) -> None:
    with contracts(on=on):
        p, h, a = _mgr(mailbox=2)
        p.submit(h, a, 8)
        p.submit(h, a, 60)  # pending
        before = abstract_manager(p)
        with pytest.raises(MailboxFull, match="all 2 cancellation-mailbox slots are held by live tickets"):
            p.submit(h, a, 1)
        assert abstract_manager(p) == before


@pytest.mark.parametrize("on", [True, False])
def test_unhashable_holder_or_authority_is_a_typed_error(on: bool) -> None:
    with contracts(on=on):
        p, h, a = _mgr()
        before = abstract_manager(p)
        for args in (([h], a), (h, [a])):
            with pytest.raises(GovernorError):
                p.submit(*args, 8)  # type: ignore[arg-type]
        assert abstract_manager(p) == before


def test_a_fast_path_grant_records_its_priority_and_role() -> None:
    with contracts(on=False):
        p, h, a = _mgr()
        t = p.submit(h, a, 8, 5, Role.WEIGHTS)
        tk = abstract_manager(p).tickets[t]
        assert (tk.role, tk.priority, tk.nbytes) == (Role.WEIGHTS, 5, 8)
        lease = p.claim(h, t)
        alloc = abstract_manager(p).ledger.allocations[lease]
        assert (alloc.role, alloc.origin, alloc.nbytes) == (Role.WEIGHTS, Origin.GRANTED, 8)


def test_claim_with_grant_charges_ledger_off_books_the_full_lease_then() -> None:
    with contracts(on=False):
        p, h, a = _mgr(guards=GuardSet.without("grant_charges_ledger"))
        t = p.submit(h, a, 8, 2, Role.WEIGHTS)
        assert _free(p, a) == 64  # nothing booked at the grant
        lease = p.claim(h, t)
        alloc = abstract_manager(p).ledger.allocations[lease]
        assert (alloc.holder, alloc.tier, alloc.role, alloc.origin, alloc.nbytes, alloc.charge) == (
            h, Tier.HOST, Role.WEIGHTS, Origin.GRANTED, 8, 8)
        assert _free(p, a) == 56


def test_cancel_of_an_unbooked_grant_reports_its_bytes() -> None:
    with contracts(on=False):
        p, h, a = _mgr(guards=GuardSet.without("grant_charges_ledger"))
        t = p.submit(h, a, 8)
        assert p.cancel_ticket(h, t) == 8 and _free(p, a) == 64


def test_cancel_of_an_unbooked_grant_runs_a_round_on_its_ledger() -> None:
    """`grant_charges_ledger` off: the cancelled grant credits nothing, but a granted ticket's retirement is a
    round on its ledger all the same (`spec.manager._arbitrate`): the waiter there ages, once."""
    with contracts(on=False):
        p, h, a = _mgr(guards=GuardSet.without("grant_charges_ledger"))
        t = p.submit(h, a, 8)  # granted, nothing booked
        p.commit(h, p.reserve(h, a, Tier.HOST, 60, Role.KV), 60)
        w = p.submit(h, a, 8)  # pending: 4 B free; its submit's round ages it to 1
        p.cancel_ticket(h, t)
        tk = abstract_manager(p).tickets[w]
        assert (tk.state.value, tk.age) == ("pending", 2)


def test_acquire_with_a_sink_interrupting_its_submit_times_the_ticket_out() -> None:
    def sink(ev: dict[str, Any]) -> None:
        if ev["kind"] == "submit":
            raise KeyboardInterrupt

    p, h, a = _mgr(trace=sink)
    with pytest.raises(KeyboardInterrupt) as info:
        p.acquire(h, a, 8)
    assert "ortmem: acquire timed out its ticket 1 (credited once)" in info.value.__notes__
    m = abstract_manager(p)
    assert _free(p, a) == 64 and len(m.tickets) == 0 and len(m.ledger.allocations) == 0


def test_acquire_parking_with_the_lock_held_is_an_i7_violation_and_times_out() -> None:
    with contracts(on=True):
        p, h, a = _mgr()
        p.submit(h, a, 60)
        with p._lock, pytest.raises(InvariantViolation, match="waiting on a ticket with the ledger lock held"):
            p.acquire(h, a, 10, timeout=0)
        assert [t.id for t in abstract_manager(p).tickets.values() if t.state.value == "pending"] == []


@pytest.mark.parametrize("on", [True, False])
def test_claim_of_an_unhashable_ticket_is_a_typed_error(on: bool) -> None:
    with contracts(on=on):
        p, h, a = _mgr()
        p.submit(h, a, 8)
        before = abstract_manager(p)
        with pytest.raises(GovernorError):
            p.claim(h, [1])  # type: ignore[arg-type]
        assert abstract_manager(p) == before


def test_a_ticket_matured_at_exactly_the_bound_goes_before_a_higher_priority() -> None:
    """I13: age == aging_bound is matured; a round then grants it ahead of a later, higher-priority ticket."""
    p = ProcessMemoryManager(aging_bound=2)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.HOST, 64)
    p.try_reserve(h, a, 54)
    small = p.try_reserve(h, a, 10)
    old, urgent = p.submit(h, a, 10, 0), p.submit(h, a, 10, 5)
    assert abstract_manager(p).tickets[old].age == 2  # matured: at the bound
    p.release(h, small)  # room for one of them
    tickets = abstract_manager(p).tickets
    assert (tickets[old].state.value, tickets[urgent].state.value) == ("granted", "pending")


def test_a_lone_waiter_ages_once_per_round() -> None:
    p = ProcessMemoryManager(aging_bound=4)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.HOST, 64)
    p.try_reserve(h, a, 60)
    leases = [p.try_reserve(h, a, 1) for _ in range(2)]
    t = p.submit(h, a, 10)
    ages = [abstract_manager(p).tickets[t].age]
    for lease in leases:
        p.release(h, lease)  # a round that still cannot grant it
        ages.append(abstract_manager(p).tickets[t].age)
    assert ages == [1, 2, 3]


# The room freed once acquire is (about to be) parked, or after its first recheck slice: a waiter re-reads its
# ticket every RECHECK_S, and a ticket still pending then goes on waiting.
@pytest.mark.parametrize("delay", [0.05, RECHECK_S * 2.5], ids=["parked", "past-a-recheck-slice"])
def test_acquire_without_a_timeout_parks_until_granted(delay: float) -> None:
    p, h, a = _mgr()
    big = p.try_reserve(h, a, 60)
    timer = threading.Timer(delay, p.release, (h, big))
    timer.start()
    try:
        lease = p.acquire(h, a, 10)
    finally:
        timer.join()
    assert type(lease) is int and abstract_manager(p).ledger.allocations[lease].nbytes == 10


@pytest.mark.parametrize("on", [True, False])
def test_traced_acquire_cancel_and_timeout_record_their_events(on: bool) -> None:
    events: list[dict[str, Any]] = []
    with contracts(on=on):
        p, h, a = _mgr(trace=events.append)
        lease = p.acquire(h, a, 8)
        t1, t2 = p.submit(h, a, 8), p.submit(h, a, 8)
        assert (p.cancel_ticket(h, t1), p.timeout_ticket(h, t2)) == (8, 8)
    assert [e["kind"] for e in events[3:]] == ["submit", "grant", "claim", "submit", "grant", "submit", "grant",
                                               "cancel_ticket", "timeout_ticket"]
    assert events[5]["payload"]["result"] == events[4]["payload"]["result"] == lease
    r = replay_manager_lines([json.dumps(e).encode() + b"\n" for e in events])
    assert r.ok, r.describe()


def test_never_issued_ticket_ids_are_unknown() -> None:
    p, h, a = _mgr()
    t = p.submit(h, a, 8)
    for call in (p.claim, p.cancel_ticket, p.timeout_ticket):
        with pytest.raises(UnknownTicket, match=f"ticket {t + 1} was never issued"):
            call(h, t + 1)
