"""refimpl/manager/allowances.py scripted: allowance figures and boundaries, one allowance_bounds control per site (I4b).

The same world as tests/test_machine_units.py, driven on ProcessMemoryManager
directly: refimpl is an independent implementation, so its own messages and
its own `<=` / `<` are pinned here, and each allowance_bounds site is shown
necessary on its own.
"""

from __future__ import annotations

import pytest

from spec import ledger_actions as A
from spec.errors import AllowanceExceeded, InvalidBytes, InvalidTransition, UnknownAllowance
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import Allowance
from spec.types import Role, Tier
from invariants import contracts
from invariants import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger

DEV = Tier.DEVICE


def world(guards: GuardSet = ALL_ON) -> ProcessMemoryManager:
    """gpu0 (1000 B), holder 1, allowance 1 (limit 100: reserved 10, mapped 20, 70 B free), allowance 2 (limit 50)."""
    pmm = ProcessMemoryManager(guards=guards)
    assert pmm.register_authority("gpu0", DEV, 1000) == 1
    assert pmm.register_holder("alice") == 1
    assert pmm.open_allowance(1, 1, 100) == 1
    pmm.reserve_growth(1, 1, 30)
    pmm.map_allowance(1, 1, 20)
    assert pmm.open_allowance(1, 1, 50) == 2
    assert abstract_ledger(pmm).allowances[1] == Allowance(1, 1, 1, 100, 10, 20)
    return pmm


@pytest.mark.parametrize("verb, fits, after, error, refusal", [
    ("reserve_growth", 70, Allowance(1, 1, 1, 100, 80, 20), AllowanceExceeded, r"^allowance 1: 71 B asked, 70 B free$"),
    ("map_allowance", 10, Allowance(1, 1, 1, 100, 0, 30), AllowanceExceeded,
     r"^allowance 1: 11 B to map, 10 B reserved$"),
    ("unmap_allowance", 20, Allowance(1, 1, 1, 100, 10, 0), InvalidBytes, r"^allowance 1: 21 B to unmap, 20 B mapped$"),
], ids=["grow", "map", "unmap"])
def test_allowance_verb_takes_all_it_has_and_names_it_one_byte_past(verb: str, fits: int, after: Allowance,
                                                                      error: type, refusal: str) -> None:
    """Growth up to the free bytes, a map of all reserved bytes, an unmap of all mapped bytes; one byte more is
    refused with the figures, the ledger unchanged."""
    pmm = world()
    with pytest.raises(error, match=refusal):
        getattr(pmm, verb)(1, 1, fits + 1)
    assert abstract_ledger(pmm) == abstract_ledger(world())
    getattr(pmm, verb)(1, 1, fits)
    assert abstract_ledger(pmm).allowances[1] == after


@pytest.mark.parametrize("site", ["grow", "transfer"])
def test_allowance_bounds_site_off_is_caught_by_the_contracts(site: str) -> None:
    contracts.enable()
    pmm = world(GuardSet.without("allowance_bounds"))
    with pytest.raises(InvariantViolation, match=r"^I4b: allowance 1: "):
        {"grow": lambda: pmm.reserve_growth(1, 1, 80), "transfer": lambda: pmm.transfer_allowance(1, 1, 2, 71)}[site]()


def test_transfer_exactly_the_free_bytes() -> None:
    pmm = world()
    pmm.transfer_allowance(1, 1, 2, 70)
    ws = abstract_ledger(pmm).allowances
    assert (ws[1].limit, ws[2].limit) == (30, 120)


def test_invalid_transfer_names_the_free_bytes() -> None:
    with pytest.raises(AllowanceExceeded, match=r"^allowance 1: 71 B to transfer, 70 B free$"):
        world().transfer_allowance(1, 1, 2, 71)


