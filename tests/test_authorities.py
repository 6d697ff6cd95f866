"""Authorities and aliases (C1, I1), record-committed oversubscription (I2), snapshots."""

from __future__ import annotations

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.ledger import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import prepare_limit
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.errors import CapacityDenied, InvalidBytes, InvalidTransition, ProviderPinned, UnknownAuthority
from spec.guards import GuardSet
from spec.types import MAX_BYTES, MAX_NAME, Role, Tier
from refimpl_manager_harness import lease


@pytest.fixture
def pmm() -> ProcessMemoryManager:
    return ProcessMemoryManager()


def test_register_same_identity_returns_existing(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("gpu0", Tier.DEVICE, 1024)
    before = abstract_ledger(pmm)
    assert pmm.register_authority("gpu0", Tier.DEVICE, 1024) == a
    assert abstract_ledger(pmm) == before


def test_alias_adds_no_charge(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("uma", Tier.DEVICE, 1024)
    view = pmm.register_alias(a, "host-view")
    h = pmm.register_holder("kv")
    pmm.reserve(h, view, Tier.DEVICE, 600, Role.KV)
    pmm.reserve(h, a, Tier.DEVICE, 400, Role.KV)
    # One physical pool: both reservations land on the canonical ledger, and it is full.
    assert pmm.snapshot(a).used == 1000
    assert pmm.snapshot(view) == pmm.snapshot(a)
    with pytest.raises(CapacityDenied, match="available"):
        pmm.reserve(h, view, Tier.DEVICE, 25, Role.KV)
    s = abstract_ledger(pmm)
    assert s.authorities[view].used == 0 and s.authorities[view].alias_of == a
    check_all(s)


def test_alias_of_alias_resolves_to_canonical(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("uma", Tier.DEVICE, 64)
    v1 = pmm.register_alias(a, "v1")
    v2 = pmm.register_alias(v1, "v2")
    assert abstract_ledger(pmm).authorities[v2].alias_of == a
    assert pmm.register_alias(v1, "v1") == v1


def test_record_committed_reports_oversubscription(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    h = pmm.register_holder("weights")
    pmm.reserve(h, a, Tier.DEVICE, 60, Role.WEIGHTS)
    # The bytes were already taken: recording them may exceed the limit, and says so.
    pmm.record_committed(h, a, Tier.DEVICE, 70, Role.ARENA)
    snap = pmm.snapshot(a)
    assert (snap.used, snap.available, snap.oversubscribed) == (130, 0, 30)
    # Grants stay closed until use falls back under the limit (lease rule G1).
    with pytest.raises(CapacityDenied):
        pmm.reserve(h, a, Tier.DEVICE, 1, Role.KV)
    check_all(abstract_ledger(pmm))


def test_commit_refunds_unused_reservation(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    h = pmm.register_holder("arena")
    x = pmm.reserve(h, a, Tier.DEVICE, 64, Role.ARENA)
    pmm.commit(h, x, 48)
    rec = abstract_ledger(pmm).allocations[x]
    assert (rec.reserved, rec.nbytes, rec.charge, pmm.snapshot(a).used) == (64, 48, 48, 48)


def test_allowance_transfer_moves_limits_not_charge(pmm: ProcessMemoryManager) -> None:
    a = pmm.register_authority("uma", Tier.DEVICE, 100)
    h1, h2 = pmm.register_holder("kv"), pmm.register_holder("weights")
    pmm.reserve(h1, a, Tier.DEVICE, 30, Role.KV)
    w1 = pmm.open_allowance(h1, a, 60)
    w2 = pmm.open_allowance(h2, a, 40)
    pmm.reserve_growth(h1, w1, 10)
    pmm.map_allowance(h1, w1, 10)
    pmm.transfer_allowance(h1, w1, w2, 50)
    s = abstract_ledger(pmm)
    assert (s.allowances[w1].limit, s.allowances[w2].limit) == (10, 90)
    assert pmm.snapshot(a).used == 30 and pmm.snapshot(a).allowance_limits == 100
    check_all(s)


# --- removing an authority (C3; the composed `remove_authority`, spec.manager's RemoveAuthority) ----------
# With contracts on: `invariants.manager` judges each removal (step_C3_manager.removal_drops_no_charge).


def _pinned_world(pmm: ProcessMemoryManager) -> tuple[int, int, int]:
    """gpu0 (id 1) pinned by an open transaction, an alias (2), a lease (1), an allowance (1), a pending ticket (1)."""
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    alias = pmm.register_alias(a, "uvm")
    h = pmm.register_holder("engine")
    x = lease(pmm, h, a, 10)
    pmm.open_allowance(h, a, 10)
    pmm.submit(h, a, 95)  # 90 B free: pending, it holds no bytes
    pmm.plan_tx(h, ((a, 5),))
    return a, alias, h


def test_invalid_remove_is_refused_naming_every_pin_and_changes_nothing() -> None:
    pmm = ProcessMemoryManager()
    a, _, _ = _pinned_world(pmm)
    before = abstract_manager(pmm)
    with pytest.raises(ProviderPinned, match=r"^authority 1 is pinned by transaction 1, alias 2, allocation 1, "
                                            r"allowance 1$"):
        pmm.remove_authority(a)
    assert abstract_manager(pmm) == before


@pytest.mark.parametrize("pin", ["pressure", "limit change"])
def test_invalid_remove_under_a_pressure_or_a_limit_change_changes_nothing(pin: str) -> None:
    pmm = ProcessMemoryManager()
    a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("engine")
    if pin == "pressure":
        pmm.press(h, a, 10)
    else:
        prepare_limit(pmm, a, 50)  # a change left pending: the checkers' step alone
    before = abstract_manager(pmm)
    with pytest.raises(ProviderPinned, match=rf"^authority 1 is pinned by {pin}"):
        pmm.remove_authority(a)
    assert abstract_manager(pmm) == before


def test_remove_names_the_stranded_charge_of_a_lost_device() -> None:
    pmm = ProcessMemoryManager()
    a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("engine")
    x = lease(pmm, h, a, 30)
    pmm.lose_device(a)
    before = abstract_manager(pmm)
    with pytest.raises(ProviderPinned, match=r"^authority 1 is pinned by 30 B stranded charge$"):
        pmm.remove_authority(a)
    assert abstract_manager(pmm) == before
    pmm.confirm_termination(a)
    pmm.remove_authority(a)
    assert a not in abstract_ledger(pmm).authorities


def test_removed_authority_and_alias_free_their_names() -> None:
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    alias = pmm.register_alias(a, "uvm")
    pmm.remove_authority(alias)  # an alias goes first (it pins its canonical ledger)
    assert pmm.register_alias(a, "uvm") == 3  # its (ledger, view) key is free again: a new id
    pmm.remove_authority(3)
    pmm.remove_authority(a)
    with pytest.raises(InvalidTransition, match=r"^authority 1 was removed$"):
        pmm.snapshot(a)
    before = abstract_manager(pmm)
    with pytest.raises(InvalidTransition, match=r"^authority 1 was removed$"):
        pmm.remove_authority(a)
    with pytest.raises(UnknownAuthority, match=r"^authority 4 is not known \(not registered\)$"):
        pmm.remove_authority(4)
    assert abstract_manager(pmm) == before
    assert pmm.register_authority("gpu0", Tier.HOST, 50) == 4  # the pool name is free: another identity is fine
    assert set(abstract_ledger(pmm).authorities) == {4}


def test_provider_pinned_off_removes_a_ledger_under_a_lease_and_the_contract_names_the_harm() -> None:
    # Negative control: without the guard the ledger goes while a lease is charged on it (C3's harm).
    pmm = ProcessMemoryManager(guards=GuardSet.without("provider_pinned"))
    a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("engine")
    x = lease(pmm, h, a, 10)
    with pytest.raises(InvariantViolation, match=r"^C3: .*authority 1 is gone but allocation 1 still name"):
        pmm.remove_authority(a)
    with contracts.contracts(False):
        pmm = ProcessMemoryManager(guards=GuardSet.without("provider_pinned"))
        a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("engine")
        x = pmm.reserve(h, a, Tier.DEVICE, 10, Role.KV)
        pmm.remove_authority(a)
        assert a not in abstract_ledger(pmm).authorities and x in abstract_ledger(pmm).allocations


# --- refimpl's own boundaries and figures (pinned by the mutation run of refimpl/manager/ledger.py) ----------


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_the_largest_figures_and_names_are_accepted(on: bool) -> None:
    with contracts.contracts(on):
        pmm = ProcessMemoryManager()
        a = pmm.register_authority("p" * MAX_NAME, Tier.DEVICE, MAX_BYTES)
        h = pmm.register_holder("h" * MAX_NAME)
        x = lease(pmm, h, a, MAX_BYTES)
        assert pmm.snapshot(a).used == MAX_BYTES


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_recording_up_to_the_ledger_maximum_and_not_one_byte_past(on: bool) -> None:
    # record_committed may pass the limit (I2) but never the ledger's own range: used stays <= 2**63-1.
    with contracts.contracts(on):
        pmm = ProcessMemoryManager()
        a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("arena")
        pmm.record_committed(h, a, Tier.DEVICE, MAX_BYTES - 10, Role.ARENA)
        pmm.record_committed(h, a, Tier.DEVICE, 10, Role.ARENA)  # exactly the maximum
        before = abstract_ledger(pmm)
        with pytest.raises(InvalidBytes, match=r"^authority 1: recording 1 B would overflow the ledger$"):
            pmm.record_committed(h, a, Tier.DEVICE, 1, Role.ARENA)
        assert abstract_ledger(pmm) == before and pmm.snapshot(a).used == MAX_BYTES


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_refused_grant_names_the_bytes_available(on: bool) -> None:
    with contracts.contracts(on):
        pmm = ProcessMemoryManager()
        a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("kv")
        pmm.reserve(h, a, Tier.DEVICE, 60, Role.KV)
        with pytest.raises(CapacityDenied, match=r"^authority 1: 41 B asked, 40 B available$"):
            pmm.reserve(h, a, Tier.DEVICE, 41, Role.KV)
        pmm.record_committed(h, a, Tier.DEVICE, 70, Role.ARENA)  # 130 B used of 100: oversubscribed
        with pytest.raises(CapacityDenied, match=r"^authority 1: 1 B asked, 0 B available$"):
            pmm.reserve(h, a, Tier.DEVICE, 1, Role.KV)


def test_a_reconfigured_authority_removed_leaves_no_generation_in_spec_or_refimpl() -> None:
    """A removed authority's generation goes with it, in the spec and in refimpl's mapping alike (the composed
    campaign found the spec keeping `generations[1]` after RemoveAuthority while refimpl's view had dropped it)."""
    from spec import ledger_actions as A
    from spec import manager as S
    from spec import manager_actions as M
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("g0", Tier.DEVICE, 64)
    pmm.reconfigure(a)
    pmm.remove_authority(a)
    m = M.initial(abstract_manager(pmm).aging_bound)
    for act in (A.RegisterAuthority("g0", Tier.DEVICE, 64), M.Reconfigure(1), M.RemoveAuthority(1)):
        m = S.apply(m, act)
    assert 1 not in m.generations and 1 not in abstract_manager(pmm).generations
    assert m.generations == abstract_manager(pmm).generations
