# The composed refimpl manager (issue #10): tickets, pressure, transactions, limits and device loss on ONE ledger.
#
# Scripted scenarios assert the whole `abstract_manager()` where a part meets another (C1, C3, C4, C5, C8,
# I1, I2, I5, I6, I7, I13); each cross-cutting guard switched off shows its harm. Bad input:
# tests/test_manager_bad_input.py; real threads: tests/test_manager_threads.py; refinement against
# spec.manager: tests/test_manager_differential.py.

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import conserved, lease, make, parked, used
from threads_harness import JOIN_S

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import commit_limit, prepare_limit, reserve_tx
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager, ledger_lock
from spec import manager_actions as M
from spec.errors import (
    CapacityDenied,
    DeviceLost,
    HolderCallbackFailed,
    InvalidTransition,
    UnknownTicket,
)
from spec.guards import GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, Role, Tier

G, P = TicketState.GRANTED, TicketState.PENDING


def contracts_off(fn: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(fn)  # its signature too: a parametrized test's arguments reach it
    def run(*args: Any, **kwargs: Any) -> None:
        with contracts.contracts(False):
            fn(*args, **kwargs)
    return run


# --- tickets and arbitration ---------------------------------------------------


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_grant_is_charged_before_the_waiter_wakes(on: bool, traced: bool) -> None:
    events: list[dict[str, Any]] = []
    pmm, w = make(trace=events.append if traced else None)
    big = lease(pmm, w.h1, w.a, 80)
    seen: dict[str, Any] = {}
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(pmm.acquire(w.h2, w.a, 50, timeout=JOIN_S)))
    t.start()
    while (tk := pmm._tickets.get(1)) is None or tk.event is None:  # the waiter has parked on its own event
        pass
    real_set = tk.event.set

    def spy_set() -> None:  # record the ledger the moment the waiter is woken
        got: list[bool] = []
        prober = threading.Thread(target=lambda: got.append(ledger_lock(pmm).probe(1.0)))
        prober.start()
        prober.join()
        seen["lock_free"] = got == [True]
        seen["state"] = abstract_manager(pmm)
        real_set()
    tk.event.set = spy_set  # type: ignore[method-assign]
    m = abstract_manager(pmm)
    assert m.tickets[1].state is P and m.ledger.authorities[w.a].used == 80
    with contracts.contracts(on):
        pmm.release(w.h1, big)
    t.join(JOIN_S)
    s = seen["state"]
    assert seen["lock_free"], "the waiter was woken with the ledger lock held (I7)"
    assert s.tickets[1].state is G and s.ledger.authorities[w.a].used == 50  # charged before the wake
    assert s.ledger.allocations[s.tickets[1].allocation].state is AllocState.PROVISIONAL
    conserved(s)
    m = abstract_manager(pmm)
    assert result == [s.tickets[1].allocation] and not m.tickets
    assert m.ledger.allocations[result[0]].state is AllocState.LIVE and m.ledger.authorities[w.a].used == 50


def test_claim_commits_the_grant_into_a_lease() -> None:
    pmm, w = make()
    tid = pmm.submit(w.h1, w.a, 30, role=Role.WEIGHTS)
    m = abstract_manager(pmm)
    t = m.tickets[tid]
    assert (t.state, t.age, t.allocation) == (G, 1, 1) and m.ledger.authorities[w.a].used == 30
    assert pmm.claim(w.h1, tid) == t.allocation
    m2 = abstract_manager(pmm)
    r = m2.ledger.allocations[t.allocation]
    assert (r.state, r.charge, r.nbytes, r.role, r.holder) == (AllocState.LIVE, 30, 30, Role.WEIGHTS, w.h1)
    assert not m2.tickets and m2.ledger.authorities[w.a].used == 30 and m2.next_ticket == 2
    with pytest.raises(InvalidTransition, match="already claimed"):
        pmm.claim(w.h1, tid)
    pmm.release(w.h1, t.allocation)
    assert used(pmm, w.a) == 0


@pytest.mark.parametrize("op", ["cancel_ticket", "timeout_ticket"])
def test_cancel_credits_a_grant_exactly_once(op: str) -> None:
    pmm, w = make()
    tid = pmm.submit(w.h1, w.a, 40)
    assert used(pmm, w.a) == 40
    assert getattr(pmm, op)(w.h1, tid) == 40
    after = abstract_manager(pmm)
    assert after.ledger.authorities[w.a].used == 0 and not after.tickets and not after.ledger.allocations
    assert getattr(pmm, op)(w.h1, tid) == 0  # retired: no second credit, nothing changes
    assert abstract_manager(pmm) == after
    with pytest.raises(InvalidTransition, match="already claimed, cancelled"):
        pmm.claim(w.h1, tid)


