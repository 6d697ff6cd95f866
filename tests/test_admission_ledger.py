"""The admission models reach capacity only through the `ProcessMemoryManager` (issue #10).

Each model's bytes are leases of its holder on one authority; its abstraction
is read from the manager's allocations; the books clauses (`observed_I12_admission`,
`observed_I8c_elastic`) compare the ledger's charge with the abstraction, and
fail when a lease leaks. Bad input leaves the whole ledger unchanged.
"""

from __future__ import annotations

import pytest
from clause_harness import judged, violation

from invariants._violation import InvariantViolation
from invariants.admission import LedgerBooks, check_observations
from refimpl.admission import CoResidencyScheduler, ElasticSplit, KvBatcher
from refimpl.verify.admission_checker import _Booked
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec import admission as S
from spec.errors import CapacityDenied, InfeasibleRequest, InvalidArgument, InvalidBytes, UnknownAuthority
from spec.types import AllocState, Role, Tier


def _leases(pmm: ProcessMemoryManager, holder: int) -> list[tuple[Role, int]]:
    return sorted(((a.role, a.charge) for a in abstract_ledger(pmm).allocations.values()
                  if a.holder == holder and a.state is AllocState.LIVE), key=lambda x: (x[0].value, x[1]))


def _books(model: object, name: str) -> None:
    check_observations(_Booked(name, model).take_observations())


def test_kv_batcher_books_every_advance_as_a_kv_lease() -> None:
    b = KvBatcher(10)
    r1, r2 = b.submit(4), b.submit(3)
    b.advance(r1, 3)
    b.advance(r2, 2)
    b.advance(r1, 1)
    assert _leases(b.seat.pmm, b.seat.holder) == [(Role.KV, 1), (Role.KV, 2), (Role.KV, 3)]
    assert b.seat.pmm.snapshot(b.seat.auth).used == 6 == b.abstract().held
    b.finish(r1)
    assert _leases(b.seat.pmm, b.seat.holder) == [(Role.KV, 2)]
    assert b.abstract().requests[r1] == S.BatchRequest(4, 0, S.ReqState.FINISHED)
    _books(b, "kv_batch")


def test_kv_batcher_fits_from_the_ledger_snapshot_it_shares() -> None:
    """Another holder's lease on the same authority is room the batcher cannot admit into (one ledger, C1)."""
    pmm = ProcessMemoryManager()
    auth = pmm.register_authority("device0", Tier.DEVICE, 10)
    b = KvBatcher(pmm=pmm, auth=auth)
    other = pmm.register_holder("other")
    pmm.commit(other, pmm.reserve(other, auth, Tier.DEVICE, 6, Role.ARENA), 6)
    rid = b.submit(5)
    before = abstract_ledger(pmm)
    with pytest.raises(CapacityDenied, match=r"^5 entries asked, 4 free$"):
        b.advance(rid, 5)
    with pytest.raises(InfeasibleRequest, match=r"needs 5 more, only 4 free$"):
        b.advance(rid, 2)
    assert abstract_ledger(pmm) == before  # refusals leave the whole ledger unchanged


def test_coresidency_books_pinned_and_loaded_weights() -> None:
    c = CoResidencyScheduler(10, {"a": (4, True), "b": (5, False), "c": (6, False)})
    assert _leases(c.seat.pmm, c.seat.holder) == [(Role.WEIGHTS, 4)]
    for a in (S.Want("b"), S.Load("b"), S.Serve("b"), S.Want("c")):
        c.execute(a)
    assert _leases(c.seat.pmm, c.seat.holder) == [(Role.WEIGHTS, 4), (Role.WEIGHTS, 5)]
    before = abstract_ledger(c.seat.pmm)
    with pytest.raises(CapacityDenied, match=r"^c: 6 B asked, 1 B free$"):
        c.execute(S.Load("c"))
    assert abstract_ledger(c.seat.pmm) == before
    c.execute(S.Evict("b"))
    c.execute(S.Load("c"))
    assert _leases(c.seat.pmm, c.seat.holder) == [(Role.WEIGHTS, 4), (Role.WEIGHTS, 6)]
    assert {n: m.resident for n, m in c.abstract().models.items()} == {"a": True, "b": False, "c": True}
    _books(c, "coresidency")


