# Named scenarios of the transaction model, run on the spec and on the
# manager (ProcessMemoryManager, through refimpl.verify.transactions_adapter) alike (parametrized), asserting whole states: C3 C4 C6 I5 I9 I10.

from __future__ import annotations

from typing import Any

import attrs
import pytest

from invariants.transactions import check_all
from invariants.transactions_machine import TxSpecAdapter
from refimpl.verify.transactions_adapter import TxRefimplAdapter
from spec import transactions_actions as T
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    ManagerPoisoned,
    StaleGeneration,
    ViewInUse,
)
from spec.transactions import TX_EMPTY, Intent
from spec.transactions_lifecycle import (
    BUNDLE_TABLE,
    TRANSACTION_TABLE,
    BundleState,
    ManagerState,
    TxEvent,
    TxPhase,
    ViewKind,
    ViewState,
    next_tx_phase,
)
from spec.errors import InvalidTransition
from spec.types import AllocState, ContextState, Role

KINDS = list(ViewKind)


@pytest.fixture(params=["spec", "refimpl"])
def gov(request):
    return TxSpecAdapter() if request.param == "spec" else TxRefimplAdapter()


def world(g: Any) -> tuple[int, int, int]:
    dev = g.execute(T.AddAuthority("device", 100))
    host = g.execute(T.AddAuthority("host", 100))
    staging = g.execute(T.AddAuthority("staging", 10))
    return dev, host, staging


def run_to_commit(g: Any, needs: tuple, kind: ViewKind = ViewKind.CONTIGUOUS, bundle: int | None = None) -> tuple[int, int]:
    tx = g.execute(T.Plan(needs, 5, kind, bundle))
    for aid in sorted(a for a, _ in needs):
        assert g.execute(T.Reserve(tx, aid)) is None
    view = g.execute(T.Publish(tx))
    g.execute(T.Execute(tx, view, 1))
    g.execute(T.Commit(tx))
    return tx, view


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_transaction_runs_plan_reserve_publish_execute_commit(gov, kind) -> None:
    dev, host, staging = world(gov)
    tx, view = run_to_commit(gov, ((staging, 4), (dev, 30), (host, 20)), kind)
    s = gov.abstract()
    assert s.txs[tx].phase is TxPhase.COMMITTED
    assert s.txs[tx].held == ((dev, 30), (host, 20), (staging, 4))  # taken in stable id order
    assert (s.views[view].allocation, s.views[view].generation, s.views[view].kind) == (tx, 1, kind)
    assert [s.authorities[a].used for a in (dev, host, staging)] == [30, 20, 4]
    gov.execute(T.Release(tx))
    s = gov.abstract()
    assert not s.txs and not s.views and all(a.used == 0 for a in s.authorities.values())
    check_all(s)


@pytest.mark.parametrize("abort_at", ["reserving", "reserved", "published", "executing", "try-miss"])
def test_abort_restores_the_whole_snapshot(gov, abort_at) -> None:
    dev, host, staging = world(gov)
    run_to_commit(gov, ((staging, 6 if abort_at == "try-miss" else 1),))
    before = gov.abstract()
    tx = gov.execute(T.Plan(((host, 50), (staging, 5), (dev, 40)), 7, ViewKind.INDEXED))
    seq = gov.abstract().txs[tx].seq
    gov.execute(T.Reserve(tx, dev))
    gov.execute(T.Reserve(tx, host))
    if abort_at == "try-miss":
        intent = gov.execute(T.Reserve(tx, staging))  # 6 + 5 > 10: the try fails, never waits
    else:
        if abort_at != "reserving":
            gov.execute(T.Reserve(tx, staging))
        if abort_at in ("published", "executing"):
            view = gov.execute(T.Publish(tx))
            if abort_at == "executing":
                gov.execute(T.Execute(tx, view, 1))
        intent = gov.execute(T.Abort(tx))
    after = gov.abstract()
    # The whole snapshot is as before the transaction, plus the zero-byte intent and spent counters.
    assert after == attrs.evolve(before, intents=before.intents.set(intent, Intent(intent, seq, 7, 1)),
                                 next_tx=tx + 1, next_intent=intent + 1, next_seq=seq + 1,
                                 next_view=after.next_view)
    check_all(after)
    # The retry keeps its arbitration identity, holding nothing.
    retry = gov.execute(T.Plan(((dev, 1),), 0, ViewKind.OPAQUE, None, intent))
    r = gov.abstract().txs[retry]
    assert (r.seq, r.priority, r.age, r.held) == (seq, 7, 1, ())
    assert intent not in gov.abstract().intents


