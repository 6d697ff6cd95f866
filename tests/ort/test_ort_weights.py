"""ORT really reads the governed weight bytes (issue #11 item 3, as far as this branch goes; I8, C6).

Managed sessions take their initializers from the weight holder's leased
buffer (`add_initializer` over OrtValues on the lease) with ORT's prepacking
off. Written into, the leased bytes change the next Run's output: ORT reads
the lease on every Run, it keeps no copy of its own. With prepacking on (the
old setting), the same write changed nothing: ORT had packed its own copy.
"""

from __future__ import annotations

import numpy as np
from ort_harness import runtime

from spec import sessions as S


def _leased_wo(rt, name):
    keep = rt.weights.models[name][1]
    backing = keep[-1]
    views = [v for v in keep if isinstance(v, np.ndarray) and v.ndim == 2]
    assert all(np.shares_memory(v, backing) for v in views)  # every matrix lies in the leased buffer
    return backing, views


def test_a_write_into_the_leased_weights_changes_the_next_run(world) -> None:
    x = np.random.default_rng(7).standard_normal((1, 1, 32)).astype(np.float32)
    rt = runtime(world, models={"a": "dec"}, inputs=lambda rid, t, d: x)  # every request sees the same token
    f = world.facts["dec"]
    r1, r2 = rt.execute(S.Open("a")), rt.execute(S.Open("a"))
    rt.execute(S.Decode(r1))
    before = rt.last_output.copy()
    backing, views = _leased_wo(rt, "a")
    assert backing.nbytes == rt.abstract().models["a"].admitted - f.transient_peak  # the charged bytes
    for v in views:
        v *= 2.0  # the lease's bytes, in place
    rt.execute(S.Decode(r2))  # the same first step, another request
    assert not np.array_equal(rt.last_output, before)  # ORT read the lease (prepacked: identical)
    for v in views:
        v *= 0.5  # exact in binary floating point: the original bytes are back
    r3 = rt.execute(S.Open("a"))
    rt.execute(S.Decode(r3))
    assert np.array_equal(rt.last_output, before)  # and reads it still: the original output is back
    rt.close()
