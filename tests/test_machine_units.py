"""spec/ledger.py, action by action: exact figures in refusals, boundaries, and one guard-off control per guard site.

The explorer (tests/test_explore.py) switches each guard off once and finds
*a* counterexample; a guard checked at several sites (allowance_bounds: grow,
map, transfer) is then shown necessary at one of them only. Here every site
gets a scripted control: with the guard on the action is refused and the
state is unchanged; with it off the same action is accepted and the state
shows the harm the guard prevents (I4b: reserved + mapped > limit).
"""

from __future__ import annotations

import pytest

from spec import ledger_actions as A
from spec.errors import (
    AllowanceExceeded,
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UnknownAllowance,
    UnknownHolder,
)
from spec.guards import ALL_ON, GuardSet
from spec.ledger import apply, step
from spec.ledger_state import EMPTY, Allowance, State
from spec.types import MAX_BYTES, Role, Tier

DEV = Tier.DEVICE


def run(*actions: A.Action, state: State = EMPTY) -> tuple[State, list[object]]:
    results = []
    for act in actions:
        state, r = step(state, act)
        results.append(r)
    return state, results


def allowance_world() -> State:
    """gpu0 (1000 B), holder 1, allowance 1 (limit 100: reserved 10, mapped 20, 70 B free), allowance 2 (limit 50)."""
    state, _ = run(
        A.RegisterAuthority("gpu0", DEV, 1000),
        A.RegisterHolder("alice"),
        A.OpenAllowance(1, 1, 100),
        A.ReserveGrowth(1, 1, 30),
        A.MapAllowance(1, 1, 20),
        A.OpenAllowance(1, 1, 50),
    )
    assert state.allowances[1] == Allowance(1, 1, 1, 100, 10, 20)
    return state


def over_i4b(w: Allowance) -> bool:
    return w.reserved + w.mapped > w.limit


# --- apply ------------------------------------------------------------------------


def test_apply_is_the_state_of_step() -> None:
    state = allowance_world()
    act = A.ReserveGrowth(1, 1, 5)
    assert apply(state, act) == step(state, act)[0]
    assert apply(state, act).allowances[1].reserved == 15


def test_apply_passes_the_guards_on() -> None:
    state, _ = run(A.RegisterAuthority("gpu0", DEV, 100), A.RegisterHolder("a"))
    act = A.Reserve(1, 1, DEV, 150, Role.KV)
    with pytest.raises(CapacityDenied):
        apply(state, act)
    assert apply(state, act, GuardSet.without("limit_check")).authorities[1].used == 150


# --- allowance figures and boundaries (I4b) ----------------------------------------


@pytest.mark.parametrize("fits, after, limit_2, past, refusal", [
    (A.ReserveGrowth(1, 1, 70), Allowance(1, 1, 1, 100, 80, 20), 50,
     A.ReserveGrowth(1, 1, 80), r"^allowance 1: 80 B requested, 70 B free$"),
    (A.MapAllowance(1, 1, 10), Allowance(1, 1, 1, 100, 0, 30), 50,
     A.MapAllowance(1, 1, 11), r"^allowance 1: mapping 11 B, only 10 B reserved$"),
    (A.TransferAllowance(1, 1, 2, 70), Allowance(1, 1, 1, 30, 10, 20), 120,
     A.TransferAllowance(1, 1, 2, 71), r"^allowance 1: 71 B to transfer, 70 B free$"),
], ids=["grow", "map", "transfer"])
def test_allowance_action_takes_all_there_is_and_names_the_figures_past_it(fits, after, limit_2, past, refusal) -> None:
    """Growth up to the free bytes, a map of all reserved bytes, a transfer of all free bytes: allowance 1 as
    `after` (within I4b), allowance 2's limit `limit_2`; past that, refused with the figures."""
    with pytest.raises(AllowanceExceeded, match=refusal):
        step(allowance_world(), past)
    new = apply(allowance_world(), fits)
    assert (new.allowances[1], new.allowances[2].limit) == (after, limit_2)
    assert not over_i4b(new.allowances[1])


@pytest.mark.parametrize("bad_id", [1.0, "1", (1,)], ids=repr)
def test_invalid_allowance_id_type_is_unknown(bad_id: object) -> None:
    # 1.0 == 1 and hashes like it: only the type check keeps it from naming allowance 1.
    with pytest.raises(UnknownAllowance, match="was never opened"):
        step(allowance_world(), A.UnmapAllowance(1, bad_id, 1))  # type: ignore[arg-type]


# --- one control per allowance_bounds site ------------------------------------------

BOUNDS_SITES = {
    "grow": A.ReserveGrowth(1, 1, 80),
    "map": A.MapAllowance(1, 1, 11),
    "transfer": A.TransferAllowance(1, 1, 2, 71),
}


