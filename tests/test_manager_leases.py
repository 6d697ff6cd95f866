# The leases part of ProcessMemoryManager (refimpl.manager.leases) where it meets the other parts:
# a requester lease is an allocation of the one ledger, the pool view reads the manager's records,
# and the use flags, generations and posted cancels act on those records (I6, I7, I13, C5).

from __future__ import annotations

import pytest

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from spec.errors import CapacityDenied, InvalidTransition, PinnedVictim, StaleAnswer, StaleGeneration
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, Tier


def _mgr(guards: GuardSet = ALL_ON) -> tuple[ProcessMemoryManager, int, int, int]:
    m = ProcessMemoryManager(guards=guards, aging_bound=2, mailbox=8)
    h1, h2 = m.register_holder("a"), m.register_holder("b")
    dev = m.register_authority("gpu0", Tier.DEVICE, 100)
    return m, h1, h2, dev


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_lease_is_an_allocation_of_the_one_ledger(on) -> None:
    m, h1, _, dev = _mgr()
    with contracts.contracts(on):
        t = m.pool_try_reserve(h1, dev, 30)
        (lease,) = [x for x in m.abstract().allocations.values()]
        assert lease.state is AllocState.LIVE and lease.charge == 30 and lease.holder == h1
        pool = m.abstract_pool(dev)
        assert pool.tickets[t].grant == lease.id and pool.tickets[t].state is TicketState.CLAIMED
        assert pool.free == m.snapshot(dev).limit - m.snapshot(dev).used == 70
        m.release(h1, lease.id)  # the ledger's own release retires the lease: the ticket names nothing now
        assert not m.abstract_pool(dev).tickets and m.snapshot(dev).used == 0
        with pytest.raises(InvalidTransition, match="already completed"):
            m.pool_release(h1, t)


@pytest.mark.parametrize("guards, taken", [(ALL_ON, False), (GuardSet.without("victims_unpinned_idle"), True)],
                         ids=["guard-on", "guard-off"])
def test_a_pinned_lease_is_never_a_victim_of_the_composed_answer(guards, taken) -> None:
    m, h1, _, dev = _mgr(guards)
    with contracts.contracts(False):
        t = m.pool_try_reserve(h1, dev, 40)
        lease = m.abstract_pool(dev).tickets[t].grant
        m.pool_set_use(h1, t, True, False)
        pid = m.open_pressure(h1, dev, 40)
        if taken:
            assert m.answer(h1, pid, (lease,)) == 40  # the harm the guard prevents: pinned bytes reclaimed
        else:
            with pytest.raises(PinnedVictim, match="pinned"):
                m.answer(h1, pid, (lease,))
            assert m.snapshot(dev).used == 40 and m.abstract_pool(dev).tickets[t].pinned


def test_device_loss_and_termination_retire_the_lease_from_the_pool_view() -> None:
    m, h1, _, dev = _mgr()
    with contracts.contracts(True):
        t = m.pool_try_reserve(h1, dev, 10)
        m.lose_device(dev)
        assert m.abstract_pool(dev).tickets[t].state is TicketState.CLAIMED  # charged until termination
        m.confirm_termination(dev)
        assert not m.abstract_pool(dev).tickets and m.snapshot(dev).used == 0


def test_reconfigure_fails_only_that_ledgers_pending_tickets() -> None:
    m, h1, h2, dev = _mgr()
    host = m.register_authority("host", Tier.HOST, 10)
    with contracts.contracts(True):
        m.pool_try_reserve(h1, dev, 100)
        m.pool_try_reserve(h1, host, 10)
        wait_dev = m.pool_submit(h2, dev, 5)
        wait_host = m.pool_submit(h2, host, 5)
        pid = m.pool_press(h1, dev, 5, 0, 9)
        m.pool_reconfigure(dev)
        assert wait_dev not in m.abstract_pool(dev).tickets
        assert m.abstract_pool(host).tickets[wait_host].state is TicketState.PENDING
        assert m.abstract_pool(dev).generation == 1 and m.abstract_pool(host).generation == 0
        with pytest.raises(StaleGeneration, match="generation 0"):
            m.pool_answer(h1, pid, (), 1)


