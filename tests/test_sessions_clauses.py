"""The session clauses' evidence (issue #26 item 4: the checkers checked by mutating `invariants/sessions.py`).

Each clause of `invariants.sessions` is shown to fail on a state or step of `spec.sessions` that carries its
harm (a model charged for its file instead of its extents, a lowered limit under used + headroom, a KV byte
in use and uncharged, a report that binds declined bytes...), reached with a guard off or a registered spec
mutant where one exists, broken by hand where none does; the whole set of clauses each harm breaks is
asserted, so a clause weakened, or made stricter against its near miss, fails. A clause's case count is what
the verdict's coverage rule reads, so each is shown to occur with one subject of it and not without.
Deterministic: no ORT, no Hypothesis.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import pytest
from clause_harness import broken, cases, violation

from invariants import sessions as SP
from invariants.clauses import collecting
from invariants.mutation import applied
from refimpl.verify.mutants import MUTANTS
from spec import sessions as S
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.types import Role

TOPO = S.Topology(capacity=4096, reserve=0, granule=256, host_mapped_capacity=1000, headroom=128, source="test")
ARENA = attrs.evolve(TOPO, arena=150, source="test, env arena 150 B")
#: 1000 B referenced in a 2000 B file, a 100 B transient peak, KV of 64 B per token in buckets of 4 up to 8
FACTS = S.ModelFacts(referenced=1000, file_bytes=2000, transient_peak=100, loop_carried=frozenset({"kv"}),
                     bytes_per_token=64, max_context=8, bucket=4)
LOAD = S.LoadModel("m", "toy", FACTS, frozenset({"kv"}))  # managed: admitted roundup(1000, 256) + 100 = 1124 B
LOAD_N = S.LoadModel("n", "toy", FACTS, frozenset({"kv"}))
COMPAT = S.LoadModel("c", "toy", FACTS, None)  # no declaration: compatibility mode, nothing charged
OPEN = (LOAD, S.Open("m"))  # request 1: 0 tokens in a 4-token bucket (256 B of KV)
FULL_BUCKET = (*OPEN, S.Decode(1), S.Decode(1), S.Decode(1), S.Decode(1))  # 4 tokens in the 4-token bucket


def run(*acts: Any, topo: S.Topology = TOPO, limit: int = 4096, guards: GuardSet = ALL_ON,
        mutant: str | None = None) -> tuple[list[S.SessionState], list[str]]:
    """The start state and the state after each action (every check passing on each step but the last), and
    every clause the last step and the state it reaches break (judged while the mutant is still applied: a
    mutated `report` is read by the predicates themselves)."""
    s = S.new_sessions(topo, limit)
    out = [s]
    found = broken(SP.check_state, s)
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        for i, a in enumerate(acts):
            nxt = S.step_sessions(s, a, guards)[0]
            with collecting() as found:
                SP.check_transition(s, a, nxt)
                SP.check_state(nxt)
            if i < len(acts) - 1:
                assert found == [], (a, found)
            out.append(s := nxt)
    return out, found


def _model(s: S.SessionState, name: str, **changes: Any) -> S.SessionState:
    """`s` with model `name` changed, its ledger re-read from the records (so only the changed figure lies)."""
    s = attrs.evolve(s, models=s.models.set(name, attrs.evolve(s.models[name], **changes)))
    return attrs.evolve(s, ledger=S.ledger_of(s))


def last(*acts: Any, **kw: Any) -> S.SessionState:
    states, found = run(*acts, **kw)
    assert found == []
    return states[-1]


# --- harms reached by a guard off or a registered spec mutant --------------------------------------------

#: name -> (script, how it runs, the clauses its last step breaks, what the first clause's message names)
SCRIPTED: dict[str, tuple[tuple[Any, ...], dict[str, Any], str, str]] = {
    "peak_lent_past_the_arena": ((LOAD, LOAD_N), dict(topo=ARENA, guards=GuardSet.without("arena_room")),
                                 "state_I8_sessions.arena_charged_once",
                                 "the pool charges 150 B to the arena role for an env arena of 150 B, and lends "
                                 "200 B of managed peaks within it"),
    "admitted_by_file_size": ((LOAD,), dict(guards=GuardSet.without("referenced_extents")),
                              "state_I8_sessions.charged_referenced_extents",
                              "m: admitted 2148 B, referenced extents give 1124 B (file 2000 B)"),
    "admitted_without_its_peak": ((LOAD,), dict(mutant="admission_drops_transient_peak"),
                                  "state_I8_sessions.charged_referenced_extents state_C7_sessions.granule_rounding",
                                  "m: admitted 1024 B, referenced extents give 1124 B (file 2000 B)"),
    "admitted_off_the_granule": ((LOAD,), dict(mutant="admission_ignores_granule"),
                                 "state_I8_sessions.charged_referenced_extents state_C7_sessions.granule_rounding",
                                 "m: admitted 1100 B, referenced extents give 1124 B (file 2000 B)"),
    "decline_not_reported": ((S.Decline(Role.KV),), dict(mutant="decline_not_reported"),
                             "state_I3_sessions.report_binds_no_declined_bytes",
                             "kv is declined but the report presents the limit as binding on it"),
    "compat_model_reported_as_weights": ((S.Decline(Role.KV), COMPAT), dict(mutant="compat_labelled_weights"),
                                         "state_I3_sessions.report_binds_no_uncharged_model",
                                         "c: 1000 B referenced, 0 B charged, but the report presents the limit as "
                                         "binding on it"),
    "declined_report_hidden": ((S.Decline(Role.WEIGHTS),), dict(guards=GuardSet.without("honest_decline")),
                               "state_I3_sessions.report_binds_no_declined_bytes", "weights is declined"),
    "residency_without_source": ((LOAD, S.ObserveResidency("m", 700, "smaps")), dict(mutant="residency_without_source"),
                                 "state_I8b_sessions.residency_has_source", "residency of m has no source"),
    "residency_moves_charge": ((LOAD, S.ObserveResidency("m", 700, "smaps")),
                               dict(guards=GuardSet.without("residency_not_charge")),
                               "step_I8b_sessions.residency_moves_no_charge "
                               "state_I8_sessions.charged_referenced_extents "
                               "state_I3_sessions.report_binds_no_uncharged_model state_C7_sessions.granule_rounding",
                               "observing residency of m changed charge 1124 -> 700"),
    "prefetch_into_headroom": ((LOAD, S.Prefetch()), dict(mutant="prefetch_into_headroom"),
                               "state_I8c_sessions.within_limit", "used 4096 + headroom 128 > limit 4096"),
    "decode_past_kv_capacity": ((*FULL_BUCKET, S.Decode(1)), dict(mutant="decode_past_capacity"),
                                "state_I8c_sessions.kv_covers_tokens", "request 1: KV capacity 4 outside [5, 8]"),
    "host_mapped_past_capacity": ((S.LoadModel("h", "toy", attrs.evolve(FACTS, referenced=1001), frozenset({"kv"}),
                                               True),),
                                  dict(guards=GuardSet.without("host_mapped_capacity")),
                                  "state_C7_sessions.host_mapped_within_reported",
                                  "h reads 1001 B host-mapped; 1000 B reported"),
    "available_counts_the_cache": ((LOAD, S.Prefetch()), dict(mutant="report_available_ignores_cache"),
                                   "state_C8_sessions.report_matches_records", "'available': "),
    "lowered_under_headroom": ((LOAD, S.LowerLimit(1200)), dict(mutant="lowering_ignores_headroom"),
                               "step_C8_sessions.lowering_exact state_I8c_sessions.within_limit",
                               "limit 4096 -> 1200 with used 1124 + headroom 128 above it"),
    "failed_growth_keeps_bucket": ((S.Prefetch(), *FULL_BUCKET, S.RunFails(1)), dict(mutant="failed_growth_keeps_bucket"),
                                   "step_C8_sessions.failed_run_keeps_no_charge",
                                   "request 1's Run failed, yet the ledger moved {'kv': 256, 'arena': 0, 'weights': "
                                   "-512} (cache yielded 512 B) and its request went Request(model='m', tokens=4, "
                                   "kv_tokens=4) -> Request(model='m', tokens=4, kv_tokens=8)"),
    "failed_lowering_commits": ((LOAD, S.LowerLimit(1200)), dict(guards=GuardSet.without("lower_limit_atomic")),
                                "step_C8_sessions.lowering_exact state_I8c_sessions.within_limit",
                                "limit 4096 -> 1200 with used 1124 + headroom 128 above it"),
    "undeclared_state_managed": ((S.LoadModel("m", "toy", FACTS, frozenset()),),
                                 dict(guards=GuardSet.without("declare_loop_carried")),
                                 "state_C9_sessions.managed_state_declared",
                                 "m runs managed with undeclared state ['kv']"),
    "compat_reuses_prefix": ((COMPAT,), dict(mutant="compat_reuses_prefix"), "state_C9_sessions.compat_unattributed",
                             "c: compatibility mode must be unattributed with no prefix reuse"),
}


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_each_scripted_harm_breaks_exactly_its_clauses(name: str) -> None:
    acts, how, keys, text = SCRIPTED[name]
    states, found = run(*acts, **how)
    assert found == keys.split()
    key = keys.split()[0]
    predicate = getattr(SP, key.split(".")[0])
    args = (states[-2], acts[-1], states[-1]) if key.startswith("step_") else (states[-1],)
    with applied(MUTANTS[how["mutant"]]) if "mutant" in how else nullcontext():
        e = violation(predicate, *args)
    assert e.clause == key and text in str(e)


def test_a_charge_off_the_granule_is_named_by_the_granule_clause_too() -> None:
    # (the exact-charge clause fails first on these states; the granule clause must still name the model)
    for mutant, charged in (("admission_ignores_granule", 1100), ("admission_drops_transient_peak", 1024)):
        states, _ = run(LOAD, mutant=mutant)
        e = violation(SP.state_C7_sessions, states[-1])
        assert e.clause == "state_C7_sessions.granule_rounding"
        assert str(e).endswith("m: weight charge not rounded to the 256 B granule")
        assert states[-1].models["m"].admitted == charged


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_the_same_script_intact_is_refused_or_breaks_nothing(name: str) -> None:
    acts, how, _, _ = SCRIPTED[name]
    try:
        _, found = run(*acts, topo=how.get("topo", TOPO))
    except GovernorError:  # the guard refuses the harmful step, typed
        assert "guards" in how
        return
    assert found == []


# --- harms no guard or mutant reaches: states and steps broken by hand ------------------------------------


def _ledger(s: S.SessionState, **roles: int | None) -> S.SessionState:
    """`s` with the ledger's charge per role changed (None: the role dropped from the ledger)."""
    ledger = s.ledger
    for role, n in roles.items():
        ledger = ledger.delete(role) if n is None else ledger.set(role, n)
    return attrs.evolve(s, ledger=ledger)