def test_elastic_split_books_pinned_kv_and_cache_on_one_authority() -> None:
    e = ElasticSplit(40, 2, 1, 10, 4, 10)
    pmm = e.seat.pmm
    assert _leases(pmm, e.seat.holder) == [(Role.KV, 4), (Role.WEIGHTS, 10)]
    assert e.execute(S.Prefetch()) == 24
    assert _leases(pmm, e.cache.id) == [(Role.WEIGHTS, 4)] * 6
    for _ in range(5):  # the fifth token grows KV 4 -> 8: the cache gives back the copy's peak
        e.decode()
    assert _leases(pmm, e.seat.holder) == [(Role.KV, 8), (Role.WEIGHTS, 10)]
    s = e.abstract()
    assert (s.pinned, s.cache, s.kv_tokens, s.tokens) == (10, 16, 8, 5)
    assert pmm.snapshot(e.seat.auth).used == 10 + 16 + 8
    _books(e, "elastic")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(auth=1), InvalidArgument, r"without its manager"),
    (dict(pmm="fresh", auth=99), UnknownAuthority, r"99"),
    (dict(pmm="fresh", auth="mine", capacity=11), InvalidArgument, r"differs from authority"),
    (dict(capacity=0), InvalidBytes, r"capacity must be a positive int"),
])
def test_KvBatcher_rejects_a_bad_authority(kwargs: dict, error: type, match: str) -> None:
    pmm = ProcessMemoryManager()
    mine = pmm.register_authority("kv", Tier.DEVICE, 10)
    if kwargs.get("pmm") == "fresh":
        kwargs["pmm"] = pmm
    if kwargs.get("auth") == "mine":
        kwargs["auth"] = mine
    before = abstract_ledger(pmm)
    with pytest.raises(error, match=match):
        KvBatcher(**kwargs)
    assert abstract_ledger(pmm) == before


def test_books_clause_catches_a_leaked_kv_lease() -> None:
    """A finish that drops a request's lease ids without releasing them: the abstraction says the request
    holds nothing, the ledger still charges its bytes (negative control of observed_I12_admission)."""
    b = KvBatcher(8)
    rid = b.submit(3)
    b.advance(rid, 3)
    b._leases[rid] = []  # the leak: ids forgotten, leases live
    with pytest.raises(InvariantViolation, match=r"kv_batch: the ledger charges 3 B, its requests and models hold 0 B"):
        _books(b, "kv_batch")


def test_books_clause_catches_an_evicted_model_still_charged() -> None:
    c = CoResidencyScheduler(10, {"a": (4, True), "b": (5, False)})
    c.execute(S.Want("b"))
    c.execute(S.Load("b"))
    c._rows["b"][2] = None  # the leak: marked non-resident, its lease never released
    with pytest.raises(InvariantViolation, match=r"coresidency: the ledger charges 9 B, .* hold 4 B"):
        _books(c, "coresidency")


def test_books_clause_catches_an_old_kv_buffer_still_charged() -> None:
    e = ElasticSplit(40, 2, 1, 10, 4, 10)
    e.seat.lease(4, Role.KV)  # a second KV buffer the split does not know: the old one of a growth, say
    with pytest.raises(InvariantViolation, match=r"elastic: the ledger charges 18 B; pinned 10 \+ cache 0 \+ KV 4 = 14 B"):
        _books(e, "elastic")


def test_books_clause_catches_bytes_held_but_uncharged() -> None:
    """The other direction: an abstraction holding more than the ledger charges (a figure off the books)."""
    s = S.BatchState(10, S.new_batch(10).requests.set(1, S.BatchRequest(4, 2, S.ReqState.RESIDENT)), 2)
    with pytest.raises(InvariantViolation, match=r"ledger charges 0 B, its requests and models hold 2 B"):
        check_observations([LedgerBooks("kv_batch", s, 0)])


def test_growth_refused_by_a_shared_ledger_after_reclaim_defers() -> None:
    """Another holder takes the room the cache gave back before the growth leases it: the request defers with
    what was given (C5, nothing forced back), and the ledger never charges more than its limit."""
    pmm = ProcessMemoryManager()
    auth = pmm.register_authority("host", Tier.HOST, 40)
    e = ElasticSplit(None, 2, 1, 10, 4, 10, pmm=pmm, auth=auth)
    e.execute(S.Prefetch())  # cache 24: pinned 10 + KV 4 + cache 24 charged, headroom 2 kept free
    for _ in range(4):
        e.decode()
    thief = pmm.register_holder("thief")
    real = e.cache._on_pressure

    def answer_then_steal(m: ProcessMemoryManager, pid: int, target: int) -> None:
        real(m, pid, target)
        m.commit(thief, m.reserve(thief, auth, Tier.HOST, target, Role.ARENA), target)

    pmm.register_callback(e.cache.id, answer_then_steal)
    assert e.decode() == S.Deferred(8)  # growth 4 -> 8 asks 8 B: new buffer 8 + headroom 2 - free 2
    s = e.abstract()
    assert (s.cache, s.kv_tokens, s.tokens) == (16, 4, 4)
    assert pmm.snapshot(auth).used == 10 + 4 + 16 + 8  # the thief holds what the cache gave back


