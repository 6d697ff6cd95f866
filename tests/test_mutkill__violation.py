"""invariants/_violation.py pinned (its mutation run, benchmarks/mutation.py): what each violation class carries,
its whole message and arguments, its id and clause, and that none of them is a caller error."""

from __future__ import annotations

import pytest

from invariants._violation import ErrorTypeDivergence, InvariantViolation, RefinementViolation
from spec.errors import GovernorError


def test_invariant_violation_carries_id_message_and_clause() -> None:
    e = InvariantViolation("I4a", "used 5 > limit 4", clause="I4a.used")
    assert (e.args, str(e), e.id, e.clause) == (("I4a: used 5 > limit 4",), "I4a: used 5 > limit 4", "I4a", "I4a.used")
    bare = InvariantViolation("C1", "x")
    assert (bare.args, bare.id, bare.clause) == (("C1: x",), "C1", None)


def test_refinement_violation_is_named_refinement() -> None:
    e = RefinementViolation("state differs")
    assert (e.args, e.id, e.clause) == (("refinement: state differs",), "refinement", "refinement")
    assert isinstance(e, InvariantViolation)


def test_error_type_divergence_names_its_own_clause() -> None:
    e = ErrorTypeDivergence("CapacityDenied vs InvalidArgument")
    assert (e.args, e.id, e.clause) == (
        ("refinement: CapacityDenied vs InvalidArgument",), "refinement", "refinement.error_type")
    assert isinstance(e, RefinementViolation)


@pytest.mark.parametrize("cls_args", [(InvariantViolation, ("I1", "m")), (RefinementViolation, ("m",)),
                                      (ErrorTypeDivergence, ("m",))])
def test_no_violation_is_a_caller_error(cls_args) -> None:
    cls, args = cls_args
    e = cls(*args)
    assert isinstance(e, AssertionError) and not isinstance(e, GovernorError)
