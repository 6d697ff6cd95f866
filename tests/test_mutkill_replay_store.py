"""The replay's partial-state store (`invariants.replay_store.Store`), judged exactly.

Three things are pinned. (1) A script stepped the replay's way (each action on `Store.view`, the spec's next
state merged back) ends where the spec ends on the whole state, with the same result or refusal at every step:
re-registering a pool, a device's (device, tier) or a view finds the existing authority only if the store's
indexes put it in the view. (2) Each view holds exactly what its action reads: the records it names and their
ledger and holder, observed authorities, a lost device's allocations, the one summary record of a ledger's other
allowances, and nothing for an action that names nothing it holds. (3) `check_ledgers` names each broken running
total (I1, I2, I4b) in its whole message. Written from the mutation survivors of `invariants/replay_store.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve

from invariants import InvariantViolation
from invariants.replay_store import SUMMARY_ID, Store
from spec import errors as E
from spec import ledger
from spec import ledger_actions as A
from spec.ledger_state import Allowance, State
from spec.types import Role, Tier

NONE_OBSERVED: dict[str, dict[int, int]] = {"used": {}, "charges": {}}
D, K = Tier.DEVICE, Role.KV


def _step(state: State, act: Any) -> tuple[State, Any]:
    try:
        return ledger.step(state, act)
    except E.GovernorError as e:
        return state, type(e).__name__


def _replay(acts: list[Any]) -> tuple[Store, list[Any]]:
    """Each action stepped on the whole state and on the store's view; the two must agree step by step."""
    store, whole, results = Store(), State(), []
    for act in acts:
        view = store.view(act, NONE_OBSERVED)
        nxt, got = _step(view, act)
        whole, want = _step(whole, act)
        assert got == want, act
        results.append(got)
        store.merge(view, nxt)
        assert store.full() == whole, act
    return store, results


#: Authority 1: pool gpu0 on device d0 (64 B); holders 1 and 2.
BASE = [A.RegisterAuthority("gpu0", D, 64, device="d0"), A.RegisterHolder("a"), A.RegisterHolder("b")]


def test_re_registering_a_pool_a_device_or_a_view_finds_the_existing_authority() -> None:
    _, results = _replay([*BASE,
                          A.RegisterAuthority("gpu0", D, 64), A.RegisterAuthority("other", D, 64, device="d0"),
                          A.RegisterAuthority("other", D, 32, device="d0"), A.RegisterAuthority("host", Tier.HOST, 64),
                          A.RegisterAlias(1, "um"), A.RegisterAlias(1, "um"), A.RegisterAlias(3, "um"),
                          A.RegisterAlias(1, "um2")])
    assert results == [1, 1, 2, 1, 1, "IdentityMismatch", 2, 3, 3, 3, 4]


def test_leases_allowances_and_a_lost_device_replay_as_on_the_whole_state() -> None:
    store, results = _replay([*BASE, A.RegisterAuthority("host", Tier.HOST, 64),
                              A.Reserve(1, 1, D, 8, K), A.Commit(1, 1, 8), A.Reserve(2, 1, D, 4, K),
                              A.Reserve(1, 2, Tier.HOST, 4, K),
                              A.OpenAllowance(1, 1, 20), A.OpenAllowance(2, 1, 10), A.OpenAllowance(1, 1, 30),
                              A.TransferAllowance(1, 1, 3, 5), A.CloseAllowance(2, 2), A.OpenAllowance(2, 1, 10),
                              A.OpenAllowance(1, 1, 5),
                              A.Release(1, 1), A.LoseDevice(1), A.LoseDevice(1), A.ConfirmTermination(1)])
    assert results[10:14] == [3, None, None, 4] and results[14] == "AllowanceExceeded"  # 60 B of 64 B promised
    assert store.size() == 2 + 2 + 1 + 3  # authorities, holders, allocation 3 (host), allowances 1 3 4
    assert (store.charged, store.granted, store.promised) == ({1: 0, 2: 4}, {1: 0, 2: 4}, {1: 60})
    assert (store.live_of, store.lost_of, store.allows_of) == ({1: set(), 2: {3}}, {1: set()}, {1: {1, 3, 4}})