def test_reclaim_not_wasted_fails_on_a_full_answer_that_grew_nothing() -> None:
    """Negative control of step_I8c_elastic.reclaim_not_wasted: the weights gave back all the growth needed
    and KV stayed put."""
    from invariants.admission import check_transition

    prev = S.ElasticState(40, 2, 1, 10, 4, 10, 24, 4, 4)
    nxt = S.ElasticState(40, 2, 1, 10, 4, 10, 16, 4, 4)
    with pytest.raises(InvariantViolation, match=r"gave back 8 B of the 8 B the growth 4->8 needed"):
        check_transition(prev, S.Decode(), nxt)
    check_transition(prev, S.Decode(7), S.ElasticState(40, 2, 1, 10, 4, 10, 17, 4, 4))  # short (7 < 8): defers


def test_batcher_and_scheduler_on_one_device_authority_see_each_others_leases() -> None:
    """One ledger for the pool (C1): the scheduler's load is refused for room the batcher's KV holds."""
    pmm = ProcessMemoryManager()
    dev = pmm.register_authority("gpu0", Tier.DEVICE, 12)
    c = CoResidencyScheduler(None, {"a": (4, True), "b": (5, False)}, pmm=pmm, auth=dev)
    b = KvBatcher(pmm=pmm, auth=dev)
    b.advance(b.submit(4), 4)  # 4 pinned + 4 KV: 4 B free
    c.execute(S.Want("b"))
    before = abstract_ledger(pmm)
    with pytest.raises(CapacityDenied, match=r"^b: 5 B asked, 4 B free$"):
        c.execute(S.Load("b"))
    assert abstract_ledger(pmm) == before
    b.finish(1)
    c.execute(S.Load("b"))
    assert pmm.snapshot(dev).used == 4 + 5


# --- the admission clauses checked by mutating invariants/admission.py (issue #26 item 4) ----------------------
# Each clause fails on the smallest harm, naming it, and counts its case where the harm could occur (coverage
# counted on a state that cannot show the harm would call the ID exercised by states that prove nothing).


def _cases(check, *args) -> set[str]:  # type: ignore[no-untyped-def]
    """The clause cases `check` meets on `args`, whether it holds or not."""
    return {k for k, (_, h) in judged(check, *args)[1].items() if h}


def _el(budget: int = 40, bpt: int = 1, pinned: int = 10, cache: int = 24, tokens: int = 4, kv: int = 4,
        headroom: int = 2) -> S.ElasticState:
    return S.ElasticState(budget, headroom, bpt, 10, 4, pinned, cache, tokens, kv)


def test_elastic_state_clauses_fail_by_one_byte_and_name_the_figures() -> None:
    from invariants.admission import check_state

    # 10 + 21 + 4 x 2 + 2 = 41 > 40: one byte over, every term counted at its size
    e = violation(check_state, _el(bpt=2, cache=21))
    assert e.clause == "state_I8c_elastic.within_budget"
    assert "pinned 10 + cache 21 + KV 8 + headroom 2 > budget 40" in str(e)
    check_state(_el(bpt=2, cache=20))  # exactly the budget: no harm
    e = violation(check_state, _el(tokens=5))
    assert e.clause == "state_I8c_elastic.kv_covers_tokens" and "KV capacity 4 outside [5, 10]" in str(e)


def test_elastic_state_cases_need_something_held() -> None:
    from invariants.admission import check_state

    budget, kv = "state_I8c_elastic.within_budget", "state_I8c_elastic.kv_covers_tokens"
    assert _cases(check_state, _el(cache=0, kv=0, tokens=0)) == set()
    assert _cases(check_state, _el(cache=1, kv=0, tokens=0)) == {budget}
    assert _cases(check_state, _el(cache=0, kv=1, tokens=0)) == {budget}
    assert _cases(check_state, _el(cache=0, kv=1, tokens=1)) == {budget, kv}


def test_the_holder_answer_is_respected_and_a_short_one_grows_nothing() -> None:
    from invariants.admission import check_transition, step_C5_elastic

    e = violation(check_transition, _el(), S.Decode(3), _el(cache=19))
    assert e.clause == "step_C5_elastic.answer_respected" and "5 B taken from the weight cache, 3 B answered" in str(e)
    # a short answer (4 B) and KV grown 4 -> 8 at 2 B a token: 10 + 20 + (4 + 8) x 2 + 2 = 56 > 55
    e = violation(step_C5_elastic, _el(55, 2), S.Decode(4), _el(55, 2, cache=20, kv=8, tokens=5))
    assert e.clause == "step_C5_elastic.answer_respected" and "KV grew 4->8 on a short answer" in str(e)
    step_C5_elastic(_el(56, 2), S.Decode(4), _el(56, 2, cache=20, kv=8, tokens=5))  # the peak fits: no harm
    answer = "step_C5_elastic.answer_respected"
    assert answer not in _cases(step_C5_elastic, _el(), S.Decode(3), _el())  # nothing taken: no case
    assert answer in _cases(step_C5_elastic, _el(), S.Decode(3), _el(cache=21))


def test_a_full_answer_exactly_the_need_is_wasted_if_kv_stays() -> None:
    from invariants.admission import check_transition

    # the growth 4 -> 8 needs 10 + 24 + 12 + 2 - 40 = 8 B: an answer of exactly 8 B must grow KV
    e = violation(check_transition, _el(), S.Decode(8), _el(cache=16))
    assert e.clause == "step_I8c_elastic.reclaim_not_wasted"


def test_elastic_prefetch_and_peak_clauses_fail_naming_the_figures() -> None:
    from invariants.admission import check_transition

    # static split: 40 - 2 - 10 - 10 x 1 = 18 B for the weights; a prefetch that leaves 17 B starves them
    e = violation(check_transition, _el(cache=0, kv=4), S.Prefetch(), _el(cache=17, kv=4))
    assert e.clause == "step_I8c_elastic.weights_at_least_static" and "cache 17 B" in str(e) and "18 B" in str(e)
    e = violation(check_transition, _el(cache=20), S.Decode(), _el(cache=20, kv=8, tokens=5))
    assert e.clause == "step_I8c_elastic.growth_peak_within_budget" and "growth 4->8: copy peak 12" in str(e)


def _co(*models: tuple[str, int, bool, bool, bool, int], capacity: int = 10) -> S.CoState:
    import immutables

    return S.CoState(capacity, immutables.Map({n: S.ResidentModel(size, pin, res, served, work)
                                               for n, size, pin, res, served, work in models}))


def test_coresidency_clauses_fail_naming_the_model() -> None:
    from invariants.admission import check_state, check_transition

    e = violation(check_state, _co(("a", 6, False, True, False, 0), ("b", 5, False, True, False, 0)))
    assert e.clause == "state_I12_coresidency.resident_within_capacity" and "use 11 > capacity 10" in str(e)
    e = violation(check_state, _co(("a", 4, True, False, False, 0)))
    assert e.clause == "state_I12_coresidency.pinned_resident" and "pinned model a" in str(e)
    idle = _co(("a", 4, True, True, True, 0), ("b", 5, False, True, False, 0))
    e = violation(check_transition, idle, S.Evict("b"), idle)
    assert e.clause == "step_I12_coresidency.no_wasted_load" and "b evicted before serving" in str(e)
    away = _co(("a", 4, True, True, True, 0), ("b", 5, False, False, False, 1))
    e = violation(check_transition, away, S.Serve("b"), away)
    assert e.clause == "step_I12_coresidency.serve_resident" and "b served while not resident" in str(e)


def test_an_eviction_is_needed_only_for_pending_work_that_does_not_fit() -> None:
    from invariants.admission import check_transition

    need = "step_I12_coresidency.evict_only_for_need"
    # b served and resident (1 B free); c is not resident but has no work: nothing pending needs the room
    s = _co(("a", 4, True, True, True, 0), ("b", 5, False, True, True, 0), ("c", 3, False, False, False, 0))
    e = violation(check_transition, s, S.Evict("b"), s)
    assert e.clause == need and "every pending model fits in the 1 B free" in str(e)
    # c pending, 1 B: it fits in the 1 B free, so evicting b is not needed
    s = _co(("a", 4, True, True, True, 0), ("b", 5, False, True, True, 0), ("c", 1, False, False, False, 1))
    assert violation(check_transition, s, S.Evict("b"), s).clause == need


