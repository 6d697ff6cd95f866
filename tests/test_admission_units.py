"""spec/admission.py scripted: the three I12 / I8c models step by step, whole state after each step.

tests/test_admission.py runs the refimpl models against these in campaigns
(fixed sizes, 10-20 s each); these scripts pin the spec's own figures and
refusals with hand-computed numbers, each boundary (== vs >) on both sides,
and each guard switched off showing its harm.
"""

from __future__ import annotations

import re

import attrs
import pytest

from spec import admission as M
from spec.admission import BatchRequest, ElasticState, ReqState, ResidentModel
from spec.errors import (
    BudgetBelowFloor,
    CapacityDenied,
    ContextExhausted,
    InfeasibleRequest,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UnknownAllocation,
)
from spec.guards import ALL_ON, GuardSet

W, R, F = ReqState.WAITING, ReqState.RESIDENT, ReqState.FINISHED


def run(step, s, *actions, guards=ALL_ON):
    results = []
    for a in actions:
        s, r = step(s, a, guards)
        results.append(r)
    return s, results


# === continuous batching ============================================================


def test_new_batch_is_empty() -> None:
    s = M.new_batch(10)
    assert (s.capacity, dict(s.requests), s.next_id, s.held, s.free) == (10, {}, 1, 0, 10)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "3"], ids=repr)
def test_invalid_batch_capacity(bad) -> None:
    with pytest.raises(InvalidBytes, match=r"^capacity must be a positive int, got "):
        M.new_batch(bad)


def test_submit_waits_holding_nothing() -> None:
    s, (a, b) = run(M.step_batch, M.new_batch(10), M.Submit(4), M.Submit(10))
    assert (a, b, s.next_id) == (1, 2, 3)
    assert dict(s.requests) == {1: BatchRequest(4, 0, W), 2: BatchRequest(10, 0, W)}
    assert s.free == 10


def test_invalid_submit_that_could_never_finish() -> None:
    with pytest.raises(CapacityDenied, match=r"^peak 11 exceeds the pool \(10\); it could never finish$"):
        M.step_batch(M.new_batch(10), M.Submit(11))


def test_advance_up_to_the_peak_and_finish() -> None:
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(4), M.Advance(1, 1), M.Advance(1, 3))
    assert s.requests[1] == BatchRequest(4, 4, R)
    assert (s.held, s.free) == (4, 6)
    s, (r,) = run(M.step_batch, s, M.Finish(1))
    assert (r, s.requests[1], s.free) == (None, BatchRequest(4, 0, F), 10)


def test_invalid_advance_past_the_peak() -> None:
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(4), M.Advance(1, 2))
    with pytest.raises(InvalidBytes, match=r"^request 1: 2 \+ 3 entries exceeds its peak 4$"):
        M.step_batch(s, M.Advance(1, 3))


def _crowded():
    """capacity 10: request 1 holds 8 of its 8; 2 B free."""
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(8), M.Advance(1, 8))
    return s


def test_invalid_advance_beyond_free() -> None:
    s, _ = run(M.step_batch, _crowded(), M.Submit(5))
    with pytest.raises(CapacityDenied, match=r"^3 entries asked, 2 free$"):
        M.step_batch(s, M.Advance(2, 3))


def test_invalid_advance_that_could_not_finish() -> None:
    s, _ = run(M.step_batch, _crowded(), M.Submit(5))
    with pytest.raises(InfeasibleRequest, match=r"^request 2 needs 5 more, only 2 free$"):
        M.step_batch(s, M.Advance(2, 1))


def test_advance_whose_whole_need_is_exactly_free() -> None:
    s, _ = run(M.step_batch, _crowded(), M.Submit(2), M.Advance(2, 1))
    assert s.requests[2] == BatchRequest(2, 1, R)


def test_kv_admission_fits_off_admits_a_request_that_can_never_finish() -> None:
    s, _ = run(M.step_batch, _crowded(), M.Submit(5), M.Advance(2, 2), guards=GuardSet.without("kv_admission_fits"))
    # The harm: 2 of 5 held, 0 free; it can finish only if request 1 does first (a deadlock if it waits on 2).
    assert (s.requests[2], s.free) == (BatchRequest(5, 2, R), 0)