@pytest.mark.parametrize("site", list(BOUNDS_SITES))
def test_allowance_bounds_site_refuses_with_guard_on(site: str) -> None:
    state = allowance_world()
    with pytest.raises(AllowanceExceeded):
        step(state, BOUNDS_SITES[site], ALL_ON)


@pytest.mark.parametrize("site", list(BOUNDS_SITES))
def test_allowance_bounds_site_off_breaks_i4b(site: str) -> None:
    new, _ = step(allowance_world(), BOUNDS_SITES[site], GuardSet.without("allowance_bounds"))
    # The harm the guard prevents: an allowance whose reserved + mapped exceeds its limit,
    # or (map) bytes mapped that were never reserved.
    w = new.allowances[1]
    if site == "map":
        assert (w.reserved, w.mapped) == (0, 31)  # 1 B mapped beyond the 10 reserved
    else:
        assert over_i4b(w)


# --- device context (C3) ---------------------------------------------------------------


def test_invalid_confirm_termination_of_an_active_context_names_the_authority() -> None:
    state = allowance_world()
    with pytest.raises(InvalidTransition,
                       match=r"^authority 1: no transition for event 'confirm-termination' in state 'active'$"):
        step(state, A.ConfirmTermination(1))


# --- refusals name what was wrong (STYLE 6) -------------------------------------------------


def two_holders() -> State:
    """allowance_world() plus holder 2, and allocation 1 of holder 1 (40 B live on gpu0)."""
    state, _ = run(A.RegisterHolder("bob"), A.Reserve(1, 1, DEV, 40, Role.KV), A.Commit(1, 1, 40), state=allowance_world())
    return state


MACHINE_MESSAGES = [
    ("pool", A.RegisterAuthority("", DEV, 10), InvalidArgument, r"^pool must be a non-empty str, got ''$"),
    ("tier", A.RegisterAuthority("p", "device", 10), InvalidArgument, r"^tier must be a Tier, got 'device'$"),
    ("view", A.RegisterAlias(1, ""), InvalidArgument, r"^view must be a non-empty str, got ''$"),
    ("holder-name", A.RegisterHolder(""), InvalidArgument, r"^holder name must be a non-empty str, got ''$"),
    ("reserve-tier", A.Reserve(1, 1, "device", 5, Role.KV), InvalidArgument, r"^tier must be a Tier, got 'device'$"),
    ("reserve-role", A.Reserve(1, 1, DEV, 5, "kv"), InvalidArgument, r"^role must be a Role, got 'kv'$"),
    ("holder-float", A.Reserve(1.0, 1, DEV, 5, Role.KV), UnknownHolder, r"^holder 1\.0 is not registered$"),
    ("foreign-allocation", A.Release(2, 1), ForeignHolder, r"^allocation 1 belongs to holder 1, not holder 2$"),
    ("foreign-allowance", A.ReserveGrowth(2, 1, 1), ForeignHolder, r"^allowance 1 belongs to holder 1, not holder 2$"),
    ("lifecycle", A.Commit(1, 1, 40), InvalidTransition, r"^allocation 1: no transition for event 'commit' in state 'live'$"),
    ("limit", A.Reserve(1, 1, DEV, 961, Role.KV), CapacityDenied, r"^authority 1: 961 B requested, 960 B available$"),
]


@pytest.mark.parametrize(("act", "error", "msg"), [m[1:] for m in MACHINE_MESSAGES], ids=[m[0] for m in MACHINE_MESSAGES])
def test_invalid_machine_action_message(act, error, msg) -> None:
    with pytest.raises(error, match=msg):
        step(two_holders(), act)


def test_invalid_reserve_when_oversubscribed_names_zero_available() -> None:
    # A recording may push used past the limit (I2); a grant then sees 0 B available, never a negative figure.
    state, _ = run(A.RegisterAuthority("gpu0", DEV, 100), A.RegisterHolder("a"), A.RecordCommitted(1, 1, DEV, 150, Role.KV))
    with pytest.raises(CapacityDenied, match=r"^authority 1: 1 B requested, 0 B available$"):
        step(state, A.Reserve(1, 1, DEV, 1, Role.KV))


def test_record_up_to_max_bytes_then_refuse_the_overflow() -> None:
    state, _ = run(A.RegisterAuthority("gpu0", DEV, 100), A.RegisterHolder("a"),
                   A.RecordCommitted(1, 1, DEV, MAX_BYTES - 1, Role.KV), A.RecordCommitted(1, 1, DEV, 1, Role.KV))
    assert state.authorities[1].used == MAX_BYTES
    with pytest.raises(InvalidBytes, match=r"^authority 1: recording 1 B would overflow the ledger$"):
        step(state, A.RecordCommitted(1, 1, DEV, 1, Role.KV))


