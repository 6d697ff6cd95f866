# Real threads against one ProcessMemoryManager's focused transactions (C4, I7).
#
# Two transactions need the same two authorities, declared in opposite
# orders, and only one fits at a time. With ordered try-only reservation they
# never deadlock: whoever misses holds nothing, waits outside the coordinator
# and retries with its intent (same submit sequence and priority), and every
# transaction eventually commits. With the `ordered_reservation` guard off in
# the coordinator, a lock-stepped run reaches the circular hold-and-wait
# state (each holds one authority and needs the other's): a blocking
# coordinator would deadlock there; the try-only one makes a holder fail.
#
# Join timeouts are only a safety net against a hang; never the assertion.

from __future__ import annotations

import threading
import time

import pytest
from threads_harness import JOIN_S, fast_switching, run_together  # noqa: F401  (fixture)

from invariants import contracts
from invariants.transactions import check_all, wait_for_cycle
from spec.guards import GuardSet
from spec.transactions_lifecycle import ViewKind
from tx_harness import TxManager

ROUNDS = 25


pytestmark = pytest.mark.usefixtures("fast_switching")


def _world(guards: GuardSet = GuardSet()) -> tuple[TxManager, int, int]:
    c = TxManager(guards)
    return c, c.add_authority("device", 10), c.add_authority("host", 10)


def _run(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a transaction thread hung"


@pytest.mark.parametrize("contracts_on", [False, True], ids=["contracts-off", "contracts-on"])
def test_opposite_declared_orders_never_deadlock(contracts_on) -> None:
    c, dev, host = _world()
    done: dict[str, int] = {}
    errors: list[BaseException] = []
    orders = {"a": ((dev, 6), (host, 6)), "b": ((host, 6), (dev, 6))}

    def worker(name: str) -> None:
        try:
            with contracts.contracts(contracts_on):
                for _ in range(ROUNDS):
                    intent = None
                    first_seq = None
                    while True:
                        tx = c.plan(orders[name], 3, ViewKind.CONTIGUOUS, None, intent)
                        seq = c.abstract().txs[tx].seq if first_seq is None else first_seq
                        first_seq = first_seq or seq
                        intent = c.reserve_all(tx)
                        if intent is None:
                            break
                        # Missed: holding nothing, wait outside the coordinator, then retry.
                        assert c.abstract().intents[intent].seq == first_seq
                        time.sleep(0)
                    view = c.publish(tx)
                    c.execute(tx, view, 1)
                    c.commit(tx)
                    c.release(tx)
                    done[name] = done.get(name, 0) + 1
        except BaseException as e:  # surfaced below
            errors.append(e)

    _run([threading.Thread(target=worker, args=(n,)) for n in orders])
    assert not errors, errors
    assert done == {"a": ROUNDS, "b": ROUNDS}
    s = c.abstract()
    assert not s.txs and all(a.used == 0 for a in s.authorities.values())
    check_all(s)


def _lockstep(c: TxManager, dev: int, host: int) -> tuple[object, dict[str, object]]:
    """Two threads: plan in opposite orders, take the first authority, meet, take the rest."""
    barrier = threading.Barrier(2)
    seen: dict[str, object] = {}
    outcome: dict[str, object] = {}
    orders = {"a": ((dev, 6), (host, 6)), "b": ((host, 6), (dev, 6))}

    def worker(name: str) -> None:
        tx = c.plan(orders[name], 3, ViewKind.CONTIGUOUS)
        barrier.wait()
        first, *rest = c.reservation_order(tx)
        missed = c.reserve(tx, first)
        barrier.wait()
        if name == "a":
            seen["state"] = c.abstract()
        barrier.wait()
        for aid in rest:
            if missed is None:
                missed = c.reserve(tx, aid)
        outcome[name] = "deferred" if missed is not None else "all held"

    _run([threading.Thread(target=worker, args=(n,)) for n in orders])
    return seen["state"], outcome


def test_ordered_reservation_has_no_circular_wait_in_lockstep() -> None:
    c, dev, host = _world()
    state, outcome = _lockstep(c, dev, host)
    assert wait_for_cycle(state) is None
    check_all(state)
    assert sorted(outcome.values()) == ["all held", "deferred"]  # exactly one proceeds


def test_unordered_reservation_shows_hold_and_wait_counterexample() -> None:
    # Negative control with real threads: the guard off in the coordinator.
    c, dev, host = _world(GuardSet.without("ordered_reservation"))
    with contracts.contracts(False):
        state, outcome = _lockstep(c, dev, host)
    cycle = wait_for_cycle(state)
    assert cycle is not None and len(set(cycle)) == 2, cycle
    # Try-only turns the would-be deadlock into a miss: whoever tries first holds one, fails on the other.
    assert "deferred" in outcome.values()
