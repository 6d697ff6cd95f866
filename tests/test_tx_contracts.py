# Contracts in the manager's focused transactions (debug builds): with `invariants.contracts` on,
# every focused transaction operation of ProcessMemoryManager checks the transaction
# predicates on what it produced. Each transaction guard switched off must
# make one scripted scenario raise InvariantViolation naming an ID the guard
# protects; with every guard on, the same scenario is refused with a typed
# error and the manager is unchanged. Contracts off: nothing is checked.

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from spec.errors import (
    BundlePoisoned,
    GovernorError,
    ManagerPoisoned,
    ReservationOrder,
    StaleGeneration,
    InvalidTransition,
    ViewInUse,
)
from spec.guards import ALL_ON, GUARDS, GuardSet
from spec.transactions_lifecycle import ViewKind
from tx_harness import TxManager

C = ViewKind.CONTIGUOUS
Coord = TxManager


def _two(c: Coord) -> tuple[int, int]:
    return c.add_authority("device", 10), c.add_authority("host", 10)


def _committed(c: Coord, dev: int, bundle: int | None = None) -> tuple[int, int]:
    tx = c.plan(((dev, 2),), 0, C, bundle)
    c.reserve(tx, dev)
    view = c.publish(tx)
    c.execute(tx, view, 1)
    return tx, view


def ordered_reservation(c: Coord) -> None:
    dev, host = _two(c)
    # Each needs more than half of both pools, so neither fits beside the other (a real contention).
    tx = c.plan(((host, 6), (dev, 6)), 0, C)
    other = c.plan(((dev, 6), (host, 6)), 0, C)
    c.reserve(other, dev)
    c.reserve(tx, host)  # tx holds host and waits for dev, which `other` holds, which waits for host: a cycle


def publish_after_all_held(c: Coord) -> None:
    dev, host = _two(c)
    tx = c.plan(((dev, 1), (host, 1)), 0, C)
    c.reserve(tx, dev)
    view = c.publish(tx)
    c.execute(tx, view, 1)  # runs on bytes the host reservation does not cover yet


def retry_keeps_identity(c: Coord) -> None:
    dev, _ = _two(c)
    intent = c.abort(c.plan(((dev, 1),), 7, C))
    c.plan(((dev, 1),), 0, C, None, intent)
    c.plan(((dev, 1),), 0, C, None, intent)  # with the guard on, the intent is spent: refused here


def full_abort(c: Coord) -> None:
    dev, host = _two(c)
    tx = c.plan(((dev, 1), (host, 1)), 0, C)
    c.reserve(tx, dev)
    c.reserve(tx, host)
    c.abort(tx)
    c.abort(tx)  # with the guard on, the transaction is gone: refused here


def poisoned_manager_refuses(c: Coord) -> None:
    dev, _ = _two(c)
    c.corrupt_ledger()
    tx = c.plan(((dev, 1),), 0, C)
    c.reserve(tx, dev)  # charges the corrupt ledger


def current_generation(c: Coord) -> None:
    dev, host = _two(c)
    tx, view = _committed(c, dev)
    c.commit(tx)
    c.remap(view)
    reader = c.plan(((host, 1),), 0, C)
    c.reserve(reader, host)
    c.publish(reader)
    c.execute(reader, view, 1)


def remap_when_idle(c: Coord) -> None:
    dev, _ = _two(c)
    _, view = _committed(c, dev)
    c.remap(view)


def atomic_bundle(c: Coord) -> None:
    dev, _ = _two(c)
    b = c.open_bundle()
    tx, _ = _committed(c, dev, b)
    c.commit(tx)
    c.report_mismatch(b)
    c.plan(((dev, 1),), 0, C, b)  # with the guard on, the poisoned bundle refuses here


@attrs.frozen
class Control:
    scenario: Callable[[Coord], None]
    on_error: type[GovernorError]
    on_match: str


CONTROLS: dict[str, Control] = {
    "ordered_reservation": Control(ordered_reservation, ReservationOrder, "before"),
    "publish_after_all_held": Control(publish_after_all_held, InvalidTransition, "'publish' in phase 'reserving'"),
    "retry_keeps_identity": Control(retry_keeps_identity, InvalidTransition, "already used"),
    "full_abort": Control(full_abort, InvalidTransition, "already aborted"),
    "poisoned_manager_refuses": Control(poisoned_manager_refuses, ManagerPoisoned, "grants nothing"),
    "current_generation": Control(current_generation, StaleGeneration, "generation 2, not 1"),
    "remap_when_idle": Control(remap_when_idle, ViewInUse, "bound"),
    "atomic_bundle": Control(atomic_bundle, BundlePoisoned, "poisoned"),
}
TX_GUARDS = [g for g in GUARDS if g.model == "transactions"]


def test_every_tx_guard_has_a_contract_control() -> None:
    assert set(CONTROLS) == {g.name for g in TX_GUARDS}


@pytest.mark.parametrize("guard", TX_GUARDS, ids=lambda g: g.name)
def test_invalid_tx_guard_off_raises_invariant_violation(guard) -> None:
    c = Coord(GuardSet.without(guard.name))
    with contracts.contracts(True):
        with pytest.raises(InvariantViolation, match="|".join(rf"^{i}:" for i in guard.ids)):
            CONTROLS[guard.name].scenario(c)


@pytest.mark.parametrize("guard", TX_GUARDS, ids=lambda g: g.name)
def test_tx_guard_on_refuses_with_typed_error(guard) -> None:
    c = Coord(ALL_ON)
    with contracts.contracts(True):
        with pytest.raises(CONTROLS[guard.name].on_error, match=CONTROLS[guard.name].on_match):
            CONTROLS[guard.name].scenario(c)


def test_tx_contracts_off_check_nothing() -> None:
    c = Coord(GuardSet.without("ordered_reservation"))
    with contracts.contracts(False):
        ordered_reservation(c)  # the violation goes unnoticed: contracts are the switch
    assert c.abstract().txs[1].held == ((2, 6),) and c.abstract().txs[2].held == ((1, 6),)
