"""spec/machine.py, action by action: exact figures in refusals, boundaries, and one guard-off control per guard site.

The explorer (tests/test_explore.py) switches each guard off once and finds
*a* counterexample; a guard checked at several sites (allowance_bounds: grow,
map, transfer) is then shown necessary at one of them only. Here every site
gets a scripted control: with the guard on the action is refused and the
state is unchanged; with it off the same action is accepted and the state
shows the harm the guard prevents (I4b: reserved + mapped > limit).
"""

from __future__ import annotations

import pytest

from spec import actions as A
from spec.errors import AllowanceExceeded, CapacityDenied, InvalidTransition, UnknownAllowance
from spec.guards import ALL_ON, GuardSet
from spec.machine import apply, step
from spec.state import EMPTY, Allowance, State
from spec.types import Role, Tier

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


def test_invalid_reserve_growth_names_the_free_bytes() -> None:
    state = allowance_world()
    with pytest.raises(AllowanceExceeded, match=r"^allowance 1: 80 B requested, 70 B free$"):
        step(state, A.ReserveGrowth(1, 1, 80))


def test_reserve_growth_up_to_the_free_bytes() -> None:
    new = apply(allowance_world(), A.ReserveGrowth(1, 1, 70))
    assert new.allowances[1] == Allowance(1, 1, 1, 100, 80, 20)


def test_invalid_map_names_the_reserved_bytes() -> None:
    with pytest.raises(AllowanceExceeded, match=r"^allowance 1: mapping 11 B, only 10 B reserved$"):
        step(allowance_world(), A.MapAllowance(1, 1, 11))


def test_map_all_reserved_bytes() -> None:
    assert apply(allowance_world(), A.MapAllowance(1, 1, 10)).allowances[1] == Allowance(1, 1, 1, 100, 0, 30)


def test_transfer_exactly_the_free_bytes() -> None:
    new = apply(allowance_world(), A.TransferAllowance(1, 1, 2, 70))
    assert (new.allowances[1].limit, new.allowances[2].limit) == (30, 120)
    assert not over_i4b(new.allowances[1])


def test_invalid_transfer_names_the_free_bytes() -> None:
    with pytest.raises(AllowanceExceeded, match=r"^allowance 1: 71 B to transfer, 70 B free$"):
        step(allowance_world(), A.TransferAllowance(1, 1, 2, 71))


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
