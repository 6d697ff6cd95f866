"""Issue #14 finding 2: ORT failing after admission, and unreadable model files (C2, I2, I8).

A load that fails after its grants returns every lease (used back where it
was, the model not recorded, `close()` settles to zero); a missing, empty,
truncated, corrupt or directory model file is refused with `ModelFileInvalid`
before anything is charged. Faults are injected at session creation, one
case per exception kind, BaseException included.
"""

from __future__ import annotations

import os
import shutil

import pytest
from ort_harness import runtime

import refimpl.ort.governed as G
from spec import sessions as S
from spec.errors import ModelFileInvalid, SessionCreationFailed


class _Boom(Exception):
    pass


@pytest.mark.parametrize("fault", [_Boom("ORT: out of memory"), RuntimeError("Fail"), MemoryError(),
                                   KeyboardInterrupt(), SystemExit(3)], ids=lambda e: type(e).__name__)
def test_session_creation_failing_after_admission_returns_every_lease(world, monkeypatch, fault) -> None:
    rt = runtime(world)
    before = rt.abstract()
    used = rt.used()

    def failing(*args, **kwargs):
        raise fault

    monkeypatch.setattr(G.ort, "InferenceSession", failing)
    expected = SessionCreationFailed if isinstance(fault, Exception) else type(fault)  # BaseException as is
    with pytest.raises(expected):
        rt.execute(world.load("a", "dec"))
    assert rt.used() == used == rt.env_arena.grant  # the env arena's lease alone; old code: 24,000 B more
    assert rt.env_arena.lent == 0  # the peak's loan was repaid
    assert "a" not in rt.models
    assert rt.abstract() == before
    monkeypatch.undo()
    rt.execute(world.load("a", "dec"))  # the same load succeeds once ORT does
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime


def _bad_file(tmp_path, world, kind: str) -> str:
    src = world.sources["dec"]
    path = os.path.join(str(tmp_path), f"{kind}.onnx")
    if kind == "missing":
        return path
    if kind == "directory":
        os.mkdir(path)
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "truncated":
        data = open(src, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
    elif kind == "garbage":
        open(path, "wb").write(b"\xff\xfe not an onnx model \x00" * 8)
    elif kind == "copy":
        shutil.copy(src, path)
    return path


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "truncated", "garbage"])
def test_invalid_model_file_is_a_typed_error_and_admits_nothing(tmp_path, world, kind) -> None:
    rt = runtime(world, sources={"bad": _bad_file(tmp_path, world, kind)})
    before = rt.abstract()
    f = world.facts["dec"]
    with pytest.raises(ModelFileInvalid, match="model file"):
        rt.execute(S.LoadModel("x", "bad", f, f.loop_carried))
    assert rt.abstract() == before and rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0