@pytest.mark.parametrize(("setup", "msg"), [
    ((M.Submit(4),), r"^request 1 is waiting with 0/4; cannot finish$"),
    ((M.Submit(4), M.Advance(1, 2)), r"^request 1 is resident with 2/4; cannot finish$"),
])
def test_invalid_finish(setup, msg) -> None:
    s, _ = run(M.step_batch, M.new_batch(10), *setup)
    with pytest.raises(InvalidTransition, match=msg):
        M.step_batch(s, M.Finish(1))


def test_invalid_advance_of_a_finished_request() -> None:
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(1), M.Advance(1, 1), M.Finish(1))
    with pytest.raises(InvalidTransition, match=r"^request 1 is finished$"):
        M.step_batch(s, M.Advance(1, 1))


@pytest.mark.parametrize("rid", [2, 1.0, "1"], ids=repr)
def test_invalid_unknown_request(rid) -> None:
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(1))
    with pytest.raises(UnknownAllocation, match=r"^request .* was never submitted$"):
        M.step_batch(s, M.Advance(rid, 1))


@pytest.mark.parametrize("step", [M.step_batch, M.step_coresidency, M.step_elastic])
def test_invalid_action_for_the_model(step) -> None:
    s = {M.step_batch: M.new_batch(4), M.step_coresidency: M.new_coresidency(4, {}),
         M.step_elastic: M.new_elastic(100, 0, 1, 4, 2, 0)}[step]
    with pytest.raises(InvalidArgument, match=r"^not an? .* action: "):
        step(s, object())


def test_req_state_repr() -> None:
    assert [repr(x) for x in ReqState] == ["ReqState.WAITING", "ReqState.RESIDENT", "ReqState.FINISHED"]


# === co-residency ====================================================================


def _co():
    """capacity 10: a (4, pinned, resident), b (6), c (5)."""
    return M.new_coresidency(10, {"a": (4, True), "b": (6, False), "c": (5, False)})


def test_new_coresidency_starts_the_pinned_models() -> None:
    s = _co()
    assert dict(s.models) == {"a": ResidentModel(4, True, True, False, 0), "b": ResidentModel(6, False, False, False, 0),
                              "c": ResidentModel(5, False, False, False, 0)}
    assert (s.used, s.free) == (4, 6)


def test_invalid_coresidency_floor_names_the_figures() -> None:
    with pytest.raises(BudgetBelowFloor, match=r"^pinned 4 \+ largest unpinned 6 > capacity 9$"):
        M.new_coresidency(9, {"a": (4, True), "b": (6, False), "c": (5, False)})


def test_coresidency_with_no_unpinned_model() -> None:
    assert M.new_coresidency(4, {"a": (4, True)}).free == 0


def test_want_load_serve_evict() -> None:
    s, rs = run(M.step_coresidency, _co(), M.Want("b"), M.Load("b"))
    assert rs == [None, None]
    assert s.models["b"] == ResidentModel(6, False, True, False, 1)
    assert s.free == 0
    s, _ = run(M.step_coresidency, s, M.Serve("b"), M.Want("c"))
    assert s.models["b"] == ResidentModel(6, False, True, True, 0)
    s, _ = run(M.step_coresidency, s, M.Evict("b"))
    assert s.models["b"] == ResidentModel(6, False, False, False, 0)
    assert s.free == 6
    s, _ = run(M.step_coresidency, s, M.Load("c"))
    assert s.models["c"] == ResidentModel(5, False, True, False, 1)