def test_try_reserve_never_goes_ahead_of_a_waiter() -> None:
    m, h1, h2, dev = _mgr()
    with contracts.contracts(True):
        m.pool_try_reserve(h1, dev, 60)
        m.pool_submit(h2, dev, 50)  # waits: 40 B free
        with pytest.raises(CapacityDenied, match="1 waiting"):
            m.pool_try_reserve(h1, dev, 10)  # fits, but a ticket is waiting (I13)


@pytest.mark.parametrize("first", ["refused-pool", "composed"])
def test_a_posted_cancel_is_applied_first_by_the_next_operation_of_any_front_end(first: str) -> None:
    m, h1, h2, dev = _mgr()
    with contracts.contracts(True):
        m.pool_try_reserve(h1, dev, 100)
        t = m.pool_submit(h2, dev, 5)
        m.drop(h2, t)
        assert t in m.abstract_pool(dev).tickets  # posted only: drop takes no lock
        if first == "refused-pool":
            with pytest.raises(CapacityDenied):
                m.pool_try_reserve(h2, dev, 500)  # the post is applied first; the refusal itself changes nothing
        else:
            m.press(h1, dev, 1)
        assert t not in m.abstract_pool(dev).tickets and not m._mailbox
        before = m.abstract_manager()
        with pytest.raises(CapacityDenied):
            m.pool_try_reserve(h2, dev, 500)
        assert m.abstract_manager() == before


def test_expired_pressure_refuses_late_answers() -> None:
    m, h1, _, dev = _mgr()
    with contracts.contracts(True):
        t = m.pool_try_reserve(h1, dev, 10)
        pid = m.pool_press(h1, dev, 10, 0, 3)
        with pytest.raises(InvalidTransition, match="not expired at 3"):
            m.expire_pressure(pid, 3)
        m.expire_pressure(pid, 4)
        assert m.abstract_pool(dev).pressures[pid].state.value == "expired"
        assert pid not in m.abstract_manager().pressures  # closed: not an open ticket of the composed view
        assert m.abstract_pool(dev).tickets[t].state is TicketState.CLAIMED


def test_closed_composed_pressure_tickets_are_forgotten_and_answers_to_them_stale() -> None:
    m, h1, _, dev = _mgr()
    with contracts.contracts(True):
        for _ in range(50):  # an arena pressed at every run boundary, answering nothing
            m.answer(h1, m.open_pressure(h1, dev, 1), ())
        assert len(m._pressure_log) == 0 and not m.abstract_pool(dev).pressures  # no record per closed ticket
        with pytest.raises(StaleAnswer, match="closed"):
            m.pool_answer(h1, 50, (), 0)
        with pytest.raises(InvalidTransition, match="already closed"):
            m.expire_pressure(50, 9)


# --- posted cancels: drop (no lock) and drain (pinned by the mutation run of refimpl/manager/leases.py) ------


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_drain_applies_each_post_once_and_credits_a_grant(on) -> None:
    m, h1, h2, dev = _mgr()
    with contracts.contracts(on):
        m.pool_try_reserve(h1, dev, 60)
        granted = m.pool_submit(h2, dev, 30)  # 40 B free: granted at once, 30 B charged
        waiting = m.pool_submit(h2, dev, 35)  # 10 B free: waits
        pending = m.pool_submit(h2, dev, 90)  # never fits while the lease stays
        tickets = m.abstract_pool(dev).tickets
        assert (tickets[granted].state, tickets[waiting].state) == (TicketState.GRANTED, TicketState.PENDING)
        m.drop(h2, pending)
        m.drop(h2, granted)
        m.drop(h2, granted)  # a repeat posts nothing more
        assert m.abstract_pool(dev).tickets == tickets  # a post changes nothing until it is applied
        m.drain()
        pool = m.abstract_pool(dev)
        assert set(pool.tickets) == {1, waiting}  # both posts applied; the grant's 30 B went to the waiter (I13)
        assert pool.tickets[waiting].state is TicketState.GRANTED and m.snapshot(dev).used == 95
        m.drain()  # nothing posted: nothing moves
        assert m.abstract_pool(dev) == pool


