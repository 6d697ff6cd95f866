# refimpl.manager.transactions where the mutation run found it unpinned: the exact refusals of the focused
# front end (which field an id refusal names, which lifecycle event a refused reserve names, the poisoned
# manager, an alias), its boundaries (an exact fit, the most needs, the next intent id), the composed
# front end's try-only refusal, and the registration of a name already known (C3, C4, I5).

from __future__ import annotations

import pytest
from refimpl_manager_harness import lease, make

from invariants import contracts
from refimpl.manager import ProcessMemoryManager, tx_view
from spec.errors import (
    IdentityMismatch,
    CapacityDenied,
    DeviceLost,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ManagerPoisoned,
    ProviderPinned,
    UnknownIntent,
    UnknownTransaction,
)
from spec import transactions_actions as TA
from spec.guards import GuardSet
from spec.tickets import TicketState
from spec.transactions_lifecycle import TxPhase, ViewKind
from spec.types import Tier
from tx_harness import reserve_every

C = ViewKind.CONTIGUOUS


def focused(guards: GuardSet = GuardSet(), n: int = 3) -> tuple[ProcessMemoryManager, int, list[int]]:
    pmm = ProcessMemoryManager(guards=guards)
    auths = [pmm.register_authority(f"gpu{i}", Tier.DEVICE, 64) for i in range(n)]
    return pmm, pmm.register_holder("kv"), auths


@pytest.mark.parametrize(("op", "field"), [
    (lambda p, a, t: p.tx_reserve("1", a[0]), "tx"),
    (lambda p, a, t: p.tx_reserve(t, "1"), "authority"),
    (lambda p, a, t: p.tx_commit("1"), "tx"),
    (lambda p, a, t: p.tx_abort("1"), "tx"),
    (lambda p, a, t: p.tx_release("1"), "tx"),
], ids=["reserve-tx", "reserve-authority", "commit", "abort", "release"])
def test_a_focused_id_refusal_names_its_field(op, field) -> None:
    pmm, h, auths = focused()
    tx = pmm.tx_plan(h, ((auths[0], 8),), 0, C)
    before = pmm.abstract_tx()
    with pytest.raises(InvalidArgument, match=rf"^{field} must be an int id, got '1'$"):
        op(pmm, auths, tx)
    assert pmm.abstract_tx() == before


@pytest.mark.parametrize(("needs", "event"), [(3, "reserve"), (2, "reserve-last")])
def test_a_refused_reserve_names_its_lifecycle_event(needs: int, event: str) -> None:
    # publish_after_all_held off lets a transaction publish holding one need; a further reserve is then refused
    # by phase, naming the event it would have been (the last need or not).
    with contracts.contracts(False):
        pmm, h, auths = focused(GuardSet.without("publish_after_all_held"))
        tx = pmm.tx_plan(h, tuple((a, 8) for a in auths[:needs]), 0, C)
        pmm.tx_reserve(tx, auths[0])
        pmm.publish_view(tx)
        with pytest.raises(InvalidTransition,
                           match=rf"^transaction {tx}: no transition for event '{event}' in phase 'published'$"):
            pmm.tx_reserve(tx, auths[1])


def test_an_exact_fit_is_reserved() -> None:
    pmm, h, (a, *_) = focused()
    tx = pmm.tx_plan(h, ((a, 64),), 0, C)
    assert pmm.tx_reserve(tx, a) is None
    s = pmm.abstract_tx()
    assert s.txs[tx].phase is TxPhase.RESERVED and s.authorities[a].used == 64


def test_the_most_needs_are_planned_and_one_more_is_refused() -> None:
    pmm, h, auths = focused(n=9)
    tx = pmm.tx_plan(h, tuple((a, 1) for a in auths[:8]), 0, C)
    assert len(pmm.abstract_tx().txs[tx].needs) == 8
    with pytest.raises(InvalidArgument, match=r"^needs must be a tuple of 1\.\.8 \(authority, bytes\) pairs"):
        pmm.tx_plan(h, tuple((a, 1) for a in auths), 0, C)


def test_a_retry_naming_the_next_intent_is_unknown_not_used() -> None:
    pmm, h, (a, *_) = focused()
    tx = pmm.tx_plan(h, ((a, 8),), 0, C)
    used_intent = pmm.tx_abort(tx)
    pmm.tx_plan(h, ((a, 8),), 0, C, retry=used_intent)  # spends it
    with pytest.raises(InvalidTransition, match=rf"^intent {used_intent} is already used by a retry$"):
        pmm.tx_plan(h, ((a, 8),), 0, C, retry=used_intent)
    nxt = pmm.abstract_tx().next_intent
    with pytest.raises(UnknownIntent, match=rf"^intent {nxt} is not known$"):
        pmm.tx_plan(h, ((a, 8),), 0, C, retry=nxt)


