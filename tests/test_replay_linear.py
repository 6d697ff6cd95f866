"""Issue #14 finding 4: replay is linear in the trace's size, not quadratic in live state.

A ledger-only trace that leaves its reservations open replays through the one
engine (`invariants.manager_replay`): each event's step predicates find the
records it changed by the `invariants.changed.Tracked` maps' parent links, not
by scanning everything live, and the whole-state predicates run once per as
many events as the state holds records (amortised) and at the end. The work
is counted deterministically (records scanned), never timed.
"""

from __future__ import annotations


import pytest

from invariants import contracts
from invariants import manager_replay as MR
from invariants.changed import Tracked
from invariants.manager_replay import replay_manager_lines
from refimpl.tracing import boundary
from spec.types import Role, Tier
from trace_harness import lines_of, traced


def _open_reservations(n: int, boundaries: bool = False) -> list[bytes]:
    with contracts.contracts(False):
        pmm, buf = traced()
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
    return lines_of(buf)


@pytest.mark.parametrize("boundaries", [False, True], ids=["no-boundaries", "boundary-after-each"])
def test_records_scanned_grow_linearly_with_the_trace(monkeypatch, boundaries) -> None:
    # Every scan of a tracked allocation or allowance map counts its records; a per-event scan of the
    # n open reservations would count about n^2 / 2 of them (500,000 here).
    scanned = [0]
    for name in ("keys", "values", "items", "__iter__"):
        def counting(self, _orig=getattr(Tracked, name)):
            scanned[0] += len(self)
            return _orig(self)
        monkeypatch.setattr(Tracked, name, counting)
    n = 1000
    r = replay_manager_lines(_open_reservations(n, boundaries))
    assert r.ok, r.describe()
    assert scanned[0] <= 20 * n, scanned[0]


def test_the_whole_state_predicates_run_amortised(monkeypatch) -> None:
    whole: list[int] = []
    check_all = MR.check_all

    def counting_check_all(m):
        whole.append(len(m.ledger.allocations))
        return check_all(m)

    monkeypatch.setattr(MR, "check_all", counting_check_all)
    n = 1000
    r = replay_manager_lines(_open_reservations(n))
    assert r.ok, r.describe()
    # Old code ran them per event (n^2/2 records in all).
    assert sum(whole) <= 4 * (n + 1), whole
