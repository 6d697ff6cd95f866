"""A weight cache ORT actually uses (issue #11 item 3; C5, I6, I8b).

Prefetched cache bytes hold a replica of a loaded model's weights, and the
model's decodes run on a replica session that reads them; a pressure answer
that takes the bucket drops the replica first and re-binds the requests to
the primary session (the pinned lease). Outputs stay bit-identical to an
ungoverned run on both sides of the switch; what ORT reads changes.
"""

from __future__ import annotations

import numpy as np
from ort_harness import assert_identical, runtime, ungoverned

from refimpl.verify.sessions_checker import MAX_CONTEXT
from refimpl.ort.governed import decode_input
from spec import sessions as S


def test_cache_replica_is_read_by_ort_and_reclaim_switches_back_with_identical_outputs(world) -> None:
    rt = runtime(world, models={"a": "dec"})
    rid = rt.execute(S.Open("a"))
    rt.execute(S.Decode(rid))
    primary = rt.models["a"].session
    assert rt.kv.bundles[rid].session is primary
    rt.execute(S.Prefetch())
    replica = rt.replicas.by_model["a"]
    assert rt.kv.bundles[rid].session is replica.session is not primary  # decodes now read the cache
    assert any(buf is replica.buf for _, buf in rt.weights.cache)  # inside a cache lease's bytes
    rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, 2)
    # ORT reads the cache bytes: corrupt them, one Run differs; restore them, identical again.
    mats = [v for v in replica.views if isinstance(v, np.ndarray) and v.ndim == 2]
    assert mats and all(np.shares_memory(v, replica.buf) for v in mats)
    for v in mats:
        v *= 2.0  # exact in binary floating point, undone below
    b = rt.kv.bundles[rid]
    b.x[...] = decode_input(rid, 2, 32)
    b.session.run_with_iobinding(b.bindings[2])  # a probe Run (does not advance the bundle)
    *_, (y3, _, _) = ungoverned(world, rt, rid, 3)
    assert not np.array_equal(b.y, y3)
    for v in mats:
        v *= 0.5
    rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, 3)
    # Pressure takes the cache bucket: the replica goes first, the request is re-bound to the primary.
    assert rt.execute(S.Pressure(10**6)) > 0
    assert "a" not in rt.replicas.by_model and rt.kv.bundles[rid].session is primary
    for t in range(3, MAX_CONTEXT):
        rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, MAX_CONTEXT)
    rt.close()
    assert rt.used() == rt.env_arena.grant and rt.env_arena.lent == 0  # ORT's cap outlives the runtime


def test_a_partial_reclaim_that_splits_the_replica_bucket_drops_the_replica(world) -> None:
    rt = runtime(world, models={"a": "dec"})
    rid = rt.execute(S.Open("a"))
    rt.execute(S.Prefetch())
    assert "a" in rt.replicas.by_model
    rt.execute(S.Pressure(4096))  # one page of the (single) cache bucket: split, re-leased
    assert "a" not in rt.replicas.by_model and rt.kv.bundles[rid].session is rt.models["a"].session
    rt.execute(S.Prefetch())  # room again: a new replica, the request re-bound to it
    assert rt.kv.bundles[rid].session is rt.replicas.by_model["a"].session
    rt.execute(S.Decode(rid))
    assert_identical(world, rt, rid, 1)
    rt.close()
