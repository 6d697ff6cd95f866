"""The ledger clauses' evidence (issue #26 item 4: the checkers checked by mutating `invariants/ledger.py`).

Each clause of `invariants.ledger` is shown to fail, and to be the one clause that fails, on a state or a
step that carries its harm: a byte charged twice or lost, a grant past the limit, an id reissued, a
holder's bytes given back by someone else. The states are reached with every guard on and then broken by
hand where no guard lets the harm happen; next to each harm sits its near miss (the largest change the
clause must accept), so a clause made stricter fails too. A clause's case count is what the verdict's
coverage rule reads, so each is shown to occur with one subject of it and not without. Deterministic: no
Hypothesis, no refimpl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from invariants import ledger as IL
from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, collecting, recording
from invariants.ledger import check_all, check_local, check_step, observe_snapshot, predicate_names
from spec import ledger as L
from spec import ledger_actions as A
from spec.ledger_state import State, snapshot
from spec.types import AllocState, ContextState, Origin, Role, Tier

DEV, HOST = Tier.DEVICE, Tier.HOST
KV = Role.KV
# authorities 1 ("gpu", device, 8 B) and 2 ("cpu", host, 8 B); holders 1 and 2
WORLD = (A.RegisterAuthority("gpu", DEV, 8), A.RegisterAuthority("cpu", HOST, 8),
         A.RegisterHolder("a"), A.RegisterHolder("b"))


def run(*acts: Any) -> list[State]:
    """The state after WORLD, then after each action (every guard on, every check passing)."""
    s = State()
    for a in WORLD:
        s = L.step(s, a)[0]
    out = [s]
    for a in acts:
        nxt = L.step(s, a)[0]
        check_step(s, a, nxt)
        check_all(nxt)
        out.append(s := nxt)
    return out


def last(*acts: Any) -> State:
    return run(*acts)[-1]


def broken(check: Callable[..., None], *args: Any) -> list[str]:
    """Every clause `check` finds broken (one per predicate: a predicate stops at its first failure)."""
    with collecting() as found:
        check(*args)
    return found


def message(key: str, *args: Any) -> str:
    """The failure of the predicate that evaluates clause `key`, which must be that clause's."""
    with pytest.raises(InvariantViolation) as e:
        getattr(IL, key.split(".")[0])(*args)
    assert e.value.clause == key
    return str(e.value)


def _auth(s: State, aid: int, **changes: Any) -> State:
    return attrs.evolve(s, authorities=s.authorities.set(aid, attrs.evolve(s.authorities[aid], **changes)))


def _alloc(s: State, rid: int, **changes: Any) -> State:
    return attrs.evolve(s, allocations=s.allocations.set(rid, attrs.evolve(s.allocations[rid], **changes)))


def _allowance(s: State, wid: int, **changes: Any) -> State:
    return attrs.evolve(s, allowances=s.allowances.set(wid, attrs.evolve(s.allowances[wid], **changes)))


def _renumber(s: State, rid: int, new: int) -> State:
    r = attrs.evolve(s.allocations[rid], id=new)
    return attrs.evolve(s, allocations=s.allocations.delete(rid).set(new, r))


def _add_auth(s: State, aid: int, pool: str, tier: Tier = DEV, *, alias_of: int | None = None,
              device: str | None = None, used: int = 0) -> State:
    a = L.Authority(aid, pool, tier, 8, 8, alias_of, "um" if alias_of else None, ContextState.ACTIVE, used, device)
    return attrs.evolve(s, authorities=s.authorities.set(aid, a), next_authority=max(s.next_authority, aid + 1))


RES = A.Reserve(1, 1, DEV, 3, KV)  # holder 1 reserves 3 B of the gpu: allocation 1, provisional
LIVE = (RES, A.Commit(1, 1, 2))  # ... committed at 2 B: live, charged 2 B
RECORDED = A.RecordCommitted(1, 1, DEV, 5, KV)  # 5 B taken outside the governor, charged in full
OPEN = A.OpenAllowance(1, 1, 4)  # allowance 1: holder 1, 4 B of the gpu


# --- state clauses: each harm breaks exactly its clause; its near miss breaks none ----------------------