def test_cancel_of_a_pending_ticket_credits_nothing() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 100)
    tid = pmm.submit(w.h2, w.a, 10)
    assert pmm.cancel_ticket(w.h2, tid) == 0
    m = abstract_manager(pmm)
    assert not m.tickets and m.ledger.authorities[w.a].used == 100


def test_a_matured_misfit_ends_the_round_then_a_release_grants_in_order() -> None:
    pmm, w = make(aging_bound=2)
    big = lease(pmm, w.h1, w.a, 50)
    t1 = pmm.submit(w.h2, w.a, 60)  # round 1: age 1, 60 > 50 free
    t2 = pmm.submit(w.h2, w.a, 30)  # round 2: t1 matured, does not fit: the round ends before t2
    m = abstract_manager(pmm)
    assert (m.tickets[t1].state, m.tickets[t1].age, m.tickets[t2].state, m.tickets[t2].age) == (P, 2, P, 1)
    pmm.release(w.h1, big)  # headroom rose: one round, matured first in id order
    m = abstract_manager(pmm)
    assert (m.tickets[t1].state, m.tickets[t2].state) == (G, G)
    assert m.tickets[t1].allocation < m.tickets[t2].allocation and m.ledger.authorities[w.a].used == 90
    conserved(m)


def test_priority_orders_unmatured_tickets_when_headroom_rises() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 90)
    small = lease(pmm, w.h1, w.a, 10)
    low = pmm.submit(w.h2, w.a, 10, priority=0)
    high = pmm.submit(w.h2, w.a, 10, priority=5)
    pmm.release(w.h1, small)
    m = abstract_manager(pmm)
    assert (m.tickets[low].state, m.tickets[high].state) == (P, G)
    assert (m.tickets[low].age, m.tickets[high].age) == (3, 2)


def test_no_round_without_new_headroom() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 95)
    tid = pmm.submit(w.h2, w.a, 10)
    pmm.reserve(w.h1, w.b, Tier.HOST, 5, Role.KV)  # another ledger: no round on a
    lease(pmm, w.h1, w.a, 5)  # headroom fell: no round
    assert abstract_manager(pmm).tickets[tid].age == 1


def test_a_part_owned_reservation_is_settled_only_by_its_part() -> None:
    pmm, w = make()
    tid = pmm.submit(w.h1, w.a, 10)
    tx = pmm.plan_tx(w.h1, ((w.b, 10),))
    (rid,) = pmm.reserve_all(tx)
    alloc = abstract_manager(pmm).tickets[tid].allocation
    before = abstract_manager(pmm)
    for call in (lambda: pmm.commit(w.h1, alloc, 10), lambda: pmm.cancel(w.h1, alloc),
                 lambda: pmm.release(w.h1, rid), lambda: pmm.cancel(w.h1, rid), lambda: pmm.quarantine(w.h1, rid, 0)):
        with pytest.raises(InvalidTransition, match="reservation; that part settles it"):
            call()
        assert abstract_manager(pmm) == before


# --- transactions across parts ---------------------------------------------------


def test_tx_is_refused_while_a_granted_unclaimed_ticket_holds_the_bytes() -> None:
    pmm, w = make()
    pmm.submit(w.h1, w.a, 60)  # granted, unclaimed: 60 B charged
    tx = pmm.plan_tx(w.h2, ((w.a, 50),))
    before = abstract_manager(pmm)
    with pytest.raises(CapacityDenied, match="50 B asked, 40 B free"):
        reserve_tx(pmm, tx)  # the step alone: refused, the transaction left open
    assert abstract_manager(pmm) == before