def _request(s: S.SessionState, rid: int, **changes: Any) -> S.SessionState:
    s = attrs.evolve(s, requests=s.requests.set(rid, attrs.evolve(s.requests[rid], **changes)))
    return attrs.evolve(s, ledger=S.ledger_of(s))


#: name -> (the broken state, the clauses it breaks, what the first clause's message names)
STATE_HARMS: dict[str, tuple[Callable[[], S.SessionState], str, str]] = {
    "second_host_ledger": (lambda: attrs.evolve(last(topo=ARENA), host_authorities=2),
                           "state_C1_sessions.one_authority_per_tier",
                           "the runtime's manager has 2 ledgers of the host tier, not one"),
    "no_host_ledger": (lambda: attrs.evolve(last(), host_authorities=0), "state_C1_sessions.one_authority_per_tier",
                       "has 0 ledgers"),
    "arena_charged_twice": (lambda: _ledger(last(LOAD, topo=ARENA), arena=300),
                            "state_I8_sessions.arena_charged_once state_C8_sessions.ledger_matches_records",
                            "the pool charges 300 B to the arena role for an env arena of 150 B, and lends 100 B"),
    "arena_not_charged": (lambda: _ledger(last(topo=ARENA), arena=0),
                          "state_I8_sessions.arena_charged_once state_C8_sessions.ledger_matches_records",
                          "the pool charges 0 B to the arena role for an env arena of 150 B"),
    "arena_dropped_from_the_ledger": (lambda: _ledger(last(topo=ARENA), arena=None),
                                      "state_I8_sessions.arena_charged_once state_C8_sessions.ledger_matches_records",
                                      "the pool charges 0 B to the arena role"),
    "closed_request_keeps_its_kv_lease": (lambda: _ledger(last(*OPEN, S.Close(1)), kv=256),
                                          "state_C8_sessions.ledger_matches_records",
                                          "the ledger charges {'arena': 100, 'kv': 256, 'weights': 1024} but the "
                                          "records account for {'arena': 100, 'kv': 0, 'weights': 1024}"),
    "weights_role_unbooked": (lambda: _ledger(last(LOAD), weights=None), "state_C8_sessions.ledger_matches_records",
                              "the ledger charges {'arena': 100, 'kv': 0, 'weights': 0}"),
    "lease_of_no_role": (lambda: _ledger(last(LOAD), staging=1), "state_C8_sessions.ledger_matches_records",
                         "'staging': 1"),
    "limit_past_capacity": (lambda: attrs.evolve(last(), limit=4097), "state_C7_sessions.limit_within_capacity",
                            "limit 4097 > pool capacity 4096"),
    "kv_past_max_context": (lambda: _request(last(*OPEN), 1, kv_tokens=12), "state_I8c_sessions.kv_covers_tokens",
                            "request 1: KV capacity 12 outside [0, 8]"),
    "kv_past_the_limit": (lambda: _request(last(*OPEN), 1, kv_tokens=48, tokens=8),
                          "state_I8c_sessions.within_limit", "used 4196 + headroom 128 > limit 4096"),
    "weights_charged_past_the_limit": (lambda: _model(last(LOAD, limit=2048), "m", admitted=2148,
                                                      facts=attrs.evolve(FACTS, referenced=2000)),
                                       "state_I8c_sessions.within_limit", "used 2148 + headroom 128 > limit 2048"),
    "declined_weights_model_unlabelled": (lambda: attrs.evolve(last(S.Decline(Role.WEIGHTS), LOAD),
                                                               not_enforced=frozenset({"model:m"})),
                                          "state_I3_sessions.report_binds_no_declined_bytes",
                                          "weights is declined but the report presents the limit as binding on it"),
    "compat_model_unlabelled": (lambda: attrs.evolve(last(COMPAT), not_enforced=frozenset({"weights"})),
                                "state_I3_sessions.report_binds_no_uncharged_model",
                                "c: 1000 B referenced, 0 B charged"),
    "compat_model_attributed": (lambda: _model(last(COMPAT), "c", unattributed=999),
                                "state_C9_sessions.compat_unattributed", "c: compatibility mode must be unattributed"),
    "undeclared_state_dropped": (lambda: _model(last(LOAD), "m", declared=None),
                                 "state_C9_sessions.managed_state_declared",
                                 "m runs managed with undeclared state ['kv']"),
}


