"""The governed runtime on the CUDA EP (issue #11 item 8): the arena capped from the grant, the provider asserted.

The provider options are a pure function of the grant and are checked
everywhere; the sessions themselves need an NVIDIA GPU with the
onnxruntime-gpu wheel and skip, with their reason, elsewhere. Run them with
`benchmarks/gpu_check.sh` on a GPU machine.
IDs: C7 (topology and capability: the EP the session really runs on), I8.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from refimpl.verify.sessions_checker import BUCKET, MAX_CONTEXT, OrtWorld
from refimpl.ort.governed import GovernedRuntime, decode_input, session_providers
from refimpl.ort.session import make_session
from spec import sessions as S
from spec.errors import ProviderUnavailable

CUDA = "CUDAExecutionProvider"


def _cuda_reason() -> str | None:
    if CUDA not in ort.get_available_providers():
        return f"{CUDA} is not in this onnxruntime build ({ort.get_available_providers()}): install onnxruntime-gpu"
    try:
        s = make_session(OrtWorld().sources["mlp"], provider=CUDA)
    except ProviderUnavailable as e:
        return f"the CUDA EP does not load here (no GPU, driver or CUDA/cuDNN libraries): {e}"
    del s
    return None


@pytest.fixture(scope="module")
def world():
    return OrtWorld()


@pytest.fixture(scope="module")
def cuda():
    why = _cuda_reason()
    if why is not None:
        pytest.skip(why)


def test_cuda_provider_options_cap_the_device_arena_at_the_grant() -> None:
    [(name, opts), fallback] = session_providers(CUDA, 123_456)
    assert name == CUDA and fallback == "CPUExecutionProvider"
    assert opts["gpu_mem_limit"] == "123456" and opts["arena_extend_strategy"] == "kSameAsRequested"
    assert opts["cudnn_conv_use_max_workspace"] == "0"
    assert session_providers("CPUExecutionProvider", 123_456) == ["CPUExecutionProvider"]


def test_invalid_provider_is_refused(world) -> None:
    with pytest.raises(Exception, match="provider must be"):
        GovernedRuntime(world.topology(0), 256 * 1024, world.sources, provider="TensorrtExecutionProvider")


@pytest.mark.skipif(CUDA in ort.get_available_providers(), reason="this build has the CUDA EP")
def test_cuda_runtime_on_a_cpu_build_is_provider_unavailable(world) -> None:
    with pytest.raises(ProviderUnavailable, match="not in this onnxruntime build"):
        GovernedRuntime(world.topology(0), 256 * 1024, world.sources, provider=CUDA)


def test_cuda_generation_runs_on_cuda_and_matches_an_ungoverned_cuda_session(world, cuda) -> None:
    rt = GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET, provider=CUDA)
    f = world.facts["dec_wide"]
    rt.execute(S.LoadModel("w", "dec_wide", f, f.loop_carried))
    sess = rt.models["w"].session
    assert sess.get_providers()[0] == CUDA  # the provider assertion, on the session that runs
    opts = sess.get_provider_options()[CUDA]
    assert int(opts["gpu_mem_limit"]) == rt.abstract().models["w"].admitted  # the cap is the grant
    rid = rt.execute(S.Open("w"))
    ref = make_session(world.sources["dec_wide"], provider=CUDA, prepack=False)
    m = rt.models["w"].measured
    pk = pv = np.zeros((1, m.heads, 0, m.dh), np.float32)
    for t in range(MAX_CONTEXT):
        rt.execute(S.Decode(rid))
        y, pk, pv = ref.run(None, {"x": decode_input(rid, t, m.heads * m.dh), "past_key": pk, "past_value": pv})
        gk, gv = rt.kv.present(rid)
        # Same EP, same kernels: identical; a tolerance would hide a wrong binding.
        assert np.array_equal(y, rt.last_output) and np.array_equal(pk, gk) and np.array_equal(pv, gv), t
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime
