# Shared fixtures for the ORT boundary tests: models are built once per
# session (building is pure), sessions and files per test.

from __future__ import annotations

import pytest

from refimpl.ort import build_decoder, build_dynamic, build_external


@pytest.fixture(scope="session")
def decoder():
    return build_decoder(d_model=64, heads=4, seed=0)


@pytest.fixture(scope="session")
def dynamic():
    return build_dynamic(width=64, seed=0)


@pytest.fixture
def external_path(tmp_path):
    return build_external(tmp_path, n=256, orphan_ratio=1.0, seed=0)


@pytest.fixture(scope="module")
def world():
    """The host path's models, their facts and ungoverned reference sessions, built once per test module (a module
    on another path defines its own)."""
    from refimpl.verify.sessions_checker import OrtWorld

    return OrtWorld()