@pytest.mark.parametrize("name", sorted(STATE_HARMS))
def test_each_state_harm_breaks_exactly_its_clauses(name: str) -> None:
    make, keys, text = STATE_HARMS[name]
    s = make()
    assert broken(SP.check_state, s) == keys.split()
    key = keys.split()[0]
    e = violation(getattr(SP, key.split(".")[0]), s)
    assert e.clause == key and text in str(e)


#: the largest change each state clause must still accept
STATE_NEAR_MISSES: dict[str, Callable[[], S.SessionState]] = {
    "limit_is_the_capacity": lambda: last(LOAD),
    "used_plus_headroom_is_the_limit": lambda: last(LOAD, limit=1252),
    "arena_full_of_peaks": lambda: last(LOAD, topo=attrs.evolve(ARENA, arena=100)),
    "host_mapped_exactly_the_capacity": lambda: last(S.LoadModel("h", "toy", FACTS, frozenset({"kv"}), True)),
    "kv_at_max_context": lambda: last(*FULL_BUCKET, *[S.Decode(1)] * 4),
    "kv_bucket_full": lambda: last(*FULL_BUCKET),
    "declined_weights_cover_their_model": lambda: last(S.Decline(Role.WEIGHTS), LOAD),
    "compat_and_managed_side_by_side": lambda: last(COMPAT, LOAD, S.Prefetch()),
    "declared_more_than_carried": lambda: last(S.LoadModel("m", "toy", FACTS, frozenset({"kv", "conv"}))),
    "grown_and_closed": lambda: last(*FULL_BUCKET, S.Decode(1), S.Close(1), S.Prefetch(), S.Pressure(100)),
    "a_role_booked_at_zero": lambda: _ledger(last(LOAD), staging=0),  # no byte of an unknown role is charged
    "two_models_in_the_arena": lambda: last(LOAD, LOAD_N, topo=attrs.evolve(ARENA, arena=200)),
    # a compatibility-mode model's peak (30 B) is not lent within the arena: only the managed one's (100 B) is
    "compat_model_beside_the_arena": lambda: last(S.LoadModel("c", "toy", attrs.evolve(FACTS, transient_peak=30), None),
                                                  LOAD, topo=ARENA),
    "managed_charged_exactly_its_extents": lambda: last(S.LoadModel("x", "toy", attrs.evolve(
        FACTS, referenced=1024, transient_peak=0), frozenset({"kv"}))),
    "compat_unattributed_exactly_its_extents": lambda: last(S.LoadModel("c", "toy", attrs.evolve(
        FACTS, transient_peak=0), None)),
}


