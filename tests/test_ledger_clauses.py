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
from clause_harness import broken, cases

from invariants import ledger as IL
from invariants._violation import InvariantViolation
from invariants.ledger import check_all, check_local, check_step, observe_snapshot, predicate_names
from spec import ledger as L
from spec import ledger_actions as A
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import State, snapshot
from spec.lifetime_actions import GrowLease
from spec.types import AllocState, ContextState, Role, Tier

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
                                "pool 'gpu' has two canonical authorities: authority 1 and authority 3"),
    "second_ledger_on_a_device": (
        lambda: _add_auth(_add_auth(State(), 1, "gpu0", device="cuda:0"), 2, "gpu0-bis", device="cuda:0"),
        "state_C1.one_ledger_per_pool", "device 'cuda:0' (device) has two canonical authorities: authority 1 and authority 2"),
    "alias_of_nothing": (lambda: _add_auth(last(), 3, "gpu", alias_of=9), "state_C1.alias_resolves",
                         "alias 3 does not resolve to a canonical authority of pool 'gpu'"),
    "alias_of_an_alias": (lambda: _add_auth(_add_auth(last(), 3, "gpu", alias_of=1), 4, "gpu", alias_of=3),
                          "state_C1.alias_resolves", "alias 4"),
    "alias_of_another_pool": (lambda: _add_auth(last(), 3, "gpu", alias_of=2), "state_C1.alias_resolves",
                              "alias 3"),
    "lease_on_an_unknown_ledger": (lambda: _auth(_alloc(last(RES), 1, authority=9), 1, used=0),
                                   "state_C2.lease_on_known_pool", "allocation 1 is on unknown authority 9"),
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
                            "alias 3 of authority 1 carries 2 B: the bytes are charged twice"),
    "lease_charged_to_an_alias": (lambda: _alloc(_auth(_add_auth(last(RES), 3, "gpu", alias_of=1), 1, used=0), 1,
                                                 authority=3),
                                  "state_I1.alias_charges_nothing", "alias 3 of authority 1 carries 0 B"),
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
                                           A.ReserveGrowth(1, 1, 2)),  # reserved 3 + mapped 1 of 4 B
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


# --- step clauses: each harm breaks exactly its clause; its near miss breaks none --------------------------


def step(p: State, act: Any, guards: GuardSet = ALL_ON) -> State:
    return L.step(p, act, guards)[0]


def real(*acts: Any, guards: GuardSet = ALL_ON) -> tuple[State, Any, State]:
    """The last action of `acts` as a step, taken with `guards` (every earlier one with every guard on)."""
    *before, act = acts
    p = last(*before)
    return p, act, step(p, act, guards)


def tampered(acts: tuple[Any, ...], change: Callable[[State], State]) -> tuple[State, Any, State]:
    """The last action of `acts` taken with every guard on, its next state then changed by `change`."""
    p, act, n = real(*acts)
    return p, act, change(n)


HOLDER = (A.RegisterHolder("c"),)  # a step that touches no ledger
ALIASED = (A.RegisterAlias(1, "um"),)  # authority 3: an alias of the gpu
LOST = (*LIVE, A.LoseDevice(1))  # allocation 1 device-lost, its 2 B still charged
ALLOWANCES = (OPEN, A.OpenAllowance(2, 1, 2))  # allowance 1 (holder 1, 4 B), allowance 2 (holder 2, 2 B)
QUARANTINED = (*LIVE, A.Quarantine(1, 1, 1))  # allocation 1 quarantined with 1 B still charged