#: name -> (the broken state, the clauses it breaks, what the message of the last must name)
STATE_HARMS: dict[str, tuple[Callable[[], State], str, str]] = {
    "second_ledger_on_a_pool": (lambda: _add_auth(last(), 3, "gpu"), "state_C1.one_ledger_per_pool",
                                "pool 'gpu' has two canonical authorities: 1 and 3"),
    "second_ledger_on_a_device": (
        lambda: _add_auth(_add_auth(State(), 1, "gpu0", device="cuda:0"), 2, "gpu0-bis", device="cuda:0"),
        "state_C1.one_ledger_per_pool", "device 'cuda:0' (device) has two canonical authorities: 1 and 2"),
    "alias_of_nothing": (lambda: _add_auth(last(), 3, "gpu", alias_of=9), "state_C1.alias_resolves",
                         "alias 3 does not resolve to a canonical authority of pool 'gpu'"),
    "alias_of_an_alias": (lambda: _add_auth(_add_auth(last(), 3, "gpu", alias_of=1), 4, "gpu", alias_of=3),
                          "state_C1.alias_resolves", "alias 4"),
    "alias_of_another_pool": (lambda: _add_auth(last(), 3, "gpu", alias_of=2), "state_C1.alias_resolves",
                              "alias 3"),
    "lease_in_the_wrong_tier": (lambda: _alloc(last(RES), 1, tier=HOST), "state_C2.lease_on_known_pool",
                                "allocation 1 claims tier host on a device pool"),
    "lease_of_an_unknown_holder": (lambda: _alloc(last(RES), 1, holder=7), "state_C2.lease_on_known_pool",
                                   "allocation 1 names unknown holder 7"),
    "lease_past_its_reservation": (lambda: _auth(_alloc(last(*LIVE), 1, nbytes=4, charge=4, reserved=3), 1, used=4),
                                   "state_C2.lease_within_reservation",
                                   "allocation 1: lease 4 B not covered by reservation 3 B"),
    "empty_lease": (lambda: _auth(_alloc(last(*LIVE), 1, nbytes=0, charge=0), 1, used=0),
                    "state_C2.lease_within_reservation",
                    "lease 0 B"),
    "live_lease_undercharged": (lambda: _auth(_alloc(last(*LIVE), 1, charge=1), 1, used=1),
                                "state_C2.lease_fully_charged", "allocation 1 (live) charges 1 B for 2 B"),
    "provisional_lease_overcharged": (lambda: _auth(_alloc(last(RES), 1, charge=4), 1, used=4),
                                      "state_C2.lease_fully_charged", "(provisional) charges 4 B for 3 B"),
    "used_without_a_charge": (lambda: _auth(last(RES), 2, used=1), "state_I1.used_is_sum_of_charges",
                              "authority 2 used 1 B but its allocations charge 0 B"),
    "charge_missing_from_used": (lambda: _auth(last(*LIVE), 1, used=1), "state_I1.used_is_sum_of_charges",
                                 "authority 1 used 1 B but its allocations charge 2 B"),
    "alias_carries_bytes": (lambda: _add_auth(last(), 3, "gpu", alias_of=1, used=2), "state_I1.alias_charges_nothing",
                            "alias 3 of 1 carries 2 B: the bytes are charged twice"),
    "lease_charged_to_an_alias": (lambda: _alloc(_auth(_add_auth(last(RES), 3, "gpu", alias_of=1), 1, used=0), 1,
                                                 authority=3),
                                  "state_I1.alias_charges_nothing", "alias 3 of 1 carries 0 B"),
    "grant_past_the_limit": (lambda: _auth(last(RES), 1, limit=2), "state_I2.grants_within_limit",
                             "authority 1: 3 B granted against a 2 B limit"),
    # (a negative used also differs from its charges: I1 names it too)
    "negative_used": (lambda: _auth(last(), 2, used=-1), "state_I1.used_is_sum_of_charges state_I2.grants_within_limit",
                      "authority 2: used is negative (-1 B)"),
    "id_never_issued": (lambda: attrs.evolve(last(RES), next_allocation=1), "state_I4a.ids_issued",
                        "allocation 1 outside the issued range 1..0"),
    "id_zero": (lambda: _renumber(last(RES), 1, 0), "state_I4a.ids_issued",
                "allocation 0 outside the issued range 1..1"),
    "released_record_kept": (lambda: _auth(_alloc(last(*LIVE), 1, state=AllocState.RELEASED, charge=0), 1, used=0),
                             "state_I4a.ids_issued", "allocation 1 kept in terminal state released"),
    "terminated_record_kept": (lambda: _alloc(last(*LIVE), 1, state=AllocState.CONTEXT_TERMINATED),
                               "state_I4a.ids_issued", "kept in terminal state context-terminated"),
    "allowance_past_its_limit": (lambda: _allowance(last(OPEN), 1, reserved=3, mapped=2),
                                 "state_I4b.allowance_within_limit",
                                 "allowance 1: reserved 3 + mapped 2 > limit 4"),
    "negative_reservation": (lambda: _allowance(last(OPEN), 1, reserved=-1), "state_I4b.allowance_within_limit",
                             "allowance 1: reserved -1"),
    "negative_mapping": (lambda: _allowance(last(OPEN), 1, mapped=-1), "state_I4b.allowance_within_limit",
                         "mapped -1"),
    "promises_past_capacity": (lambda: _allowance(last(OPEN, A.OpenAllowance(2, 1, 4)), 2, limit=5),
                               "state_I4b.promises_within_capacity",
                               "authority 1: allowance limits 9 B exceed capacity"),
    "allowance_on_no_pool": (lambda: _allowance(last(OPEN), 1, authority=9), "state_I4b.promises_within_capacity",
                             "authority 9: allowance limits 4 B exceed capacity"),
}


