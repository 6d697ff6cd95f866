"""D3: the physical device apart from the pool's name, in refimpl as in the spec (C1)."""

from __future__ import annotations

import io

import pytest

from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import IdentityMismatch, InvalidArgument
from spec.types import Tier


def test_a_renamed_pool_on_a_declared_device_is_the_same_authority_and_its_trace_replays_clean() -> None:
    buf = io.StringIO()
    pmm = ProcessMemoryManager(trace=JsonlSink(buf))
    a = pmm.register_authority("gpu0", Tier.DEVICE, 64, "cuda:0")
    assert pmm.register_authority("gpu0-second-book", Tier.DEVICE, 64, "cuda:0") == a
    assert pmm.register_authority("gpu1", Tier.DEVICE, 64, "cuda:1") != a
    assert pmm.register_authority("plain", Tier.DEVICE, 64) not in (a,)
    lines = [ln.encode() + b"\n" for ln in buf.getvalue().splitlines()]
    assert b'"device":"cuda:0"' in lines[0].replace(b" ", b"")
    assert b'"device":' not in lines[-1]  # undeclared: the event leaves the field out, as before
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


@pytest.mark.parametrize("device,err", [(5, InvalidArgument), ("", InvalidArgument), ("cuda:1", IdentityMismatch)])
def test_invalid_device_is_refused_and_changes_nothing(device: object, err: type) -> None:
    pmm = ProcessMemoryManager()
    pmm.register_authority("gpu0", Tier.DEVICE, 64, "cuda:0")
    before = abstract_ledger(pmm)
    with pytest.raises(err):
        pmm.register_authority("gpu0", Tier.DEVICE, 64, device)
    assert abstract_ledger(pmm) == before
