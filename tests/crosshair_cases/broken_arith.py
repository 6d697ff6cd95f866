"""Deliberately broken companions of `spec.arith`: CrossHair must find each bug.

Checked by `tests/test_crosshair.py` against the golden file
`broken_arith.expected`, so the checker is shown able to fail here. Each
function carries the same contract as its correct twin in `spec.arith`.
"""

from __future__ import annotations


def round_up(n: int, granule: int) -> int:
    """Bug: truncates instead of rounding up.

    pre: n >= 0
    pre: granule >= 1
    post: __return__ >= n
    """
    return (n // granule) * granule


def available(limit: int, used: int, growth_reserved: int) -> int:
    """Bug: forgets the clamp at zero.

    pre: limit >= 0
    pre: used >= 0
    pre: growth_reserved >= 0
    post: 0 <= __return__ <= limit
    """
    return limit - used - growth_reserved


def oversubscribed(used: int, limit: int) -> int:
    """Bug: off by one at the boundary.

    pre: used >= 0
    pre: limit >= 0
    post: (__return__ > 0) == (used > limit)
    """
    return max(0, used - limit + 1)


def unsatisfiable(n: int) -> int:
    """A precondition nothing meets: must be reported, never passed vacuously.

    pre: n > 0
    pre: n < 0
    post: __return__ == n
    """
    return n