def test_view_generation_is_fixed_per_execution(gov) -> None:
    dev, host, _ = world(gov)
    owner, view = run_to_commit(gov, ((dev, 10),))
    reader = gov.execute(T.Plan(((host, 1),), 1, ViewKind.BLOCKS_TABLE))
    gov.execute(T.Reserve(reader, host))
    gov.execute(T.Publish(reader))
    assert gov.execute(T.Remap(view)) == 2  # idle: the remap bumps the generation
    with pytest.raises(StaleGeneration, match="generation 2, not 1"):
        gov.execute(T.Execute(reader, view, 1))
    gov.execute(T.Execute(reader, view, 2))
    busy = gov.abstract()
    with pytest.raises(ViewInUse, match=r"bound to execution\(s\) \[%d\]" % reader):
        gov.execute(T.Remap(view))
    with pytest.raises(ViewInUse, match="bound"):
        gov.execute(T.Release(owner))
    assert gov.abstract() == busy
    gov.execute(T.Commit(reader))
    assert gov.execute(T.Remap(view)) == 3
    check_all(gov.abstract())


def test_bundle_commits_as_one_unit(gov) -> None:
    dev, _, _ = world(gov)
    b = gov.execute(T.OpenBundle())
    run_to_commit(gov, ((dev, 1),), bundle=b)
    run_to_commit(gov, ((dev, 1),), bundle=b)
    assert gov.abstract().bundles[b].versions == (2, 2, 2, 2)
    tx = gov.execute(T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS, b))
    gov.execute(T.Abort(tx))  # rolls back as one unit: nothing moved
    assert gov.abstract().bundles[b].versions == (2, 2, 2, 2)


def test_mismatch_poisons_only_its_bundle(gov) -> None:
    dev, _, _ = world(gov)
    bad, good = gov.execute(T.OpenBundle()), gov.execute(T.OpenBundle())
    tx = gov.execute(T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS, bad))
    gov.execute(T.Reserve(tx, dev))
    view = gov.execute(T.Publish(tx))
    gov.execute(T.Execute(tx, view, 1))
    gov.execute(T.ReportMismatch(bad))
    s = gov.abstract()
    assert s.bundles[bad].state is BundleState.POISONED and s.bundles[good].state is BundleState.ACTIVE
    with pytest.raises(BundlePoisoned, match="poisoned"):
        gov.execute(T.Commit(tx))
    with pytest.raises(BundlePoisoned, match="rebuild"):
        gov.execute(T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS, bad))
    assert gov.abstract() == s
    run_to_commit(gov, ((dev, 1),), bundle=good)  # the rest of the manager keeps working


def test_poisoned_manager_refuses_every_grant(gov) -> None:
    dev, _, _ = world(gov)
    tx = gov.execute(T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS))
    gov.execute(T.CorruptLedger())
    s = gov.abstract()
    assert s.manager is ManagerState.POISONED
    for action in (T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS), T.Reserve(tx, dev)):
        with pytest.raises(ManagerPoisoned, match="grants nothing"):
            gov.execute(action)
        assert gov.abstract() == s
    gov.execute(T.Abort(tx))  # giving back still works


