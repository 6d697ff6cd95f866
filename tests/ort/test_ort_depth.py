"""Depth of the real-ORT campaign (issue #11 item 4): scripted generations to max context.

The quick campaign must accept >= 200 decodes and >= 20 KV growths, each
decode checked bit for bit against an ungoverned session; every scripted
request grows through all of its buckets; and a KV growth that forgets to
copy the old K/V is found (by the campaign's control, deterministically).
IDs: C9 (the KV bundle), I8c (growth bucket by bucket), C8 (figures).
"""

from __future__ import annotations

import pytest

from invariants import contracts
from invariants.mutation import applied
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.sessions_checker import BUCKET, HEADROOM, MAX_CONTEXT, OrtChecker, ort_model
from refimpl.ort.generations import run_scripts, script
from refimpl.verify import PROFILES
from spec import sessions as S


@pytest.fixture(scope="module")
def checker():
    return OrtChecker()


def test_quick_campaign_reaches_depth(checker) -> None:
    s = checker.campaign(PROFILES["quick"]).stats
    assert s.accepted_by_action["Decode"] >= 200
    assert s.events["kv_growths"] >= 20
    assert s.events["identical_decodes"] == s.accepted_by_action["Decode"]  # every decode compared
    assert s.events["reclaims:Decode"] > 0  # growth took bytes back from the weight cache
    assert s.events["arena_shrinks"] > 0  # arena pressure answered at Run boundaries
    assert sum(s.accepted_by_action.values()) == s.accepted


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scripted_requests_grow_through_every_bucket_on_two_models(checker, seed) -> None:
    world = checker.world
    config, acts = script(seed, world.facts, HEADROOM)
    assert {a.model for a in acts if isinstance(a, S.Open)} == {"a", "b"}
    assert sum(isinstance(a, S.Open) for a in acts) >= 3  # several concurrent requests
    world.take_events()
    with contracts.contracts(True):
        stats = run_scripts(ort_model(world), world.facts, HEADROOM, 1, seed=seed)
    ev = world.take_events()
    opened = stats.accepted_by_action["Open"]
    assert stats.accepted_by_action["Decode"] == opened * MAX_CONTEXT  # every request to max context
    assert ev["kv_growths"] == opened * (MAX_CONTEXT // BUCKET - 1) >= 3 * 3  # >= 3 growths per request
    assert stats.rejected.get("ContextExhausted") == opened  # one past max context is refused


@pytest.mark.parametrize("mutant, violated, clause", [
    ("kv_growth_forgets_copy", "C9", "ort.identical_to_ungoverned"),
    ("kv_growth_leaks_old_lease", "C8", "state_C8_sessions.ledger_matches_records"),  # (test_ort_ledger)
    ("failed_run_keeps_grown_lease", "C8", "step_C8_sessions.failed_run_keeps_no_charge"),  # (run_failures)
])
def test_campaign_control_finds_each_ort_mutant(checker, mutant: str, violated: str, clause: str) -> None:
    m = MUTANTS[mutant]
    with applied(m):
        r = checker.control(m, m.layer, PROFILES["quick"])
    assert r.found and r.violated == violated and r.clause == clause, r.message