@pytest.mark.parametrize(("act", "error", "msg"), [
    (A.Reserve(1, 1, DEV, 0, Role.KV), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    (A.Reserve(1, 1, DEV, 2.0, Role.KV), InvalidBytes, r"^nbytes must be an int, got float$"),
    (A.Quarantine(1, 1, -1), InvalidBytes, r"^released must be in \[0, 2\*\*63-1\], got -1$"),
    (A.Quarantine(1, 1, 2**63), InvalidBytes, r"^released must be in \[0, 2\*\*63-1\], got 9223372036854775808$"),
    (object(), InvalidArgument, r"^not a governor action: <object object at "),
], ids=["zero", "float", "negative-zero-ok", "huge-zero-ok", "not-an-action"])
def test_invalid_bytes_name_the_bounds(act, error, msg) -> None:
    with pytest.raises(error, match=msg):
        step(two_holders(), act)


def test_quarantine_of_zero_released_bytes() -> None:
    new = apply(two_holders(), A.Quarantine(1, 1, 0))
    assert new.allocations[1].charge == 40


def test_a_stated_alignment_is_any_power_of_two_in_1_to_2_62_and_is_never_charged() -> None:
    """D13 (check_alignment): 1, 2, 64 and 2**62 are reserved at exactly nbytes; 0, negatives, non-powers on
    either side of a power, one bit past 2**62, and non-ints are InvalidArgument at site "alignment" with the
    whole message and the state unchanged; the site waived, the step goes on."""
    from spec.errors import InvalidArgument
    from spec.ledger import check_alignment

    state, _ = run(A.RegisterAuthority("gpu0", DEV, 1000), A.RegisterHolder("a"))
    for n, align in ((8, 1), (8, 2), (16, 64), (24, 1 << 62)):
        state, lease = step(state, A.Reserve(1, 1, DEV, n, Role.KV, align))
        r = state.allocations[lease]
        assert (r.reserved, r.nbytes, r.charge) == (n, n, n)
    assert state.authorities[1].used == 56
    for bad in (0, -1, -4, 3, 6, 12, 1 << 63, (1 << 62) + (1 << 61), True, 8.0, "8"):
        with pytest.raises(InvalidArgument) as e:
            step(state, A.Reserve(1, 1, DEV, 8, Role.KV, bad))
        assert str(e.value) == f"alignment must be None or a power of two in [1, 2**62], got {bad!r}"
        assert e.value.site == "alignment"  # type: ignore[attr-defined]
        assert check_alignment(bad, ALL_ON.waive("alignment")) is None
    assert check_alignment(None) is None


def test_every_refusal_of_an_admission_in_order_each_at_its_own_site() -> None:
    """spec.refusals.every_refusal on Reserve / RecordCommitted: each check (bytes, holder, context, tier,
    alignment, limit, overflow) refuses at its own site and, waived, lets the step reach the next check, so the
    whole list is found once each; a site waived from the start is passed over."""
    from spec.refusals import every_refusal

    base, _ = run(A.RegisterAuthority("gpu0", DEV, 100), A.RegisterHolder("a"))
    tier = ("TierMismatch", "tier", "authority 1 is tier device, not host")
    align = ("InvalidArgument", "alignment", "alignment must be None or a power of two in [1, 2**62], got 3")
    limit = ("CapacityDenied", "limit", "authority 1: 500 B requested, 100 B available")

    def found(state: State, act: A.Action, guards: GuardSet = ALL_ON) -> list[tuple[str, str, str]]:
        refusals = every_refusal(step, state, act, guards)
        return [(type(e).__name__, e.site, str(e)) for e in refusals]  # type: ignore[attr-defined]

    bad = A.Reserve(1, 1, Tier.HOST, 500, Role.KV, 3)
    assert found(base, bad) == [tier, align, limit]
    assert found(base, bad, ALL_ON.waive("limit")) == [tier, align]
    assert found(base, A.Reserve(1, 1, Tier.HOST, 0, Role.KV, 3)) == [
        ("InvalidBytes", "bytes:nbytes", "nbytes must be in [1, 2**63-1], got 0"), tier, align]
    assert found(base, A.Reserve(9, 1, Tier.HOST, 500, Role.KV, 3)) == [
        ("UnknownHolder", "holder", "holder 9 is not registered"), tier, align, limit]
    assert found(apply(base, A.LoseDevice(1)), bad) == [
        ("DeviceLost", "context", "authority 1 (gpu0) context is lost"), tier, align, limit]
    full = apply(base, A.RecordCommitted(1, 1, DEV, MAX_BYTES - 5, Role.KV))
    record = A.RecordCommitted(1, 1, Tier.HOST, 10, Role.KV)
    overflow = ("InvalidBytes", "overflow", "authority 1: recording 10 B would overflow the ledger")
    assert found(full, record) == [tier, overflow]
    assert found(full, record, ALL_ON.waive("overflow")) == [tier]
