"""Shared helpers of the clause tests of every layer: a predicate's verdict or violation, and the clause cases it meets."""

from __future__ import annotations

from typing import Any

import pytest

from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, collecting, recording

__all__ = ["judged", "verdict", "violation", "cases", "broken"]


def judged(pred: Any, *args: Any) -> tuple[str | None, dict[str, tuple[int, int]]]:
    """One predicate on `args`: its whole failure message (None: it held) and its clauses' (evaluated, case held)."""
    cov = Coverage()
    with recording(cov):
        try:
            pred(*args)
            message = None
        except InvariantViolation as e:
            message = str(e)
    return message, {k: (e, h) for k, (e, h) in cov.counts.items()}


def verdict(check: Any, *args: Any) -> str | None:
    """The clause (else the ID) `check` names on `args`; None if it holds."""
    try:
        check(*args)
    except InvariantViolation as e:
        return e.clause or e.id
    return None


def violation(pred: Any, *args: Any) -> InvariantViolation:
    """What `pred` raises on `args` (the test fails if it holds)."""
    with pytest.raises(InvariantViolation) as e:
        pred(*args)
    return e.value


def cases(pred: Any, *args: Any) -> set[str]:
    """The clause cases `pred` meets on `args`, which must hold (a violation propagates)."""
    cov = Coverage()
    with recording(cov):
        pred(*args)
    return {k for k, (_, held) in cov.counts.items() if held}


def broken(check: Any, *args: Any) -> list[str]:
    """Every clause `check` finds broken on `args` (one per predicate: a predicate stops at its first failure)."""
    with collecting() as found:
        check(*args)
    return found
