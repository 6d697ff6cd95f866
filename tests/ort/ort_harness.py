"""Helpers of the ORT tests: a runtime over the test world's models, and the ungoverned reference decodes that
governed outputs are compared with."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.verify.sessions_checker import BUCKET, MAX_CONTEXT
from spec import sessions as S


def runtime(world, limit: int = 256 * 1024, models: dict[str, str] | None = None, prefetch: bool = False,
            sources: dict[str, str] | None = None, **kw) -> GovernedRuntime:
    """A host-path GovernedRuntime of `limit` over `sources` (the world's by default; `kw`: its other options),
    each name -> source of `models` loaded, then the weight cache prefetched if asked."""
    rt = GovernedRuntime(world.topology(0), limit, sources or world.sources, MAX_CONTEXT, BUCKET, **kw)
    for name, source in (models or {}).items():
        rt.execute(world.load(name, source))
    if prefetch:
        rt.execute(S.Prefetch())
    return rt


def ungoverned(world, rt, rid: int, steps: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(y, present_key, present_value) of each of `steps` steps of request `rid`'s inputs on the ungoverned
    reference session of its model (found by the model file `rt` measured)."""
    m = rt.models[rt.requests[rid][0]].measured
    [source] = [k for k, p in world.sources.items() if p == m.path]
    pk = pv = np.zeros((1, m.heads, 0, m.dh), np.float32)
    for t in range(steps):
        y, pk, pv = world.reference[source].run(None, {"x": decode_input(rid, t, m.heads * m.dh), "past_key": pk,
                                                       "past_value": pv})
        yield y, pk, pv


def assert_identical(world, rt, rid: int, steps: int) -> None:
    """The last decode's output and the request's KV equal the ungoverned session's after `steps` steps."""
    *_, (y, k, v) = ungoverned(world, rt, rid, steps)
    gk, gv = rt.kv.present(rid)
    assert np.array_equal(y, rt.last_output) and np.array_equal(k, gk) and np.array_equal(v, gv), (rid, steps)


def decode_identically(world, rt, rids: list[int], steps: int, each=lambda rid, step: None) -> None:
    """Decode `rids` in turn for `steps` steps, each step bit for bit an ungoverned session's; `each` after it."""
    refs = {r: ungoverned(world, rt, r, steps) for r in rids}
    for step in range(steps):
        for r in rids:
            rt.execute(S.Decode(r))
            y, k, v = next(refs[r])
            gk, gv = rt.kv.present(r)
            assert np.array_equal(y, rt.last_output) and np.array_equal(k, gk) and np.array_equal(v, gv), (r, step)
            each(r, step)


def check_weights_read_in_place(world, rt) -> None:
    """Model "a" (dec) loaded on `rt`: Wo zeroed in the leased bytes changes the first step's output, restored it
    does not: ORT reads the lease, not a copy of its own."""

    def first_step_matches_ungoverned() -> bool:
        rid = rt.execute(S.Open("a"))
        rt.execute(S.Decode(rid))
        return bool(np.array_equal(rt.last_output, next(ungoverned(world, rt, rid, 1))[0]))

    region, layout, _ = rt.weights.regions["a"]
    _, off, arr = next(e for e in layout if e[0] == "Wo")  # (Wq: one token attends to itself alone)
    assert first_step_matches_ungoverned()
    rt.weights.memory.upload(region, off, np.zeros_like(arr))  # zero Wo in the leased bytes only
    assert not first_step_matches_ungoverned()
    rt.weights.memory.upload(region, off, arr)
    assert first_step_matches_ungoverned()


def campaign_events(world) -> dict[str, int]:
    """Hypothesis' random actions and the scripted generations on `world`'s path, refinement and every predicate
    on; the events they counted."""
    from invariants import contracts
    from invariants.campaign import campaign_settings
    from invariants.model_machine import run_model_campaign
    from refimpl.ort.generations import run_scripts
    from refimpl.verify.sessions_checker import HEADROOM, ort_model

    world.take_events()
    with contracts.contracts(True):
        random_part = run_model_campaign(ort_model(world), campaign_settings(8, 20))
        scripted = run_scripts(ort_model(world), world.facts, HEADROOM, 2, paths=world.sources)
    events = world.take_events()
    assert random_part.accepted > 0 and scripted.accepted > 100
    assert events["identical_decodes"] > 100 and events["kv_growths"] > 0
    return events