def test_tx_reserves_in_authority_order_and_commits_leases() -> None:
    pmm, w = make()
    tx = pmm.plan_tx(w.h1, ((w.b, 20), (w.a, 30)))
    assert abstract_manager(pmm).txs[tx].needs == ((w.a, 30), (w.b, 20))
    ra = reserve_tx(pmm, tx)  # one step at a time: the checkers' view of reserve_all
    m = abstract_manager(pmm)
    assert m.txs[tx].held == (ra,) and m.ledger.allocations[ra].authority == w.a
    assert m.ledger.allocations[ra].role is Role.STATE
    with pytest.raises(InvalidTransition, match="holds 1 of 2"):
        pmm.commit_tx(tx)
    rb = reserve_tx(pmm, tx)
    with pytest.raises(InvalidTransition, match="already holds every need"):
        reserve_tx(pmm, tx)
    assert pmm.commit_tx(tx) == (ra, rb)
    m = abstract_manager(pmm)
    assert not m.txs and {m.ledger.allocations[i].state for i in (ra, rb)} == {AllocState.LIVE}
    assert (m.ledger.authorities[w.a].used, m.ledger.authorities[w.b].used) == (30, 20)


def test_abort_credits_every_held_reservation_once_and_runs_rounds() -> None:
    pmm, w = make()
    tx = pmm.plan_tx(w.h1, ((w.a, 70), (w.b, 20)))
    pmm.reserve_all(tx)
    tid = pmm.submit(w.h2, w.a, 50)
    assert abstract_manager(pmm).tickets[tid].state is P
    assert pmm.abort_tx(tx) == 90
    m = abstract_manager(pmm)
    assert m.tickets[tid].state is G and m.ledger.authorities[w.a].used == 50 and m.ledger.authorities[w.b].used == 0
    with pytest.raises(InvalidTransition, match="already committed or aborted"):
        pmm.abort_tx(tx)


def test_reserve_all_aborts_on_a_refusal() -> None:
    pmm, w = make()
    lease(pmm, w.h2, w.b, 90, Tier.HOST)
    tx = pmm.plan_tx(w.h1, ((w.a, 10), (w.b, 20)))
    with pytest.raises(CapacityDenied):
        pmm.reserve_all(tx)
    m = abstract_manager(pmm)
    assert not m.txs and m.ledger.authorities[w.a].used == 0


# --- device loss, one mechanism --------------------------------------------------


def test_device_loss_mid_transaction_and_with_tickets_pressure_and_a_limit_change() -> None:
    pmm, w = make()
    tx = pmm.plan_tx(w.h1, ((w.a, 30), (w.b, 40)))
    ra, rb = pmm.reserve_all(tx)
    granted = pmm.submit(w.h2, w.a, 20)
    lease(pmm, w.h2, w.a, 50)
    pending = pmm.submit(w.h2, w.a, 40)
    pmm.open_pressure(w.h2, w.a, 10)
    prepare_limit(pmm, w.a, 60)  # left pending (the checkers' step alone): pressure on h2's leases
    waiter = pmm.submit(w.h1, w.b, 70)  # pending on b: the loss's credit on b grants it
    m = abstract_manager(pmm)
    g_alloc = m.tickets[granted].allocation
    assert m.tickets[pending].state is P and m.tickets[waiter].state is P and len(m.pressures) == 2 and m.changes
    pmm.lose_device(w.a)
    m = abstract_manager(pmm)
    assert set(m.tickets) == {waiter} and m.tickets[waiter].state is G  # every ticket on a dropped
    assert not m.txs and not m.pressures and not m.changes
    assert rb not in m.ledger.allocations  # the reservation elsewhere was credited
    assert m.ledger.allocations[ra].state is AllocState.DEVICE_LOST  # the one on a stays charged
    assert m.ledger.allocations[g_alloc].state is AllocState.DEVICE_LOST
    assert m.ledger.authorities[w.a].used == 100 and m.ledger.authorities[w.b].used == 70
    conserved(m)
    with pytest.raises(DeviceLost):
        pmm.submit(w.h1, w.a, 1)
    pmm.confirm_termination(w.a)
    m = abstract_manager(pmm)
    assert m.ledger.authorities[w.a].used == 0 and not [r for r in m.ledger.allocations.values() if r.authority == w.a]
    pmm.confirm_termination(w.a)  # idempotent: credited exactly once
    assert abstract_manager(pmm) == m


def test_acquire_returns_none_when_its_ticket_is_dropped_by_device_loss() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 100)
    t, out = parked(pmm, w.h2, w.a, 10, JOIN_S)
    pmm.lose_device(w.a)
    t.join(JOIN_S)
    assert out == [None] and not t.is_alive() and not abstract_manager(pmm).tickets