# --- what each view holds ---------------------------------------------------------------------------------------


def _keys(s: State) -> tuple[set[int], set[int], set[int], set[int]]:
    return set(s.authorities), set(s.holders), set(s.allocations), set(s.allowances)


def test_a_view_holds_the_observed_authorities_and_charges_and_each_record_s_ledger_and_holder() -> None:
    store, _ = _replay([*BASE, A.RegisterAuthority("host", Tier.HOST, 64), A.Reserve(1, 1, D, 8, K),
                        A.OpenAllowance(1, 2, 20), A.OpenAllowance(1, 2, 10)])
    # a holder's growth on another holder's allowance: the allowance's holder and ledger come along
    assert _keys(store.view(A.ReserveGrowth(2, 1, 4), NONE_OBSERVED)) == ({2}, {1, 2}, set(), {1})
    assert _keys(store.view(A.TransferAllowance(1, 1, 2, 5), NONE_OBSERVED)) == ({2}, {1}, set(), {1, 2})
    # a release observing another ledger's used (unchanged) and an allocation it does not name
    assert _keys(store.view(A.Release(2, 9), {"used": {2: 0}, "charges": {1: 8}})) == ({1, 2}, {1, 2}, {1}, set())
    # ids the store does not hold name nothing: not an allowance that happens to share the number
    assert _keys(store.view(A.Release(1, 2), NONE_OBSERVED)) == (set(), {1}, set(), set())
    assert _keys(store.view(A.LoseDevice(9), NONE_OBSERVED)) == (set(), set(), set(), set())
    assert _keys(store.view(A.RegisterAuthority(7, D, 64, device=8), NONE_OBSERVED)) == (set(), set(), set(), set())
    assert _keys(store.view(A.RegisterAlias(1, 5), NONE_OBSERVED)) == ({1}, set(), set(), set())


def test_a_lost_device_s_view_holds_its_live_or_its_lost_allocations_and_what_is_observed() -> None:
    store, _ = _replay([*BASE, A.RegisterAuthority("host", Tier.HOST, 64), A.Reserve(1, 1, D, 8, K),
                        A.Reserve(1, 2, Tier.HOST, 4, K)])
    assert _keys(store.view(A.LoseDevice(2), NONE_OBSERVED))[2] == {2}
    assert _keys(Store().view(A.LoseDevice(1), NONE_OBSERVED)) == (set(), set(), set(), set())
    store0, _ = _replay(BASE)  # a ledger that never held an allocation
    assert _keys(store0.view(A.LoseDevice(1), NONE_OBSERVED)) == ({1}, set(), set(), set())
    assert _keys(store.view(A.ConfirmTermination(2), NONE_OBSERVED))[2] == set()  # nothing lost yet
    store, _ = _replay([*BASE, A.RegisterAuthority("host", Tier.HOST, 64), A.Reserve(1, 1, D, 8, K),
                        A.Reserve(1, 2, Tier.HOST, 4, K), A.LoseDevice(1)])
    assert _keys(store.view(A.LoseDevice(1), NONE_OBSERVED))[2] == set()  # each allocation is lost once
    assert _keys(store.view(A.ConfirmTermination(1), {"used": {}, "charges": {2: 4}}))[2] == {1, 2}