@pytest.mark.parametrize(("setup", "action", "msg"), [
    ((M.Want("b"), M.Load("b")), M.Load("b"), r"^b: load needs a non-resident model with work$"),
    ((), M.Load("c"), r"^c: load needs a non-resident model with work$"),
    ((M.Want("b"), M.Load("b"), M.Want("c")), M.Load("c"), r"^c: 5 B asked, 0 B free$"),
    ((M.Want("b"), M.Load("b"), M.Serve("b")), M.Serve("b"), r"^b: serve needs a resident model with work$"),
    ((), M.Serve("a"), r"^a: serve needs a resident model with work$"),
    ((), M.Evict("a"), r"^a: only a resident, unpinned model can be evicted$"),
    ((), M.Evict("b"), r"^b: only a resident, unpinned model can be evicted$"),
    ((M.Want("b"), M.Load("b"), M.Want("c")), M.Evict("b"),
     r"^b has not served since it was loaded \(retire before evict\)$"),
    ((M.Want("b"), M.Load("b"), M.Serve("b")), M.Evict("b"), r"^no pending model needs b's room$"),
])
def test_invalid_coresidency_action(setup, action, msg) -> None:
    s, _ = run(M.step_coresidency, _co(), *setup)
    with pytest.raises((InvalidTransition, CapacityDenied), match=msg):
        M.step_coresidency(s, action)


def test_invalid_evict_when_the_pending_model_fits_already() -> None:
    # capacity 12: b (6) resident and served, c (2) pending fits in the 2 B free: no eviction needed.
    s = M.new_coresidency(12, {"a": (4, True), "b": (6, False), "c": (2, False)})
    s, _ = run(M.step_coresidency, s, M.Want("b"), M.Load("b"), M.Serve("b"), M.Want("c"))
    assert s.free == 2
    with pytest.raises(InvalidTransition, match=r"^no pending model needs b's room$"):
        M.step_coresidency(s, M.Evict("b"))


def test_retire_before_evict_off_evicts_unserved_work() -> None:
    s, _ = run(M.step_coresidency, _co(), M.Want("b"), M.Load("b"))
    s, _ = run(M.step_coresidency, s, M.Evict("b"), guards=GuardSet.without("retire_before_evict"))
    # The harm: b was loaded for its request and evicted before serving it.
    assert s.models["b"] == ResidentModel(6, False, False, False, 1)


@pytest.mark.parametrize("name", ["z", 1], ids=repr)
def test_invalid_unknown_model(name) -> None:
    with pytest.raises(InvalidArgument, match=r"^no model "):
        M.step_coresidency(_co(), M.Want(name))


# === elastic KV reservation ==========================================================


def _el():
    """budget 40, headroom 2, 1 B/token, max context 8, bucket 4, 10 B pinned."""
    return M.new_elastic(40, 2, 1, 8, 4, 10)


def test_new_elastic_starts_at_one_bucket() -> None:
    assert _el() == ElasticState(40, 2, 1, 8, 4, 10, 0, 0, 4)
    assert (_el().kv_charge, _el().used) == (4, 14)


@pytest.mark.parametrize(("args", "floor"), [
    ((24, 2, 1, 8, 4, 10), None),  # exactly the floor: 10 + (4 + 8) + 2
    ((23, 2, 1, 8, 4, 10), 24),
    ((14, 2, 1, 3, 4, 10), 15),  # max context under one bucket: last growth 0 -> 3
    ((29, 2, 1, 10, 4, 10), 30),  # 10 is not a whole number of buckets: last growth 8 -> 10
    ((29, 2, 2, 4, 4, 20), 30),  # one bucket is max context: 20 + 8 + 2
])
def test_elastic_floor(args, floor) -> None:
    if floor is None:
        assert M.new_elastic(*args).kv_tokens == 4
    else:
        with pytest.raises(BudgetBelowFloor, match=rf"^budget {args[0]} below the floor {floor} "):
            M.new_elastic(*args)


def test_elastic_floor_of_a_short_context_is_the_context() -> None:
    assert M.new_elastic(15, 2, 1, 3, 4, 10).kv_tokens == 3


