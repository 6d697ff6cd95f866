"""`InvariantViolation`: a governor bug, never a caller error.

It subclasses `AssertionError`, not `spec.errors.GovernorError`, so
`except GovernorError` in a caller can never swallow it.
"""

from __future__ import annotations

__all__ = ["InvariantViolation", "RefinementViolation", "ErrorTypeDivergence"]


class InvariantViolation(AssertionError):
    """A catalog invariant or contract does not hold; `.id` names it, `.clause` the clause that failed."""

    def __init__(self, id: str, message: str, clause: str | None = None) -> None:
        super().__init__(f"{id}: {message}")
        self.id = id
        self.clause = clause


class RefinementViolation(InvariantViolation):
    """An implementation step differs from the spec's step on the abstraction (state or result)."""

    def __init__(self, message: str) -> None:
        super().__init__("refinement", message, clause="refinement")


class ErrorTypeDivergence(RefinementViolation):
    """Both layers refused and nothing changed, but they name a different cause.

    A campaign still fails on it (the caller is told the wrong reason), but a
    negative control does not count it as a harm: no byte, ticket or request
    went wrong.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.clause = "refinement.error_type"
