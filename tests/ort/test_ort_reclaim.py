"""KV growth over real sessions reclaims the weight cache through pressure tickets (C5, I6, I8c)."""

from __future__ import annotations

import pytest
from ort_harness import runtime

from invariants.sessions import check_state
from refimpl.verify.sessions_checker import MAX_CONTEXT
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec import sessions as S
from spec.errors import CapacityDenied, ForeignHolder


def _to_growth(rt, rid):
    """Decode until the next Decode must grow the KV bundle."""
    while rt.kv.bundles[rid].tokens < rt.requests[rid][1]:
        rt.execute(S.Decode(rid))


def test_growth_to_max_context_goes_through_pressure_tickets(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    w = rt.weights
    opened0 = w.opened
    rid = rt.execute(S.Open("a"))
    released = sum(rt.execute(S.Decode(rid)) for _ in range(MAX_CONTEXT))
    assert rt.abstract().requests[rid].tokens == MAX_CONTEXT
    assert released > 0 and w.opened > opened0
    assert w.answered == w.opened  # every ticket answered by the holder's callback
    assert not abstract_manager(rt.pmm).pressures  # none left open in the one manager
    assert w.credited >= released  # open's floor and growth both went through tickets
    check_state(rt.abstract())
    rt.close()


def test_pressure_never_takes_pinned_model_weights(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    lease = rt.models["a"].weights_lease
    charge = abstract_ledger(rt.pmm).allocations[lease].charge
    cache = rt.weights.cache_bytes
    assert cache > 0
    # Ask for everything the authority charges: the holder answers with its cache only (I6).
    credited = rt.weights.reclaim(rt.used())
    assert credited == cache and rt.weights.cache_bytes == 0
    allocs = abstract_ledger(rt.pmm).allocations
    assert lease in allocs and allocs[lease].charge == charge
    rid = rt.execute(S.Open("a"))  # the model still serves from its leased weights
    rt.execute(S.Decode(rid))
    check_state(rt.abstract())
    rt.close()


def test_answer_with_another_holders_lease_is_refused_and_changes_nothing(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    rid = rt.execute(S.Open("a"))
    pid = rt.pmm.open_pressure(rt.weights.id, rt.auth, 1)  # opened, not delivered
    before, mgr = rt.abstract(), abstract_manager(rt.pmm)
    with pytest.raises(ForeignHolder):
        rt.pmm.answer(rt.weights.id, pid, (rt.kv.bundles[rid].lease,))
    assert rt.abstract() == before and abstract_manager(rt.pmm) == mgr
    rt.pmm.cancel_pressure(pid)
    rt.close()


def test_growth_rejects_when_holder_credits_zero(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    rid = rt.execute(S.Open("a"))
    _to_growth(rt, rid)
    rt.weights._pick = lambda target: ()  # the holder declines: zero is legal
    before = rt.abstract()
    with pytest.raises(CapacityDenied, match="credited 0 of"):
        rt.execute(S.Decode(rid))
    assert rt.abstract() == before  # nothing forced, nothing grown
    assert not abstract_manager(rt.pmm).pressures
    rt.close()


def test_demo_elastic_reclaims_through_answered_tickets() -> None:
    from refimpl.demo import run_demo

    static, elastic, identical = run_demo(steps=20, max_context=24)  # a peak within this process's cap
    assert identical
    assert elastic.stranded_byte_steps < static.stranded_byte_steps
    opened, answered = elastic.tickets
    assert opened > 0 and answered == opened
    assert sum(s["released"] for s in elastic.steps) > 0
