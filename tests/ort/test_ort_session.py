# Sessions run where they are asked to or fail loudly, and two ORT wheels
# side by side are refused before `import onnxruntime` (ORT-NOTES 1).

from __future__ import annotations

import onnxruntime as ort
import pytest

from refimpl.ort import check_single_ort_wheel, make_session
from refimpl.ort import _wheels
from spec.errors import EnvironmentFault, ProviderUnavailable

HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


def test_cpu_session_runs_on_cpu(decoder):
    assert make_session(decoder).get_providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize(
    ("kwargs", "key", "value"),
    [({"use_env_allocators": True}, "session.use_env_allocators", "1"),
     ({"intra_op_threads": 2}, None, None)],
    ids=["env-allocators", "threads"],
)
def test_session_options_reach_ort(decoder, kwargs, key, value):
    options = make_session(decoder, **kwargs).get_session_options()
    assert options.enable_mem_pattern is False
    assert options.intra_op_num_threads == kwargs.get("intra_op_threads", 1)
    if key is not None:
        assert options.get_session_config_entry(key) == value


@pytest.mark.skipif(HAS_CUDA, reason="this ORT build has the CUDA EP; the not-compiled-in path is untestable here")
def test_invalid_provider_not_in_build(decoder):
    with pytest.raises(ProviderUnavailable, match=r"CUDAExecutionProvider is not in this onnxruntime build") as caught:
        make_session(decoder, provider="CUDAExecutionProvider")
    assert isinstance(caught.value, EnvironmentFault)


@pytest.mark.skipif(HAS_CUDA, reason="CUDA EP present: ORT would not fall back")
def test_invalid_provider_silent_fallback_is_caught(decoder, monkeypatch):
    # The GPU wheel on a box without CUDA libraries lists the CUDA EP as
    # available and still runs on CPU. Pretend the EP is compiled in so ORT
    # takes that fallback path for real, and check the post-creation assert.
    real = ort.get_available_providers()
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", *real])
    with pytest.raises(ProviderUnavailable, match=r"asked for CUDAExecutionProvider, session runs on \['CPUExecutionProvider'\]"):
        make_session(decoder, provider="CUDAExecutionProvider")


def _fake_versions(monkeypatch, installed: dict[str, str]):
    def version(name):
        if name in installed:
            return installed[name]
        raise _wheels.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_wheels.metadata, "version", version)


def test_invalid_both_ort_wheels_installed(monkeypatch):
    _fake_versions(monkeypatch, {"onnxruntime": "1.32.0", "onnxruntime-gpu": "1.31.1"})
    with pytest.raises(
        ImportError, match=r"both onnxruntime 1\.32\.0 and onnxruntime-gpu 1\.31\.1 are installed.*pip uninstall -y onnxruntime onnxruntime-gpu"
    ):
        check_single_ort_wheel()


@pytest.mark.parametrize(
    "installed",
    [{"onnxruntime": "1.32.0"}, {"onnxruntime-gpu": "1.31.1"}, {}],
    ids=["cpu-only", "gpu-only", "none"],
)
def test_single_or_no_ort_wheel_passes(monkeypatch, installed):
    _fake_versions(monkeypatch, installed)
    check_single_ort_wheel()


def test_real_environment_has_one_wheel():
    check_single_ort_wheel()