def test_coresidency_cases_need_their_subject() -> None:
    from invariants.admission import check_state

    cap, pin = "state_I12_coresidency.resident_within_capacity", "state_I12_coresidency.pinned_resident"
    assert _cases(check_state, _co(("b", 5, False, False, False, 0))) == set()
    assert _cases(check_state, _co(("a", 1, True, True, False, 0))) == {pin}  # pinned only: cannot be evicted
    assert _cases(check_state, _co(("b", 5, False, True, False, 0))) == {cap}


def test_books_cases_need_a_charge_or_a_holding() -> None:
    books = "observed_I12_admission.ledger_charges_what_is_held"
    empty = S.new_batch(10)
    one = S.BatchState(10, empty.requests.set(1, S.BatchRequest(4, 1, S.ReqState.RESIDENT)), 2)
    assert _cases(check_observations, [LedgerBooks("kv_batch", empty, 0)]) == set()
    assert _cases(check_observations, [LedgerBooks("kv_batch", empty, 1)]) == {books}  # charged, nothing held
    assert _cases(check_observations, [LedgerBooks("kv_batch", one, 0)]) == {books}  # held, nothing charged
    el = "observed_I8c_elastic.ledger_charges_what_is_held"
    none = _el(pinned=0, cache=0, kv=0, tokens=0)
    assert _cases(check_observations, [LedgerBooks("elastic", none, 0)]) == set()
    assert _cases(check_observations, [LedgerBooks("elastic", none, 1)]) == {el}
    assert _cases(check_observations, [LedgerBooks("elastic", _el(pinned=1, cache=0, kv=0, tokens=0), 0)]) == {el}


def test_the_batch_pool_over_capacity_names_its_figures() -> None:
    from invariants.admission import check_state

    over = S.BatchState(4, S.new_batch(4).requests.set(1, S.BatchRequest(6, 5, S.ReqState.RESIDENT)), 2)
    e = violation(check_state, over)
    assert e.clause == "state_I12_batch.kv_within_capacity" and "holds 5 > capacity 4" in str(e)


def _batch(capacity: int, *reqs: tuple[int, int, S.ReqState]) -> S.BatchState:
    rs = S.new_batch(capacity).requests
    for i, (peak, held, state) in enumerate(reqs, 1):
        rs = rs.set(i, S.BatchRequest(peak, held, state))
    return S.BatchState(capacity, rs, len(reqs) + 1)


def test_batch_clauses_fail_naming_the_request_and_figures() -> None:
    from invariants.admission import check_state

    R, F = S.ReqState.RESIDENT, S.ReqState.FINISHED
    e = violation(check_state, _batch(10, (4, 2, F)))
    assert e.clause == "state_I12_batch.only_residents_hold" and "request 1 is finished but holds 2" in str(e)
    e = violation(check_state, _batch(10, (4, 5, R)))
    assert e.clause == "state_I12_batch.only_residents_hold" and "request 1 holds 5 > its peak 4" in str(e)
    e = violation(check_state, _batch(10, (9, 4, R), (9, 4, R)))  # each needs 5 more, 2 free
    assert e.clause == "state_I12_batch.some_resident_can_finish" and "needs [5, 5], free 2" in str(e)


def test_batch_cases_need_their_subject() -> None:
    from invariants.admission import check_state

    cap, idle, live = ("state_I12_batch.kv_within_capacity", "state_I12_batch.only_residents_hold",
                       "state_I12_batch.some_resident_can_finish")
    assert _cases(check_state, _batch(10)) == set()
    assert _cases(check_state, _batch(10, (4, 0, S.ReqState.WAITING))) == {idle}
    assert _cases(check_state, _batch(10, (4, 1, S.ReqState.RESIDENT))) == {cap, idle, live}


def test_a_growth_peak_counts_the_bytes_of_both_buffers() -> None:
    from invariants.admission import check_transition

    # at 2 B a token the peak of 4 -> 8 is (4 + 8) x 2 = 24 B: 10 + 15 + 24 + 2 = 51 > 50
    e = violation(check_transition, _el(50, 2, cache=15), S.Decode(), _el(50, 2, cache=15, kv=8, tokens=5))
    assert e.clause == "step_I8c_elastic.growth_peak_within_budget" and "copy peak 24" in str(e)


def test_a_batcher_leak_is_credited_to_i12_only() -> None:
    from invariants.clauses import collecting

    leak = LedgerBooks("kv_batch", _batch(10, (4, 1, S.ReqState.RESIDENT)), 3)
    with collecting() as found:
        check_observations([leak])
    assert found == ["observed_I12_admission.ledger_charges_what_is_held"]  # not the elastic split's I8c