@pytest.mark.parametrize("name", sorted(STATE_NEAR_MISSES))
def test_each_state_near_miss_breaks_nothing(name: str) -> None:
    assert broken(SP.check_state, STATE_NEAR_MISSES[name]()) == []


def _after(acts: tuple[Any, ...], change: Callable[[S.SessionState], S.SessionState],
           **kw: Any) -> tuple[S.SessionState, Any, S.SessionState]:
    """The last step of `acts` (every guard on), its next state then changed by `change`."""
    states, _ = run(*acts, **kw)
    return states[-2], acts[-1], change(states[-1])


GROWTH_FAILS = (S.Prefetch(), *FULL_BUCKET, S.RunFails(1))  # the growth's Run fails; the cache it yielded stays

#: name -> ((prev, action, next), the clause it breaks, what its message names)
STEP_HARMS: dict[str, tuple[Callable[[], tuple[S.SessionState, Any, S.SessionState]], str, str]] = {
    "failed_run_keeps_its_token": (lambda: _after(GROWTH_FAILS, lambda n: _request(n, 1, tokens=5, kv_tokens=8)),
                                   "step_C8_sessions.failed_run_keeps_no_charge",
                                   "request 1's Run failed, yet the ledger moved {'kv': 256, 'arena': 0, 'weights': "
                                   "-512} (cache yielded 512 B) and its request went Request(model='m', tokens=4, "
                                   "kv_tokens=4) -> Request(model='m', tokens=5, kv_tokens=8)"),
    "failed_run_keeps_the_grown_lease": (lambda: _after(GROWTH_FAILS, lambda n: _ledger(n, kv=n.ledger["kv"] + 256)),
                                         "step_C8_sessions.failed_run_keeps_no_charge", "{'kv': 256, 'arena': 0"),
    "failed_run_charges_the_arena": (lambda: _after(GROWTH_FAILS, lambda n: _ledger(n, arena=n.ledger["arena"] + 1)),
                                     "step_C8_sessions.failed_run_keeps_no_charge", "'arena': 1"),
    "failed_run_keeps_the_yielded_cache_charged": (
        lambda: _after(GROWTH_FAILS, lambda n: _ledger(n, weights=n.ledger["weights"] + 512)),
        "step_C8_sessions.failed_run_keeps_no_charge", "'weights': 0} (cache yielded 512 B)"),
    "failed_run_drops_the_arena_lease": (lambda: _after(GROWTH_FAILS, lambda n: _ledger(n, arena=None)),
                                         "step_C8_sessions.failed_run_keeps_no_charge", "'arena': -100"),
    "failed_run_grows_the_cache": (lambda: _after((LOAD, *OPEN[1:], S.RunFails(1)),
                                                  lambda n: attrs.evolve(n, cache=10, ledger=S.ledger_of(
                                                      attrs.evolve(n, cache=10)))),
                                   "step_C8_sessions.failed_run_keeps_no_charge", "(cache yielded -10 B)"),
    "lowering_lands_elsewhere": (lambda: _after((LOAD, S.LowerLimit(2000)), lambda n: attrs.evolve(n, limit=2500)),
                                 "step_C8_sessions.lowering_exact",
                                 "limit 4096 -> 2500 with used 1124 + headroom 128 above it"),
    "residency_moves_the_ledger_only": (lambda: _after((LOAD, S.ObserveResidency("m", 700, "smaps")),
                                                       lambda n: attrs.evolve(n, cache=5)),
                                        "step_I8b_sessions.residency_moves_no_charge",
                                        "observing residency of m changed charge 1124 -> 1129"),
}