@pytest.mark.parametrize("name", sorted(STATE_HARMS))
def test_each_state_harm_breaks_exactly_its_clause_and_names_it(name: str) -> None:
    make, key, text = STATE_HARMS[name]
    s = make()
    assert broken(check_all, s) == key.split()
    assert text in message(key.split()[-1], s)


#: the largest change each state clause must still accept
STATE_NEAR_MISSES: dict[str, Callable[[], State]] = {
    "same_device_other_tier": lambda: _add_auth(_add_auth(State(), 1, "gpu0", device="cuda:0"), 2, "pinned0",
                                                HOST, device="cuda:0"),
    "two_pools_no_device": lambda: _add_auth(_add_auth(State(), 1, "gpu0"), 2, "gpu1"),
    "alias_of_its_canonical": lambda: _add_auth(last(), 3, "gpu", alias_of=1),
    "lease_exactly_its_reservation": lambda: last(RES),
    "lease_below_its_reservation": lambda: last(*LIVE),
    "quarantined_keeps_a_residue": lambda: last(*LIVE, A.Quarantine(1, 1, 1)),  # charge 1 B for a 2 B lease
    "recorded_past_the_limit": lambda: last(RECORDED, A.RecordCommitted(1, 1, DEV, 5, KV)),  # 10 B on 8
    "grant_exactly_the_limit": lambda: last(A.Reserve(1, 1, DEV, 8, KV)),
    "last_issued_id": lambda: last(RES, A.Reserve(2, 1, DEV, 1, KV)),
    "allowance_exactly_full": lambda: last(OPEN, A.ReserveGrowth(1, 1, 2), A.MapAllowance(1, 1, 1),
                                           A.ReserveGrowth(1, 1, 1)),  # reserved 2 + mapped 1... and 1 more
    "promises_exactly_capacity": lambda: last(OPEN, A.OpenAllowance(2, 1, 4)),
    "device_lost_keeps_its_charge": lambda: last(*LIVE, A.LoseDevice(1)),
}


@pytest.mark.parametrize("name", sorted(STATE_NEAR_MISSES))
def test_each_state_near_miss_breaks_nothing(name: str) -> None:
    assert broken(check_all, STATE_NEAR_MISSES[name]()) == []


def test_predicate_names_lists_the_state_and_step_predicates_of_an_id() -> None:
    assert predicate_names("I1") == ["invariants.ledger.state_I1", "invariants.ledger.step_I1"]
    assert predicate_names("I6") == ["invariants.ledger.step_I6"]
    assert predicate_names("C8") == []  # an observation only
