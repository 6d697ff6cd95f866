"""Predicates per catalog ID, the contract switch (`invariants.contracts`), and the checking tools."""

from invariants._violation import InvariantViolation, RefinementViolation
from invariants.ledger import check_all, check_local, check_step

__all__ = ["InvariantViolation", "RefinementViolation", "check_all", "check_local", "check_step"]