@pytest.mark.parametrize("name", sorted(STEP_HARMS))
def test_each_step_harm_breaks_its_clause(name: str) -> None:
    make, key, text = STEP_HARMS[name]
    p, act, n = make()
    assert broken(SP.check_transition, p, act, n) == [key]
    e = violation(getattr(SP, key.split(".")[0]), p, act, n)
    assert e.clause == key and text in str(e)


STEP_NEAR_MISSES: dict[str, tuple[Any, ...]] = {
    "growth_fails_after_yielding_the_cache": GROWTH_FAILS,
    "run_fails_inside_its_bucket": (*OPEN, S.Decode(1), S.RunFails(1)),
    "lowered_to_exactly_used_plus_headroom": (LOAD, S.LowerLimit(1252)),
    "failed_lowering_keeps_the_old_limit": (LOAD, S.LowerLimit(1200)),
    "lowering_reclaims_the_cache": (LOAD, S.Prefetch(), S.LowerLimit(2000)),
    "residency_observed_again": (LOAD, S.ObserveResidency("m", 700, "smaps"), S.ObserveResidency("m", 900, "smaps")),
}


@pytest.mark.parametrize("name", sorted(STEP_NEAR_MISSES))
def test_each_step_near_miss_breaks_nothing(name: str) -> None:
    _, found = run(*STEP_NEAR_MISSES[name])
    assert found == []


