# The local contract's own books (refimpl.manager.contract_books): exact across every path, and `checkpoint`.
#
# Level "local" checks conservation against books it keeps from the rows each operation touched. A path that
# keeps none (`drain`, contracts switched off, the other level) must leave the
# next checked operation recounting, never trusting stale books: each case below runs such a path between two
# checked operations on the same ledger and must raise nothing, then a `checkpoint` must find the books exact.
# Removing any one `forget` (or the switch watching the books) makes its case raise a false InvariantViolation.
#
# The partial views of the frozen-view path check the parts' partition of `used` on the view restricted by the
# books: a grant that books no reservation is caught there, on a ledger of 10,000 leases, and nowhere else.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager, checkpoint
from refimpl.verify.manager_hooks import abstract_manager
from spec.guards import GuardSet
from spec.types import Role, Tier
from refimpl_manager_harness import lease

DEV, KV = Tier.DEVICE, Role.KV


def _world(guards: GuardSet | None = None) -> tuple[ProcessMemoryManager, int, int, int, int]:
    """gpu0 of 1000 B with a 10 B lease x and a 20 B reservation y, both booked by checked operations."""
    pmm = ProcessMemoryManager(guards=guards or GuardSet())
    a, h = pmm.register_authority("gpu0", DEV, 1000), pmm.register_holder("kv")
    x = lease(pmm, h, a, 10)
    return pmm, a, h, x, pmm.reserve(h, a, DEV, 20, KV)


def _booked(pmm: ProcessMemoryManager, h: int, pool: str) -> int:
    """A ledger whose books a checked operation counted (a reservation, cancelled: nothing stays charged)."""
    a = pmm.register_authority(pool, DEV, 1000)
    pmm.cancel(h, pmm.reserve(h, a, DEV, 1, KV))
    return a


def _drain(pmm: ProcessMemoryManager, h: int) -> int:
    a = _booked(pmm, h, "drain")
    pmm.submit(h, a, 30)  # granted at once: reservations
    t = pmm.submit(h, a, 40)
    pmm.cancel(h, pmm.reserve(h, a, DEV, 1, KV))  # a checked operation counts the books again
    pmm.drop(h, t)
    pmm.drain()  # retires t's reservation (40 B): no other operation runs around it
    return a


def _off(pmm: ProcessMemoryManager, h: int) -> int:
    a = _booked(pmm, h, "off")
    with contracts.contracts(False):
        pmm.commit(h, pmm.reserve(h, a, DEV, 60, KV), 60)
    return a


def _full(pmm: ProcessMemoryManager, h: int) -> int:
    a = _booked(pmm, h, "full")
    with contracts.contracts(True, level="full"):
        pmm.commit(h, pmm.reserve(h, a, DEV, 70, KV), 70)
    return a


BETWEEN: dict[str, Callable[[ProcessMemoryManager, int], int]] = {
    "drain": _drain, "contracts_off": _off, "level_full": _full}


@pytest.mark.parametrize("path", sorted(BETWEEN))
def test_a_path_that_keeps_no_books_leaves_them_to_be_counted_again(path: str) -> None:
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    with contracts.contracts(True, level="local"):
        a = BETWEEN[path](pmm, h)
        assert pmm.snapshot(a).used > 0  # the path left bytes charged that the books never saw
        w = lease(pmm, h, a, 5)  # checked against books that must not be the stale ones
        pmm.release(h, w)
        checkpoint(pmm)


def test_a_violation_leaves_the_books_to_be_counted_again() -> None:
    """A release that found its row drifted raised after its body ran: the books it had half moved are dropped,
    so the next operation on the (sound again) ledger is checked against a fresh count, not a false figure."""
    pmm, a, h, x, y = _world()
    with contracts.contracts(True):
        pmm._allocs[x].charge += 1
        pmm._auths[a].used += 1
        with pytest.raises(InvariantViolation, match="when the contract last saw it"):
            pmm.release(h, x)  # retired 11 B: the ledger adds up again (y's 20 B)
        pmm.cancel(h, y)
        checkpoint(pmm)


# --- checkpoint ------------------------------------------------------------------------------------------

def test_checkpoint_with_contracts_off_recomputes_every_sum() -> None:
    pmm, a, h, x, y = _world()
    with contracts.contracts(False):
        checkpoint(pmm)  # negative control: a sound ledger
        pmm._auths[a].used += 1
        with pytest.raises(InvariantViolation, match=r"^I1: authority 1: used 31 B, its allocations charge 30 B$"):
            checkpoint(pmm)


def test_checkpoint_changes_nothing() -> None:
    pmm, a, h, x, y = _world()
    t = pmm.submit(h, a, 7)
    before = abstract_manager(pmm)
    checkpoint(pmm)
    assert abstract_manager(pmm) == before and pmm._tickets[t].state.value == "granted"


