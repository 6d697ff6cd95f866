# Issue #14, findings 1 and 5: Pool under interrupted waits and hostile arguments.
#
# Every rejection is typed, names the problem in its message, and leaves the
# WHOLE abstract pool unchanged; an interrupted `acquire` leaves no grant
# behind (the bytes come back exactly once).

from __future__ import annotations

import signal
import threading
import time
from decimal import Decimal

import numpy as np
import pytest

from invariants.pressure import check_all
from pool_harness import Pool, pool as make_pool
from spec.errors import HolderCallbackFailed, InvalidArgument, InvalidBytes, UnknownHolder, UnknownTicket


def _settled(gov: Pool) -> None:
    pool = gov.abstract()
    assert not pool.tickets, pool.tickets
    assert pool.free == pool.capacity - pool.fixed
    check_all(pool)


# --- finding 1: a grant leaks when acquire is interrupted -------------------------


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -1, "1", 2**64, Decimal(1), True, np.float64(1.0),
                                     threading.TIMEOUT_MAX * 2],
                         ids=["inf", "nan", "negative", "str", "2**64", "Decimal", "bool", "numpy", "past-max"])
def test_acquire_rejects_invalid_timeout_before_submitting(timeout) -> None:
    g = make_pool(100, holders=2)
    b = g.pool_try_reserve(1, 100)
    before = g.abstract()
    with pytest.raises(InvalidArgument, match="timeout"):
        g.acquire(2, 10, timeout=timeout)
    assert g.abstract() == before  # no ticket was opened
    g.release(1, b)
    assert g.free() == 100
    _settled(g)


def test_acquire_interrupted_by_a_real_sigint_while_parked_leaves_no_grant() -> None:
    assert threading.current_thread() is threading.main_thread()
    g = make_pool(100, holders=2)
    b = g.pool_try_reserve(1, 100)
    main = threading.main_thread().ident

    def interrupt() -> None:
        time.sleep(0.2)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        g.acquire(2, 10, timeout=10)
    g.release(1, b)  # old code: this grants the orphaned ticket, and free() stays 90 forever
    assert g.free() == 100
    _settled(g)


def test_acquire_interrupted_after_claiming_returns_the_lease() -> None:
    g = make_pool(100, holders=1)
    claim = g.mgr._claim  # the manager's claim body, which its acquire runs under the lock

    def claim_then_interrupt(holder: int, ticket: int) -> int:
        claim(holder, ticket)
        raise KeyboardInterrupt  # arrives after the claim, before acquire returns the lease

    g.mgr._claim = claim_then_interrupt  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        g.acquire(1, 10, timeout=1)
    _settled(g)


def test_wait_rejects_a_ticket_never_issued() -> None:
    g = make_pool(100, holders=1)
    before = g.abstract()
    with pytest.raises(UnknownTicket, match="never issued"):
        g.wait(7, 0)
    with pytest.raises(UnknownTicket, match="never issued"):
        g.wait("1", 0)
    assert g.abstract() == before


# --- finding 5: unchecked constructor and registration arguments ------------------


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(capacity="100"), InvalidBytes, "capacity"),
    (dict(capacity=2.5), InvalidBytes, "capacity"),
    (dict(capacity=float("inf")), InvalidBytes, "capacity"),
    (dict(capacity=True), InvalidBytes, "capacity"),
    (dict(capacity=2**64), InvalidBytes, "capacity"),
    (dict(capacity=np.int64(100)), InvalidBytes, "capacity"),
    (dict(capacity=0), InvalidBytes, "capacity"),
    (dict(capacity=100, fixed=101), InvalidBytes, "limit"),
    (dict(capacity=100, fixed=-1), InvalidBytes, "limit"),
    (dict(capacity=100, fixed=1.0), InvalidBytes, "limit"),
    (dict(capacity=100, aging_bound=0.5), InvalidArgument, "aging_bound"),
    (dict(capacity=100, aging_bound=0), InvalidArgument, "aging_bound"),
    (dict(capacity=100, mailbox=2**64), InvalidArgument, "mailbox"),
    (dict(capacity=100, mailbox=True), InvalidArgument, "mailbox"),
    (dict(capacity=100, guards="all"), InvalidArgument, "guards"),
])
def test_manager_and_pool_refuse_invalid_parameters(kwargs, error, match) -> None:
    # The pool's figures are the manager's: its constructor (aging bound, mailbox, guards), the
    # authority's capacity, and `fixed` as a lowered limit (capacity - fixed).
    with pytest.raises(error, match=match):
        make_pool(**kwargs)


@pytest.mark.parametrize("fn", [42, None, "callback"])
def test_register_callback_rejects_a_non_callable(fn) -> None:
    g = make_pool(100, holders=1)
    before = g.abstract()
    with pytest.raises(InvalidArgument, match="callable"):
        g.register_callback(1, fn)
    g.press(1, 10)  # old code: the next press opened a ticket and then raised TypeError
    assert g.abstract().next_pressure == before.next_pressure + 1


def test_a_raising_callback_is_a_typed_error_and_closes_its_ticket() -> None:
    g = make_pool(100, holders=1)
    g.register_callback(1, lambda *a: 1 / 0)
    with pytest.raises(HolderCallbackFailed, match="ZeroDivisionError"):
        g.press(1, 10, deadline=5)
    (r,) = g.abstract().pressures.values()
    assert r.state.value == "cancelled" and r.released == 0
    check_all(g.abstract())


def test_a_rejected_call_changes_nothing_of_its_own() -> None:
    g = make_pool(100, holders=1)
    t = g.submit(1, 10)
    g.drop(1, t)
    g.drain()  # the post is applied at the entry of the next operation of any front end (issue #21), as here
    before = g.abstract()
    with pytest.raises(UnknownHolder, match="not registered"):
        g.submit("x", 1)
    with pytest.raises(InvalidBytes, match="nbytes"):
        g.pool_try_reserve(1, 2.5)
    assert g.abstract() == before  # the refused calls changed nothing of their own
    _settled(g)


def test_bogus_drops_cannot_block_a_legitimate_drop() -> None:
    g = make_pool(100, holders=2, mailbox=1)
    t = g.submit(2, 10)
    for bogus in [(1, 99), (1, "x"), (1, t)]:
        with pytest.raises((UnknownTicket, Exception), match="never issued|not 1's"):
            g.drop(*bogus)
    g.drop(2, t)  # old code: MailboxFull
    g.drain()
    _settled(g)