def test_a_role_absent_from_both_ledgers_moved_nothing() -> None:
    # a ledger that books no KV at all, before and after a failed growth: the failure charged no KV
    states, _ = run(*GROWTH_FAILS)
    p, n = (_ledger(x, kv=None) for x in states[-2:])
    assert broken(SP.check_transition, p, GROWTH_FAILS[-1], n) == []


# --- observations: what the ORT checker saw inside a step ------------------------------------------------


def test_kv_in_use_uncharged_at_any_transition_fails() -> None:
    ok = [SP.KvCover("Reserve 1", 256, 256), SP.KvCover("Commit 1", 512, 256)]
    SP.observed_I8c_kv_leased(ok)
    e = violation(SP.observed_I8c_kv_leased, [*ok, SP.KvCover("Release 1", 255, 256), SP.KvCover("Commit 2", 512, 256)])
    assert e.clause == "observed_I8c_kv_leased.kv_in_use_leased"
    assert str(e).endswith("after Release 1: requests hold 256 B of KV but KV leases charge only 255 B")
    # other observations in the same list are not KV covers
    SP.observed_I8c_kv_leased([SP.PaddedTwin("m", 1, 2, 1, 3), *ok])


def test_a_padded_twin_charged_otherwise_fails() -> None:
    same = SP.PaddedTwin("m.onnx", 1024, 2000, 1024, 4000)
    SP.observed_I8_padding([same])
    e = violation(SP.observed_I8_padding, [same, SP.PaddedTwin("n.onnx", 1024, 2000, 2048, 4000)])
    assert e.clause == "observed_I8_padding.dead_space_not_charged"
    assert str(e).endswith("n.onnx: charged 1024 B for a 2000 B file but 2048 B for the same graph in a 4000 B file")
    SP.observed_I8_padding([SP.KvCover("x", 0, 1)])  # a KV cover is no twin
    assert broken(SP.check_observations, [SP.KvCover("x", 0, 1), SP.PaddedTwin("n", 1, 2, 3, 4)]) == [
        "observed_I8_padding.dead_space_not_charged", "observed_I8c_kv_leased.kv_in_use_leased"]