def test_a_poisoned_manager_refuses_a_plan_by_name() -> None:
    with contracts.contracts(False):
        pmm, h, (a, *_) = focused()
        pmm.tx_corrupt_ledger()
        with pytest.raises(ManagerPoisoned, match=r"^the ledger was found corrupt; the manager grants nothing$"):
            pmm.tx_plan(h, ((a, 8),), 0, C)


def test_a_plan_naming_an_alias_is_refused_by_name() -> None:
    pmm, h, (a, *_) = focused()
    view = pmm.register_alias(a, "uvm")
    with pytest.raises(InvalidArgument,
                       match=rf"^authority {view} is a view of {a}; a transaction names canonical ledgers$"):
        pmm.tx_plan(h, ((view, 8),), 0, C)


def test_a_known_name_registers_nothing_new_and_a_mismatched_identity_is_refused() -> None:
    pmm, _, (a, *_) = focused(n=1)
    before = pmm.abstract_tx()
    assert pmm.register_authority("gpu0", Tier.DEVICE, 64) == a  # re-registering returns it (C1)
    with pytest.raises(IdentityMismatch, match=r"^pool 'gpu0' is already \(device, 64 B\); got \(device, 32 B\)$"):
        pmm.register_authority("gpu0", Tier.DEVICE, 32)
    assert pmm.abstract_tx() == before


def test_the_composed_try_only_refusal_reports_zero_free() -> None:
    pmm, w = make()
    lease(pmm, w.h1, w.a, 100)  # the ledger is full
    tx = pmm.plan_tx(w.h2, ((w.a, 10),))
    with pytest.raises(CapacityDenied, match=r"^authority 1: 10 B asked, 0 B free \(try-only\)$"):
        pmm.reserve_tx(tx)


