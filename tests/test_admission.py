"""The pure admission models (I12, I8c): refimpl refines spec, negative controls, bad input."""

from __future__ import annotations

import itertools

import pytest

from invariants.admission import check_state
from invariants.campaign import campaign_settings
from invariants.model_machine import find_model_counterexample, run_model_campaign
from invariants import contracts
from refimpl.admission import CoResidencyScheduler, ElasticSplit, KvBatcher
from refimpl.verify.admission_checker import BATCH, CORESIDENCY, ELASTIC, MODELS
from spec import admission as S
from spec.errors import BudgetBelowFloor, CapacityDenied, InfeasibleRequest, InvalidBytes, InvalidTransition
from spec.guards import GUARDS, Layer


@pytest.mark.parametrize("model", [BATCH, CORESIDENCY, ELASTIC], ids=lambda m: m.name)
def test_admission_models_refine_spec(model) -> None:
    with contracts.contracts(True):
        stats = run_model_campaign(model, campaign_settings(40, 30))
    assert stats.examples >= 40 and stats.accepted > 0


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", [g for g in GUARDS if g.model == "admission"], ids=lambda g: g.name)
def test_admission_negative_controls(guard, layer) -> None:
    r = find_model_counterexample(MODELS[guard.name], guard, layer, campaign_settings(100, 30, shrink=False))
    assert r.found, r.message
    if layer is Layer.SPEC:
        assert r.violated in guard.ids


def test_kv_batcher_rejects_infeasible_advance() -> None:
    b = KvBatcher(10)
    r1, r2 = b.submit(8), b.submit(8)
    b.advance(r1, 5)
    before = b.abstract()
    with pytest.raises(InfeasibleRequest, match="needs 8 more, only 5 free"):
        b.advance(r2, 1)
    assert b.abstract() == before
    check_state(before)


def test_kv_batcher_lets_the_resident_finish() -> None:
    b = KvBatcher(10)
    r1, r2 = b.submit(8), b.submit(8)
    b.advance(r1, 5)
    b.advance(r1, 3)
    b.finish(r1)
    b.advance(r2, 8)
    assert b.abstract().requests[r1] == S.BatchRequest(8, 0, S.ReqState.FINISHED)


@pytest.mark.parametrize("peak", [0, -1, True, 11])
def test_kv_batcher_rejects_bad_peak(peak) -> None:
    b = KvBatcher(10)
    with pytest.raises((InvalidBytes, CapacityDenied), match="peak"):
        b.submit(peak)
    assert b.abstract() == S.new_batch(10)


def test_coresidency_rejects_evict_before_service() -> None:
    c = CoResidencyScheduler(10, {"a": (4, True), "b": (5, False), "c": (6, False)})
    c.execute(S.Want("b"))
    c.execute(S.Load("b"))
    c.execute(S.Want("c"))
    before = c.abstract()
    with pytest.raises(InvalidTransition, match="has not served"):
        c.execute(S.Evict("b"))
    assert c.abstract() == before


def test_invalid_coresidency_config_below_floor() -> None:
    with pytest.raises(BudgetBelowFloor, match="pinned 6 \\+ largest unpinned 5"):
        CoResidencyScheduler(10, {"a": (6, True), "b": (5, False)})


def test_elastic_split_grows_to_max_context_by_reclaim() -> None:
    e = ElasticSplit(budget=40, headroom=2, bytes_per_token=1, max_context=10, bucket=4, pinned=10)
    assert e.execute(S.Prefetch()) == 40 - 10 - 4 - 2
    released = sum(e.decode() for _ in range(10))
    s = e.abstract()
    assert s.tokens == s.kv_tokens == 10 and released > 0
    assert s.used + s.headroom <= s.budget
    check_state(s)


def test_invalid_elastic_budget_below_floor() -> None:
    with pytest.raises(BudgetBelowFloor, match="below the floor"):
        ElasticSplit(budget=20, headroom=2, bytes_per_token=1, max_context=10, bucket=4, pinned=10)


@pytest.mark.parametrize("answer, deferred", [(0, None), (1, 1), (None, None)])
def test_elastic_short_answer_defers_in_both_layers(answer, deferred) -> None:
    """C5 / I8c: the weight holder may answer short; KV then does not grow (issue #9: ElasticSplit grew anyway)."""
    from refimpl.admission import ElasticSplit
    from spec.errors import CapacityDenied
    from invariants.admission import check_state, check_transition

    args = (13, 2, 1, 6, 2, 1)  # budget 13: pinned 1, headroom 2, bucket 2, max context 6
    spec, impl = S.new_elastic(*args), ElasticSplit(*args)
    for a in (S.Prefetch(), S.Decode(), S.Decode()):  # fill the cache, fill the first bucket
        spec, _ = S.step_elastic(spec, a)
        impl.execute(a)
    assert impl.abstract() == spec and spec.cache == 8
    grow = S.Decode(answer)
    if answer == 0:
        for run in (lambda: S.step_elastic(spec, grow), lambda: impl.execute(grow)):
            with pytest.raises(CapacityDenied, match="gave back nothing"):
                run()
        assert impl.abstract() == spec  # a rejection changed nothing
        return
    nxt, result = S.step_elastic(spec, grow)
    assert impl.execute(grow) == result and impl.abstract() == nxt
    check_transition(spec, grow, nxt)
    check_state(nxt)
    if deferred is None:
        assert nxt.kv_tokens == 4 and nxt.cache == 8 - 4  # over = 1 + 8 + (2 + 4) + 2 - 13
    else:
        assert result == S.Deferred(deferred) and nxt.kv_tokens == 2 and nxt.cache == 7


def test_elastic_floor_checks_agree_between_layers() -> None:
    """Refimpl carries its own configuration check (issue #9, item 7); both layers accept the same configurations."""
    from refimpl.admission import ElasticSplit
    from spec.errors import GovernorError

    def outcome(make, *args):
        try:
            make(*args)
        except GovernorError as e:
            return type(e)
        return None

    seen = set()
    for args in itertools.product(range(1, 30), (0, 2), (1, 3), range(1, 9), (1, 2, 3), (0, 5)):
        spec, impl = outcome(S.new_elastic, *args), outcome(ElasticSplit, *args)
        assert spec is impl, args
        seen.add(spec)
    assert len(seen) == 2  # both accepted and refused configurations were compared
