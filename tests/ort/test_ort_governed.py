"""Real ORT sessions under the governor: the stateful machine, its negative controls, and direct cases.

IDs: I3 I8 I8b I8c C7 C8 C9 (and identical outputs: governance never changes results).
"""

from __future__ import annotations

import os

import onnx
import pytest
from ort_harness import runtime

from invariants import contracts
from invariants.campaign import campaign_settings
from invariants.model_machine import run_model_campaign
from invariants.sessions import check_state
from refimpl.verify.sessions_checker import BUCKET, HEADROOM, MAX_CONTEXT, OrtChecker, ort_model
from refimpl.ort.governed import GovernedRuntime
from refimpl.ort.session import make_session
from refimpl.ort.zoo import reporter_facts, save_decoder_external
from refimpl.verify import PROFILES
from spec import sessions as S
from spec.arith import admitted_bytes, kv_bytes
from spec.errors import (
    BudgetBelowFloor,
    ExternalDataMissing,
    ExternalDataOutOfRange,
    ExternalDataOverlap,
    ModelFileInvalid,
    ProviderUnavailable,
    UndeclaredState,
)
from spec.guards import GUARDS, Layer
from spec.types import Role


def test_real_ort_machine_refines_spec(world) -> None:
    with contracts.contracts(True):
        stats = run_model_campaign(ort_model(world), campaign_settings(20, 30))
    assert stats.examples >= 20 and stats.accepted > 0


@pytest.mark.parametrize("layer", list(Layer), ids=lambda l: l.value)
@pytest.mark.parametrize("guard", [g for g in GUARDS if g.model == "ort"], ids=lambda g: g.name)
def test_ort_negative_controls(guard, layer) -> None:
    r = OrtChecker().control(guard, layer, PROFILES["quick"])
    assert r.found, r.message
    if layer is Layer.SPEC:
        assert r.violated in guard.ids


def test_orphaned_blob_does_not_change_admission(tmp_path, world) -> None:
    plain = save_decoder_external(str(tmp_path), orphan_ratio=0.0, name="plain")
    padded = save_decoder_external(str(tmp_path), orphan_ratio=1.0, name="padded")
    fp, fd = (reporter_facts(p, MAX_CONTEXT, BUCKET) for p in (plain, padded))
    assert fp.referenced == fd.referenced and fd.file_bytes > 1.9 * fp.referenced
    rt = runtime(world, sources={"plain": plain, "padded": padded})
    rt.execute(S.LoadModel("p", "plain", fp, fp.loop_carried))
    rt.execute(S.LoadModel("d", "padded", fd, fd.loop_carried))
    s = rt.abstract()
    want = admitted_bytes(fp.referenced, world.topology(0).granule, fp.transient_peak)
    assert s.models["p"].admitted == s.models["d"].admitted == want
    check_state(s)


