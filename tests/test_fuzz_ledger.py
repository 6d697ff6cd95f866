"""Issue #14: the ProcessMemoryManager fuzzer, plain and traced (C1, C2, I1, I2, I4a, I4b, I6).

Every public operation, hostile values interleaved with valid ones: a typed
error with a message and the whole `abstract_ledger(pmm)` unchanged on every
rejection; invariants after every accepted call. The traced run also
replays its own trace clean against the spec (the tracer changes nothing).
"""

from __future__ import annotations

import io
from collections import Counter

import pytest
from fuzz_harness import FUZZ_SETTINGS, pick, replayed, report, run_fuzz
from hypothesis import given
from hypothesis import strategies as st

from invariants.ledger import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_ledger
from spec.types import Role, Tier

OPS = [
    ("register_authority", ("pool", "tier", "bytes")), ("register_alias", ("authority", "pool")),
    ("register_holder", ("pool",)), ("reserve", ("holder", "authority", "tier", "bytes", "role")),
    ("record_committed", ("holder", "authority", "tier", "bytes", "role")),
    ("commit", ("holder", "allocation", "bytes")), ("cancel", ("holder", "allocation")),
    ("release", ("holder", "allocation")), ("quarantine", ("holder", "allocation", "bytes0")),
    ("lose_device", ("authority",)), ("confirm_termination", ("authority",)),
    ("open_allowance", ("holder", "authority", "bytes")), ("reserve_growth", ("holder", "allowance", "bytes")),
    ("map_allowance", ("holder", "allowance", "bytes")), ("unmap_allowance", ("holder", "allowance", "bytes")),
    ("transfer_allowance", ("holder", "allowance", "allowance", "bytes")),
    ("close_allowance", ("holder", "allowance")), ("snapshot", ("authority",)),
]
# Valid traffic dominates so that live state builds up between hostile calls.
WEIGHTED = OPS + [("reserve", OPS[3][1])] * 4 + [("commit", OPS[5][1])] * 3 + [("release", OPS[7][1])] * 2


class _World:
    def __init__(self, pmm: ProcessMemoryManager) -> None:
        self.holders = [pmm.register_holder("h0")]
        self.auths = [pmm.register_authority("gpu0", Tier.DEVICE, 400), pmm.register_authority("host", Tier.HOST, 900)]
        self.allocs: list[int] = []
        self.allows: list[int] = []

    def valid(self, kind: str, data) -> object:
        return {
            "holder": lambda: pick(data, self.holders), "authority": lambda: pick(data, self.auths),
            "allocation": lambda: pick(data, self.allocs), "allowance": lambda: pick(data, self.allows),
            "tier": lambda: data.draw(st.sampled_from(list(Tier))), "role": lambda: data.draw(st.sampled_from(list(Role))),
            "bytes": lambda: data.draw(st.integers(1, 120)), "bytes0": lambda: data.draw(st.integers(0, 60)),
            "pool": lambda: data.draw(st.sampled_from(["gpu0", "host", "uma", "gpu1"])),
        }[kind]()

    def noted(self, name: str, args, result) -> None:
        if name in ("register_authority", "register_alias") and result not in self.auths:
            self.auths.append(result)
        elif name == "register_holder":
            self.holders.append(result)
        elif name in ("reserve", "record_committed"):
            self.allocs.append(result)
        elif name == "open_allowance":
            self.allows.append(result)


def _fuzz(data, counts: Counter, traced: bool) -> None:
    buf = io.StringIO()
    pmm = ProcessMemoryManager(trace=JsonlSink(buf) if traced else None)
    world = _World(pmm)
    run_fuzz(data, pmm, WEIGHTED, world.valid, lambda p: abstract_ledger(p), counts, steps=40, noted=world.noted,
             check=lambda p: check_all(abstract_ledger(p)))
    if traced:
        r, lines = replayed(pmm, buf)
        assert r.ok, r.describe()
        assert r.events == len(lines)
        counts["trace events replayed"] += r.events


@pytest.mark.parametrize("traced", [False, True], ids=["plain", "traced"])
def test_fuzz_process_memory_manager(capsys, traced: bool) -> None:
    counts: Counter = Counter()

    @FUZZ_SETTINGS
    @given(st.data())
    def run(data) -> None:
        _fuzz(data, counts, traced=traced)

    run()
    report("ProcessMemoryManager" + " traced (tracer)" * traced, counts, capsys)
    assert counts["accepted"] > 150 and counts["rejected"] > 600, counts
    assert not traced or counts["trace events replayed"] > 1000, counts
