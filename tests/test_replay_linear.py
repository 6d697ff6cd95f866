"""Issue #14 finding 4: replay is linear in the trace's size, not quadratic in live state.

Each event is checked on a partial state of what it touches, so the records
a step sees do not grow with the number of reservations left open; the
whole-state predicates run at boundaries (amortised) and at the end.
"""

from __future__ import annotations

import io
import time

import pytest

from invariants import contracts
from invariants import replay as R
from invariants import replay_store
from refimpl.governor import ProcessMemoryManager
from refimpl.tracing import JsonlSink, boundary
from spec.types import Role, Tier


def _open_reservations(n: int, boundaries: bool = False) -> list[bytes]:
    buf = io.StringIO()
    with contracts.contracts(False):
        pmm = ProcessMemoryManager(trace=JsonlSink(buf))
        h = pmm.register_holder("h")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 2**40)
        for _ in range(n):
            pmm.reserve(h, a, Tier.DEVICE, 8, Role.KV)  # left open
            if boundaries:
                boundary(pmm)
        pmm.lose_device(a)
        pmm.lose_device(a)  # a repeat scans nothing new
        pmm.confirm_termination(a)
        boundary(pmm)
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


@pytest.mark.parametrize("boundaries", [False, True], ids=["no-boundaries", "boundary-after-each"])
def test_each_event_sees_a_bounded_partial_state(monkeypatch, boundaries) -> None:
    seen: list[int] = []
    view = replay_store.Store.view

    def counting(self, act, observed):
        s = view(self, act, observed)
        seen.append(len(s.allocations) + len(s.authorities) + len(s.allowances))
        return s

    monkeypatch.setattr(replay_store.Store, "view", counting)
    lines = _open_reservations(2000, boundaries)
    r = R.replay_lines(lines)
    assert r.ok, r.describe()
    # A reserve sees its ledger and nothing else. Only the loss, its repeat and the termination see the
    # 2,000 allocations, because their own lines list every charge they observed (linear in the line).
    assert sorted(seen)[-4] <= 4 and sum(seen) <= 3 * 2001 + 4 * len(seen), sorted(seen)[-5:]


def test_replay_of_many_open_reservations_is_fast() -> None:
    lines = _open_reservations(4000)  # old code: 13.7 s for 4,000 open reservations
    t0 = time.perf_counter()
    r = R.replay_lines(lines)
    took = time.perf_counter() - t0
    assert r.ok, r.describe()
    assert took < 6, f"{len(lines)} events took {took:.1f} s"