@pytest.mark.parametrize(("i", "what", "bad", "kind"), [
    (0, "budget", 0, "positive"), (1, "headroom", -1, "non-negative"), (2, "bytes_per_token", 0, "positive"),
    (3, "max_context", 0, "positive"), (4, "bucket", 0, "positive"), (5, "pinned", -1, "non-negative"),
])
def test_invalid_elastic_config(i, what, bad, kind) -> None:
    args = [40, 2, 1, 8, 4, 10]
    args[i] = bad
    with pytest.raises(InvalidBytes, match=rf"^{what} must be a {kind} int, got {bad}$"):
        M.new_elastic(*args)


def test_elastic_zero_headroom_and_pinned_are_allowed() -> None:
    assert M.new_elastic(12, 0, 1, 8, 4, 0).headroom == 0


def test_prefetch_borrows_what_kv_and_headroom_leave() -> None:
    s, (got,) = run(M.step_elastic, _el(), M.Prefetch())
    assert (got, s.cache, s.used) == (24, 24, 38)
    s, (again,) = run(M.step_elastic, s, M.Prefetch())
    assert (again, s.cache) == (0, 24)


def test_decode_inside_the_bucket_reclaims_nothing() -> None:
    s, rs = run(M.step_elastic, _el(), M.Prefetch(), M.Decode(), M.Decode())
    assert rs == [24, 0, 0]
    assert s == ElasticState(40, 2, 1, 8, 4, 10, 24, 2, 4)


def test_decode_at_a_full_bucket_grows_by_reclaiming_the_peak() -> None:
    s, _ = run(M.step_elastic, _el(), M.Prefetch(), *[M.Decode()] * 4)
    assert (s.tokens, s.kv_tokens) == (4, 4)
    s, (reclaimed,) = run(M.step_elastic, s, M.Decode())
    # peak of 4 -> 8 tokens: 12 B; 10 + 24 + 12 + 2 - 40 = 8 B reclaimed from the cache.
    assert reclaimed == 8
    assert s == ElasticState(40, 2, 1, 8, 4, 10, 16, 5, 8)


def test_growth_stops_at_max_context() -> None:
    s = M.new_elastic(40, 0, 1, 10, 4, 0)
    s, _ = run(M.step_elastic, s, *[M.Decode()] * 9)
    assert (s.tokens, s.kv_tokens) == (9, 10)  # 4 -> 8 -> 10, never 12


def test_invalid_decode_past_max_context() -> None:
    s, _ = run(M.step_elastic, _el(), *[M.Decode()] * 8)
    with pytest.raises(ContextExhausted, match=r"^request holds 8 = max context$"):
        M.step_elastic(s, M.Decode())


def test_invalid_growth_that_cannot_fit() -> None:
    # Below its floor (built directly, past new_elastic's check): 10 + 0 + 12 + 2 > 20.
    s = ElasticState(20, 2, 1, 8, 4, 10, 0, 4, 4)
    with pytest.raises(CapacityDenied, match=r"^growth peak 12 does not fit even with the cache reclaimed$"):
        M.step_elastic(s, M.Decode())


def test_growth_that_fits_exactly() -> None:
    s = ElasticState(24, 2, 1, 8, 4, 10, 0, 4, 4)
    assert M.step_elastic(s, M.Decode()) == (ElasticState(24, 2, 1, 8, 4, 10, 0, 5, 8), 0)


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_invalid_holder_answer(bad) -> None:
    """C5: the holder's answer is a count of bytes (0 allowed: it may give back nothing); anything else is refused."""
    s, _ = run(M.step_elastic, _el(), M.Prefetch(), *[M.Decode()] * 4)
    with pytest.raises(InvalidBytes, match=rf"^answer must be a non-negative int, got {re.escape(repr(bad))}$"):
        M.step_elastic(s, M.Decode(bad))


def test_elastic_guaranteed_path_off_oversubscribes() -> None:
    s, _ = run(M.step_elastic, _el(), M.Prefetch(), *[M.Decode()] * 4)
    s, (reclaimed,) = run(M.step_elastic, s, M.Decode(), guards=GuardSet.without("elastic_guaranteed_path"))
    # The harm: KV grew with nothing reclaimed: 10 + 24 + 8 = 42 B charged under a 40 B budget.
    assert (reclaimed, s.cache, s.used) == (0, 24, 42)