def test_device_loss_refunds_only_on_confirmed_termination(gov) -> None:
    dev, host, _ = world(gov)
    committed, view = run_to_commit(gov, ((dev, 30), (host, 5)))
    open_tx = gov.execute(T.Plan(((dev, 20), (host, 7)), 3, ViewKind.CONTIGUOUS))
    gov.execute(T.Reserve(open_tx, dev))
    gov.execute(T.Reserve(open_tx, host))
    gov.execute(T.LoseDevice(dev))
    s = gov.abstract()
    a = s.authorities[dev]
    assert (a.context, a.used, a.stranded) == (ContextState.LOST, 50, 50)  # nothing refunded on loss
    assert s.authorities[host].used == 5  # the open transaction's host part was released
    assert open_tx not in s.txs and s.views[view].state is ViewState.INVALID
    assert s.txs[committed].held == ((host, 5),)
    for action, err in ((T.Plan(((dev, 1),), 0, ViewKind.CONTIGUOUS), DeviceLost),
                        (T.Remap(view), DeviceLost)):
        with pytest.raises(err):
            gov.execute(action)
        assert gov.abstract() == s
    gov.execute(T.ConfirmTermination(dev))
    t = gov.abstract()
    assert (t.authorities[dev].context, t.authorities[dev].used, t.authorities[dev].stranded) == (
        ContextState.TERMINATED, 0, 0)
    gov.execute(T.ConfirmTermination(dev))  # idempotent: never a second refund
    assert gov.abstract() == t
    check_all(t)


@pytest.mark.parametrize("key", sorted(TRANSACTION_TABLE, key=str), ids=str)
def test_transaction_table_entries_resolve(key) -> None:
    assert next_tx_phase(*key) is TRANSACTION_TABLE[key]


@pytest.mark.parametrize("phase", [TxPhase.COMMITTED, TxPhase.ABORTED, TxPhase.RELEASED], ids=lambda p: p.value)
def test_invalid_transition_names_phase_and_event(phase) -> None:
    with pytest.raises(InvalidTransition, match=f"'publish' in phase '{phase.value}'"):
        next_tx_phase(phase, TxEvent.PUBLISH)


def test_bundle_table_is_total() -> None:
    assert set(BUNDLE_TABLE.values()) == {BundleState.POISONED}


def test_empty_state_satisfies_invariants() -> None:
    check_all(TX_EMPTY)


def test_transactions_are_records_of_the_one_ledger() -> None:
    # No second ledger: the focused model's figures are read from the manager's ledger records.
    g = TxRefimplAdapter()
    dev, host, _ = world(g)
    tx, view = run_to_commit(g, ((host, 20), (dev, 10)))
    ledger, s = g.pmm.abstract(), g.abstract()
    leases = sorted((r.authority, r.nbytes) for r in ledger.allocations.values())
    assert leases == [(dev, 10), (host, 20)] == sorted(s.txs[tx].held)
    assert all(r.holder == g.holder and r.state is AllocState.LIVE and r.role is Role.STATE
               for r in ledger.allocations.values())
    assert [g.pmm.snapshot(a).used for a in (dev, host)] == [s.authorities[a].used for a in (dev, host)] == [10, 20]
    # The composed operations book on the same ledger: a composed transaction sees the focused one's bytes.
    h2 = g.pmm.register_holder("composed")
    ctx = g.pmm.plan_tx(h2, ((dev, 91),))
    with pytest.raises(CapacityDenied):
        g.pmm.reserve_tx(ctx)  # 10 of 100 B are the focused lease set's
    g.execute(T.Release(tx))
    assert g.pmm.reserve_tx(ctx) and g.pmm.snapshot(dev).used == 91 == g.abstract().authorities[dev].used


def test_only_a_focused_abort_leaves_a_retry_intent() -> None:
    # A composed abort keeps no intent (no composed caller spends one: it would pile up); a focused one does.
    g = TxRefimplAdapter()
    dev, _, _ = world(g)
    ctx = g.pmm.plan_tx(g.holder, ((dev, 5),))
    g.pmm.reserve_tx(ctx)
    assert g.pmm.abort_tx(ctx) == 5 and not g.abstract().intents
    intent = g.execute(T.Abort(g.execute(T.Plan(((dev, 5),), 3, ViewKind.CONTIGUOUS))))
    assert list(g.abstract().intents) == [intent]
