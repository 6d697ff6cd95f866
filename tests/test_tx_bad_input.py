# Bad input to every focused transaction operation of ProcessMemoryManager (STYLE 6, 8).
#
# A fixed world holds one record in every interesting state: planned,
# reserving, published, executing, committed, aborted (intent left) and
# released transactions; a remapped view; a poisoned bundle; a lost and a
# terminated context. Each case must raise its typed error with a message
# naming the problem, leave the WHOLE abstraction unchanged, and the spec
# from the same state must raise the same error type.

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from invariants.transactions_machine import TxSpecAdapter
from refimpl.verify.transactions_adapter import TxRefimplAdapter
from spec import transactions_actions as T
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    GovernorError,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ReservationOrder,
    StaleGeneration,
    UnknownAuthority,
    UnknownBundle,
    UnknownIntent,
    UnknownTransaction,
    UnknownView,
    ViewInUse,
)
from spec.transactions_lifecycle import ViewKind

C = ViewKind.CONTIGUOUS


def build_world(do: Callable[[Any], Any]) -> SimpleNamespace:
    w = SimpleNamespace()
    w.dev, w.host, w.staging = (do(T.AddAuthority(n, 100)) for n in ("device", "host", "staging"))
    w.lost, w.term = do(T.AddAuthority("gpu1", 100)), do(T.AddAuthority("gpu2", 100))
    w.bundle, w.poisoned = do(T.OpenBundle()), do(T.OpenBundle())
    do(T.ReportMismatch(w.poisoned))
    w.planned = do(T.Plan(((w.host, 5), (w.dev, 5)), 2, C))
    w.reserving = do(T.Plan(((w.dev, 5), (w.host, 5), (w.staging, 5)), 2, C))
    do(T.Reserve(w.reserving, w.dev))
    w.committed = do(T.Plan(((w.dev, 10),), 1, C, w.bundle))
    do(T.Reserve(w.committed, w.dev))
    w.shared = do(T.Publish(w.committed))
    do(T.Execute(w.committed, w.shared, 1))
    do(T.Commit(w.committed))
    assert do(T.Remap(w.shared)) == 2
    w.executing = do(T.Plan(((w.host, 3),), 1, C))
    do(T.Reserve(w.executing, w.host))
    w.own = do(T.Publish(w.executing))
    do(T.Execute(w.executing, w.own, 1))
    do(T.Execute(w.executing, w.shared, 2))
    w.published = do(T.Plan(((w.staging, 3),), 1, C))
    do(T.Reserve(w.published, w.staging))
    w.provisional = do(T.Publish(w.published))
    w.aborted = do(T.Plan(((w.dev, 1),), 4, C))
    w.intent = do(T.Abort(w.aborted))
    w.released = do(T.Plan(((w.host, 1),), 1, C))
    do(T.Reserve(w.released, w.host))
    v = do(T.Publish(w.released))
    do(T.Execute(w.released, v, 1))
    do(T.Commit(w.released))
    do(T.Release(w.released))
    w.dropped = v
    w.on_lost = do(T.Plan(((w.lost, 4),), 1, C))  # open when the device is lost: aborted, intent left
    do(T.Reserve(w.on_lost, w.lost))
    w.lost_tx = do(T.Plan(((w.lost, 7),), 1, C))
    do(T.Reserve(w.lost_tx, w.lost))
    w.lost_view = do(T.Publish(w.lost_tx))
    do(T.Execute(w.lost_tx, w.lost_view, 1))
    do(T.Commit(w.lost_tx))
    do(T.LoseDevice(w.lost))
    do(T.LoseDevice(w.term))
    do(T.ConfirmTermination(w.term))
    return w


@pytest.fixture(scope="module")
def spec_world():
    a = TxSpecAdapter()
    w = build_world(a.execute)
    return w, a.state


@pytest.fixture
def world(spec_world):
    a = TxRefimplAdapter()
    w = build_world(a.execute)
    assert w == spec_world[0] and a.abstract() == spec_world[1]
    return a, w


@attrs.frozen
class Case:
    id: str
    make: Callable[[SimpleNamespace], Any]
    error: type[GovernorError]
    match: str


