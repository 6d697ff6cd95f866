"""A module whose only contract is vacuous: CrossHair exits 0, the project's check must still fail."""

from __future__ import annotations


def unsatisfiable(n: int) -> int:
    """pre: n > 0
    pre: n < 0
    post: __return__ == n
    """
    return n
