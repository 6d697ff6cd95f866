"""The observed-step predicate of I2 (`invariants.replay_predicates`) on a ledger its prior state does not hold.

The replay hands each event a partial state, and the drift check and the verdict pins call the predicate on any
step: a grant on a ledger absent from the prior state is judged from 0 B used (the ledger rose from nothing).
Written from the mutation survivors of `invariants/replay_predicates.py` (the absent ledger's `used`).
"""

from __future__ import annotations

import pytest
from attrs import evolve

from invariants import InvariantViolation
from invariants.replay_predicates import step_I2_grant_charges
from spec import ledger
from spec import ledger_actions as A
from spec.ledger_state import State
from spec.types import Role, Tier

RESERVE = A.Reserve(1, 1, Tier.DEVICE, 8, Role.KV)


def _grant() -> tuple[State, State]:
    """A real 8 B grant on authority 1, and the prior state with that ledger left out (a partial view)."""
    s = ledger.apply(State(), A.RegisterAuthority("gpu0", Tier.DEVICE, 64))
    s = ledger.apply(s, A.RegisterHolder("kv"))
    nxt = ledger.apply(s, RESERVE)
    return evolve(s, authorities=s.authorities.delete(1)), nxt


def test_a_grant_on_a_ledger_absent_before_rose_from_zero() -> None:
    prev, nxt = _grant()
    step_I2_grant_charges(prev, RESERVE, nxt)  # 0 -> 8 B: exactly the grant


def test_a_ledger_absent_before_that_rose_by_more_than_the_grant_fails_naming_the_move() -> None:
    prev, nxt = _grant()
    nxt = evolve(nxt, authorities=nxt.authorities.set(1, evolve(nxt.authorities[1], used=9)))
    with pytest.raises(InvariantViolation) as e:
        step_I2_grant_charges(prev, RESERVE, nxt)
    assert (e.value.id, e.value.clause) == ("I2", "step_I2_grant_charges.grant_charged")
    assert str(e.value) == (f"I2: {RESERVE!r} was granted but charged 8 B (ledger moved 9 B): "
                            "bytes granted without being charged")


def test_a_second_grant_on_a_ledger_in_use_rose_by_its_bytes_alone() -> None:
    """8 B used before, 16 B after: the grant's 8 B (the ledger's move is after - before, not the sum)."""
    _, prev = _grant()
    step_I2_grant_charges(prev, RESERVE, ledger.apply(prev, RESERVE))
