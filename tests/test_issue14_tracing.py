"""Issue #14 finding 3: tracing changes no behaviour (the trace's own IDs: C2, I4a, I7).

With a sink attached, hostile arguments get the same typed errors as
without one and use no sequence number without an event; the trace stays
valid JSON and replays clean; the sink runs outside the ledger lock, in
sequence order; a raising sink loses no outcome.
"""

from __future__ import annotations

import io
import json
import threading
import time
from decimal import Decimal

import numpy as np
import pytest

from invariants.manager_replay import replay_manager_lines
from invariants import replay as R
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink, boundary, sink_errors
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import CapacityDenied, InvalidArgument, InvalidBytes, TraceSinkFailed, UnknownHolder
from spec.types import Role, Tier
from trace_harness import lines_of, traced

HOSTILE_BYTES = [np.int64(5), Decimal(5), b"5", float("nan"), float("inf"), 10**30, 2.5, True, -1]


def _world(sink):
    pmm = ProcessMemoryManager(trace=sink)
    h = pmm.register_holder("h")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 1000)
    return pmm, h, a


def _no_constant(name: str) -> None:
    raise AssertionError(f"the trace holds {name}, which is not JSON")


def _replays_clean(buf: io.StringIO) -> R.ReplayResult:
    lines = lines_of(buf)
    for line in lines:
        json.loads(line, parse_constant=_no_constant)  # strict JSON: no NaN / Infinity
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    return r


@pytest.mark.parametrize("nbytes", HOSTILE_BYTES, ids=repr)
def test_traced_hostile_bytes_get_the_untraced_error_and_replay_clean(nbytes) -> None:
    buf = io.StringIO()
    pmm, h, a = _world(JsonlSink(buf))
    plain, ph, pa = _world(None)
    before = abstract_ledger(pmm)
    with pytest.raises(InvalidBytes, match="nbytes") as traced:
        pmm.reserve(h, a, Tier.DEVICE, nbytes, Role.WEIGHTS)
    with pytest.raises(InvalidBytes) as untraced:
        plain.reserve(ph, pa, Tier.DEVICE, nbytes, Role.WEIGHTS)
    assert str(traced.value) == str(untraced.value)
    assert abstract_ledger(pmm) == before
    rid = pmm.reserve(h, a, Tier.DEVICE, 10, Role.WEIGHTS)  # the next call is numbered right after
    pmm.cancel(h, rid)
    assert _replays_clean(buf).events == 6  # the configure event first


@pytest.mark.parametrize("call, error", [
    (lambda p, h, a: p.reserve(h, a, "device", 10, Role.WEIGHTS), InvalidArgument),  # a raw string, not a Tier
    (lambda p, h, a: p.reserve(h, a, Tier.DEVICE, 10, "weights"), InvalidArgument),
    (lambda p, h, a: p.reserve(np.int64(h), a, Tier.DEVICE, 10, Role.WEIGHTS), UnknownHolder),
    (lambda p, h, a: p.register_holder("x" * 300), InvalidArgument),  # old code: accepted, trace malformed
    (lambda p, h, a: p.register_authority("y" * 257, Tier.HOST, 10), InvalidArgument),
    (lambda p, h, a: p.register_alias(a, b"view"), InvalidArgument),
    (lambda p, h, a: p.reserve(h, a, Tier.DEVICE, 10**6, Role.WEIGHTS), CapacityDenied),
], ids=["raw-tier", "raw-role", "numpy-holder", "long-holder-name", "long-pool", "bytes-view", "denied"])
def test_traced_rejections_replay_clean(call, error) -> None:
    buf = io.StringIO()
    pmm, h, a = _world(JsonlSink(buf))
    before = abstract_ledger(pmm)
    with pytest.raises(error):
        call(pmm, h, a)
    assert abstract_ledger(pmm) == before
    r = _replays_clean(buf)
    assert r.events == 4  # the configure event first


def test_a_raising_sink_loses_no_outcome() -> None:
    fail = {"on": False}

    def sink(event):
        if fail["on"]:
            raise OSError("disk full")

    pmm, h, a = _world(sink)
    fail["on"] = True
    with pytest.raises(TraceSinkFailed, match="disk full") as e:
        pmm.reserve(h, a, Tier.DEVICE, 100, Role.WEIGHTS)
    rid = e.value.result  # old code: the id was lost while 100 B stayed charged
    assert pmm.snapshot(a).used == 100
    with pytest.raises(CapacityDenied) as denied:  # a rejected op keeps its own error, with the sink's noted
        pmm.reserve(h, a, Tier.DEVICE, 10**6, Role.WEIGHTS)
    assert any("trace sink failed" in n for n in denied.value.__notes__)
    fail["on"] = False
    pmm.cancel(h, rid)
    assert pmm.snapshot(a).used == 0
    assert [seq for seq, _ in sink_errors(pmm)] == [4, 5]  # after configure and the two registrations


def test_a_slow_sink_does_not_stall_another_threads_snapshot() -> None:
    in_sink, snapped = threading.Event(), threading.Event()

    def sink(event):
        if event["kind"] == "reserve":
            in_sink.set()
            snapped.wait(5)  # stays in the sink until the other thread's snapshot() returned (or 5 s)

    pmm, h, a = _world(sink)

    def observer() -> None:
        in_sink.wait(5)
        pmm.snapshot(a)  # old code: blocks on the ledger lock the sink's caller holds
        snapped.set()

    t = threading.Thread(target=observer, daemon=True)
    t.start()
    pmm.reserve(h, a, Tier.DEVICE, 10, Role.WEIGHTS)
    t.join(5)
    assert snapped.is_set(), "snapshot() waited for the sink"


def test_a_sink_waiting_on_another_threads_call_does_not_deadlock() -> None:
    done = []

    def sink(event):
        if event["kind"] == "reserve":
            other = threading.Thread(target=lambda: done.append(pmm.register_holder("other")), daemon=True)
            other.start()
            other.join(3)  # old code: the other call blocks on the ledger lock held around this sink

    pmm, h, a = _world(sink)
    pmm.reserve(h, a, Tier.DEVICE, 10, Role.WEIGHTS)
    assert done, "the other thread's governor call never returned (deadlock)"


def test_events_reach_the_sink_in_sequence_order_from_many_threads() -> None:
    seen: list[int] = []
    buf = io.StringIO()
    jsonl = JsonlSink(buf)

    def sink(event):
        seen.append(event["source_sequence"])
        jsonl(event)
        if event["source_sequence"] % 7 == 0:
            time.sleep(0.001)  # let other threads queue behind the delivering one

    pmm, h, a = _world(sink)

    def work() -> None:
        for _ in range(50):
            rid = pmm.reserve(h, a, Tier.DEVICE, 1, Role.KV)
            pmm.commit(h, rid, 1)
            pmm.release(h, rid)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    boundary(pmm)
    assert seen == list(range(1, len(seen) + 1)) and len(seen) == 3 + 6 * 150 + 1  # configure, registrations, work, boundary
    _replays_clean(buf)