def test_the_composed_plan_names_the_bytes_field() -> None:
    pmm, w = make()
    with pytest.raises(InvalidBytes, match=r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"):
        pmm.plan_tx(w.h1, ((w.a, 0),))


@pytest.mark.parametrize("tx", [99, []], ids=["unknown", "unhashable"])
def test_reserve_all_of_no_transaction_is_unknown(tx) -> None:
    pmm, _ = make()
    with pytest.raises(UnknownTransaction):
        pmm.reserve_all(tx)


def test_full_abort_off_returns_only_the_first_reservation_and_the_rest_are_the_holders() -> None:
    with contracts.contracts(False):
        pmm, h, auths = focused(GuardSet.without("full_abort"))
        tx = pmm.tx_plan(h, tuple((a, 8) for a in auths), 0, C)
        assert reserve_every(pmm, tx) is None
        pmm.tx_abort(tx)
        s = pmm.abstract_tx()
        assert [s.authorities[a].used for a in auths] == [0, 8, 8]  # the harm: two reservations leak
        leaked = sorted(pmm.abstract().allocations)
        assert len(leaked) == 2
        for i in leaked:  # no transaction owns them now: refused for their state, not as a part's reservation
            with pytest.raises(InvalidTransition, match=rf"^allocation {i}: cannot release in state provisional$"):
                pmm.release(h, i)


def test_a_focused_release_grants_a_waiting_ticket_on_the_freed_ledger() -> None:
    with contracts.contracts(False):  # a composed ticket is outside the focused model's contract
        pmm, h, (a, *_) = focused(n=1)
        waiter = pmm.register_holder("w")
        tx = pmm.tx_plan(h, ((a, 60),), 0, C)
        pmm.tx_reserve(tx, a)
        view = pmm.publish_view(tx)
        pmm.execute_view(tx, view, 1)
        pmm.tx_commit(tx)
        t = pmm.submit(waiter, a, 30)
        assert pmm.abstract_manager().tickets[t].state is TicketState.PENDING
        pmm.tx_release(tx)
        m = pmm.abstract_manager()
        assert m.tickets[t].state is TicketState.GRANTED and m.ledger.authorities[a].used == 30


def test_tx_counts_granted_off_counts_only_granted_tickets_on_that_ledger_as_free() -> None:
    # The negative control's harm is granted bytes looking free; a pending ticket, or a grant on another
    # ledger, holds no bytes here and must not add headroom.
    with contracts.contracts(False):
        pmm, w = make(GuardSet.without("tx_counts_granted"))
        lease(pmm, w.h1, w.a, 100)
        pending = pmm.submit(w.h2, w.a, 50)
        pmm.submit(w.h2, w.b, 40)  # granted, on b
        assert pmm.abstract_manager().tickets[pending].allocation is None
        tx = pmm.plan_tx(w.h2, ((w.a, 10),))
        with pytest.raises(CapacityDenied, match=r"^authority 1: 10 B asked, 0 B free \(try-only\)$"):
            pmm.reserve_tx(tx)


def test_each_focused_operation_checks_the_action_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    # With contracts on, the step predicates check the action the front end passes on: every field the
    # caller gave is in it.
    seen: list[object] = []
    monkeypatch.setattr(tx_view, "check_step", lambda before, action, after: seen.append(action))
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        a, b = pmm.register_authority("g0", Tier.DEVICE, 64), pmm.register_authority("g1", Tier.DEVICE, 32)
        h = pmm.register_holder("kv")
        bundle = pmm.open_bundle()
        tx = pmm.tx_plan(h, ((a, 8), (b, 4)), 2, ViewKind.CONTIGUOUS, bundle)
        pmm.tx_reserve(tx, a)
        intent = pmm.tx_abort(tx)
        t2 = pmm.tx_plan(h, ((a, 8),), 0, C, None, intent)
        pmm.tx_reserve(t2, a)
        pmm.execute_view(t2, pmm.publish_view(t2), 1)  # composed verbs: not the focused runner's
        pmm.tx_commit(t2)
        pmm.tx_release(t2)
    assert seen == [TA.Plan(((a, 8), (b, 4)), 2, C, bundle, None), TA.Reserve(tx, a), TA.Abort(tx),
                    TA.Plan(((a, 8),), 0, C, None, intent), TA.Reserve(t2, a), TA.Commit(t2), TA.Release(t2)]


def test_a_composed_transaction_is_seen_by_the_focused_view_as_planned_with_defaults_and_keeps_no_intent() -> None:
    with contracts.contracts(False):  # the composed front end opens it; the focused one reads and aborts it
        pmm, w = make()
        tx = pmm.plan_tx(w.h1, ((w.a, 5),))
        t = pmm.abstract_tx().txs[tx]
        assert (t.priority, t.kind, t.phase, t.bundle) == (0, C, TxPhase.PLANNED, None)
        assert pmm.tx_abort(tx) == 0  # a composed transaction leaves no retry intent
        assert not pmm.abstract_tx().intents


def test_what_pins_a_ledger_is_named_once_and_an_unrelated_transaction_pins_nothing() -> None:
    pmm, h, (a, b, c) = focused()
    tx = pmm.plan_tx(h, ((a, 8), (b, 4)))
    pmm.reserve_tx(tx)
    before = pmm.abstract_manager()
    # held on a: named as the transaction, its reservation not again as a bare allocation
    with pytest.raises(ProviderPinned, match=rf"^authority {a} is pinned by transaction {tx}$"):
        pmm.remove_authority(a)
    with pytest.raises(ProviderPinned, match=rf"^authority {b} is pinned by transaction {tx}$"):  # needed, open
        pmm.remove_authority(b)
    assert pmm.abstract_manager() == before
    pmm.remove_authority(c)  # an open transaction that does not need c does not pin it
    assert c not in pmm.abstract_manager().ledger.authorities


def test_a_committed_lease_set_and_its_view_pin_every_ledger_it_holds() -> None:
    # refimpl's `_pins` also names the focused records (a committed lease set, its model view): C3.
    pmm, h, (a, b, _) = focused()
    tx = pmm.tx_plan(h, ((a, 10), (b, 20)), 0, C)
    reserve_every(pmm, tx)
    view = pmm.publish_view(tx)
    pmm.execute_view(tx, view, 1)
    pmm.tx_commit(tx)
    before = pmm.abstract_manager(), pmm.abstract_tx()
    with pytest.raises(ProviderPinned, match=rf"^authority {a} is pinned by transaction {tx}, view {view}$"):
        pmm.remove_authority(a)
    with pytest.raises(ProviderPinned, match=rf"^authority {b} is pinned by transaction {tx}$"):  # no view on b
        pmm.remove_authority(b)
    assert (pmm.abstract_manager(), pmm.abstract_tx()) == before
    pmm.tx_release(tx)
    pmm.remove_authority(b)
    assert b not in pmm.abstract_manager().ledger.authorities


def test_a_released_lease_set_leaves_its_lost_part_to_the_holder_and_termination() -> None:
    pmm, h, (a, *_) = focused(n=1)
    tx = pmm.tx_plan(h, ((a, 8),), 0, C)
    pmm.tx_reserve(tx, a)
    view = pmm.publish_view(tx)
    pmm.execute_view(tx, view, 1)
    pmm.tx_commit(tx)
    pmm.lose_device(a)
    pmm.tx_release(tx)  # the lost part stays charged (stranded) until termination
    (alloc,) = pmm.abstract().allocations
    with contracts.contracts(False):  # no transaction owns it now: refused for the loss, not as a part's reservation
        with pytest.raises(DeviceLost, match=rf"^allocation {alloc} is on a lost device; its charge stays until"):
            pmm.release(h, alloc)
    pmm.confirm_termination(a)
    assert not pmm.abstract().allocations and pmm.abstract_tx().authorities[a].used == 0