def test_drain_wakes_the_waiter_a_drained_cancel_grants() -> None:
    m, h1, h2, dev = _mgr()
    with contracts.contracts(False):
        m.pool_try_reserve(h1, dev, 60)
        granted = m.pool_submit(h2, dev, 30)
        waiting = m.pool_submit(h1, dev, 35)
        assert m.wait(waiting, 0) is False  # its waiter's event exists, unset
        m.drop(h2, granted)
        m.drain()
        assert m._tickets[waiting].event.is_set()


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_bad_drops_are_refused_typed_and_post_nothing(on) -> None:
    from spec.errors import ForeignHolder, UnknownHolder, UnknownTicket

    m, h1, h2, dev = _mgr()
    with contracts.contracts(on):
        t = m.pool_submit(h2, dev, 10)
        with pytest.raises(UnknownTicket, match=r"^ticket 99 was never issued$"):
            m.drop(h2, 99)
        with pytest.raises(UnknownTicket, match=rf"^ticket {t + 1} was never issued$"):
            m.drop(h2, t + 1)  # the next id: not issued yet
        with pytest.raises(UnknownTicket, match=r"^ticket '1' was never issued$"):
            m.drop(h2, "1")
        with pytest.raises(ForeignHolder, match=rf"^ticket {t} is holder {h2}'s, not {h1}'s$"):
            m.drop(h1, t)
        with pytest.raises(UnknownHolder):
            m.drop(7, t)
        m.drain()
        assert m.abstract_pool(dev).tickets[t].state is TicketState.GRANTED  # no post was applied
        m.pool_cancel(h2, t)
        m.drop(h2, t)  # a retired ticket: a no-op, no error
        m.drain()
        assert m.snapshot(dev).used == 0 and not m.abstract_pool(dev).tickets


def test_a_repeated_drop_is_a_no_op_even_with_every_slot_posted() -> None:
    # mailbox=8: at most 8 live tickets, so 8 posts fill it; repeating one of them must not be MailboxFull.
    m, h1, h2, dev = _mgr()
    with contracts.contracts(False):
        tickets = [m.pool_submit(h2, dev, 20) for _ in range(8)]  # 5 granted (100 B), 3 waiting
        for t in tickets:
            m.drop(h2, t)
        m.drop(h2, tickets[0])
        m.drain()
        assert not m.abstract_pool(dev).tickets and m.snapshot(dev).used == 0


