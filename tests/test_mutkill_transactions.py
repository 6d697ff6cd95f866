"""The transaction part's refusals, figures and negative control judged exactly (refimpl/manager/transactions.py).

Written from the mutation survivors of the module: each refusal with its typed error, its whole message and the
whole manager unchanged (contracts off and on); a capacity refusal's figures and the intent it leaves; a fresh
transaction's whole abstract record; what pins a ledger a transaction holds; and the `ordered_reservation`
negative control, which keeps the declared order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import lease, make

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import reserve_tx
from refimpl.verify.manager_hooks import abstract_manager, corrupt_ledger
from spec import manager_actions as M
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    ManagerPoisoned,
    ProviderPinned,
    UnknownIntent,
    UnknownTransaction,
)
from spec.guards import GuardSet

ON_OFF = pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])


def _refused(pmm: ProcessMemoryManager, call: Callable[[], Any], error: type, message: str, on: bool) -> None:
    """`call` raises exactly `error` with exactly `message`, and the whole manager is unchanged."""
    before = abstract_manager(pmm)
    with contracts.contracts(on), pytest.raises(error) as exc:
        call()
    assert type(exc.value) is error and str(exc.value) == message
    assert abstract_manager(pmm) == before


@ON_OFF
def test_a_poisoned_manager_refuses_a_plan_with_its_reason(on: bool) -> None:
    pmm, w = make()
    corrupt_ledger(pmm)
    _refused(pmm, lambda: pmm.plan_tx(w.h1, ((w.a, 1),)), ManagerPoisoned,
             "the ledger was found corrupt; the manager grants nothing", on)


@ON_OFF
@pytest.mark.parametrize(("retry", "shown"), [(2, "2"), ([1], "[1]")], ids=["next-id", "unhashable"])
def test_a_retry_of_an_intent_no_abort_left_is_unknown(on: bool, retry: Any, shown: str) -> None:
    """Intent 1 exists; 2 is the next transaction's id (never planned), [1] is no id at all."""
    pmm, w = make()
    pmm.abort_tx(pmm.plan_tx(w.h1, ((w.a, 1),)))
    _refused(pmm, lambda: pmm.plan_tx(w.h1, ((w.a, 1),), 0, retry), UnknownIntent,
             f"intent {shown} was never left by an abort", on)


@ON_OFF
def test_a_retry_of_another_holders_intent_names_that_holder(on: bool) -> None:
    """The intent's holder (2) differs from its submit sequence (1): the message names the holder."""
    pmm, w = make()
    pmm.abort_tx(pmm.plan_tx(w.h2, ((w.a, 1),)))
    assert (w.h1, w.h2) == (1, 2) and abstract_manager(pmm).intents[1] == M.Intent(1, w.h2, 1, 0, 1)
    _refused(pmm, lambda: pmm.plan_tx(w.h1, ((w.a, 1),), 0, 1), ForeignHolder,
             "intent 1 belongs to holder 2, not 1", on)


@ON_OFF
@pytest.mark.parametrize(("args", "error", "message"), [
    ((((1, 1),), "1"), InvalidArgument, "priority must be an int in [-2**63, 2**63-1], got '1'"),
    ((((1, 0),),), InvalidBytes, "nbytes must be in [1, 2**63-1], got 0"),
], ids=["priority-str", "zero-bytes"])
def test_a_bad_plan_is_refused_with_its_whole_message(on: bool, args: tuple[Any, ...], error: type,
                                                      message: str) -> None:
    pmm, w = make()
    _refused(pmm, lambda: pmm.plan_tx(w.h1, *args), error, message, on)


@ON_OFF
def test_reserve_all_of_an_unhashable_id_is_an_unknown_transaction(on: bool) -> None:
    pmm, w = make()
    pmm.plan_tx(w.h1, ((w.a, 1),))
    _refused(pmm, lambda: pmm.reserve_all([1]), UnknownTransaction, "transaction [1] was never planned", on)


@ON_OFF
def test_a_plan_without_priority_is_a_fresh_record_of_priority_zero(on: bool) -> None:
    pmm, w = make()
    pmm.abort_tx(pmm.plan_tx(w.h1, ((w.a, 1),), 3))
    with contracts.contracts(on):
        tx = pmm.plan_tx(w.h2, ((w.b, 2), (w.a, 1)))
    assert dict(abstract_manager(pmm).txs) == {tx: M.Tx(2, w.h2, ((w.a, 1), (w.b, 2)), (), None, 2, 0, 0)}


@ON_OFF
def test_a_refusal_on_a_full_ledger_shows_zero_free_and_leaves_the_intent(on: bool) -> None:
    pmm, w = make()
    lease(pmm, w.h2, w.a, 100)
    tx = pmm.plan_tx(w.h1, ((w.a, 1),), 2)
    with contracts.contracts(on), pytest.raises(CapacityDenied) as exc:
        pmm.reserve_all(tx)
    assert type(exc.value) is CapacityDenied and str(exc.value) == (
        f"authority 1: 1 B asked, 0 B free (try-only); transaction {tx} aborted: each reservation it held credited, "
        "its place kept as a retry intent (C4)")
    m = abstract_manager(pmm)
    assert (dict(m.txs), dict(m.intents), m.ledger.authorities[w.a].used) == ({}, {tx: M.Intent(tx, w.h1, 1, 2, 1)},
                                                                              100)


@ON_OFF
def test_a_ledger_a_transaction_holds_is_pinned_by_the_transaction_alone(on: bool) -> None:
    """The transaction's reservation on the ledger is its own record: the refusal names the transaction, not the
    allocation beside it."""
    pmm, w = make()
    pmm.reserve_all(pmm.plan_tx(w.h1, ((w.a, 4), (w.b, 4))))
    _refused(pmm, lambda: pmm.remove_authority(w.a), ProviderPinned, "authority 1 is pinned by transaction 1", on)


def test_ordered_reservation_off_reserves_in_the_declared_order() -> None:
    """The C4 negative control: the transaction keeps its needs as declared, and its first step books the first
    declared ledger (host, authority 2), not the lowest id."""
    with contracts.contracts(False):
        pmm, w = make(GuardSet.without("ordered_reservation"))
        tx = pmm.plan_tx(w.h1, ((w.b, 3), (w.a, 2)))
        first = reserve_tx(pmm, tx)
    m = abstract_manager(pmm)
    assert m.txs[tx] == M.Tx(tx, w.h1, ((w.b, 3), (w.a, 2)), (first,), None, 1, 0, 0)
    assert (m.ledger.allocations[first].authority, m.ledger.authorities[w.b].used, m.ledger.authorities[w.a].used) \
        == (w.b, 3, 0)