def test_opening_an_allowance_sees_the_ledger_s_others_as_one_summary_record() -> None:
    store, _ = _replay([*BASE, A.OpenAllowance(1, 1, 20), A.OpenAllowance(2, 1, 10)])
    view = store.view(A.OpenAllowance(1, 1, 5), NONE_OBSERVED)
    assert dict(view.allowances) == {SUMMARY_ID: Allowance(SUMMARY_ID, 1, 0, 30, 0, 0)}
    assert dict(store.view(A.Reserve(1, 1, D, 8, K), NONE_OBSERVED).allowances) == {}  # only an opening sums them
    store, _ = _replay([*BASE, A.OpenAllowance(1, 1, 20), A.CloseAllowance(1, 1)])
    assert dict(store.view(A.OpenAllowance(1, 1, 5), NONE_OBSERVED).allowances) == {}  # none left: no summary


def test_a_merge_writes_back_every_changed_allowance_past_an_unchanged_one() -> None:
    store, _ = _replay([*BASE, A.OpenAllowance(1, 1, 20), A.OpenAllowance(1, 1, 10)])
    prev = store.view(A.TransferAllowance(1, 1, 2, 5), NONE_OBSERVED)
    w2 = evolve(prev.allowances[2], limit=15)
    store.merge(prev, evolve(prev, allowances=prev.allowances.set(2, w2)))  # allowance 1 unchanged, 2 grew
    assert (store.allows[2], store.promised) == (w2, {1: 35})


# --- the running totals -------------------------------------------------------------------------------------


def _ledgers(*extra: Any) -> tuple[Store, State]:
    """Authority 1 (64 B) with alias 2, grants of 8 B and 8 B, allowances of 20 B and 10 B."""
    store, _ = _replay([*BASE, A.RegisterAlias(1, "um"), A.Reserve(1, 1, D, 8, K), A.Reserve(2, 1, D, 8, K),
                        A.OpenAllowance(1, 1, 20), A.OpenAllowance(2, 1, 10), *extra])
    return store, store.full()


def _fails(store: Store, nxt: State) -> tuple[str, str]:
    with pytest.raises(InvariantViolation) as e:
        store.check_ledgers(nxt)
    return e.value.id, str(e.value)


def _auth(s: State, i: int, **changes: Any) -> State:
    return evolve(s, authorities=s.authorities.set(i, evolve(s.authorities[i], **changes)))


def test_the_running_totals_hold_on_a_replayed_state() -> None:
    store, s = _ledgers()
    store.check_ledgers(s)
    store.check_ledgers(_auth(s, 1, limit=16, capacity=30))  # exactly at each bound


def test_an_alias_carrying_bytes_fails_I1() -> None:
    store, s = _ledgers()
    assert _fails(store, _auth(s, 2, used=3)) == ("I1", "I1: alias 2 of 1 carries 3 B: the bytes are charged twice")


def test_a_ledger_whose_used_is_not_its_charges_fails_I1_after_its_alias() -> None:
    store, s = _ledgers()
    assert _fails(store, _auth(s, 1, used=17)) == ("I1", "I1: authority 1 used 17 B but its allocations charge 16 B")
    # an alias checked first (alias 32 of ledger 1, as after 31 registrations: the map yields 32 before 1)
    # must not end the check
    alias = evolve(s.authorities[2], id=32)
    nxt = evolve(s, authorities=s.authorities.delete(2).set(32, alias).set(1, evolve(s.authorities[1], used=17)))
    assert list(nxt.authorities)[0] == 32
    assert _fails(store, nxt) == ("I1", "I1: authority 1 used 17 B but its allocations charge 16 B")


def test_grants_past_the_limit_fail_I2() -> None:
    store, s = _ledgers()
    assert _fails(store, _auth(s, 1, limit=15)) == ("I2", "I2: authority 1: 16 B granted against a 15 B limit")
    store, s = _ledgers(A.Cancel(1, 1))
    assert _fails(store, _auth(s, 1, limit=7)) == ("I2", "I2: authority 1: 8 B granted against a 7 B limit")


def test_allowance_limits_past_capacity_fail_I4b() -> None:
    store, s = _ledgers()
    assert _fails(store, _auth(s, 1, capacity=29)) == (
        "I4b", "I4b: authority 1: allowance limits 30 B exceed capacity 29 B")