def test_acquire_times_out_and_leaves_nothing() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 100)
    before = abstract_manager(pmm)
    assert pmm.acquire(w.h2, w.a, 10, timeout=0.01) is None
    m = abstract_manager(pmm)
    assert not m.tickets and m.ledger == before.ledger and m.next_ticket == 2


# --- pressure and limits ----------------------------------------------------------


def _answering(pmm: ProcessMemoryManager, leases: dict[int, list[int]], probes: list[bool]) -> Callable:
    def cb(mgr: ProcessMemoryManager, pid: int, target: int) -> None:
        got: list[bool] = []
        t = threading.Thread(target=lambda: got.append(ledger_lock(mgr).probe(2.0)))
        t.start()
        t.join()
        probes.append(got == [True] and not ledger_lock(mgr).held_by_me())
        h = abstract_manager(mgr).pressures[pid].holder
        mgr.answer(h, pid, tuple(leases.pop(h, [])))
    return cb


def test_lower_limit_commits_when_callbacks_answer() -> None:
    pmm, w = make()
    leases = {w.h1: [lease(pmm, w.h1, w.a, 30), lease(pmm, w.h1, w.a, 30)]}
    lease(pmm, w.h2, w.a, 20)
    probes: list[bool] = []
    pmm.register_callback(w.h1, _answering(pmm, leases, probes))
    pmm.register_callback(w.h2, _answering(pmm, {}, probes))  # answers zero victims: legal
    out = pmm.lower_limit(w.a, 40)
    assert out == M.LimitOutcome(True, 40, ((1, 60), (2, 0)))
    assert probes == [True, True]  # each callback ran with the ledger lock free (I7)
    m = abstract_manager(pmm)
    assert m.ledger.authorities[w.a].limit == 40 and m.ledger.authorities[w.a].used == 20
    assert not m.pressures and not m.changes


def test_lower_limit_keeps_the_old_limit_when_not_enough_comes_back() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 80)
    probes: list[bool] = []
    pmm.register_callback(w.h1, _answering(pmm, {}, probes))
    out = pmm.lower_limit(w.a, 40)
    assert out == M.LimitOutcome(False, 100, ((1, 0),))
    m = abstract_manager(pmm)
    assert m.ledger.authorities[w.a].limit == 100 and m.ledger.authorities[w.a].used == 80 and not m.changes


def test_a_raising_callback_is_typed_and_leaves_the_ledger_exact() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 80)

    def bad(mgr: ProcessMemoryManager, pid: int, target: int) -> None:
        raise OSError("holder crashed")
    pmm.register_callback(w.h1, bad)
    before = abstract_manager(pmm)
    with pytest.raises(HolderCallbackFailed, match="OSError: holder crashed; pressure ticket 1 cancelled"):
        pmm.press(w.h1, w.a, 10)
    after = abstract_manager(pmm)
    assert after.ledger == before.ledger and not after.pressures and after.next_pressure == 2
    assert pmm.lower_limit(w.a, 40) == M.LimitOutcome(False, 100, ())  # a failing holder answered nothing


def test_raising_a_limit_is_headroom_for_waiters() -> None:
    pmm, w = make()
    assert pmm.lower_limit(w.a, 50) == M.LimitOutcome(True, 50, ())
    tid = pmm.submit(w.h1, w.a, 20)
    lease(pmm, w.h2, w.a, 30)
    tid2 = pmm.submit(w.h1, w.a, 20)
    assert abstract_manager(pmm).tickets[tid2].state is P
    assert pmm.lower_limit(w.a, 100) == M.LimitOutcome(True, 100, ())  # a raise: no pressure
    m = abstract_manager(pmm)
    assert m.tickets[tid].state is G and m.tickets[tid2].state is G and m.ledger.authorities[w.a].used == 70


def test_answer_lists_in_the_limit_change_and_rounds_run() -> None:
    pmm, w = make()
    l1 = lease(pmm, w.h1, w.a, 60)
    tid = pmm.submit(w.h2, w.a, 50)
    (pid,) = prepare_limit(pmm, w.a, 30)  # the checkers' steps, to look between them
    assert pmm.answer(w.h1, pid, (l1,)) == 60
    m = abstract_manager(pmm)
    assert m.changes[w.a].completed == ((pid, 60),) and m.tickets[tid].state is G and m.ledger.authorities[w.a].used == 50
    assert commit_limit(pmm, w.a) == M.LimitOutcome(False, 100, ((pid, 60),))  # the grant took the room back


