"""Bind once per bucket (issue #11 item 7): no IOBinding or OrtValue is built on the decode path.

A bucket's bindings are built when the bucket is made (open, growth); each
decode only writes its input into the bound buffer and runs. Counted by
wrapping ORT's constructors; the outputs stay identical to a plain session.
IDs: C9 (the KV bundle's contents), I8c (growth by buckets).
"""

from __future__ import annotations

import onnxruntime as ort
from ort_harness import decode_identically

from refimpl.ort.governed import GovernedRuntime
from spec import sessions as S

MAX_CONTEXT, BUCKET = 16, 4


class _Counter:
    def __init__(self, monkeypatch) -> None:
        self.ortvalues = self.bindings = 0
        make_value = ort.OrtValue.ortvalue_from_numpy
        make_binding = ort.InferenceSession.io_binding

        def value(*a, **k):
            self.ortvalues += 1
            return make_value(*a, **k)

        def binding(s):
            self.bindings += 1
            return make_binding(s)

        monkeypatch.setattr(ort.OrtValue, "ortvalue_from_numpy", staticmethod(value))
        monkeypatch.setattr(ort.InferenceSession, "io_binding", binding)


def test_decode_within_a_bucket_builds_no_binding_and_growth_builds_one_bucket(world, monkeypatch) -> None:
    rt = GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET)
    rt.execute(world.load("a", "dec"))
    c = _Counter(monkeypatch)
    rid = rt.execute(S.Open("a"))
    assert c.bindings == BUCKET  # one binding per step position of the first bucket
    opened = (c.bindings, c.ortvalues)
    for _ in range(BUCKET):
        rt.execute(S.Decode(rid))
    assert (c.bindings, c.ortvalues) == opened  # old code: 4 OrtValues + 1 IOBinding per step
    rt.execute(S.Decode(rid))  # the growth: the next bucket's bindings, once
    assert c.bindings == 2 * BUCKET
    grown = (c.bindings, c.ortvalues)
    for _ in range(BUCKET - 1):
        rt.execute(S.Decode(rid))
    assert (c.bindings, c.ortvalues) == grown
    rt.close()


def test_bound_decode_to_max_context_is_identical_to_a_plain_session(world) -> None:
    rt = GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET)
    rt.execute(world.load("w", "dec_wide"))
    rids = [rt.execute(S.Open("w")) for _ in range(2)]
    decode_identically(world, rt, rids, MAX_CONTEXT)  # interleaved requests on one session: bindings per request
    assert all(rt.kv.bundles[r].cap == MAX_CONTEXT for r in rids)  # grew 4 -> 8 -> 12 -> 16
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime
