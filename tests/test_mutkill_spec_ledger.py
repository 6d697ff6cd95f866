"""spec/ledger.py judged exactly where its first full mutation run (issue #26 item 4) found it unjudged.

Four things are pinned. (1) `refusals`: every refusal of a step, each with its error class, its site and its
whole message, in `step`'s order; a site waived passes its check over, so each later check (the holder, the
owner, the device context, the lifecycle table, each byte bound) must see the caller's guards, not the defaults.
(2) The id lookups' boundaries: id 0 and the next id never issued are unknown, a retired id 1 is a typed
InvalidTransition. (3) A pool's declared device: kept on its record, validated as a name, matched on
re-registration (same device or none stated: the same authority; another device: IdentityMismatch, or the
same authority with identity_check off), and a second pool on another device is a new authority. (4)
`alternatives`: a map past the reserved growth is the growth and the map in one outcome, under the caller's
guards; nothing else has one. Written from the survivors of `benchmarks/mutation.py --modules spec/ledger.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from spec import ledger_actions as A
from spec.errors import IdentityMismatch, InvalidArgument, InvalidTransition, UnknownAllocation, UnknownAllowance
from spec.errors import UnknownAuthority
from spec.guards import ALL_ON, GuardSet
from spec.ledger import alternatives, apply, refusals, step
from spec.ledger_state import EMPTY, Allowance, State
from spec.records import evolve
from spec.types import MAX_NAME, AllocState, Role, Tier

DEV, KV = Tier.DEVICE, Role.KV


def run(*actions: A.Action, state: State = EMPTY) -> State:
    for act in actions:
        state = apply(state, act)
    return state


def world() -> State:
    """gpu0 (1000 B); holders 1 and 2; allowance 1 of holder 1 (limit 100: reserved 10, mapped 20, 70 B free),
    allowance 2 (limit 50); allocation 1 of holder 1 provisional at 40 B, allocation 2 live at 30 B."""
    state = run(A.RegisterAuthority("gpu0", DEV, 1000), A.RegisterHolder("alice"), A.RegisterHolder("bob"),
                A.OpenAllowance(1, 1, 100), A.ReserveGrowth(1, 1, 30), A.MapAllowance(1, 1, 20),
                A.OpenAllowance(1, 1, 50), A.Reserve(1, 1, DEV, 40, KV), A.Reserve(1, 1, DEV, 30, KV),
                A.Commit(1, 2, 30))
    assert state.allowances[1] == Allowance(1, 1, 1, 100, 10, 20)
    assert (state.allocations[1].state, state.allocations[2].state) == (AllocState.PROVISIONAL, AllocState.LIVE)
    return state


def lost() -> State:
    return apply(world(), A.LoseDevice(1))


def found(state: State, act: Any, guards: GuardSet = ALL_ON) -> list[tuple[str, str, str]]:
    return [(type(e).__name__, e.site, str(e)) for e in refusals(state, act, guards)]  # type: ignore[attr-defined]


def holder9(record: str) -> list[tuple[str, str, str]]:
    return [("UnknownHolder", "holder", "holder 9 is not registered"),
            ("ForeignHolder", "owner", f"{record} belongs to holder 1, not holder 9")]


def zero(what: str = "nbytes") -> tuple[str, str, str]:
    return ("InvalidBytes", f"bytes:{what}", f"{what} must be in [1, 2**63-1], got 0")


CONTEXT = ("DeviceLost", "context", "authority 1 (gpu0) context is lost")

# (label, state, action, every refusal in step's order)
REFUSALS = [
    ("commit-bytes-holder-owner", world, A.Commit(9, 1, 0), [zero(), *holder9("allocation 1")]),
    ("commit-past-reserved", world, A.Commit(9, 1, 41),
     [*holder9("allocation 1"),
      ("InvalidBytes", "reserved", "allocation 1: commit of 41 B exceeds the 40 B reserved")]),
    ("commit-live", world, A.Commit(1, 2, 31),
     [("InvalidTransition", "lifecycle", "allocation 2: no transition for event 'commit' in state 'live'"),
      ("InvalidBytes", "reserved", "allocation 2: commit of 31 B exceeds the 30 B reserved")]),
    ("release-lost", lost, A.Release(1, 2),
     [("DeviceLost", "lost", "allocation 2 is on a lost device; nothing is refunded until termination"),
      ("InvalidTransition", "lifecycle", "allocation 2: no transition for event 'release' in state 'device-lost'")]),
    ("quarantine-bytes", world, A.Quarantine(1, 2, -1),
     [("InvalidBytes", "bytes:released", "released must be in [0, 2**63-1], got -1")]),
    ("quarantine-past-charge", world, A.Quarantine(9, 2, 31),
     [*holder9("allocation 2"), ("InvalidBytes", "charged", "allocation 2: released 31 B exceeds the 30 B charged")]),
    ("open-bytes-holder", world, A.OpenAllowance(9, 1, 0),
     [zero("limit"), ("UnknownHolder", "holder", "holder 9 is not registered")]),
    ("open-lost-past-capacity", lost, A.OpenAllowance(1, 1, 851),
     [CONTEXT, ("AllowanceExceeded", "capacity", "authority 1: allowances already promise 150 B of 1000 B")]),
    ("grow-bytes-holder-owner", world, A.ReserveGrowth(9, 1, 0), [zero(), *holder9("allowance 1")]),
    ("grow-lost-past-free", lost, A.ReserveGrowth(1, 1, 71),
     [CONTEXT, ("AllowanceExceeded", "allowance", "allowance 1: 71 B requested, 70 B free")]),
    ("map-bytes-holder-owner", world, A.MapAllowance(9, 1, 0), [zero(), *holder9("allowance 1")]),
    ("map-lost-past-reserved", lost, A.MapAllowance(1, 1, 11),
     [CONTEXT, ("AllowanceExceeded", "allowance", "allowance 1: mapping 11 B, only 10 B reserved")]),
    ("unmap-bytes-holder-owner", world, A.UnmapAllowance(9, 1, 0), [zero(), *holder9("allowance 1")]),
    ("unmap-past-mapped", world, A.UnmapAllowance(1, 1, 21),
     [("InvalidBytes", "mapped", "allowance 1: unmapping 21 B, only 20 B mapped")]),
    ("transfer-bytes-holder-owner", world, A.TransferAllowance(9, 1, 2, 0), [zero(), *holder9("allowance 1")]),
    ("transfer-past-free", world, A.TransferAllowance(1, 1, 2, 71),
     [("AllowanceExceeded", "allowance", "allowance 1: 71 B to transfer, 70 B free")]),
    ("close-holder-owner-mapped", world, A.CloseAllowance(9, 1),
     [*holder9("allowance 1"),
      ("InvalidTransition", "mapped", "allowance 1 still maps 20 B; unmap before closing")]),
]


@pytest.mark.parametrize(("make", "act", "expected"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_every_refusal_with_its_site_and_whole_message(make: Any, act: A.Action,
                                                       expected: list[tuple[str, str, str]]) -> None:
    state = make()
    assert found(state, act) == expected
    with pytest.raises(Exception) as e:  # noqa: PT011 - the class is the first refusal's, checked by name
        step(state, act)
    assert (type(e.value).__name__, e.value.site, str(e.value)) == expected[0]  # type: ignore[attr-defined]
    assert state == make()  # a refused step leaves the state as it was


def test_refusals_use_the_guards_passed() -> None:
    """A check switched off or a site waived by the caller is not listed."""
    state = world()
    act = A.Reserve(1, 1, DEV, 931, KV)
    limit = ("CapacityDenied", "limit", "authority 1: 931 B requested, 930 B available")
    assert found(state, act) == [limit]
    assert found(state, act, ALL_ON.waive("limit")) == []
    assert found(state, act, GuardSet.without("limit_check")) == []
    assert refusals(state, A.Reserve(1, 1, DEV, 930, KV)) == ()


def test_a_quarantine_past_the_charge_waived_refunds_the_whole_charge() -> None:
    new = apply(world(), A.Quarantine(1, 2, 31), ALL_ON.waive("charged"))
    assert (new.allocations[2].state, new.allocations[2].charge) == (AllocState.QUARANTINED, 0)
    assert new.authorities[1].used == 40


# --- the id lookups' boundaries ----------------------------------------------------------------------------


def test_allocation_ids_past_the_last_are_unknown() -> None:
    state = apply(world(), A.Release(1, 2))
    with pytest.raises(InvalidTransition, match=r"^allocation 2 is already released or terminated$"):
        step(state, A.Release(1, 2))
    for aid in (0, 3):
        with pytest.raises(UnknownAllocation, match=rf"^allocation {aid} was never issued$"):
            step(state, A.Release(1, aid))


def test_allowance_ids_past_the_last_are_unknown_and_a_closed_first_one_is_retired() -> None:
    state = run(A.RegisterAuthority("gpu0", DEV, 1000), A.RegisterHolder("alice"), A.OpenAllowance(1, 1, 10),
                A.CloseAllowance(1, 1))
    with pytest.raises(InvalidTransition, match=r"^allowance 1 is already closed$"):
        step(state, A.CloseAllowance(1, 1))
    for wid in (0, 2):
        with pytest.raises(UnknownAllowance, match=rf"^allowance {wid} was never opened$"):
            step(state, A.CloseAllowance(1, wid))


def test_authority_ids_past_the_last_are_unknown_and_a_removed_first_one_is_retired() -> None:
    """Authority 1 removed as spec.manager's RemoveAuthority leaves the ledger (its record gone, the counter kept)."""
    state = run(A.RegisterAuthority("gpu0", DEV, 1000), A.RegisterAuthority("gpu1", DEV, 1000), A.RegisterHolder("a"))
    state = evolve(state, authorities=state.authorities.delete(1))
    with pytest.raises(InvalidTransition, match=r"^authority 1 was removed$"):
        step(state, A.Reserve(1, 1, DEV, 8, KV))
    for aid in (0, 3):
        with pytest.raises(UnknownAuthority, match=rf"^authority {aid} is not registered$"):
            step(state, A.Reserve(1, aid, DEV, 8, KV))


# --- names and devices -------------------------------------------------------------------------------------


def test_a_name_of_max_name_characters_is_accepted_and_one_more_is_refused() -> None:
    state = apply(EMPTY, A.RegisterAuthority("p" * MAX_NAME, DEV, 10))
    assert state.authorities[1].pool == "p" * MAX_NAME
    with pytest.raises(InvalidArgument) as e:
        step(EMPTY, A.RegisterAuthority("p" * (MAX_NAME + 1), DEV, 10))
    assert str(e.value) == f"pool must be at most {MAX_NAME} characters, got {MAX_NAME + 1}"


def test_a_declared_device_is_kept_validated_and_matched() -> None:
    state, aid = step(EMPTY, A.RegisterAuthority("g0", DEV, 100, device="d0"))
    assert (aid, state.authorities[1].device) == (1, "d0")
    with pytest.raises(InvalidArgument) as e:
        step(state, A.RegisterAuthority("g1", DEV, 100, device=""))
    assert str(e.value) == "device must be a non-empty str, got ''"
    # the same pool on the same device, or with no device stated, is the same authority
    assert step(state, A.RegisterAuthority("g0", DEV, 100, device="d0")) == (state, 1)
    assert step(state, A.RegisterAuthority("g0", DEV, 100)) == (state, 1)
    # the same pool on another device is a mismatch, unless identity_check is off
    with pytest.raises(IdentityMismatch) as e:
        step(state, A.RegisterAuthority("g0", DEV, 100, device="d1"))
    assert str(e.value) == "pool 'g0' is registered on device d0, not d1"
    off = GuardSet.without("identity_check")
    assert step(state, A.RegisterAuthority("g0", DEV, 100, device="d1"), off) == (state, 1)
    # another pool on another device is a new authority
    new, aid = step(state, A.RegisterAuthority("g1", DEV, 100, device="d1"))
    assert (aid, new.authorities[2].device, new.next_authority) == (2, "d1", 3)


def test_an_alias_of_an_alias_resolves_to_the_canonical_authority() -> None:
    state = run(A.RegisterAuthority("gpu0", DEV, 1000), A.RegisterAlias(1, "v"))
    new, aid = step(state, A.RegisterAlias(2, "w"))
    assert (aid, new.authorities[3].alias_of, new.authorities[3].view) == (3, 1, "w")


# --- alternatives (D8) -------------------------------------------------------------------------------------


def test_a_map_past_the_reserved_growth_has_the_growth_and_map_as_one_outcome() -> None:
    state = world()
    (outcome,) = alternatives(state, A.MapAllowance(1, 1, 25))
    assert outcome == (apply(apply(state, A.ReserveGrowth(1, 1, 15)), A.MapAllowance(1, 1, 25)), None)
    assert outcome[0].allowances[1] == Allowance(1, 1, 1, 100, 0, 45)


def test_alternatives_run_both_steps_under_the_guards_passed() -> None:
    # the growth past the free limit, with allowance_bounds off
    (outcome,) = alternatives(world(), A.MapAllowance(1, 1, 90), GuardSet.without("allowance_bounds"))
    assert outcome[0].allowances[1] == Allowance(1, 1, 1, 100, 0, 110)
    # on a lost device, with the context site waived (both steps check it)
    (outcome,) = alternatives(lost(), A.MapAllowance(1, 1, 25), ALL_ON.waive("context"))
    assert outcome[0].allowances[1] == Allowance(1, 1, 1, 100, 0, 45)
    assert alternatives(lost(), A.MapAllowance(1, 1, 25)) == ()


@pytest.mark.parametrize("act", [A.MapAllowance(1, 1, 10), A.MapAllowance(1, 99, 50), A.MapAllowance(1, [1], 50),
                                 A.MapAllowance(1, 1, 25.0), A.MapAllowance(1, 1, "25"), A.ReserveGrowth(1, 1, 80),
                                 A.ReserveGrowth(1, 1, 20), A.MapAllowance(1, 1, 81)],
                         ids=["within-reserved", "unknown", "unhashable", "float-bytes", "str-bytes", "not-a-map",
                              "not-a-map-that-fits", "past-free"])
def test_nothing_else_has_an_alternative(act: Any) -> None:
    assert alternatives(world(), act) == ()


def test_a_map_within_the_reserved_growth_has_no_alternative_even_with_the_growth_bytes_waived() -> None:
    """`step` accepts it: a zero growth waived through would still be no other outcome."""
    assert alternatives(world(), A.MapAllowance(1, 1, 10), ALL_ON.waive("bytes:nbytes")) == ()


def test_a_transfer_to_itself_or_another_authority_is_refused_with_its_whole_message() -> None:
    state = run(A.RegisterAuthority("host", Tier.HOST, 100), A.OpenAllowance(1, 2, 10), state=world())
    for target, text in ((1, "allowance 1 cannot transfer to allowance 1: same allowance or other authority"),
                         (3, "allowance 1 cannot transfer to allowance 3: same allowance or other authority")):
        with pytest.raises(InvalidArgument) as e:
            step(state, A.TransferAllowance(1, 1, target, 1))
        assert str(e.value) == text