# --- the cross-cutting guards, each switched off, show their harm --------------------


@contracts_off  # the harm in the state itself; refimpl's contracts catch it (test_manager_differential)
def test_guard_grant_charges_ledger() -> None:
    for off in (False, True):
        pmm, w = make(GuardSet.without("grant_charges_ledger") if off else GuardSet())
        tid = pmm.submit(w.h1, w.a, 60)
        m = abstract_manager(pmm)
        assert m.tickets[tid].state is G
        assert (m.tickets[tid].allocation is None) == off
        if off:
            lease(pmm, w.h2, w.a, 60)  # the ledger thinks the bytes are free
            pmm.claim(w.h1, tid)
            a = abstract_manager(pmm).ledger.authorities[w.a]
            assert a.used == 120 > a.limit  # harm: granted past the limit
        else:
            with pytest.raises(CapacityDenied):
                lease(pmm, w.h2, w.a, 60)


@contracts_off  # the harm in the state itself; refimpl's contracts catch it (test_manager_differential)
def test_guard_tx_counts_granted() -> None:
    pmm, w = make(GuardSet.without("tx_counts_granted"))
    pmm.submit(w.h1, w.a, 60)
    tx = pmm.plan_tx(w.h2, ((w.a, 50),))
    pmm.reserve_all(tx)
    a = abstract_manager(pmm).ledger.authorities[w.a]
    assert a.used == 110 > a.limit  # harm: the transaction took bytes a granted ticket holds


def test_guard_loss_keeps_charge() -> None:
    for off in (False, True):
        pmm, w = make(GuardSet.without("loss_keeps_charge") if off else GuardSet())
        tx = pmm.plan_tx(w.h1, ((w.a, 30), (w.b, 40)))
        pmm.reserve_all(tx)
        with contracts.contracts(False):
            pmm.lose_device(w.a)
        # harm when off: the lost device's 30 B are credited before termination is confirmed
        assert used(pmm, w.a) == (0 if off else 30)


def test_guard_loss_keeps_charge_is_caught_by_the_ledger_contracts() -> None:
    from invariants._violation import InvariantViolation

    pmm, w = make(GuardSet.without("loss_keeps_charge"))
    pmm.reserve_all(pmm.plan_tx(w.h1, ((w.a, 30),)))
    with contracts.contracts(True), pytest.raises(InvariantViolation, match="I6: LoseDevice.* reduced holder 1's"):
        pmm.lose_device(w.a)


@contracts_off  # the harm in the state itself; refimpl's contracts catch it (test_manager_differential)
def test_guard_limit_after_reclaim() -> None:
    for off in (False, True):
        pmm, w = make(GuardSet.without("limit_after_reclaim") if off else GuardSet())
        lease(pmm, w.h1, w.a, 80)
        out = pmm.lower_limit(w.a, 40)  # no callback: nothing comes back
        a = abstract_manager(pmm).ledger.authorities[w.a]
        assert out.committed == off
        assert (a.used > a.limit) == off  # harm when off: committed below used


# --- contracts hook and tracing -----------------------------------------------------------


def test_composed_contracts_call_invariants_manager_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []
    fake = types.ModuleType("invariants.manager")
    fake.check_step = lambda b, act, a, result: calls.append(("step", act))  # type: ignore[attr-defined]
    fake.check_all = lambda a: calls.append(("all", type(a)))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "invariants.manager", fake)
    pmm, w = make()
    with contracts.contracts(True, level="full"):  # level "local" checks tickets without the frozen views
        tid = pmm.submit(w.h1, w.a, 10)
        with pytest.raises(UnknownTicket):
            pmm.claim(w.h1, 99)  # refused: checked for G4 only
        pmm.claim(w.h1, tid)
    with contracts.contracts(False):
        pmm.submit(w.h1, w.a, 10)
    assert calls == [("step", M.Submit(w.h1, w.a, 10, 0, Role.STAGING)), ("all", M.Manager),
                     ("step", M.Claim(w.h1, tid)), ("all", M.Manager)]


