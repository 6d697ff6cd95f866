"""ORT failures as environment events (issue #11 item 6, #14's leftover): typed error, ledger exact.

Each case leaves no leaked or grown lease and the abstraction unchanged:
  - a Run over the env arena's cap: REAL ORT failure, in a subprocess;
  - an IOBinding shape error: a REAL ORT error on a binding the test
    corrupts (INJECTED: a wrongly shaped present buffer);
  - a Decode whose Run fails after its KV growth: INJECTED (the session's
    run raises), since ORT cannot be made to fail at that step naturally;
  - a model file that changes under the runtime after measurement: REAL
    (the file is overwritten; loading it fails).
IDs: C2, I2 (no charge kept for a step that did not happen), C9 (the bundle).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from ort_harness import assert_identical, runtime

from refimpl.verify.sessions_checker import BUCKET, MAX_CONTEXT
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import RunFailed, SessionCreationFailed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _opened(world):
    rt = runtime(world, models={"a": "dec"}, prefetch=True)
    return rt, rt.execute(S.Open("a"))


def _frozen(rt):
    return rt.abstract(), abstract_ledger(rt.pmm).allocations, rt.used()


def test_run_over_the_env_arena_cap_is_run_failed_with_the_ledger_exact() -> None:
    r = subprocess.run([sys.executable, os.path.join("tests", "ort", "run_fail_proc.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["refused"].startswith("AllowanceExceeded:") and out["refused_unchanged"] is True, out
    assert out["error"] is not None and out["error"].startswith("RunFailed:"), out
    assert "Available memory of" in out["error"]  # ORT's own arena error, not ours
    assert out["unchanged"] is True and out["used_after"] == out["used_before"] and out["tokens"] == 0
    assert out["used_closed"] == out["cap"]  # only the env arena's one lease, in the host pool, stays


def test_iobinding_shape_error_is_run_failed_and_changes_nothing(world) -> None:
    rt, rid = _opened(world)
    rt.execute(S.Decode(rid))
    b = rt.kv.bundles[rid]
    wrong = np.zeros((1, b.heads, 5, b.dh), np.float32)  # INJECTED: the step at t=1 computes 2 tokens
    b.bindings[1].bind_ortvalue_output("present_key", ort.OrtValue.ortvalue_from_numpy(wrong))
    before = _frozen(rt)
    with pytest.raises(RunFailed, match="shape"):
        rt.execute(S.Decode(rid))
    assert _frozen(rt) == before
    b.bind()  # rebuild the bucket's bindings from position 1: the request goes on unharmed
    rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, 2)
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime


def test_run_failing_after_kv_growth_returns_the_grown_lease(world, monkeypatch) -> None:
    rt, rid = _opened(world)
    for _ in range(BUCKET):
        rt.execute(S.Decode(rid))
    kv_before = {k: a for k, a in abstract_ledger(rt.pmm).allocations.items() if a.holder == rt.kv.id and a.charge}
    s0 = rt.abstract()
    real = ort.InferenceSession.run_with_iobinding

    def injected(self, io, run_options=None):  # INJECTED: ORT's Run raises on the grown bucket's first step
        raise RuntimeError("injected: Run failed after growth")

    monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", injected)
    with pytest.raises(RunFailed, match="grown bucket's lease was returned"):
        rt.execute(S.Decode(rid))
    kv_after = {k: a for k, a in abstract_ledger(rt.pmm).allocations.items() if a.holder == rt.kv.id and a.charge}
    assert kv_after == kv_before  # no grown lease kept, the old one still the request's
    s1 = rt.abstract()
    assert s1.requests == s0.requests and s1.ledger["kv"] == s0.ledger["kv"]
    assert rt.used() == sum(s1.ledger.values())  # the reclaim that made room may stand; nothing leaked
    monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", real)
    for _ in range(MAX_CONTEXT - BUCKET):
        rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, MAX_CONTEXT)
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime


def test_model_file_changing_after_measurement_fails_to_load_with_nothing_charged(world, tmp_path) -> None:
    import shutil

    src = os.path.join(str(tmp_path), "m.onnx")
    shutil.copy(world.sources["mlp"], src)
    blob = os.path.join(os.path.dirname(world.sources["mlp"]), "weights.bin")
    if os.path.exists(blob):
        shutil.copy(blob, os.path.join(str(tmp_path), "weights.bin"))
    f = world.facts["mlp"]
    rt = runtime(world, sources={"m": src})
    from refimpl.ort.governed import measure
    measure(src, MAX_CONTEXT, BUCKET)  # measured while the file was good
    with open(src, "wb") as fh:  # REAL: the file is replaced under the runtime
        fh.write(b"\x08\x0a" + b"\xff" * 64)
    before = _frozen(rt)
    with pytest.raises(SessionCreationFailed, match="leases were returned"):
        rt.execute(S.LoadModel("m", "m", f, f.loop_carried))
    assert _frozen(rt) == before and rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0



def _script(bucket):
    return [S.Prefetch(), S.Open("a"), *[S.Decode(1)] * bucket, S.RunFails(1), S.RunFails(1), S.Decode(1),
            S.RunFails(1)]


def _drive(world, ad, limit=256 * 1024):
    """Step the adapter and the spec side by side; check refinement and every session predicate."""
    from invariants.sessions import check_state, check_transition

    from refimpl.verify.sessions_checker import ENV_ARENA_CAP

    f = world.facts["dec"]
    s = S.new_sessions(world.topology(0, ENV_ARENA_CAP), limit)  # the adapter's pool: the campaign's env arena
    for a in [S.LoadModel("a", "dec", f, f.loop_carried), *_script(BUCKET)]:
        prev = s
        s, want = S.step_sessions(s, a)
        got = ad.execute(a)
        check_transition(prev, a, ad.abstract())
        check_state(ad.abstract())
        assert got == want and ad.abstract() == s, a
    return s


def test_run_fails_refines_the_spec_and_keeps_no_charge(world) -> None:
    """`spec.sessions.RunFails` (C8): an injected ORT failure inside a bucket and at a growth, via the adapter."""
    from refimpl.verify.sessions_checker import OrtAdapter
    from spec.guards import ALL_ON

    world.take_events()
    ad = OrtAdapter(world, (256 * 1024, 0), ALL_ON)
    s = _drive(world, ad)
    assert s.requests[1].tokens == BUCKET + 1 and s.requests[1].kv_tokens == 2 * BUCKET
    ev = world.take_events()
    assert ev["run_failures_injected"] == 3 and ev["run_failures_after_growth"] == 2, ev
    assert_identical(world, ad.rt, 1, BUCKET + 1)  # the failed Runs changed nothing the next decode reads
    ad.close()
    assert ad.rt.used() == ad.rt.env_arena.grant  # only the env arena's one lease stays


def test_spec_run_fails_at_a_growth_keeps_the_bucket_and_yields_cache(world) -> None:
    f = world.facts["dec"]
    s = S.new_sessions(world.topology(0), 256 * 1024)
    for a in (S.LoadModel("a", "dec", f, f.loop_carried), S.Prefetch(), S.Open("a"), *[S.Decode(1)] * BUCKET):
        s, _ = S.step_sessions(s, a)
    nxt, released = S.step_sessions(s, S.RunFails(1))
    assert released > 0 and nxt.cache == s.cache - released and nxt.requests == s.requests
    assert nxt.ledger["kv"] == s.ledger["kv"] and nxt.ledger["weights"] == s.ledger["weights"] - released
    inside, zero = S.step_sessions(S.step_sessions(s, S.Decode(1))[0], S.RunFails(1))
    assert zero == 0
    for bad, err in ((S.RunFails(99), "UnknownAllocation"), (S.RunFails("1"), "UnknownAllocation")):
        with pytest.raises(Exception) as e:
            S.step_sessions(s, bad)
        assert type(e.value).__name__ == err


def test_failed_run_keeping_the_grown_lease_fails_failed_run_keeps_no_charge(world) -> None:
    from invariants import InvariantViolation
    from invariants.mutation import applied
    from refimpl.verify.mutants import MUTANTS
    from refimpl.verify.sessions_checker import OrtAdapter
    from spec.guards import ALL_ON

    with applied(MUTANTS["failed_run_keeps_grown_lease"]):
        ad = OrtAdapter(world, (256 * 1024, 0), ALL_ON)
        with pytest.raises(InvariantViolation, match="^C8: request 1's Run failed") as e:
            _drive(world, ad)
        assert e.value.clause == "step_C8_sessions.failed_run_keeps_no_charge"