def test_checkpoint_runs_every_state_predicate() -> None:
    """A harm the books cannot see (no charge moved): a reservation smaller than its lease (C2)."""
    pmm, a, h, x, y = _world()
    with contracts.contracts(True):
        pmm._allocs[y].reserved = 5
        with pytest.raises(InvariantViolation, match=r"^C2: allocation 2: lease 20 B not covered by reservation 5 B"):
            checkpoint(pmm)


def test_checkpoint_names_a_row_that_left_without_its_books() -> None:
    pmm, a, h, x, y = _world()
    with contracts.contracts(True):
        rec = pmm._allocs.pop(x)
        del pmm._auths[a].allocs[x]
        pmm._auths[a].used -= rec.charge  # conservation adds up: only the books remember the row
        with pytest.raises(InvariantViolation, match=rf"^I1: allocation {x} is charged nothing \(not on the ledger\) "
                                                     r"now, but 10 B when the contract last saw it"):
            checkpoint(pmm)


# --- the partition on a partial view, restricted by the books ------------------------------------------------

@pytest.mark.parametrize("background", [0, 10_000])
@pytest.mark.parametrize("bug", [True, False], ids=["grant_books_nothing", "real_code"])
def test_a_grant_that_books_nothing_is_caught_on_the_partial_view(background: int, bug: bool) -> None:
    """With a pressure ticket open, a submit is checked on partial frozen views. A grant that charges nothing
    (grant_charges_ledger off) leaves every row and `used` as they were: only the parts' partition of `used`, on
    the view restricted by the books, sees the granted bytes no reservation backs. Negative control (real code,
    every guard on): the same steps raise nothing, and the restricted view does not mistake the rows out of view
    for a lost byte."""
    pmm = ProcessMemoryManager(guards=GuardSet.without("grant_charges_ledger") if bug else GuardSet())
    a, h = pmm.register_authority("gpu0", DEV, 1000 + background), pmm.register_holder("kv")
    with contracts.contracts(False):
        for _ in range(background):
            pmm.commit(h, pmm.reserve(h, a, DEV, 1, KV), 1)
    with contracts.contracts(True, level="local"):
        p = pmm.open_pressure(h, a, 1)
        if bug:
            with pytest.raises(InvariantViolation, match=r"^I1: authority 1: used \d+ B, but parts hold 5 B") as exc:
                pmm.submit(h, a, 5)
            assert exc.value.clause == "state_I1_manager.buckets_partition_used"
            return
        pmm.release(h, pmm.claim(h, pmm.submit(h, a, 5)))
        pmm.cancel_pressure(p)
        checkpoint(pmm)


# --- the frozen-view path at level "local" keeps the books too --------------------------------------------

#: (setup, op): setup(pmm, a, h) runs first (its result is `p`); then op(pmm, a, h, x, p) names lease x.
FROZEN: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    # a ledger operation outside the hot set: partial ledger views (`invariants.ledger.check_local`) + the books
    "quarantine": (lambda pmm, a, h: None, lambda pmm, a, h, x, p: pmm.quarantine(h, x, 4)),
    # a hot operation while a pressure ticket is open: partial manager views + the books
    "release_under_pressure": (lambda pmm, a, h: pmm.open_pressure(h, a, 1), lambda pmm, a, h, x, p: pmm.release(h, x)),
    # a composed operation: partial manager views + the books
    "answer": (lambda pmm, a, h: pmm.open_pressure(h, a, 10), lambda pmm, a, h, x, p: pmm.answer(h, p, (x,))),
}


def _frozen(op: str, drift: Callable[[ProcessMemoryManager, int, int], None] | None) -> None:
    pmm, a, h, x, y = _world()
    setup, run = FROZEN[op]
    with contracts.contracts(True, level="local"):
        p = setup(pmm, a, h)
        if drift is None:  # the negative control: a hot operation after it, checked against the books it left
            run(pmm, a, h, x, p)
            pmm.cancel(h, y)
            checkpoint(pmm)
            return
        drift(pmm, a, x)
        run(pmm, a, h, x, p)


def _used_drifts(pmm: ProcessMemoryManager, a: int, x: int) -> None:
    pmm._auths[a].used += 1


def _row_drifts(pmm: ProcessMemoryManager, a: int, x: int) -> None:
    pmm._allocs[x].charge += 1
    pmm._auths[a].used += 1


@pytest.mark.parametrize("op", sorted(FROZEN))
@pytest.mark.parametrize(("drift", "match", "clause"), [
    (_used_drifts, r"^I1: authority 1: used \d+ B, its allocations charge \d+ B \(the rows as the contract booked them\)",
     "local.conserved"),
    (_row_drifts, r"^I1: allocation 1 is charged 11 B before this operation, but 10 B when the contract last saw it",
     "local.row_as_booked"),
    (None, None, None),  # the negative control: the books stay exact
], ids=["used_drifts", "row_changed_between_operations", "books_exact"])
def test_frozen_path_checks_used_and_rows_against_the_books(op: str, drift: Any, match: str, clause: str) -> None:
    if drift is None:
        _frozen(op, None)
        return
    with pytest.raises(InvariantViolation, match=match) as exc:
        _frozen(op, drift)
    assert exc.value.clause == clause