# --- pool_try_reserve's own checks and figures (pinned by the mutation run of refimpl/manager/leases.py) --------


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_try_reserve_bad_input_is_refused_whole(on) -> None:
    from spec.errors import InvalidArgument, InvalidBytes

    m, h1, _, dev = _mgr()
    view = m.register_alias(dev, "uvm")
    with contracts.contracts(on):
        m.pool_try_reserve(h1, dev, 60)
        before = m.abstract_manager()
        for call, error, match in [
            (lambda: m.pool_try_reserve(h1, dev, 0), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
            (lambda: m.pool_try_reserve(h1, dev, -1), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got -1$"),
            (lambda: m.pool_try_reserve(h1, dev, 1, "0"), InvalidArgument, r"^priority must be an int, got '0'$"),
            (lambda: m.pool_try_reserve(h1, dev, 1, 0, "kv"), InvalidArgument, r"^role must be a Role, got 'kv'$"),
            (lambda: m.pool_try_reserve(h1, view, 1), InvalidArgument,
             rf"^authority {view} is a view of {dev}; tickets name the canonical ledger$"),
            (lambda: m.pool_try_reserve(h1, dev, 41), CapacityDenied, r"^try-only: 41 B asked, 40 B free, 0 waiting$"),
        ]:
            with pytest.raises(error, match=match):
                call()
            assert m.abstract_manager() == before


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_try_reserve_books_the_role_and_priority_asked(on) -> None:
    from spec.types import Role

    m, h1, _, dev = _mgr()
    with contracts.contracts(on):
        t = m.pool_try_reserve(h1, dev, 1)  # defaults: priority 0, role STAGING
        u = m.pool_try_reserve(h1, dev, 40, 7, Role.KV)
        pool, allocs = m.abstract_pool(dev), m.abstract().allocations
        assert (pool.tickets[t].priority, allocs[pool.tickets[t].grant].role) == (0, Role.STAGING)
        assert (pool.tickets[u].priority, allocs[pool.tickets[u].grant].role) == (7, Role.KV)
        assert allocs[pool.tickets[u].grant].nbytes == 40 and m.snapshot(dev).used == 41


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_wait_answers_at_once_for_a_resolved_ticket_and_checks_its_arguments(on) -> None:
    from spec.errors import InvalidArgument, UnknownTicket

    m, h1, h2, dev = _mgr()
    with contracts.contracts(on):
        m.pool_try_reserve(h1, dev, 60)
        granted, pending = m.pool_submit(h2, dev, 30), m.pool_submit(h2, dev, 35)
        assert m.wait(granted, None) is True  # granted: resolved already, even with no timeout
        assert m.wait(pending, 0) is False  # still pending: a zero timeout runs out at once
        m.pool_cancel(h2, pending)
        assert m.wait(pending, None) is True  # retired: resolved
        with pytest.raises(UnknownTicket, match=r"^ticket 4 was never issued$"):
            m.wait(4, 0)
        with pytest.raises(InvalidArgument, match=r"^timeout must be finite and in \[0, \d+\] s, got -1$"):
            m.wait(granted, -1)


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_pool_press_records_what_was_asked_and_refuses_bad_input_whole(on) -> None:
    from spec.errors import InvalidArgument, InvalidBytes

    m, h1, _, dev = _mgr()
    view = m.register_alias(dev, "uvm")
    with contracts.contracts(on):
        m.pool_try_reserve(h1, dev, 10)
        p = m.pool_press(h1, dev, 5)  # defaults: priority 0, deadline 0
        q = m.pool_press(h1, dev, 6, 3, 9)
        prs = m.abstract_pool(dev).pressures
        assert (prs[p].target, prs[p].priority, prs[p].deadline) == (5, 0, 0)
        assert (prs[q].target, prs[q].priority, prs[q].deadline) == (6, 3, 9)
        before = m.abstract_manager(), m.abstract_pool(dev)
        for call, error, match in [
            (lambda: m.pool_press(h1, dev, 0), InvalidBytes, r"^target must be in \[1, 2\*\*63-1\], got 0$"),
            (lambda: m.pool_press(h1, dev, 1, "0"), InvalidArgument, r"^priority must be an int, got '0'$"),
            (lambda: m.pool_press(h1, dev, 1, 0, -1), InvalidArgument, r"^deadline must be an int >= 0, got -1$"),
            (lambda: m.pool_press(h1, view, 1), InvalidArgument,
             rf"^authority {view} is a view of {dev}; pressure names the canonical ledger$"),
        ]:
            with pytest.raises(error, match=match):
                call()
            assert (m.abstract_manager(), m.abstract_pool(dev)) == before


# A dropped ticket is never granted by a composed operation's round: the post is applied before the next
# operation of any front end (tests/test_manager_drop.py checks every front end; issue #21).
@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_composed_release_never_grants_a_dropped_pending_ticket(on) -> None:
    m, h1, h2, dev = _mgr()
    with contracts.contracts(on):
        lease = m.pool_try_reserve(h1, dev, 100)
        alloc = m.abstract_pool(dev).tickets[lease].grant
        t = m.submit(h2, dev, 30)  # composed submit: 0 B free, pending
        assert m.abstract_manager().tickets[t].state is TicketState.PENDING
        m.drop(h2, t)
        m.release(h1, alloc)  # the post is applied first: its round finds no ticket t to grant
        assert t not in m.abstract_manager().tickets and m.snapshot(dev).used == 0
        m.drain()  # exactly once: nothing more is credited
        assert m.snapshot(dev).used == 0 and t not in m.abstract_manager().tickets