# --- case accounting --------------------------------------------------------------------------------------


def test_nothing_to_harm_counts_only_the_capacity_case() -> None:
    assert cases(SP.check_state, last()) == {"state_C7_sessions.limit_within_capacity"}


NO_CARRY = S.LoadModel("s", "toy", attrs.evolve(FACTS, loop_carried=frozenset()), frozenset())

#: clause -> ((script, topology) with one subject of the clause, the same without)
STATE_WITNESS: dict[str, tuple[tuple[tuple[Any, ...], S.Topology], tuple[tuple[Any, ...], S.Topology]]] = {
    "state_I8_sessions.charged_referenced_extents": (((LOAD,), TOPO), ((COMPAT,), TOPO)),
    "state_I8_sessions.arena_charged_once": (((), ARENA), ((LOAD,), TOPO)),
    "state_C1_sessions.one_authority_per_tier": (((), ARENA), ((LOAD,), TOPO)),
    "state_I3_sessions.report_binds_no_declined_bytes": (((S.Decline(Role.KV),), TOPO), ((LOAD,), TOPO)),
    "state_I3_sessions.report_binds_no_uncharged_model": (((COMPAT,), TOPO), ((LOAD,), TOPO)),
    "state_I8b_sessions.residency_has_source": (((LOAD, S.ObserveResidency("m", 1, "smaps")), TOPO), ((LOAD,), TOPO)),
    "state_I8c_sessions.within_limit": (((LOAD,), TOPO), ((COMPAT,), TOPO)),
    "state_I8c_sessions.kv_covers_tokens": (((*OPEN, S.Decode(1)), TOPO), (OPEN, TOPO)),
    "state_C7_sessions.host_mapped_within_reported": (((S.LoadModel("h", "toy", FACTS, frozenset({"kv"}), True),),
                                                       TOPO), ((LOAD,), TOPO)),
    "state_C7_sessions.granule_rounding": (((LOAD,), TOPO), ((COMPAT,), TOPO)),
    "state_C8_sessions.ledger_matches_records": (((LOAD,), TOPO), ((COMPAT,), TOPO)),
    "state_C8_sessions.report_matches_records": (((LOAD,), TOPO), ((COMPAT,), TOPO)),
    "state_C9_sessions.managed_state_declared": (((LOAD,), TOPO), ((NO_CARRY,), TOPO)),
    "state_C9_sessions.compat_unattributed": (((COMPAT,), TOPO), ((LOAD,), TOPO)),
}


