"""The governed device path on the CUDA EP (issue #22 item 3): a DEVICE authority, weights and KV in leased
device memory that ORT reads and writes in place, each session's EP arena capped at its loan.

These need an NVIDIA GPU, the onnxruntime-gpu wheel and cuda-bindings (the [gpu] extra); elsewhere
they skip with their reason (the device-free parts run everywhere: test_ort_device_units.py, and the
same wiring on a CPU stand-in: test_ort_device_standin.py). `benchmarks/gpu_check.sh` runs them and
fails if they skip on a GPU machine.
IDs: C1, C7 (the EP the session really runs on), C9 (identical to ungoverned), I2, I3, I8.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import onnxruntime as ort
import pytest
from ort_harness import campaign_events, check_weights_read_in_place, decode_identically

from refimpl.ort.device_arena import OUTSIDE_LEDGER
from refimpl.ort.governed import GovernedRuntime
from refimpl.verify.sessions_checker import MAX_CONTEXT, OrtWorld
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import ProviderUnavailable
from spec.types import Tier

CUDA = "CUDAExecutionProvider"
LIMIT = 256 * 1024


def _cuda_reason() -> str | None:
    if CUDA not in ort.get_available_providers():
        return f"{CUDA} is not in this onnxruntime build ({ort.get_available_providers()}): install onnxruntime-gpu"
    try:
        from refimpl.ort.device import CudaMemory

        CudaMemory(0)
    except ProviderUnavailable as e:
        return f"no usable CUDA device or cuda-bindings here: {e}"
    return None


@pytest.fixture(scope="module")
def cuda():
    why = _cuda_reason()
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="module")
def world(cuda):
    return OrtWorld("cuda")


def test_invalid_provider_is_refused() -> None:
    w = OrtWorld()
    with pytest.raises(Exception, match="provider must be"):
        GovernedRuntime(w.topology(0), LIMIT, w.sources, provider="TensorrtExecutionProvider")


@pytest.mark.skipif(CUDA in ort.get_available_providers(), reason="this build has the CUDA EP")
def test_cuda_runtime_on_a_cpu_build_is_provider_unavailable() -> None:
    w = OrtWorld()
    with pytest.raises(ProviderUnavailable, match="not in this onnxruntime build"):
        GovernedRuntime(w.topology(0), LIMIT, w.sources, provider=CUDA)


def _runtime(world):
    return world.runtime(world.topology(0), LIMIT)


def test_cuda_weights_kv_and_arena_are_leased_on_the_device_authority(world) -> None:
    rt = _runtime(world)
    f = world.facts["dec_wide"]
    rt.execute(S.LoadModel("w", "dec_wide", f, f.loop_carried))
    rid = rt.execute(S.Open("w"))
    sess = rt.models["w"].session
    assert sess.get_providers()[0] == CUDA  # the provider assertion, on the session that runs
    opts = sess.get_provider_options()[CUDA]
    assert int(opts["gpu_mem_limit"]) == rt.env_arena.cap_of(rt.models["w"].arena_loan) == f.transient_peak
    leases = [a for a in abstract_ledger(rt.pmm).allocations.values() if a.authority == rt.auth and a.charge]
    assert {a.tier for a in leases} == {Tier.DEVICE} and len(leases) == 3  # weights, EP arenas, KV
    snap = rt.device_snapshot()
    assert snap.allocated == snap.device.used - rt.env_arena.grant  # every other charged byte is a region
    assert snap.driver_used is not None and snap.driver_used >= snap.allocated
    measured = next(n for n in snap.not_enforced if n.what == "measured outside the ledger")
    assert measured.nbytes == snap.driver_used - snap.device.used and set(OUTSIDE_LEDGER) < set(snap.not_enforced)
    rt.execute(S.Close(rid))
    rt.close()


def test_cuda_weights_are_read_in_place_from_the_device_region(world) -> None:
    rt = _runtime(world)
    rt.execute(world.load("a", "dec"))
    check_weights_read_in_place(world, rt)  # the device bytes of the lease only
    rt.close()


def test_cuda_generation_matches_an_ungoverned_cuda_session_bit_for_bit(world) -> None:
    rt = _runtime(world)
    rt.execute(world.load("w", "dec_wide"))
    rid = rt.execute(S.Open("w"))
    decode_identically(world, rt, [rid], MAX_CONTEXT)  # same EP, same kernels: identical, no tolerance
    rt.close()
    assert rt.pmm.snapshot(rt.auth).used == 0 and rt.weights.memory.allocated == 0


def test_cuda_ort_takes_every_leased_initializer(cuda) -> None:
    """ORT logs and ignores a user initializer on a device other than its plan's: none may be ignored."""
    code = textwrap.dedent("""
        import onnxruntime as ort
        ort.set_default_logger_severity(1)  # INFO: ORT then names each user initializer it uses
        from refimpl.verify.sessions_checker import OrtWorld
        from spec import sessions as S
        w = OrtWorld("cuda")
        rt = w.runtime(w.topology(0), 256 * 1024)
        for name, src in (("a", "dec"), ("b", "dec_wide"), ("c", "mlp")):
            f = w.facts[src]
            rt.execute(S.LoadModel(name, src, f, f.loop_carried))
        print("loaded", sorted(rt.models))
        rt.close()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "loaded ['a', 'b', 'c']" in out.stdout
    assert "Cannot use user supplied initializer" not in out.stderr, out.stderr[-4000:]
    for name in ("Wq", "Wk", "Wv", "Wo", "heads_shape"):  # device weights and a host-planned shape tensor
        assert f"Using user supplied initializer with name ({name})" in out.stderr + out.stdout, name


def test_cuda_runs_the_same_campaign_and_invariants_as_the_host_path(world) -> None:
    campaign_events(world)
