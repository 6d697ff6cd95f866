"""The replay checker checked like the governor (issue #21 item 8).

The corpus of `refimpl.verify.replay_control` (short traces recorded from
refimpl, and bad variants of them) is judged correctly by the intact replay;
each mutant of `refimpl.verify.mutants_replay` makes a named trace's verdict
flip (a bad trace accepted, rejected for another reason, or a good one
rejected), which is how `ortmem verify` finds it.
"""

from __future__ import annotations

import pytest

from invariants.mutation import applied
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.mutants_replay import REPLAY_MUTANTS
from refimpl.verify.replay_control import corpus_of, verdict
from spec.guards import Layer

_CLEAN = (True, None, None)

#: mutant -> (the corpus trace whose verdict it flips, the mutated replay's verdict on it).
FLIPS = {
    "replay_excuses_any_refusal": ("misreported-refusal", _CLEAN),
    "replay_duplicate_as_retransmission": ("duplicated-release", (False, "violation", "I4a")),
    "replay_forgives_one_lost_event": ("lost-cancel", (False, "leftover", None)),
    "replay_boundary_forgives_later_leftovers": ("left-open-after-boundary", _CLEAN),
    "replay_leftover_forgets_growth": ("growth-left-open", _CLEAN),
    "replay_g4_compares_leases_only": ("refusal-that-moved-used", (False, "violation", "I1")),
    "replay_view_drops_untouched_ledgers": ("moved-untouched-ledger", (False, "refinement", None)),
    "replay_allows_retired_allocation_id": ("reused-allocation-id", _CLEAN),
    "trace_omits_recorded_charge": ("ledger-good", (False, "refinement", None)),
    "trace_reads_touched_after_operation": ("ledger-good", (False, "refinement", None)),
    "manager_replay_forgets_open_work": ("tx-left-open", _CLEAN),
    "grant_replay_lets_newcomer_overtake": ("newcomer-served-first", _CLEAN),
    "replay_charges_of_named_allocations_only": ("grant-charge-left-out", _CLEAN),
    "trace_omits_grant_charge": ("manager-good", (False, "refinement", None)),
    "trace_omits_created_charges": ("manager-good", (False, "refinement", None)),
    "replay_ignores_topology_epoch": ("stale-topology-epoch", _CLEAN),
    "trace_stamps_epoch_after_operation": ("manager-good", (False, "refinement", None)),
}


def test_intact_replay_judges_the_corpus() -> None:
    seen = {}
    for model in ("ledger", "manager"):
        corpus, replay = corpus_of(model)
        for name, lines, want in corpus:
            seen[name] = verdict(replay(lines))
            assert seen[name] == want, (name, replay(lines).describe())
    # The bad traces name what is wrong with them.
    assert seen["duplicated-release"] == (False, "duplicate-sequence", None)
    assert seen["lost-cancel"] == (False, "sequence-gap", None)
    assert seen["reused-allocation-id"] == (False, "violation", "I4a")
    assert seen["refusal-that-moved-used"] == (False, "violation", "G4")
    assert seen["moved-untouched-ledger"] == (False, "violation", "I1")
    assert seen["tx-left-open"] == (False, "leftover", None)
    assert seen["grant-charge-left-out"] == (False, "refinement", None)
    assert seen["stale-topology-epoch"] == (False, "refinement", None)
    assert seen["ledger-good"] == seen["manager-good"] == _CLEAN


def test_every_replay_mutant_is_registered_and_tested() -> None:
    assert sorted(FLIPS) == sorted(m.name for m in REPLAY_MUTANTS)
    for m in REPLAY_MUTANTS:
        assert MUTANTS[m.name] is m and m.submodel == "replay" and m.model in ("ledger", "manager")
        m.patched_source()  # not stale: the snippet occurs exactly once


@pytest.mark.parametrize("name", sorted(FLIPS))
def test_mutant_flips_its_trace(name: str) -> None:
    m = MUTANTS[name]
    trace, mutated = FLIPS[name]
    with applied(m):
        corpus, replay = corpus_of(m.model)
        got = {n: verdict(replay(lines)) for n, lines, _ in corpus}
        result = CHECKERS[m.model].control(m, Layer.REFIMPL, None)
    assert got[trace] == mutated
    assert result.found and result.ids == m.ids and any(c.startswith(trace + ":") for c in result.counterexample)


@pytest.mark.parametrize("model", ["ledger", "manager"])
def test_replay_control_finds_nothing_without_a_mutant(model: str) -> None:
    m = next(m for m in REPLAY_MUTANTS if m.model == model)
    r = CHECKERS[model].control(m, Layer.REFIMPL, None)
    assert not r.found and r.counterexample == () and "verdicts of the replay corpus held" in r.message
