"""Exact values of spec/arith.py at and around its boundaries (I8, I8c, C7, C8, I2, section 6 order).

CrossHair proves the contracts in the docstrings; those are loose on purpose
(bounds, not values), so these cases pin the values themselves: each row is
a hand-computed figure, with the boundary (exact multiple, zero, clamp at 0)
it is there for. Fast and pure: also the mutation run's selection for arith.
"""

from __future__ import annotations

import pytest

from spec import arith


@pytest.mark.parametrize(
    ("n", "granule", "expected"),
    [
        (0, 1, 0),
        (0, 4096, 0),  # zero stays zero
        (1, 4096, 4096),  # one byte costs a whole granule
        (4095, 4096, 4096),
        (4096, 4096, 4096),  # an exact multiple is not rounded further
        (4097, 4096, 8192),
        (7, 1, 7),  # granule 1: identity
        (10, 3, 12),
        (9, 3, 9),
    ],
)
def test_round_up(n: int, granule: int, expected: int) -> None:
    assert arith.round_up(n, granule) == expected


@pytest.mark.parametrize(
    ("referenced", "granule", "peak", "expected"),
    [
        (0, 4096, 0, 0),
        (1, 4096, 0, 4096),
        (4096, 4096, 100, 4196),  # the peak is added unrounded
        (5000, 1024, 7, 5127),
        (3, 2, 1, 5),
    ],
)
def test_admitted_bytes(referenced: int, granule: int, peak: int, expected: int) -> None:
    assert arith.admitted_bytes(referenced, granule, peak) == expected


@pytest.mark.parametrize(("tokens", "bpt", "expected"), [(0, 8, 0), (3, 0, 0), (3, 8, 24), (1, 1, 1)])
def test_kv_bytes(tokens: int, bpt: int, expected: int) -> None:
    assert arith.kv_bytes(tokens, bpt) == expected


@pytest.mark.parametrize(
    ("old", "new", "bpt", "expected"),
    [
        (0, 0, 8, 0),
        (0, 4, 8, 32),  # first bucket: nothing old is live
        (4, 8, 8, 96),  # old 32 B live beside new 64 B during the copy
        (4, 4, 2, 16),
    ],
)
def test_kv_growth_peak(old: int, new: int, bpt: int, expected: int) -> None:
    assert arith.kv_growth_peak(old, new, bpt) == expected


@pytest.mark.parametrize(
    ("budget", "bpt", "ctx", "expected"),
    [
        (1000, 2, 100, 800),
        (1000, 10, 100, 0),  # KV takes everything: exactly 0
        (1000, 11, 100, 0),  # clamped at 0, never negative
        (1000, 0, 100, 1000),
        (1000, 9, 100, 100),
    ],
)
def test_static_weight_budget(budget: int, bpt: int, ctx: int, expected: int) -> None:
    assert arith.static_weight_budget(budget, bpt, ctx) == expected


@pytest.mark.parametrize(
    ("limit", "used", "growth", "expected"),
    [
        (100, 30, 20, 50),  # growth reserved counts against available (C8)
        (100, 30, 0, 70),
        (100, 0, 20, 80),
        (100, 80, 20, 0),  # exactly full
        (100, 90, 20, 0),  # oversubscribed: 0, never negative
        (0, 0, 0, 0),
    ],
)
def test_available(limit: int, used: int, growth: int, expected: int) -> None:
    assert arith.available(limit, used, growth) == expected


@pytest.mark.parametrize(
    ("used", "limit", "expected"),
    [(120, 100, 20), (100, 100, 0), (101, 100, 1), (50, 100, 0), (0, 0, 0)],
)
def test_oversubscribed(used: int, limit: int, expected: int) -> None:
    assert arith.oversubscribed(used, limit) == expected


@pytest.mark.parametrize(
    ("matured", "priority", "seq", "expected"),
    [
        (True, 5, 7, (0, 0, 7)),  # matured: priority ignored, FIFO by submit order
        (True, -3, 0, (0, 0, 0)),
        (False, 5, 7, (1, -5, 7)),
        (False, 0, 2, (1, 0, 2)),
        (False, -2, 1, (1, 2, 1)),
    ],
)
def test_arbitration_key(matured: bool, priority: int, seq: int, expected: tuple[int, int, int]) -> None:
    assert arith.arbitration_key(matured, priority, seq) == expected


def test_arbitration_key_orders_matured_first_then_priority_descending_then_fifo() -> None:
    # (matured, priority, seq) in the order section 6 grants them.
    expected_order = [(True, 0, 4), (True, 9, 5), (False, 9, 1), (False, 9, 3), (False, 1, 0), (False, -1, 2)]
    shuffled = [expected_order[i] for i in (3, 5, 0, 2, 4, 1)]
    assert sorted(shuffled, key=lambda t: arith.arbitration_key(*t)) == expected_order


@pytest.mark.parametrize(
    ("weight", "resident", "expected"),
    [
        (10, 3, 7),  # what does not stay resident crosses
        (10, 10, 0),  # all of it resident: exactly 0
        (10, 11, 0),  # more room than weights: clamped at 0, never negative
        (0, 0, 0),
    ],
)
def test_streaming_floor(weight: int, resident: int, expected: int) -> None:
    assert arith.streaming_floor(weight, resident) == expected


@pytest.mark.parametrize(
    ("budget", "ctx", "bpt", "expected"),
    [
        (1000, 10, 10, 10),  # an exact multiple: 1000 // (10 x 10)
        (1099, 10, 10, 10),  # one byte short of the next sequence: floored, not 10.99
        (99, 10, 10, 0),  # not even one sequence fits
        (0, 1, 1, 0),
        (24, 4, 3, 2),  # context and bytes/token are both factors: 24 // 12
    ],
)
def test_max_batch(budget: int, ctx: int, bpt: int, expected: int) -> None:
    got = arith.max_batch(budget, ctx, bpt)
    assert got == expected and type(got) is int