#: name -> ((prev, action, next), the clauses it breaks, what the message of the last must name)
STEP_HARMS: dict[str, tuple[Callable[[], tuple[State, Any, State]], str, str]] = {
    "ledger_grows": (lambda: tampered(HOLDER, lambda n: _auth(n, 1, capacity=16)), "step_C1.ledger_identity_stable",
                     "changed authority 1"),
    "ledger_moves_pool": (lambda: tampered(HOLDER, lambda n: _auth(n, 2, pool="gpu2")),
                          "step_C1.ledger_identity_stable", "changed authority 2"),
    "ledger_changes_tier": (lambda: tampered(HOLDER, lambda n: _auth(n, 2, tier=DEV)),
                            "step_C1.ledger_identity_stable", "changed authority 2"),
    "alias_becomes_a_ledger": (lambda: tampered((*ALIASED, *HOLDER), lambda n: _auth(n, 3, alias_of=None)),
                               "step_C1.ledger_identity_stable", "changed authority 3"),
    "ledger_vanishes": (lambda: tampered(HOLDER, lambda n: attrs.evolve(n, authorities=n.authorities.delete(2))),
                        "step_C1.ledger_identity_stable", "changed authority 2"),
    # the registration binds to the 8 B gpu ledger although it declared 16 B (identity_check off)
    "registration_binds_another_identity": (
        lambda: real(A.RegisterAuthority("gpu", DEV, 16), guards=GuardSet.without("identity_check")),
        "step_C1.identity_kept", "pool 'gpu' is (device, 8 B)"),
    # a second ledger over the gpu (single_authority_per_pool off)
    "registration_adds_a_second_ledger": (
        lambda: real(A.RegisterAuthority("gpu", DEV, 8), guards=GuardSet.without("single_authority_per_pool")),
        "state_C1.one_ledger_per_pool", "pool 'gpu' has two canonical authorities: authority 1 and authority 3"),
    "alias_registration_to_nothing": (lambda: tampered(ALIASED, lambda n: _auth(n, 3, alias_of=9)),
                                      "state_C1.alias_resolves", "alias 3"),
    "byte_charged_from_nowhere": (lambda: tampered(HOLDER, lambda n: _auth(n, 2, used=1)), "step_I1.charge_conserved",
                                  "authority 2 used moved 1 B, charges moved 0 B"),
    "refund_lost": (lambda: tampered((*LIVE, A.Release(1, 1)), lambda n: _auth(n, 1, used=1)),
                    "step_I1.charge_conserved", "authority 1 used moved -1 B, charges moved -2 B"),
    "commit_refund_lost": (lambda: tampered(LIVE, lambda n: _auth(n, 1, used=3)), "step_I1.charge_conserved",
                           "authority 1 used moved 0 B, charges moved -1 B"),
    "alias_charged": (lambda: tampered((*ALIASED, *HOLDER), lambda n: _auth(n, 3, used=2)),
                      "step_I1.charge_conserved", "authority 3 used moved 2 B, charges moved 0 B"),
    # the grant booked on the alias: the alias's used moves with its charges, but an alias holds no bytes
    "grant_booked_on_an_alias": (lambda: tampered((*ALIASED, RES), lambda n: _auth(_auth(_alloc(n, 1, authority=3), 1,
                                                                                        used=0), 3, used=3)),
                                 "step_I1.charge_conserved", "alias 3 was charged 3 B"),
    "grant_past_the_limit": (lambda: real(A.Reserve(1, 1, DEV, 6, KV), RES, guards=GuardSet.without("limit_check")),
                             "step_I2.reserve_within_limit", "granted past the limit: used 9 B > 8 B"),
    # the 1 B grant booked on a ledger with no room that appeared in the same step (its used was 0 before it)
    "grant_booked_on_a_conjured_ledger": (lambda: tampered((A.Reserve(1, 1, DEV, 1, KV),), lambda n: _auth(_auth(
        _alloc(_add_auth(n, 3, "gpu2", used=1), 1, authority=3), 3, limit=0), 1, used=0)),
        "step_I2.reserve_within_limit", "granted past the limit: used 1 B > 0 B"),
    "recording_undercharged": (lambda: tampered((RECORDED,),
                                                lambda n: _auth(_alloc(n, 1, charge=4, nbytes=4), 1, used=4)),
                               "step_I2.recorded_bytes_charged", "was accepted but charged [4] B"),
    "recording_charged_twice": (lambda: tampered((RECORDED,), lambda n: attrs.evolve(
        _auth(n, 1, used=10), allocations=n.allocations.set(2, attrs.evolve(n.allocations[1], id=2)),
        next_allocation=3)), "step_I2.recorded_bytes_charged", "was accepted but charged [5, 5] B"),
    "recording_left_off_the_ledger": (lambda: tampered((RECORDED,), lambda n: _auth(n, 1, used=0)),
                                      "step_I1.charge_conserved step_I2.recorded_bytes_charged",
                                      "authority 1 used 0 B does not include"),
    # the recording silently drops the holder's live lease: its 2 B refund hides inside the 5 B recorded
    "recording_drops_a_lease": (lambda: tampered((*LIVE, RECORDED), lambda n: _auth(
        attrs.evolve(n, allocations=n.allocations.delete(1)), 1, used=5)),
        "step_I2.recorded_bytes_charged", "authority 1 used 5 B does not include the recorded bytes"),
    "id_counter_goes_back": (lambda: tampered((RES, RES), lambda n: attrs.evolve(n, next_allocation=1)),
                             "step_I4a.ids_fresh", "id counter went back from 2 to 1"),
    # a cancelled id handed out again (fresh_ids off)
    "id_reissued": (lambda: real(RES, A.Cancel(1, 1), RES, guards=GuardSet.without("fresh_ids")),
                    "step_I4a.ids_fresh", "reissued allocation id 1"),
    "lease_rehomed": (lambda: tampered(LIVE, lambda n: _alloc(n, 1, holder=2)), "step_I4a.holder_fixed",
                      "allocation 1 changed holder 1 -> holder 2"),
    "live_lease_rewritten": (lambda: tampered((*LIVE, RES, A.Cancel(1, 2)), lambda n: _alloc(n, 1, role=Role.WEIGHTS)),
                             "step_I4a.lifecycle_followed", "allocation 1 changed while staying live"),
    # the lifecycle's self-loop (a live lease shrinking) lets the bytes fall, never rise, and nothing else change
    "live_lease_grown_in_place": (lambda: tampered((*LIVE, A.Reserve(1, 1, DEV, 1, KV)), lambda n: _auth(
        _alloc(n, 1, nbytes=3, charge=3), 1, used=4)), "step_I4a.lifecycle_followed",
                                  "allocation 1 changed while staying live"),
    "live_lease_shrunk_and_rewritten": (lambda: tampered((*LIVE, A.Reserve(1, 1, DEV, 1, KV)), lambda n: _auth(
        _alloc(n, 1, nbytes=1, charge=1, role=Role.WEIGHTS), 1, used=2)), "step_I4a.lifecycle_followed",
                                        "allocation 1 changed while staying live"),
    # the self-loop lets a live lease's charge move only with its bytes: here the charge rises, the bytes stay
    "live_lease_recharged_in_place": (lambda: tampered((*LIVE, A.Reserve(1, 1, DEV, 1, KV)), lambda n: _auth(
        _alloc(n, 1, charge=3), 1, used=4)), "step_I4a.lifecycle_followed",
                                      "allocation 1 changed while staying live"),
    # a GrowLease that raises the lease's reservation but not its bytes: a grow must grow the lease
    "grow_lease_reserves_without_growing": (lambda: (last(*LIVE), GrowLease(1, 1, 1),
                                                     _alloc(last(*LIVE), 1, reserved=4)),
                                            "step_I4a.lifecycle_followed", "allocation 1 changed while staying live"),
    # a provisional lease quarantined without a commit (lifecycle_table off)
    "provisional_quarantined": (lambda: real(RES, A.Quarantine(1, 1, 0), guards=GuardSet.without("lifecycle_table")),
                                "step_I4a.lifecycle_followed", "allocation 1 moved provisional -> quarantined"),
    "live_lease_back_to_provisional": (lambda: tampered((*LIVE, *HOLDER),
                                                        lambda n: _alloc(n, 1, state=AllocState.PROVISIONAL)),
                                       "step_I4a.lifecycle_followed", "allocation 1 moved live -> provisional"),
    # a quarantined lease released, its residue refunded (lifecycle_table off)
    "quarantined_lease_released": (lambda: real(*QUARANTINED, A.Release(1, 1),
                                                guards=GuardSet.without("lifecycle_table")),
                                   "step_I4a.lifecycle_followed", "allocation 1 left the ledger from quarantined"),
    "growth_charged": (lambda: tampered((OPEN, A.ReserveGrowth(1, 1, 2)), lambda n: _auth(n, 1, used=2)),
                       "step_I1.charge_conserved step_I4b.allowance_moves_no_charge", "moved charge on authority 1"),
    "transfer_mints_limit": (lambda: tampered((*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
                                              lambda n: _allowance(n, 2, limit=4)),
                             "step_I4b.transfer_conserves", "changed total allowance limits 6 -> 7"),
    "transfer_burns_limit": (lambda: tampered((*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
                                              lambda n: _allowance(n, 1, limit=2)),
                             "step_I4b.transfer_conserves", "changed total allowance limits 6 -> 5"),
    # holder 2 releases holder 1's lease (owner_only off)
    "lease_released_by_another": (lambda: real(*LIVE, A.Release(2, 1), guards=GuardSet.without("owner_only")),
                                  "step_I6.only_owner_reduces_charge", "reduced holder 1's allocation 1 by 2 B"),
    "lease_quarantined_by_another": (lambda: real(*LIVE, A.Quarantine(2, 1, 1), guards=GuardSet.without("owner_only")),
                                     "step_I6.only_owner_reduces_charge", "reduced holder 1's allocation 1 by 1 B"),
    # holder 1's commit (its own lease unchanged in charge) also shrinks holder 2's later lease
    "commit_shrinks_another_holders_lease": (lambda: tampered((RES, A.Reserve(2, 1, DEV, 2, KV), A.Commit(1, 1, 3)),
                                                              lambda n: _auth(_alloc(n, 2, charge=1, nbytes=1), 1,
                                                                              used=4)),
                                             "step_I4a.lifecycle_followed step_I6.only_owner_reduces_charge",
                                             "reduced holder 2's allocation 2 by 1 B"),
    "lost_lease_refunded_without_termination": (lambda: tampered((*LOST, A.LoseDevice(1)), lambda n: _auth(
        _alloc(n, 1, charge=0), 1, used=0)), "step_I4a.lifecycle_followed step_I6.only_owner_reduces_charge",
        "reduced holder 1's allocation 1 by 2 B"),
    # the termination refunds the lost lease, and also holder 2's live lease on the other ledger
    "termination_refunds_a_live_lease": (lambda: tampered(
        (*LOST, A.Reserve(2, 2, HOST, 2, KV), A.ConfirmTermination(1)),
        lambda n: _auth(attrs.evolve(n, allocations=n.allocations.delete(2)), 2, used=0)),
                                         "step_I6.only_owner_reduces_charge", "reduced holder 2's allocation 2 by 2 B"),
    # an action of no holder (a device loss) rewrites holder 1's allowance
    "device_loss_rewrites_an_allowance": (lambda: tampered((OPEN, A.LoseDevice(2)),
                                                           lambda n: _allowance(n, 1, limit=3)),
                                          "step_I6.only_owner_changes_allowance",
                                          "LoseDevice(authority=2) changed holder 1's allowance 1"),
    # holder 1's transfer leaves the target's limit as it was but books growth in it
    "transfer_rewrites_its_target": (lambda: tampered(
        (*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
        lambda n: _allowance(_allowance(_allowance(n, 1, limit=4), 2, limit=2), 2, reserved=1)),
        "step_I6.only_owner_changes_allowance", "changed holder 2's allowance 2"),
    # holder 1's transfer grows holder 2's allowance 2, and also books growth in holder 2's allowance 3
    "transfer_touches_a_third_allowance": (lambda: tampered((*ALLOWANCES, A.OpenAllowance(2, 1, 1),
                                                             A.TransferAllowance(1, 1, 2, 1)),
                                                            lambda n: _allowance(n, 3, reserved=1)),
                                           "step_I6.only_owner_changes_allowance", "changed holder 2's allowance 3"),
    # holder 1 releases lease 1 and, in the same step, rewrites its lease 2
    "release_rewrites_the_next_lease": (lambda: tampered((*LIVE, RES, A.Commit(1, 2, 3), A.Release(1, 1)),
                                                         lambda n: _alloc(n, 2, role=Role.WEIGHTS)),
                                        "step_I4a.lifecycle_followed", "allocation 2 changed while staying live"),
    # holder 2 grows, or closes, holder 1's allowance (owner_only off)
    "allowance_grown_by_another": (lambda: real(*ALLOWANCES, A.ReserveGrowth(2, 1, 1),
                                                guards=GuardSet.without("owner_only")),
                                   "step_I6.only_owner_changes_allowance", "changed holder 1's allowance 1"),
    "allowance_closed_by_another": (lambda: real(*ALLOWANCES, A.CloseAllowance(2, 1),
                                                 guards=GuardSet.without("owner_only")),
                                    "step_I6.only_owner_changes_allowance", "changed holder 1's allowance 1"),
    "transfer_shrinks_its_target": (lambda: tampered((*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
                                                     lambda n: _allowance(_allowance(n, 1, limit=5), 2, limit=1)),
                                    "step_I6.only_owner_changes_allowance", "changed holder 2's allowance 2"),
}


def _step_predicate(key: str) -> str:
    """The step predicate that evaluates clause `key` (step_C1 evaluates state_C1 on a registration)."""
    return "step_" + key.split(".")[0].removeprefix("state_").removeprefix("step_")


@pytest.mark.parametrize("name", sorted(STEP_HARMS))
def test_each_step_harm_breaks_exactly_its_clause_and_names_it(name: str) -> None:
    make, keys, text = STEP_HARMS[name]
    p, act, n = make()
    assert broken(check_step, p, act, n) == keys.split()
    with pytest.raises(InvariantViolation) as e:
        getattr(IL, _step_predicate(keys.split()[-1]))(p, act, n)
    assert e.value.clause == keys.split()[-1] and text in str(e.value)
    assert repr(act) in str(e.value) or e.value.clause.startswith("state_")  # a step's failure names its action


def _odd_alias(s: State) -> State:
    """An alias of the gpu that declares 16 B (its own capacity is never bound to: only canonical ledgers are)."""
    return _auth(_add_auth(s, 3, "gpu", alias_of=1), 3, capacity=16)


#: the largest change each step clause must still accept
STEP_NEAR_MISSES: dict[str, Callable[[], tuple[State, Any, State]]] = {
    "same_identity_registered_again": lambda: real(A.RegisterAuthority("gpu", DEV, 8)),
    "new_pool_of_another_identity": lambda: real(A.RegisterAuthority("npu", HOST, 16)),
    "registration_past_an_odd_alias": lambda: (lambda p: (p, A.RegisterAuthority("gpu", DEV, 8), p))(
        _odd_alias(last())),
    "alias_registered": lambda: real(*ALIASED),
    "reserve_exactly_to_the_limit": lambda: real(RES, A.Reserve(2, 1, DEV, 5, KV)),
    "reserve_beside_an_oversubscribed_ledger": lambda: real(RECORDED, RECORDED, A.Reserve(1, 2, HOST, 1, KV)),
    "recording_past_the_limit": lambda: real(RECORDED, RECORDED),
    "commit_refunds_the_unused_part": lambda: real(*LIVE),
    "release_by_the_owner": lambda: real(*LIVE, A.Release(1, 1)),
    # as the composed manager's ShrinkLease leaves it: the live lease's bytes and charge fall, in step with used
    "live_lease_shrunk_by_its_owner": lambda: tampered((*LIVE, A.Reserve(1, 1, DEV, 1, KV)), lambda n: _auth(
        _alloc(n, 1, nbytes=1, charge=1), 1, used=2)),
    "cancel_by_the_owner": lambda: real(RES, A.Cancel(1, 1)),
    "quarantine_by_the_owner": lambda: real(*QUARANTINED),
    "device_lost": lambda: real(*LOST),
    "termination_refunds_lost_leases": lambda: real(*LOST, A.ConfirmTermination(1)),
    "growth_mapped_and_unmapped": lambda: real(OPEN, A.ReserveGrowth(1, 1, 2), A.MapAllowance(1, 1, 2),
                                               A.UnmapAllowance(1, 1, 1)),
    "transfer_grows_another_holders_allowance": lambda: real(*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
    "close_by_the_owner": lambda: real(*ALLOWANCES, A.CloseAllowance(2, 2)),
}


@pytest.mark.parametrize("name", sorted(STEP_NEAR_MISSES))
def test_each_step_near_miss_breaks_nothing(name: str) -> None:
    assert broken(check_step, *STEP_NEAR_MISSES[name]()) == []


# --- the snapshot's reading (C8, I2's visibility) -------------------------------------------------------

OVER = (RECORDED, RECORDED)  # 10 B recorded on the 8 B gpu: oversubscribed by 2 B
GROWN = (OPEN, A.ReserveGrowth(1, 1, 3))  # 3 B of the gpu reserved for growth, nothing charged


def _read(acts: tuple[Any, ...], aid: int = 1, **wrong: Any) -> Callable[[], tuple[State, int, Any]]:
    """The state after `acts`, the authority read, and its snapshot with the figures in `wrong` misreported."""
    def make() -> tuple[State, int, Any]:
        s = last(*acts)
        return s, aid, attrs.evolve(snapshot(s, aid), **wrong)
    return make


FULL = (A.Reserve(1, 1, DEV, 8, KV),)  # every byte of the gpu granted
_OVER, _FREE = "observe_snapshot.oversubscription_reported", "observe_snapshot.available_excludes_growth"

#: name -> ((state, authority read, snapshot reported), the clause it fails (None: it passes), what it must name)
SNAPSHOTS: dict[str, tuple[Callable[[], tuple[State, int, Any]], str | None, str]] = {
    "oversubscription_hidden": (_read(OVER, oversubscribed=0), _OVER,
                                "I2: authority 1: 10 B charged against a 8 B limit, reported oversubscribed 0 B"),
    "oversubscription_understated": (_read(OVER, oversubscribed=1), _OVER, "reported oversubscribed 1 B"),
    "full_ledger_called_oversubscribed": (_read(FULL, oversubscribed=1), _OVER,
                                          "I2: authority 1: reported oversubscribed 1 B within its limit"),
    "charged_bytes_called_available": (_read((RES,), available=8), _FREE,
                                       "C8: authority 1: available 8 B, but limit 8 - used 3 - growth 0 gives 5 B"),
    "growth_called_available": (_read(GROWN, available=8), _FREE,
                                "available 8 B, but limit 8 - used 0 - growth 3 gives 5 B"),
    # the smallest subjects: one byte reserved for growth, one byte charged
    "one_growth_byte_called_available": (_read((OPEN, A.ReserveGrowth(1, 1, 1)), available=8), _FREE,
                                         "available 8 B, but limit 8 - used 0 - growth 1 gives 7 B"),
    "one_charged_byte_called_available": (_read((A.Reserve(1, 1, DEV, 1, KV),), available=8), _FREE,
                                          "available 8 B, but limit 8 - used 1 - growth 0 gives 7 B"),
    "oversubscribed_ledger_offers_bytes": (_read(OVER, available=-2), _FREE,
                                           "available -2 B, but limit 8 - used 10 - growth 0 gives 0 B"),
    "used_misreported": (_read((RES,), used=2), _FREE,
                         "C8: authority 1: snapshot used 2 / growth 0 B, records give 3 / 0 B"),
    "growth_misreported": (_read(GROWN, growth_reserved=2), _FREE,
                           "snapshot used 0 / growth 2 B, records give 0 / 3 B"),
    # an idle ledger (nothing charged, nothing reserved for growth) is judged too: its whole limit is available
    "idle_ledger_hides_its_bytes": (_read((), available=0), _FREE,
                                    "C8: authority 1: available 0 B, but limit 8 - used 0 - growth 0 gives 8 B"),
    "idle_ledger_offers_past_its_limit": (_read((), available=9), _FREE, "available 9 B, but limit 8"),
    "idle_ledger_read": (_read(()), None, ""),
    "full_ledger_read": (_read(FULL), None, ""),
    "one_byte_free_read": (_read((A.Reserve(1, 1, DEV, 7, KV),)), None, ""),
    "oversubscribed_ledger_read": (_read(OVER), None, ""),
    "grown_ledger_read": (_read((*GROWN, RES)), None, ""),
    "other_ledgers_growth_not_counted": (_read((A.OpenAllowance(1, 2, 4), A.ReserveGrowth(1, 1, 3), RES)), None, ""),
    "read_through_an_alias": (_read((*ALIASED, *GROWN, RES), 3), None, ""),
}


@pytest.mark.parametrize("aid", [1, 9], ids=["nothing_registered", "never_registered"])
def test_a_snapshot_of_an_authority_the_records_lack_is_a_typed_violation(aid: int) -> None:
    # An empty ledger (no authority at all) or an id never issued: no KeyError, the C8 clause names the id.
    s = State() if aid == 1 else last()
    snap = attrs.evolve(snapshot(last(), 1), authority=aid)
    with pytest.raises(InvariantViolation, match=f"authority {aid} is in no record") as e:
        observe_snapshot(s, aid, snap)
    assert e.value.clause == _FREE and e.value.id == "C8"


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_a_snapshot_is_judged_by_the_records(name: str) -> None:
    make, key, text = SNAPSHOTS[name]
    s, aid, snap = make()
    if key is None:
        observe_snapshot(s, aid, snap)
        return
    with pytest.raises(InvariantViolation) as e:
        observe_snapshot(s, aid, snap)
    assert e.value.clause == key and text in str(e.value)


# --- case accounting: a clause's case occurs with one subject of it, and not without --------------------


def test_nothing_to_harm_counts_no_case() -> None:
    assert cases(check_all, State()) == set()
    assert cases(check_all, last()) == {"state_C1.one_ledger_per_pool"}  # two ledgers, nothing on them
    first = A.RegisterHolder("z")
    assert cases(check_step, State(), first, step(State(), first)) == set()


#: clause -> (a script whose last state has one subject of the clause, one whose last state has none)
STATE_WITNESS: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
    "state_C1.alias_resolves": (ALIASED, HOLDER),
    "state_C2.lease_on_known_pool": ((RES,), ()),
    "state_C2.lease_within_reservation": ((RES,), ()),
    "state_C2.lease_fully_charged": (LIVE, QUARANTINED),  # a quarantined lease keeps only a residue
    "state_I1.used_is_sum_of_charges": ((RES,), (RES, A.Cancel(1, 1))),
    "state_I1.alias_charges_nothing": (ALIASED, HOLDER),
    "state_I2.grants_within_limit": ((RECORDED, RES), (RECORDED,)),  # recorded bytes are no grant
    "state_I4a.ids_issued": ((RES,), (RES, A.Cancel(1, 1))),
    "state_I4b.allowance_within_limit": ((OPEN, A.ReserveGrowth(1, 1, 1)), (OPEN,)),
    "state_I4b.promises_within_capacity": ((OPEN,), (OPEN, A.CloseAllowance(1, 1))),
}


@pytest.mark.parametrize("key", sorted(STATE_WITNESS))
def test_one_subject_makes_the_state_case_occur(key: str) -> None:
    with_, without = STATE_WITNESS[key]
    assert key in cases(check_all, last(*with_)) and key not in cases(check_all, last(*without))


def test_a_later_subject_does_not_hide_an_earlier_one() -> None:
    # a grown allowance listed before an idle one; a lease before a quarantined one
    assert "state_I4b.allowance_within_limit" in cases(check_all, last(OPEN, A.ReserveGrowth(1, 1, 1),
                                                                        A.OpenAllowance(2, 1, 2)))
    assert "state_I4b.allowance_within_limit" in cases(check_all, last(OPEN, A.OpenAllowance(2, 1, 2),
                                                                        A.ReserveGrowth(2, 2, 1)))
    assert "state_C2.lease_fully_charged" in cases(check_all, last(*LIVE, RES, A.Commit(1, 2, 3),
                                                                    A.Quarantine(1, 2, 1)))


#: clause -> (a script whose last step is a case of the clause, one whose last step is not)
STEP_WITNESS: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
    "step_C1.identity_kept": ((A.RegisterAuthority("gpu", DEV, 8),), (*ALIASED,)),
    "step_I1.charge_conserved": ((RES,), (RES, A.Commit(1, 1, 3))),  # a commit of every reserved byte moves none
    "step_I2.reserve_within_limit": ((RES,), (RECORDED,)),
    "step_I2.recorded_bytes_charged": ((RECORDED,), (RES,)),
    "step_I4a.ids_fresh": ((RES,), (RES, A.Commit(1, 1, 3))),
    "step_I4a.holder_fixed": ((RES, A.Commit(1, 1, 3)), (RES,)),
    "step_I4a.lifecycle_followed": ((RES, A.Cancel(1, 1)), (RES, RES)),
    "step_I4b.allowance_moves_no_charge": ((OPEN,), (RES,)),
    "step_I4b.transfer_conserves": ((*ALLOWANCES, A.TransferAllowance(1, 1, 2, 1)),
                                    (*ALLOWANCES, A.CloseAllowance(2, 2))),
    "step_I6.only_owner_reduces_charge": (LIVE, (RES, A.Commit(1, 1, 3))),
    "step_I6.only_owner_changes_allowance": ((OPEN, A.ReserveGrowth(1, 1, 1)), ALLOWANCES),
}


@pytest.mark.parametrize("key", sorted(STEP_WITNESS))
def test_one_subject_makes_the_step_case_occur(key: str) -> None:
    with_, without = STEP_WITNESS[key]
    assert key in cases(check_step, *real(*with_)) and key not in cases(check_step, *real(*without))


def test_the_ledger_identity_case_needs_a_ledger_before_the_step() -> None:
    first = A.RegisterAuthority("gpu", DEV, 8)
    assert "step_C1.ledger_identity_stable" not in cases(check_step, State(), first, step(State(), first))
    assert "step_C1.ledger_identity_stable" in cases(check_step, *real(*HOLDER))


def test_a_move_in_place_and_two_births_are_counted_as_such() -> None:
    # a commit moves its record without removing it: a lifecycle case
    assert "step_I4a.lifecycle_followed" in cases(check_step, *real(RES, A.Commit(1, 1, 2)))
    # two records born in one step from an empty ledger: both fresh, none kept
    p, act, n = real(RES)
    twin = attrs.evolve(n.allocations[1], id=2, nbytes=1, reserved=1, charge=1)
    n = _auth(attrs.evolve(n, allocations=n.allocations.set(2, twin), next_allocation=3), 1, used=4)
    assert broken(check_step, p, act, n) == []
    assert "step_I4a.ids_fresh" in cases(check_step, p, act, n)
    assert "step_I4a.holder_fixed" not in cases(check_step, p, act, n)


def test_a_lease_shrunk_in_place_is_a_lifecycle_case() -> None:
    # its one changed record stays live (the self-loop) and the other is born: the shrink alone is the case
    assert "step_I4a.lifecycle_followed" in cases(check_step, *STEP_NEAR_MISSES["live_lease_shrunk_by_its_owner"]())


def test_a_later_record_does_not_hide_an_earlier_move() -> None:
    # the released lease (1) comes before an untouched one (2): the step still moved a record
    assert "step_I4a.lifecycle_followed" in cases(check_step, *real(*LIVE, RES, A.Release(1, 1)))
    # a fresh reservation beside a kept record is both fresh and kept
    assert {"step_I4a.ids_fresh", "step_I4a.holder_fixed"} <= cases(check_step, *real(*LIVE, RES))


def test_snapshot_cases_occur_only_where_a_figure_could_be_wrong() -> None:
    def seen(s: State) -> set[str]:
        return cases(observe_snapshot, s, 1, snapshot(s, 1))

    assert seen(last()) == set()  # judged (an idle ledger's available is its limit), but no byte to pass off
    assert seen(last(RES)) == {_FREE}
    # the smallest subjects: one byte reserved for growth, one byte charged
    assert seen(last(OPEN, A.ReserveGrowth(1, 1, 1))) == seen(last(A.Reserve(1, 1, DEV, 1, KV))) == {_FREE}
    assert seen(last(*GROWN)) == {_FREE}
    assert seen(last(*OVER)) == {_FREE, _OVER}
    assert seen(last(*FULL)) == {_FREE}


# --- the incremental contract -------------------------------------------------------------------------


def test_check_local_runs_the_step_and_the_local_state_predicates() -> None:
    p, act, n = real(*LIVE)
    check_local(p, act, n)
    with pytest.raises(InvariantViolation) as e:  # a step clause
        check_local(p, act, _auth(n, 1, used=3))
    assert e.value.clause == "step_I1.charge_conserved"
    with pytest.raises(InvariantViolation) as e:  # a local state clause the step clauses do not see
        check_local(p, act, _alloc(n, 1, tier=HOST))
    assert e.value.clause == "state_C2.lease_on_known_pool"
    p, act, n = real(OPEN, A.ReserveGrowth(1, 1, 1))
    with pytest.raises(InvariantViolation) as e:
        check_local(p, act, _allowance(n, 1, reserved=5))
    assert e.value.clause == "state_I4b.allowance_within_limit"
