# Real threads against one ProcessMemoryManager's composed transactions (C4, I7; issue #21).
#
# Two holders' transactions need the same two authorities, declared in opposite
# orders, and only one fits at a time. With ordered try-only reservation they
# never deadlock: whoever misses aborts (`reserve_all`), holds nothing, waits
# outside the manager and retries naming its intent (same submit sequence and
# priority), and every transaction eventually commits. With the
# `ordered_reservation` guard off in the governor, a lock-stepped run reaches
# the circle of holds (each holds one authority and needs the other's): a
# blocking governor would deadlock there; the try-only one makes both miss.
#
# Join timeouts are only a safety net against a hang; never the assertion.

from __future__ import annotations

import threading
import time

import pytest
from test_reserve_order import circle_of_holds
from threads_harness import fast_switching, start_and_join  # noqa: F401  (fixture)

from invariants import contracts
from invariants.manager import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import reserve_tx
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import CapacityDenied
from spec.guards import GuardSet
from spec.types import Tier

ROUNDS = 25

pytestmark = pytest.mark.usefixtures("fast_switching")


def _world(guards: GuardSet = GuardSet()) -> tuple[ProcessMemoryManager, dict[str, tuple[int, tuple]]]:
    pmm = ProcessMemoryManager(guards=guards)
    dev, host = pmm.register_authority("device", Tier.DEVICE, 10), pmm.register_authority("host", Tier.HOST, 10)
    return pmm, {"a": (pmm.register_holder("a"), ((dev, 6), (host, 6))),
                 "b": (pmm.register_holder("b"), ((host, 6), (dev, 6)))}


@pytest.mark.parametrize("contracts_on", [False, True], ids=["contracts-off", "contracts-on"])
def test_opposite_declared_orders_never_deadlock_and_retries_keep_their_place(contracts_on: bool) -> None:
    pmm, clients = _world()
    done: dict[str, int] = {}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        holder, needs = clients[name]
        try:
            with contracts.contracts(contracts_on):
                for _ in range(ROUNDS):
                    retry, first_seq = None, None
                    while True:
                        tx = pmm.plan_tx(holder, needs, 3, retry)
                        seq = abstract_manager(pmm).txs[tx].seq
                        first_seq = first_seq or seq
                        assert seq == first_seq  # a retry is not a newcomer (C4)
                        try:
                            leases = pmm.reserve_all(tx)
                            break
                        except CapacityDenied:  # missed: aborted, holding nothing; wait outside, then retry
                            retry = tx
                            time.sleep(0)
                    pmm.commit_tx(tx)
                    for alloc in leases:
                        pmm.release(holder, alloc)
                    done[name] = done.get(name, 0) + 1
        except BaseException as e:  # surfaced below
            errors.append(e)

    start_and_join([threading.Thread(target=worker, args=(n,)) for n in clients])
    assert not errors, errors
    assert done == {"a": ROUNDS, "b": ROUNDS}
    m = abstract_manager(pmm)
    assert not m.txs and all(a.used == 0 for a in m.ledger.authorities.values())
    check_all(m)


def _lockstep(pmm: ProcessMemoryManager, clients: dict[str, tuple[int, tuple]]) -> tuple[object, dict[str, str]]:
    """Two threads: plan, take the first need each, meet (a snapshot), then try the rest."""
    barrier = threading.Barrier(2)
    seen: dict[str, object] = {}
    outcome: dict[str, str] = {}

    def worker(name: str) -> None:
        holder, needs = clients[name]
        tx = pmm.plan_tx(holder, needs)
        barrier.wait()
        try:
            reserve_tx(pmm, tx)  # the first step alone (the checkers' atomic action), then meet
        except CapacityDenied:
            outcome[name] = "missed"
        barrier.wait()
        if name == "a":
            seen["state"] = abstract_manager(pmm)
        barrier.wait()
        try:
            while len(abstract_manager(pmm).txs[tx].held) < len(needs):
                reserve_tx(pmm, tx)
            outcome.setdefault(name, "all held")
        except CapacityDenied:
            outcome[name] = "missed"

    start_and_join([threading.Thread(target=worker, args=(n,)) for n in clients])
    return seen["state"], outcome


def test_ordered_reservation_has_no_circle_of_holds_in_lockstep() -> None:
    pmm, clients = _world()
    state, outcome = _lockstep(pmm, clients)
    assert circle_of_holds(state) == []
    check_all(state)
    assert sorted(outcome.values()) == ["all held", "missed"]  # exactly one proceeds


def test_unordered_reservation_shows_the_circle_of_holds() -> None:
    # Negative control with real threads: the guard off in the governor.
    pmm, clients = _world(GuardSet.without("ordered_reservation"))
    with contracts.contracts(False):
        state, outcome = _lockstep(pmm, clients)
    assert len(circle_of_holds(state)) == 2, state
    # Try-only turns the would-be deadlock into misses: each holds one and fails on the other.
    assert outcome == {"a": "missed", "b": "missed"}