def test_composed_operations_are_traced_in_lock_order() -> None:
    events: list[dict[str, Any]] = []
    pmm = ProcessMemoryManager(trace=events.append)
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    h = pmm.register_holder("kv")
    tid = pmm.submit(h, a, 10)
    alloc = pmm.claim(h, tid)
    pmm.release(h, alloc)
    with pytest.raises(UnknownTicket):
        pmm.claim(h, 42)
    # The first event is the `configure` event: the manager's aging bound (default 4).
    assert events[0] == {"contract_revision": "ortmem-manager/2", "topology_epoch": 0, "source": events[0]["source"],
                         "source_sequence": 1, "kind": "configure", "ids": {}, "payload": {"aging_bound": 4}}
    del events[0]
    kinds = [(e["kind"], e["payload"]["outcome"], e["payload"].get("result")) for e in events]
    assert kinds == [("register_authority", "accepted", a), ("register_holder", "accepted", h),
                     ("submit", "accepted", tid), ("grant", "accepted", alloc), ("claim", "accepted", alloc),
                     ("release", "accepted", None), ("claim", "rejected", None)]
    assert [e["source_sequence"] for e in events] == [2, 3, 4, 5, 6, 7, 8]
    # The submit's own figure leaves out the bytes its grant charged; the grant event's includes them.
    assert [e["payload"]["used"] for e in events[2:5]] == [{str(a): 0}, {str(a): 10}, {str(a): 10}]
    assert events[3]["ids"] == {"ticket": tid}
    assert {e["contract_revision"] for e in events} == {"ortmem-manager/2"}  # the ledger's operations too
    assert events[6]["payload"]["error"] == "UnknownTicket"


def test_every_guard_the_manager_reads_is_registered() -> None:
    """`_Guards.on` is a plain set lookup (no unknown-name check), so a misspelt guard would read as off."""
    import pathlib
    import re

    from spec.guards import GUARDS

    src = "".join(p.read_text() for p in pathlib.Path("refimpl/manager").glob("*.py"))
    names = set(re.findall(r'_guards\.on\("([a-z_]+)"\)', src))
    assert {"grant_charges_ledger", "tx_counts_granted", "loss_keeps_charge", "limit_after_reclaim", "provider_pinned",
            "limit_check", "owner_only"} <= names
    assert names <= {g.name for g in GUARDS}


def test_a_refusal_that_changed_the_manager_is_a_G4_violation() -> None:
    from invariants._violation import InvariantViolation

    class Leaky(ProcessMemoryManager):
        def _submit(self, *args: Any) -> int:
            self._next_ticket += 1  # a bug: the id is used, then the submit is refused
            raise CapacityDenied("refused")

    pmm = Leaky()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    h = pmm.register_holder("kv")
    with contracts.contracts(False), pytest.raises(CapacityDenied):
        pmm.submit(h, a, 1)
    with contracts.contracts(True), pytest.raises(InvariantViolation, match="G4: Submit.* refused but changed"):
        pmm.submit(h, a, 1)


def test_cancelling_a_matured_misfit_lets_the_next_waiter_fit() -> None:
    pmm, w = make(aging_bound=1)
    lease(pmm, w.h1, w.a, 50)
    big = pmm.submit(w.h2, w.a, 60)  # matured at once, does not fit
    small = pmm.submit(w.h2, w.a, 30)  # the round ends at the matured misfit
    assert abstract_manager(pmm).tickets[small].state is P
    assert pmm.cancel_ticket(w.h2, big) == 0  # retired: a round runs on its authority
    m = abstract_manager(pmm)
    assert m.tickets[small].state is G and m.ledger.authorities[w.a].used == 80


@pytest.mark.parametrize("granted_first", [False, True], ids=["pending", "granted"])
def test_an_interrupt_while_parked_leaves_no_grant_behind(monkeypatch: pytest.MonkeyPatch, granted_first: bool) -> None:
    import refimpl.manager.arbitration as arbitration

    pmm, w = make()
    blocker = lease(pmm, w.h1, w.a, 100)

    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if granted_first:
                pmm.release(w.h1, blocker)  # the ticket is granted (charged) while its waiter is parked
                assert abstract_manager(pmm).tickets[1].state is G
            raise KeyboardInterrupt

    monkeypatch.setattr(arbitration, "threading", types.SimpleNamespace(Event=Interrupted))
    with pytest.raises(KeyboardInterrupt):
        pmm.acquire(w.h2, w.a, 40, timeout=JOIN_S)
    m = abstract_manager(pmm)
    assert not m.tickets and m.ledger.authorities[w.a].used == (0 if granted_first else 100)
    assert [r.holder for r in m.ledger.allocations.values()] == ([] if granted_first else [w.h1])


