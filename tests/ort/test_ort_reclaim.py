"""KV growth over real sessions reclaims the weight cache through pressure tickets (C5, I6, I8c)."""

from __future__ import annotations

import pytest

from invariants.session_predicates import check_state
from refimpl.ort.checker import BUCKET, MAX_CONTEXT, OrtWorld
from refimpl.ort.governed import GovernedRuntime
from spec import sessions as S
from spec.errors import CapacityDenied, PinnedVictim
from spec.tickets import PressureState


@pytest.fixture(scope="module")
def world():
    return OrtWorld()


def _elastic(world, limit=96 * 1024):
    rt = GovernedRuntime(world.topology(0), limit, world.sources, MAX_CONTEXT, BUCKET)
    f = world.facts["dec"]
    rt.execute(S.LoadModel("a", "dec", f, f.loop_carried))
    rt.execute(S.Prefetch())
    return rt


def _to_growth(rt, rid):
    """Decode until the next Decode must grow the KV bundle."""
    while rt.kv.bundles[rid].tokens < rt.requests[rid][1]:
        rt.execute(S.Decode(rid))


def test_growth_to_max_context_goes_through_pressure_tickets(world) -> None:
    rt = _elastic(world)
    ch = rt.weights.channel
    opened0 = ch.opened
    rid = rt.execute(S.Open("a"))
    released = sum(rt.execute(S.Decode(rid)) for _ in range(MAX_CONTEXT))
    assert rt.abstract().requests[rid].tokens == MAX_CONTEXT
    assert released > 0 and ch.opened > opened0
    assert ch.answered == ch.opened  # every ticket answered by the holder's callback
    pressures = ch.pg.abstract().pressures
    assert all(p.state is PressureState.ANSWERED for p in pressures.values())
    assert sum(p.released for p in pressures.values()) == ch.credited
    assert ch.credited >= released  # open's floor and growth both went through tickets
    check_state(rt.abstract())
    rt.close()


def test_answer_rejects_pinned_model_weights(world) -> None:
    rt = _elastic(world)
    ch = rt.weights.channel
    tid = rt.weights.tickets[rt.models["a"].weights_lease]
    assert ch.pg.abstract().tickets[tid].pinned
    assert ch.state(ch.press(1)) == (PressureState.ANSWERED, 1)  # the callback answers with cache bytes
    ch.defer(lambda pid: None)  # hold the next ticket open, then answer it with the model's weights
    pid = ch.press(1, window=5)
    before, pool = rt.abstract(), ch.pg.abstract()
    with pytest.raises(PinnedVictim, match="pinned"):
        ch.answer(pid, (tid,))
    assert rt.abstract() == before and ch.pg.abstract() == pool
    rt.close()


def test_growth_rejects_when_holder_credits_zero(world) -> None:
    rt = _elastic(world)
    rid = rt.execute(S.Open("a"))
    _to_growth(rt, rid)
    rt.weights.channel.serve(lambda target: (), rt.weights._freed)  # the holder declines: zero is legal
    before = rt.abstract()
    with pytest.raises(CapacityDenied, match="credited 0 of"):
        rt.execute(S.Decode(rid))
    assert rt.abstract() == before  # nothing forced, nothing grown
    rt.close()


def test_demo_elastic_reclaims_through_answered_tickets() -> None:
    from refimpl.demo import run_demo

    static, elastic, identical = run_demo(steps=20)
    assert identical
    assert elastic.stranded_byte_steps < static.stranded_byte_steps
    opened, answered = elastic.tickets
    assert opened > 0 and answered == opened
    assert sum(s["released"] for s in elastic.steps) > 0