def _corrupt(tmp_path, world, kind: str) -> str:
    """A model broken in one way: its file (no-file, directory, empty, truncated, garbage) or its external data."""
    out = os.path.join(str(tmp_path), f"bad_{kind}.onnx")
    if kind in ("no-file", "directory", "empty", "truncated", "garbage"):
        data = open(world.sources["dec"], "rb").read()
        if kind == "directory":
            os.mkdir(out)
        elif kind != "no-file":
            open(out, "wb").write({"empty": b"", "truncated": data[: len(data) // 2],
                                   "garbage": b"\xff\xfe not an onnx model \x00" * 8}[kind])
        return out
    m = onnx.load(save_decoder_external(str(tmp_path), name="bad"), load_external_data=False)
    ext = [t for t in m.graph.initializer if t.external_data]
    entry = {e.key: e for e in ext[1].external_data}
    if kind == "overlap":
        entry["offset"].value = str(int({e.key: e.value for e in ext[0].external_data}["offset"]) + 4)
    elif kind == "range":
        {e.key: e for e in ext[-1].external_data}["offset"].value = str(10**6)
    else:
        entry["location"].value = "missing.bin"
    onnx.save_model(m, out)
    return out


@pytest.mark.parametrize("kind,error,match", [
    ("overlap", ExternalDataOverlap, "overlap"),
    ("range", ExternalDataOutOfRange, "ends past"),
    ("missing", ExternalDataMissing, "missing.bin"),
    *((kind, ModelFileInvalid, "model file") for kind in ("no-file", "directory", "empty", "truncated", "garbage")),
])
def test_invalid_external_data_admits_nothing(tmp_path, world, kind, error, match) -> None:
    """External data that does not describe real, disjoint bytes, or a model file that is not one: a typed error
    (ModelFileInvalid for the file, before anything is charged) and nothing admitted."""
    rt = runtime(world, sources={"bad": _corrupt(tmp_path, world, kind)})
    before = rt.abstract()
    with pytest.raises(error, match=match):
        rt.execute(S.LoadModel("x", "bad", world.facts["dec"], world.facts["dec"].loop_carried))
    assert rt.abstract() == before and rt.used() == rt.env_arena.grant  # the env arena's lease alone
    assert rt.env_arena.lent == 0


def test_undeclared_state_is_rejected(world) -> None:
    rt = runtime(world)
    before = rt.abstract()
    with pytest.raises(UndeclaredState, match="past_value"):
        rt.execute(S.LoadModel("a", "dec", world.facts["dec"], frozenset({"past_key"})))
    assert rt.abstract() == before


def test_no_declaration_enters_reported_compat_mode(world) -> None:
    rt = runtime(world)
    rt.execute(S.LoadModel("a", "dec", world.facts["dec"], None))
    s = rt.abstract()
    m = s.models["a"]
    assert m.mode is S.Mode.COMPAT and m.admitted == 0 and not m.prefix_reuse
    assert m.unattributed >= m.facts.referenced and "model:a" in rt.report().not_enforced


def test_decline_reports_not_enforced(world) -> None:
    rt = runtime(world)
    rt.execute(S.Decline(Role.WEIGHTS))
    rt.execute(world.load("a", "dec"))
    r = rt.report()
    assert "weights" in r.not_enforced and r.used == rt.env_arena.grant and r.unattributed > 0  # unlent arena
    assert rt.abstract().models["a"].mode is S.Mode.DECLINED


def test_residency_is_sourced_and_not_charge(world) -> None:
    rt = runtime(world, models={"a": "dec"})
    used = rt.used()
    from refimpl.ort.residency import process_rss

    fig = process_rss()  # a real figure under its real source (I8b), never an invented one
    rt.execute(S.ObserveResidency("a", fig.nbytes, fig.source))
    assert rt.used() == used and rt.report().residency == (("a", fig.nbytes, fig.source),)
    assert rt.report().unit.startswith("charge")


def test_elastic_path_reaches_max_context_through_reclaim(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    cache0 = rt.weights.cache_bytes
    rid = rt.execute(S.Open("a"))
    released = sum(rt.execute(S.Decode(rid)) for _ in range(MAX_CONTEXT))
    s = rt.abstract()
    f = world.facts["dec"]
    assert s.requests[rid].tokens == MAX_CONTEXT and released > 0 and rt.weights.cache_bytes < cache0
    assert s.used + HEADROOM <= s.limit
    # Stranded KV after 1 token: static reserves max context at load, elastic one bucket.
    static = kv_bytes(MAX_CONTEXT - 1, f.bytes_per_token)
    elastic = kv_bytes(BUCKET - 1, f.bytes_per_token)
    assert elastic < static
    check_state(s)


def test_failed_lowering_keeps_old_limit(world) -> None:
    rt = runtime(world, models={"a": "dec"}, prefetch=True)
    cache = rt.weights.cache_bytes
    rep = rt.execute(S.LowerLimit(HEADROOM + 1))
    assert not rep.ok and rt.limit == rep.old_limit
    assert rep.completed == (("reclaim weight cache", cache),) and rt.weights.cache_bytes == 0
    rep = rt.execute(S.LowerLimit(rt.used() + HEADROOM))
    assert rep.ok and rt.limit == rep.new_limit


def test_invalid_limit_below_floor(world) -> None:  # (LowerLimit below it: test_ort_one_manager.py)
    with pytest.raises(BudgetBelowFloor, match="below the headroom"):
        GovernedRuntime(world.topology(0), HEADROOM - 1, world.sources)


def test_cuda_session_really_on_cuda_or_skip(world) -> None:
    try:
        s = make_session(world.sources["dec"], provider="CUDAExecutionProvider")
    except ProviderUnavailable as e:
        pytest.skip(f"CUDA EP unavailable here: {e}")
    assert s.get_providers()[0] == "CUDAExecutionProvider"


def test_runtime_report_is_its_own_reading_of_the_ledger(world) -> None:
    """C8 (issue #9): the runtime computes its report from the manager's ledger; the spec's report on the
    runtime's abstraction must agree with it through a generation, a prefetch and a pressure answer."""
    rt = runtime(world, 96 * 1024, {"a": "dec"})
    rid = rt.execute(S.Open("a"))
    steps = [S.Prefetch(), S.Decode(rid), S.Decode(rid), S.Pressure(4096), S.Decode(rid), S.Decode(rid),
             S.Decode(rid), S.ObserveResidency("a", 100, "injected: an invented figure")]
    for a in steps:
        rt.execute(a)
        assert rt.report() == S.report(rt.abstract()), a
    assert rt.report().used == rt.used()
