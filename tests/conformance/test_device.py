"""D3: the physical device apart from the pool's name, in refimpl as in the spec (C1)."""

from __future__ import annotations

import json

import pytest

from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import IdentityMismatch, InvalidArgument
from spec.types import Tier
from trace_harness import traced


def test_a_renamed_pool_on_a_declared_device_is_the_same_authority_and_its_trace_replays_clean() -> None:
    pmm, buf = traced()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 64, "cuda:0")
    assert pmm.register_authority("gpu0-second-book", Tier.DEVICE, 64, "cuda:0") == a
    assert pmm.register_authority("gpu1", Tier.DEVICE, 64, "cuda:1") != a
    assert pmm.register_authority("plain", Tier.DEVICE, 64) not in (a,)
    assert pmm.register_authority("gpu0", Tier.DEVICE, 64) == a  # re-registered naming no device: still on cuda:0
    lines = [ln.encode() + b"\n" for ln in buf.getvalue().splitlines()]
    assert b'"device":"cuda:0"' in lines[1].replace(b" ", b"")  # line 1: configure
    assert b'"device":"cuda:0"' in lines[2].replace(b" ", b"")  # the renamed pool: the device it is on
    assert b'"device":"plain"' in lines[-2]  # undeclared: the pool is its own device (ortmem-manager/2 names one)
    assert b'"device":"cuda:0"' in lines[-1].replace(b" ", b"")  # the device the pool was declared on
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


def _two_books(device: bool) -> list[bytes]:
    """D3 in `ortmem-manager/2`: a governor that opens a second book over device cuda:0 under another pool name
    (it issues a fresh authority id, 9, where the design binds the one canonical authority)."""
    pmm, buf = traced()
    pmm.register_authority("gpu0", Tier.DEVICE, 64, "cuda:0")
    pmm.register_authority("gpu0-second-book", Tier.DEVICE, 64, "cuda:0")
    events = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    events[2]["payload"].update(result=9, used={"9": 0})
    if not device:
        for ev in events[1:]:
            del ev["payload"]["device"]
    return [json.dumps(ev).encode() + b"\n" for ev in events]


def test_two_books_over_one_device_with_different_pool_names_are_rejected_naming_c1() -> None:
    r = replay_manager_lines(_two_books(device=True))
    assert (r.ok, r.line, r.failure, r.id) == (False, 3, "violation", "C1"), r.describe()


def test_a_registration_without_its_device_is_malformed() -> None:
    r = replay_manager_lines(_two_books(device=False))
    assert (r.ok, r.line, r.failure) == (False, 2, "malformed"), r.describe()
    assert "a registration names its physical device (C1)" in r.message
    null = [json.loads(x) for x in _two_books(device=True)]
    null[1]["payload"]["device"] = None
    r = replay_manager_lines([json.dumps(ev).encode() + b"\n" for ev in null])
    assert (r.ok, r.line, r.failure) == (False, 2, "malformed"), r.describe()
    assert "accepted register_authority: payload.device must name the physical device" in r.message


@pytest.mark.parametrize("pool,device", [(None, None), (["gpu0"], {"opaque": "list"})])
def test_a_refused_registration_may_name_no_device(pool: object, device: object) -> None:
    """Its pool is no name (None, or an unhashable list the recorder must not look up): refused, nothing
    registered, so no device is named (null, or the pool written opaque), and that is no C1 matter: it replays
    clean."""
    pmm, buf = traced()
    with pytest.raises(InvalidArgument):
        pmm.register_authority(pool, Tier.DEVICE, 64)  # type: ignore[arg-type]
    lines = [ln.encode() + b"\n" for ln in buf.getvalue().splitlines()]
    assert json.loads(lines[1])["payload"]["device"] == device
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
