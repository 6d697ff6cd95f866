"""`InvariantViolation`: a governor bug, never a caller error.

It subclasses `AssertionError`, not `spec.errors.GovernorError`, so
`except GovernorError` in a caller can never swallow it.
"""

from __future__ import annotations

__all__ = ["InvariantViolation", "RefinementViolation"]


class InvariantViolation(AssertionError):
    """A catalog invariant or contract does not hold; `.id` names it."""

    def __init__(self, id: str, message: str) -> None:
        super().__init__(f"{id}: {message}")
        self.id = id


class RefinementViolation(InvariantViolation):
    """An implementation step differs from the spec's step on the abstraction."""

    def __init__(self, message: str) -> None:
        super().__init__("refinement", message)