def test_retire_returns_kv_to_its_floor() -> None:
    s, _ = run(M.step_elastic, _el(), *[M.Decode()] * 6)
    s, (r,) = run(M.step_elastic, s, M.Retire())
    assert (r, s.tokens, s.kv_tokens) == (None, 0, 4)


def test_retire_floor_of_a_short_context() -> None:
    s = M.new_elastic(15, 2, 1, 3, 4, 10)
    s, _ = run(M.step_elastic, s, M.Decode(), M.Retire())
    assert (s.tokens, s.kv_tokens) == (0, 3)


def test_stranded_bytes() -> None:
    s, _ = run(M.step_elastic, M.new_elastic(100, 0, 3, 8, 4, 0), *[M.Decode()] * 5)
    # static: 8 - 5 tokens unused at 3 B; elastic: 8 - 5 of the grown bucket.
    assert (M.static_stranded(s), M.elastic_stranded(s)) == (9, 9)
    s, _ = run(M.step_elastic, M.new_elastic(100, 0, 3, 8, 4, 0), M.Decode())
    assert (M.static_stranded(s), M.elastic_stranded(s)) == (21, 9)


# --- figures the first mutation run showed unpinned -------------------------------------


@pytest.mark.parametrize(("make", "msg"), [
    (lambda: M.new_coresidency(0, {}), r"^capacity must be a positive int, got 0$"),
    (lambda: M.new_coresidency(10, {"a": (0, False)}), r"^size must be a positive int, got 0$"),
    (lambda: M.step_batch(M.new_batch(4), M.Submit(0)), r"^peak must be a positive int, got 0$"),
    (lambda: M.step_batch(M.step_batch(M.new_batch(4), M.Submit(2))[0], M.Advance(1, 0)),
     r"^n must be a positive int, got 0$"),
], ids=["co-capacity", "co-size", "peak", "n"])
def test_invalid_count_names_the_field(make, msg) -> None:
    with pytest.raises(InvalidBytes, match=msg):
        make()


def test_invalid_unhashable_model_name() -> None:
    with pytest.raises(InvalidArgument, match=r"^no model \['a'\]$"):
        M.step_coresidency(_co(), M.Want(["a"]))  # type: ignore[arg-type]


def test_advance_counts_only_the_remaining_need() -> None:
    # capacity 10: request 2 holds 3; request 1 holds 2 of 4, so needs 2 more with 5 free.
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(4), M.Submit(3), M.Advance(1, 2), M.Advance(2, 3))
    assert s.free == 5
    s, _ = run(M.step_batch, s, M.Advance(1, 1))
    assert s.requests[1] == BatchRequest(4, 3, R)


def test_invalid_advance_that_could_not_finish_names_the_remaining_need() -> None:
    # capacity 10: request 1 holds 1 of 9 (8 more), request 2 holds 3: 6 free.
    s, _ = run(M.step_batch, M.new_batch(10), M.Submit(9), M.Submit(3), M.Advance(2, 3))
    # A state the guard forbids reaching (request 1 holding while it cannot finish), built directly.
    s = attrs.evolve(s, requests=s.requests.set(1, BatchRequest(9, 1, R)))
    with pytest.raises(InfeasibleRequest, match=r"^request 1 needs 8 more, only 6 free$"):
        M.step_batch(s, M.Advance(1, 1))


def test_prefetch_with_nothing_left_borrows_nothing() -> None:
    s = ElasticState(20, 2, 1, 8, 4, 10, 0, 0, 8)  # 10 + 8 + 2 = the whole budget
    assert M.step_elastic(s, M.Prefetch()) == (s, 0)


def test_growth_that_fits_reclaims_nothing() -> None:
    # 10 + 5 + 12 + 2 = 29 <= 40: the 5 B cache stays.
    s = ElasticState(40, 2, 1, 8, 4, 10, 5, 4, 4)
    assert M.step_elastic(s, M.Decode()) == (ElasticState(40, 2, 1, 8, 4, 10, 5, 5, 8), 0)