@pytest.mark.parametrize("site", ["grow", "map", "transfer"])
def test_allowance_bounds_site_off_breaks_i4b(site: str) -> None:
    contracts.disable()  # the debug-build contracts would stop the harm at once; show it instead
    pmm = world(GuardSet.without("allowance_bounds"))
    {"grow": lambda: pmm.reserve_growth(1, 1, 80), "map": lambda: pmm.map_allowance(1, 1, 11),
     "transfer": lambda: pmm.transfer_allowance(1, 1, 2, 71)}[site]()
    w = abstract_ledger(pmm).allowances[1]
    if site == "map":
        assert (w.reserved, w.mapped) == (0, 31)  # 1 B mapped that was never reserved
    else:
        assert w.reserved + w.mapped > w.limit


# --- the release build's paths (contracts off) ---------------------------------------------


@pytest.mark.parametrize("checked", [False, True], ids=["contracts-off", "contracts-on"])
def test_every_operation_refines_the_spec_step_by_step(checked: bool) -> None:
    # Each public operation has two paths: checked (debug contracts on) and plain (off, as under
    # python -O). The suite runs with contracts on, so the plain paths are driven here: the world of
    # tests/test_bad_input.py (every operation, every record state), spec and refimpl in lockstep.
    import attrs

    from spec.ledger import step as spec_step
    from spec.ledger_state import EMPTY
    from refimpl.verify.manager_adapter import method_name
    from test_bad_input import build_world

    contracts.enable() if checked else contracts.disable()
    pmm = ProcessMemoryManager()
    state = EMPTY
    seen = set()

    def do(action):
        nonlocal state
        state, expected = spec_step(state, action)
        got = getattr(pmm, method_name(action))(**attrs.asdict(action, recurse=False))
        assert got == expected, action
        assert abstract_ledger(pmm) == state, action
        seen.add(type(action).__name__)
        return got

    w = build_world(do)
    do(A.Release(w.h, w.live))
    do(A.RecordCommitted(w.h, w.host, Tier.HOST, 10, Role.KV))
    do(A.UnmapAllowance(w.h, w.allow, 5))
    do(A.TransferAllowance(w.h, w.allow, w.allow_bob, 10))
    assert len(seen) == 17  # every governor action (spec.ledger_actions) was driven


# --- the checked path's scope and action (pinned by the mutation run of refimpl/manager/allowances.py) ----


def _bob_acts(pmm: ProcessMemoryManager, site: str) -> None:
    """Holder 2 (bob) acts on alice's allowance 1 (on allowance 2 for close: 1 maps bytes)."""
    {"grow": lambda: pmm.reserve_growth(2, 1, 5), "map": lambda: pmm.map_allowance(2, 1, 5),
     "unmap": lambda: pmm.unmap_allowance(2, 1, 5), "transfer": lambda: pmm.transfer_allowance(2, 1, 2, 5),
     "close": lambda: pmm.close_allowance(2, 2)}[site]()


@pytest.mark.parametrize("site", ["grow", "map", "unmap", "transfer", "close"])
def test_owner_only_off_at_each_allowance_site_is_caught_naming_the_action(site: str) -> None:
    # The checked path must view the allowance the operation names (a wrong scope key sees nothing) and
    # hand the contract the action as called (its repr is what a developer reads in the violation).
    contracts.enable()
    pmm = world(GuardSet.without("owner_only"))
    assert pmm.register_holder("bob") == 2
    expected = {"grow": A.ReserveGrowth(2, 1, 5), "map": A.MapAllowance(2, 1, 5), "unmap": A.UnmapAllowance(2, 1, 5),
                "transfer": A.TransferAllowance(2, 1, 2, 5), "close": A.CloseAllowance(2, 2)}[site]
    with pytest.raises(InvariantViolation, match=r"^I6: ") as exc:
        _bob_acts(pmm, site)
    wid = 2 if site == "close" else 1
    assert str(exc.value) == f"I6: {expected!r} changed holder 1's allowance {wid}"


@pytest.mark.parametrize("site", ["grow", "map", "unmap", "transfer", "close"])
def test_owner_only_on_refuses_bob_at_each_allowance_site(site: str) -> None:
    from spec.errors import ForeignHolder

    pmm = world()
    pmm.register_holder("bob")
    before = abstract_ledger(pmm)
    with pytest.raises(ForeignHolder, match=rf"^allowance {2 if site == 'close' else 1} is held by holder 1, not 2$"):
        _bob_acts(pmm, site)
    assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("checked", [False, True], ids=["contracts-off", "contracts-on"])