# --- the ledger part's plain paths (contracts off, as under python -O): wake-ups, rounds, the lease index ----
# Pinned by the mutation run of refimpl/manager/ledger.py.


def _parked(pmm: ProcessMemoryManager, w: Any, free: int, nbytes: int = 50) -> int:
    """A pending ticket of h2 on gpu0 with `free` B free, and its waiter's event made (wait with timeout 0)."""
    t = pmm.submit(w.h2, w.a, nbytes)
    assert abstract_manager(pmm).tickets[t].state is P and pmm.snapshot(w.a).available == free
    assert pmm.wait(t, 0) is False  # the waiter's event now exists; nobody has set it
    return t


def _next_grant_still_wakes(pmm: ProcessMemoryManager, w: Any) -> None:
    """The manager's wake list is left usable: a later grant (on host) wakes its own waiter too."""
    x = lease(pmm, w.h1, w.b, 60, Tier.HOST)
    t2 = pmm.submit(w.h2, w.b, 50)
    assert pmm.wait(t2, 0) is False
    pmm.release(w.h1, x)
    assert pmm._tickets[t2].event.is_set()


@contracts_off
@pytest.mark.parametrize("how", ["cancel", "commit-refund", "quarantine"])
def test_returned_bytes_wake_the_waiter_they_grant(how: str) -> None:
    pmm, w = make()
    if how == "quarantine":
        x = lease(pmm, w.h1, w.a, 60)
        t = _parked(pmm, w, 40)
        pmm.quarantine(w.h1, x, 10)
    else:
        lease(pmm, w.h1, w.a, 50)
        prov = pmm.reserve(w.h1, w.a, Tier.DEVICE, 45, Role.KV)
        t = _parked(pmm, w, 5, 45 if how == "commit-refund" else 50)
        if how == "cancel":
            pmm.cancel(w.h1, prov)  # 50 B free: the round grants t, and its event is set once the lock is released (I7)
        else:
            pmm.commit(w.h1, prov, 1)  # 44 B refunded: 49 B free, the round grants t (I13) and wakes its waiter (I7)
    assert abstract_manager(pmm).tickets[t].state is G
    assert pmm._tickets[t].event.is_set()
    _next_grant_still_wakes(pmm, w)


@contracts_off
def test_quarantine_releasing_nothing_runs_no_round() -> None:
    # A round ages every pending ticket; a quarantine that frees no byte must not (I13 runs on returned capacity).
    pmm, w = make()
    x = lease(pmm, w.h1, w.a, 60)
    t = _parked(pmm, w, 40)
    age = abstract_manager(pmm).tickets[t].age
    pmm.quarantine(w.h1, x, 0)
    assert abstract_manager(pmm).tickets[t].age == age


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_releasing_a_claimed_lease_leaves_nothing_named_by_its_ticket(on: bool) -> None:
    # A claim's lease is indexed by its ticket id (for `acquire`); once the ledger releases it, nothing is left.
    pmm, w = make()
    with contracts.contracts(on):
        t = pmm.submit(w.h1, w.a, 10)
        x = pmm.claim(w.h1, t)
        assert t not in abstract_manager(pmm).tickets and x not in abstract_manager(pmm).uses
        pmm.release(w.h1, x)
        assert t not in pmm._leases
        with pytest.raises(InvalidTransition):
            pmm.set_use(w.h1, x, True, False)
        assert pmm.snapshot(w.a).used == 0


# --- limit changes at their edges (pinned by the mutation run of refimpl/manager/limits.py) ----------------


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_limit_equal_to_used_opens_no_pressure_and_commits(on: bool) -> None:
    pmm, w = make()
    with contracts.contracts(on):
        lease(pmm, w.h1, w.a, 60)
        assert prepare_limit(pmm, w.a, 60) == ()  # used fits exactly: nobody is pressed
        assert commit_limit(pmm, w.a) == M.LimitOutcome(True, 60, ())
        assert pmm.snapshot(w.a).limit == 60


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_lower_limit_interrupted_by_a_callback_commits_before_it_propagates(on: bool) -> None:
    # A KeyboardInterrupt from a holder's callback: the change is committed (nothing came back, so the old
    # limit stays) and no pressure ticket stays open, then the interrupt goes on up (issue #14).
    pmm, w = make()
    lease(pmm, w.h1, w.a, 80)

    def interrupted(mgr: ProcessMemoryManager, pid: int, target: int) -> None:
        raise KeyboardInterrupt
    pmm.register_callback(w.h1, interrupted)
    with contracts.contracts(on):
        with pytest.raises(KeyboardInterrupt):
            pmm.lower_limit(w.a, 40)
        m = abstract_manager(pmm)
        assert not m.changes and not m.pressures and pmm.snapshot(w.a).limit == 100
        assert pmm.lower_limit(w.a, 90) == M.LimitOutcome(True, 90, ())  # a new change may start: none is pending