CASES = [
    # the bad input
    Case("commit-aborted", lambda w: T.Commit(w.aborted), InvalidTransition, "already aborted"),
    Case("commit-released", lambda w: T.Commit(w.released), InvalidTransition, "already aborted or released"),
    Case("commit-unknown", lambda w: T.Commit(999), UnknownTransaction, "not known"),
    Case("commit-not-executing", lambda w: T.Commit(w.published), InvalidTransition, "'commit' in phase 'published'"),
    Case("abort-committed", lambda w: T.Abort(w.committed), InvalidTransition, "'abort' in phase 'committed'"),
    Case("reserve-out-of-order", lambda w: T.Reserve(w.planned, w.host), ReservationOrder,
         r"reserve authority 1 before 2"),
    Case("reserve-skips-lowest", lambda w: T.Reserve(w.reserving, w.staging), ReservationOrder, "before"),
    Case("execute-stale-generation", lambda w: T.Execute(w.published, w.shared, 1), StaleGeneration,
         "generation 2, not 1"),
    Case("execute-future-generation", lambda w: T.Execute(w.published, w.shared, 3), StaleGeneration,
         "generation 2, not 3"),
    Case("plan-on-lost", lambda w: T.Plan(((w.lost, 1),), 0, C), DeviceLost, "context is lost"),
    Case("plan-on-terminated", lambda w: T.Plan(((w.dev, 1), (w.term, 1)), 0, C), DeviceLost,
         "context is terminated"),
    Case("remap-lost-view", lambda w: T.Remap(w.lost_view), DeviceLost, "invalid"),
    Case("execute-lost-view", lambda w: T.Execute(w.published, w.lost_view, 1), DeviceLost, "invalid"),
    Case("confirm-active", lambda w: T.ConfirmTermination(w.dev), InvalidTransition, "'active'"),
    # views
    Case("remap-in-use", lambda w: T.Remap(w.shared), ViewInUse, r"execution\(s\)"),
    Case("release-view-in-use", lambda w: T.Release(w.committed), ViewInUse, "bound"),
    Case("execute-others-provisional", lambda w: T.Execute(w.executing, w.provisional, 1), InvalidArgument,
         "provisional view"),
    Case("execute-twice", lambda w: T.Execute(w.executing, w.own, 1), InvalidTransition, "already binds"),
    Case("execute-dropped-view", lambda w: T.Execute(w.published, w.dropped, 1), InvalidTransition, "dropped"),
    Case("execute-unknown-view", lambda w: T.Execute(w.published, 999, 1), UnknownView, "not known"),
    Case("execute-generation-zero", lambda w: T.Execute(w.published, w.provisional, 0), InvalidArgument,
         "generation must be"),
    Case("remap-bad-id", lambda w: T.Remap("1"), InvalidArgument, "int id"),
    # plans
    Case("plan-empty", lambda w: T.Plan((), 0, C), InvalidArgument, "needs must be"),
    Case("plan-list", lambda w: T.Plan([(w.dev, 1)], 0, C), InvalidArgument, "needs must be"),
    Case("plan-duplicate", lambda w: T.Plan(((w.dev, 1), (w.dev, 2)), 0, C), InvalidArgument, "twice"),
    Case("plan-zero-bytes", lambda w: T.Plan(((w.dev, 0),), 0, C), InvalidBytes, "needs bytes must be"),
    Case("plan-bool-bytes", lambda w: T.Plan(((w.dev, True),), 0, C), InvalidBytes, "needs bytes must be"),
    Case("plan-huge", lambda w: T.Plan(((w.dev, 2**63),), 0, C), InvalidBytes, "needs bytes must be"),
    Case("plan-priority", lambda w: T.Plan(((w.dev, 1),), 10, C), InvalidArgument, "priority"),
    Case("plan-kind", lambda w: T.Plan(((w.dev, 1),), 0, "contiguous"), InvalidArgument, "ViewKind"),
    Case("plan-unknown-authority", lambda w: T.Plan(((99, 1),), 0, C), UnknownAuthority, "not known"),
    # refimpl's own messages, whole (pinned by the mutation run of refimpl/manager/transactions.py)
    Case("plan-authority-type", lambda w: T.Plan((("1", 1),), 0, C), InvalidArgument,
         r"^needs authority must be an int id, got '1'$"),
    Case("plan-triple", lambda w: T.Plan(((w.dev, 1, 2),), 0, C), InvalidArgument,
         r"^needs must hold \(authority, bytes\) pairs, got \(\d+, 1, 2\)$"),
    Case("plan-bundle-type", lambda w: T.Plan(((w.dev, 1),), 0, C, "1"), InvalidArgument,
         r"^bundle must be an int id, got '1'$"),
    Case("plan-retry-type", lambda w: T.Plan(((w.dev, 1),), 0, C, None, "1"), InvalidArgument,
         r"^retry must be an int id, got '1'$"),
    Case("plan-unknown-bundle", lambda w: T.Plan(((w.dev, 1),), 0, C, 99), UnknownBundle, "not known"),
    Case("plan-poisoned-bundle", lambda w: T.Plan(((w.dev, 1),), 0, C, w.poisoned), BundlePoisoned, "poisoned"),
    Case("plan-unknown-intent", lambda w: T.Plan(((w.dev, 1),), 0, C, None, 99), UnknownIntent, "not known"),
    Case("plan-over-capacity", lambda w: T.Plan(((w.dev, 101),), 0, C), CapacityDenied, "capacity is 100"),
    Case("reserve-unneeded", lambda w: T.Reserve(w.planned, w.staging), InvalidArgument, "does not need"),
    Case("reserve-held", lambda w: T.Reserve(w.reserving, w.dev), InvalidTransition, "already holds"),
    Case("reserve-published", lambda w: T.Reserve(w.published, w.staging), InvalidTransition, "already holds"),
    Case("publish-not-all-held", lambda w: T.Publish(w.reserving), InvalidTransition,
         "'publish' in phase 'reserving'"),
    Case("release-open", lambda w: T.Release(w.executing), InvalidTransition, "'release' in phase 'executing'"),
    Case("add-authority-empty-name", lambda w: T.AddAuthority("", 1), InvalidArgument, "non-empty"),
    Case("add-authority-zero", lambda w: T.AddAuthority("nvme", 0), InvalidBytes, "capacity must be"),
    Case("lose-unknown", lambda w: T.LoseDevice(99), UnknownAuthority, "not known"),
    Case("mismatch-unknown", lambda w: T.ReportMismatch(99), UnknownBundle, "not known"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_coordinator_rejects_bad_input(world, spec_world, case) -> None:
    adapter, w = world
    before, ledger = adapter.abstract(), adapter.pmm.abstract()
    action = case.make(w)
    with pytest.raises(case.error, match=case.match):
        adapter.execute(action)
    assert adapter.abstract() == before  # the whole transaction snapshot
    assert adapter.pmm.abstract() == ledger  # and the manager's ledger under it
    oracle = TxSpecAdapter()
    oracle.state = spec_world[1]  # the spec, from the same state, refuses with the same type
    with pytest.raises(case.error):
        oracle.execute(action)
    assert oracle.state == spec_world[1]


@pytest.mark.parametrize("make", [
    pytest.param(lambda w: T.LoseDevice(w.lost), id="lose-again"),
    pytest.param(lambda w: T.LoseDevice(w.term), id="lose-terminated"),
    pytest.param(lambda w: T.ConfirmTermination(w.term), id="confirm-again"),
])
def test_repeated_loss_and_confirmation_change_nothing(world, make) -> None:
    adapter, w = world
    before = adapter.abstract()
    assert adapter.execute(make(w)) is None
    assert adapter.abstract() == before


def test_commit_of_lost_transaction_is_retired(world) -> None:
    # The open transaction on the lost device was aborted at loss; it left an intent.
    adapter, w = world
    before = adapter.abstract()
    assert w.on_lost not in before.txs and before.intents
    with pytest.raises(InvalidTransition, match="already aborted"):
        adapter.execute(T.Commit(w.on_lost))
    assert adapter.abstract() == before