def test_closed_allowance_ids_from_one_are_already_closed(checked: bool) -> None:
    # Ids run from 1: a closed id 1 is "already closed" (InvalidTransition), 0 and the next id were never opened.
    contracts.enable() if checked else contracts.disable()
    pmm = world()
    pmm.unmap_allowance(1, 1, 20)
    pmm.close_allowance(1, 1)
    before = abstract_ledger(pmm)
    with pytest.raises(InvalidTransition, match=r"^allowance 1 was already closed$"):
        pmm.map_allowance(1, 1, 1)
    for wid in (0, 3):
        with pytest.raises(UnknownAllowance, match=rf"^allowance {wid} was never opened$"):
            pmm.map_allowance(1, wid, 1)
    assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("checked", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_bool_allowance_id_is_unknown_not_allowance_one(checked: bool) -> None:
    # True == 1 and hashes alike: a lookup by value alone would map 1 B on allowance 1.
    contracts.enable() if checked else contracts.disable()
    pmm = world()
    before = abstract_ledger(pmm)
    with pytest.raises(UnknownAllowance, match=r"^allowance True was never opened$"):
        pmm.map_allowance(1, True, 1)
    assert abstract_ledger(pmm) == before


_ALIGN_MSG = "alignment must be None or a power of two in [1, 2**62], got {}"


@pytest.mark.parametrize("checked", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_stated_alignment_is_accepted_from_1_to_2_62_and_never_charged(checked: bool) -> None:
    """D13: every power of two in [1, 2**62] is a valid alignment, charged nothing (the lease is its nbytes);
    2**63 (one bit past) and 2**62 + 2**61 are refused with the whole message, the ledger unchanged."""
    from spec.errors import InvalidArgument

    with contracts.contracts(checked):
        pmm = world()
        for n, align in ((8, 1), (16, 64), (24, 1 << 62)):
            lease = pmm.reserve(1, 1, DEV, n, Role.KV, align)
            r = abstract_ledger(pmm).allocations[lease]
            assert (r.reserved, r.nbytes, r.charge) == (n, n, n)
        assert pmm.snapshot(1).used == 48
        before = abstract_ledger(pmm)
        for bad in (1 << 63, (1 << 62) + (1 << 61)):
            with pytest.raises(InvalidArgument) as e:
                pmm.reserve(1, 1, DEV, 8, Role.KV, bad)
            assert str(e.value) == _ALIGN_MSG.format(bad)
        assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("checked", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_pool_on_a_declared_device_is_that_device_tiers_one_authority(checked: bool) -> None:
    """C1: a second pool name on the same (device, tier) is the same ledger; on another device or tier, its own."""
    with contracts.contracts(checked):
        pmm = ProcessMemoryManager()
        a = pmm.register_authority("hbm", DEV, 100, device="cuda:0")
        assert pmm.register_authority("arena", DEV, 100, device="cuda:0") == a
        assert pmm.register_authority("other", DEV, 100, device="cuda:1") == a + 1
        assert pmm.register_authority("pinned", Tier.HOST, 100, device="cuda:0") == a + 2
        assert sorted(abstract_ledger(pmm).authorities) == [a, a + 1, a + 2]


@pytest.mark.parametrize("checked", [True, False], ids=["contracts-on", "contracts-off"])
def test_the_next_allocation_id_was_never_issued(checked: bool) -> None:
    from spec.errors import UnknownAllocation

    with contracts.contracts(checked):
        pmm = world()
        lease = pmm.reserve(1, 1, DEV, 8, Role.KV)
        before = abstract_ledger(pmm)
        with pytest.raises(UnknownAllocation) as e:
            pmm.release(1, lease + 1)
        assert str(e.value) == f"allocation {lease + 1} was never issued"
        assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("op", ["register_holder", "register_alias"])
def test_a_registration_with_contracts_off_applies_a_posted_drop_first(op: str) -> None:
    """Drop-then-release (issue #21): a registration applies the mailbox's posts before its own effect, with
    contracts off too, so the dropped pending ticket is gone once it returns."""
    from refimpl.verify.manager_hooks import abstract_manager

    with contracts.contracts(False):
        pmm = ProcessMemoryManager()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("hbm", DEV, 100)
        pmm.reserve(h, a, DEV, 100, Role.WEIGHTS)
        t = pmm.submit(h, a, 60)
        pmm.drop(h, t)
        assert t in abstract_manager(pmm).tickets
        pmm.register_holder("late") if op == "register_holder" else pmm.register_alias(a, "uva")
        assert t not in abstract_manager(pmm).tickets


def test_a_new_ledgers_tickets_are_of_generation_0_until_a_reconfigure() -> None:
    """A ticket carries its ledger's generation: 0 on a new ledger, 1 after one reconfigure (C5)."""
    from refimpl.verify.manager_hooks import abstract_manager

    pmm = ProcessMemoryManager()
    h, a = pmm.register_holder("kv"), pmm.register_authority("hbm", DEV, 100)
    first = pmm.submit(h, a, 10)
    pmm.reconfigure(a)
    second = pmm.submit(h, a, 10)
    tickets = abstract_manager(pmm).tickets
    assert (tickets[first].generation, tickets[second].generation) == (0, 1)


@pytest.mark.parametrize("checked", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_declared_devices_pool_is_checked_against_the_ledger_it_binds_to(checked: bool) -> None:
    """C1 on a declared device: a bad device name is refused; a pool named again on another device, or a new
    name on the device's ledger with another capacity, is IdentityMismatch; a pool named again without its
    device (or first named without one) binds to its ledger. Each refusal leaves the ledger unchanged."""
    from spec.errors import IdentityMismatch, InvalidArgument

    with contracts.contracts(checked):
        pmm = ProcessMemoryManager()
        a = pmm.register_authority("hbm", DEV, 100, device="cuda:0")
        plain = pmm.register_authority("host", Tier.HOST, 50)
        assert pmm.register_authority("hbm", DEV, 100) == a
        assert pmm.register_authority("host", Tier.HOST, 50, device="cpu") == plain
        before = abstract_ledger(pmm)
        for call, err, msg in (
                (lambda: pmm.register_authority("x", DEV, 100, device=""), InvalidArgument,
                 "device must be a non-empty str, got ''"),
                (lambda: pmm.register_authority("x", DEV, 100, device=7), InvalidArgument,
                 "device must be a non-empty str, got 7"),
                (lambda: pmm.register_authority("hbm", DEV, 100, device="cuda:1"), IdentityMismatch,
                 "pool 'hbm' is on device cuda:0, not cuda:1"),
                (lambda: pmm.register_authority("arena", DEV, 200, device="cuda:0"), IdentityMismatch,
                 "pool 'arena' is already (device, 100 B); got (device, 200 B)")):
            with pytest.raises(err) as e:
                call()
            assert str(e.value) == msg
        assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("op", [
    lambda p: p.open_allowance(1, 1, 10), lambda p: p.reserve_growth(1, 1, 5), lambda p: p.map_allowance(1, 1, 5),
    lambda p: p.unmap_allowance(1, 1, 5), lambda p: p.transfer_allowance(1, 1, 2, 5), lambda p: p.close_allowance(1, 2),
], ids=["open", "grow", "map", "unmap", "transfer", "close"])
def test_an_allowance_operation_with_contracts_off_applies_a_posted_drop_first(op) -> None:
    """Drop-then-release (issue #21): each allowance operation applies the mailbox's posts before its own effect,
    with contracts off too, so the dropped pending ticket is gone once it returns."""
    from refimpl.verify.manager_hooks import abstract_manager

    with contracts.contracts(False):
        pmm = world()
        pmm.reserve(1, 1, DEV, 1000, Role.WEIGHTS)
        t = pmm.submit(1, 1, 60)
        pmm.drop(1, t)
        assert t in abstract_manager(pmm).tickets
        op(pmm)
        assert t not in abstract_manager(pmm).tickets