@pytest.mark.parametrize("key", sorted(STATE_WITNESS))
def test_one_subject_makes_the_state_case_occur(key: str) -> None:
    (with_, t1), (without, t2) = STATE_WITNESS[key]
    assert key in cases(SP.check_state, last(*with_, topo=t1))
    assert key not in cases(SP.check_state, last(*without, topo=t2))


def test_one_byte_used_is_a_case() -> None:
    # the smallest charge: 1 B referenced on a 1 B granule, no peak
    one = S.LoadModel("b", "toy", S.ModelFacts(1, 1, 0, frozenset(), 0, 0, 0), frozenset())
    got = cases(SP.check_state, last(one, topo=attrs.evolve(TOPO, granule=1)))
    assert {"state_I8c_sessions.within_limit", "state_C8_sessions.report_matches_records"} <= got


def test_a_later_subject_does_not_hide_an_earlier_one() -> None:
    s = last(S.LoadModel("h", "toy", FACTS, frozenset({"kv"}), True), LOAD, COMPAT, NO_CARRY)
    assert {"state_C7_sessions.host_mapped_within_reported", "state_C7_sessions.granule_rounding",
            "state_C9_sessions.managed_state_declared", "state_C9_sessions.compat_unattributed",
            "state_I3_sessions.report_binds_no_uncharged_model"} <= cases(SP.check_state, s)
    s = last(*OPEN, S.Decode(1), S.Open("m"))  # a request with tokens, then one without
    assert "state_I8c_sessions.kv_covers_tokens" in cases(SP.check_state, s)


#: clause -> (a script whose last step is a case of the clause, one whose last step is not)
STEP_WITNESS: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
    "step_I8b_sessions.residency_moves_no_charge": ((LOAD, S.ObserveResidency("m", 1, "smaps")), (LOAD, S.Prefetch())),
    "step_C8_sessions.failed_run_keeps_no_charge": ((*OPEN, S.RunFails(1)), (*OPEN, S.Decode(1))),
    "step_C8_sessions.lowering_exact": ((LOAD, S.LowerLimit(2000)), (LOAD, S.Prefetch())),
}


@pytest.mark.parametrize("key", sorted(STEP_WITNESS))
def test_one_subject_makes_the_step_case_occur(key: str) -> None:
    def seen(acts: tuple[Any, ...]) -> set[str]:
        states, _ = run(*acts)
        return cases(SP.check_transition, states[-2], acts[-1], states[-1])

    with_, without = STEP_WITNESS[key]
    assert key in seen(with_) and key not in seen(without)


def test_observation_cases_occur_only_with_a_subject() -> None:
    assert cases(SP.check_observations, [SP.KvCover("a", 0, 0)]) == set()
    assert cases(SP.check_observations, [SP.KvCover("a", 0, 0), SP.KvCover("b", 64, 64)]) == {
        "observed_I8c_kv_leased.kv_in_use_leased"}
    assert cases(SP.check_observations, [SP.PaddedTwin("m", 1, 10, 1, 10)]) == set()
    assert cases(SP.check_observations, [SP.PaddedTwin("m", 1, 10, 1, 10), SP.PaddedTwin("n", 1, 10, 1, 11)]) == {
        "observed_I8_padding.dead_space_not_charged"}


def test_a_counterexample_prints_the_same_in_every_process() -> None:
    """Sets of state names print sorted: a control's counterexample must not depend on the process's str hashes."""
    code = ("from spec import sessions as S; f = S.ModelFacts(1, 2, 3, frozenset('abcdefgh'), 0, 0, 0); "
            "print(S.LoadModel('m', 'toy', f, frozenset('zyxwvuts')), S.LoadModel('m', 'toy', f, None))")
    printed = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": str(seed), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}).stdout for seed in range(4)}
    assert len(printed) == 1, printed
    assert "loop_carried=frozenset({'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'})" in printed.pop()