# --- device loss on the plain and checked paths (pinned by the mutation run of refimpl/manager/devices.py) ----


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_lost_device_drops_its_waiters_and_terminates_to_nothing(on: bool) -> None:
    pmm, w = make()
    x = lease(pmm, w.h1, w.a, 30)
    t = pmm.submit(w.h2, w.a, 90)  # 70 B free: waits
    assert pmm.wait(t, 0) is False  # its waiter's event exists, unset
    with contracts.contracts(on):
        pmm.lose_device(w.a)
        m = abstract_manager(pmm)
        assert t not in m.tickets and m.ledger.allocations[x].state is AllocState.DEVICE_LOST
        assert used(pmm, w.a) == 30  # the charge stays until termination (C3)
        pmm.confirm_termination(w.a)
        m = abstract_manager(pmm)
        assert used(pmm, w.a) == 0 and x not in m.ledger.allocations
        pmm.remove_authority(w.a)  # nothing pins it any more: no allocation, no ticket left in its queue
        assert w.a not in abstract_ledger(pmm).authorities
    assert pmm._tickets.get(t) is None and t not in abstract_manager(pmm).tickets


@contracts_off
def test_lose_device_wakes_the_waiters_it_drops() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 30)
    t = pmm.submit(w.h2, w.a, 90)
    assert pmm.wait(t, 0) is False
    ev = pmm._tickets[t].event
    pmm.lose_device(w.a)
    assert ev.is_set()  # the dropped ticket's waiter must not sleep on (I7)
    _next_grant_still_wakes(pmm, w)


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_confirm_termination_of_a_live_context_is_refused_whole(on: bool) -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 30)
    before = abstract_manager(pmm)
    with contracts.contracts(on), pytest.raises(
            InvalidTransition, match=r"^authority 1: no transition for event 'confirm-termination' in state 'active' "
                                     r"\(the context was never lost\)$"):
        pmm.confirm_termination(w.a)
    assert abstract_manager(pmm) == before


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_ticket_books_its_role_from_grant_to_lease(on: bool) -> None:
    # Pinned by the mutation run of refimpl/manager/arbitration.py: the grant's reservation and the claimed
    # lease carry the role the ticket was submitted with.
    pmm, w = make()
    with contracts.contracts(on):
        t = pmm.submit(w.h1, w.a, 10, 0, Role.KV)  # a lone ticket that fits: granted by submit's own path
        blocker = lease(pmm, w.h2, w.a, 90)
        u = pmm.submit(w.h1, w.a, 10, 0, Role.WEIGHTS)  # waits; granted by the round the release runs
        pmm.release(w.h2, blocker)
        m = abstract_manager(pmm)
        assert (m.tickets[t].state, m.tickets[u].state) == (G, G)
        for tid, role in ((t, Role.KV), (u, Role.WEIGHTS)):
            assert abstract_ledger(pmm).allocations[abstract_manager(pmm).tickets[tid].allocation].role is role
            x = pmm.claim(w.h1, tid)
            assert (abstract_ledger(pmm).allocations[x].role, abstract_ledger(pmm).allocations[x].holder) == (role, w.h1)


def test_a_commit_past_its_reservation_with_the_guard_off_books_the_difference() -> None:
    """`commit_within_reservation` off (a negative control): a commit of more than was reserved is accepted, and
    the ledger's `used` takes the difference (`Ledger._commit_rec`'s non-refund branch), as the spec's does."""
    with contracts.contracts(False):
        pmm = ProcessMemoryManager(guards=GuardSet.without("commit_within_reservation"))
        a, h = pmm.register_authority("gpu0", Tier.DEVICE, 64), pmm.register_holder("kv")
        pmm.commit(h, pmm.reserve(h, a, Tier.DEVICE, 4, Role.KV), 6)
        assert (abstract_ledger(pmm).authorities[a].used, pmm.snapshot(a).used) == (6, 6)
