# The toy models are valid ONNX at IR 10 / opset 18 and ORT computes what the
# numpy references compute (ORT-NOTES 3a, 3b).

from __future__ import annotations

import numpy as np
import onnx
import pytest

from refimpl.ort import (
    build_decoder,
    build_dynamic,
    build_external,
    empty_past,
    make_session,
    reference_decoder_step,
    reference_dynamic,
    reference_external,
)

STEPS = 10


@pytest.mark.parametrize("build", [build_decoder, build_dynamic], ids=["decoder", "dynamic"])
def test_model_is_valid_ir10_opset18_with_named_nodes(build):
    model = build()
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 10
    assert [o.version for o in model.opset_import] == [18]
    assert [n.name for n in model.graph.node] == [f"{n.op_type}_{i}" for i, n in enumerate(model.graph.node)]


def test_external_model_passes_checker(external_path):
    onnx.checker.check_model(external_path)


@pytest.fixture(scope="module")
def decoder_trajectory(decoder):
    # ORT drives its own KV forward; each step's feeds are kept so numpy can
    # be checked against ORT step by step without compounding error.
    session = make_session(decoder)
    rng = np.random.default_rng(1)
    past_key = past_value = empty_past()
    steps = []
    for _ in range(STEPS):
        feeds = {"x": rng.standard_normal((1, 1, 64)).astype(np.float32), "past_key": past_key, "past_value": past_value}
        y, past_key, past_value = session.run(None, feeds)
        steps.append((feeds, (y, past_key, past_value)))
    return steps


@pytest.mark.parametrize("step", range(STEPS))
def test_decoder_matches_numpy_reference(decoder, decoder_trajectory, step):
    feeds, (y, present_key, present_value) = decoder_trajectory[step]
    ref_y, ref_key, ref_value = reference_decoder_step(decoder, **feeds)
    np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(present_key, ref_key, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(present_value, ref_value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("step", range(STEPS))
def test_decoder_kv_grows_one_token_and_copies_past_exactly(decoder_trajectory, step):
    feeds, (_, present_key, present_value) = decoder_trajectory[step]
    assert present_key.shape == present_value.shape == (1, 4, step + 1, 16)
    np.testing.assert_array_equal(present_key[:, :, :step], feeds["past_key"])
    np.testing.assert_array_equal(present_value[:, :, :step], feeds["past_value"])


@pytest.mark.parametrize("batch", [1, 3])
def test_external_model_matches_numpy(external_path, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 256)).astype(np.float32)
    (y,) = make_session(external_path).run(None, {"x": x})
    np.testing.assert_allclose(y, reference_external(external_path, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 7, 128])
def test_dynamic_model_matches_numpy(dynamic, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
    (y,) = make_session(dynamic).run(None, {"x": x})
    np.testing.assert_allclose(y, reference_dynamic(dynamic, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("d_model", "heads"), [(64, 5), (0, 4), (-8, 2)])
def test_invalid_decoder_geometry(d_model, heads):
    with pytest.raises(ValueError, match="positive multiple of heads"):
        build_decoder(d_model=d_model, heads=heads)


@pytest.mark.parametrize(("n", "ratio"), [(0, 1.0), (16, -0.5)])
def test_invalid_external_geometry(tmp_path, n, ratio):
    with pytest.raises(ValueError, match="orphan_ratio"):
        build_external(tmp_path, n=n, orphan_ratio=ratio)
    assert list(tmp_path.iterdir()) == []  # nothing written on rejection
