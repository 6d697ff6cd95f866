"""Issue #14 finding 2: ORT failing after admission, and unreadable model files (C2, I2, I8).

A load that fails after its grants returns every lease (used back where it
was, the model not recorded, `close()` settles to zero). Faults are injected
at session creation, one case per exception kind, BaseException included. (A
missing, empty, truncated, corrupt or directory model file is refused with
`ModelFileInvalid` before anything is charged: test_ort_governed.py,
test_invalid_external_data_admits_nothing.)
"""

from __future__ import annotations

import pytest
from ort_harness import runtime

import refimpl.ort.governed as G
from spec.errors import SessionCreationFailed


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
