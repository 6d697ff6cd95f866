# Bad input to every pool operation of the manager (ProcessMemoryManager, refimpl.manager.leases) (STYLE 6, 8; C5, I6, I7).
#
# Each case runs one action against a fixed pool that holds a ticket in every
# interesting state (claimed idle / pinned / in flight, granted, pending,
# retired) and a pressure ticket in every state (open, answered, cancelled,
# expired, stale generation), with the cancellation mailbox full. The refimpl
# must raise the specific typed error, whose message names the problem, and
# leave the WHOLE abstract pool exactly as it was; `spec.pressure.step` from
# the same pool must raise the same error type.

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from invariants.pressure import check_all
from invariants.pressure_machine import PoolParams, SpecPoolAdapter
from refimpl.verify.pressure_adapter import PressureAdapter
from spec import pressure as P
from spec.errors import (
    CapacityDenied,
    ForeignHolder,
    GovernorError,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    StaleGeneration,
    UnknownHolder,
    UnknownTicket,
)

PARAMS = PoolParams(capacity=100, fixed=10, holders=2, aging_bound=3, mailbox=2)


def build_world(do: Any) -> SimpleNamespace:
    w = SimpleNamespace()
    w.stale = do(P.Press(1, 10, 0, 100))
    do(P.Reconfigure())
    w.retired = do(P.Submit(1, 5, 0))
    do(P.Cancel(1, w.retired))
    w.idle = do(P.Submit(1, 30, 0))
    do(P.Claim(1, w.idle))
    w.pinned = do(P.Submit(1, 10, 0))
    do(P.Claim(1, w.pinned))
    do(P.SetUse(1, w.pinned, True, False))
    w.busy = do(P.Submit(1, 10, 0))
    do(P.Claim(1, w.busy))
    do(P.SetUse(1, w.busy, False, True))
    w.granted = do(P.Submit(2, 20, 0))
    w.pending = do(P.Submit(2, 80, 0))  # 20 B free: waits; the mailbox (2 slots) is now full
    w.open = do(P.Press(1, 10, 0, 10))
    w.answered = do(P.Press(1, 5, 0, 10))
    do(P.Answer(1, w.answered, (), 0))
    w.cancelled = do(P.Press(1, 5, 0, 10))
    do(P.CancelPressure(w.cancelled))
    w.expired = do(P.Press(1, 5, 0, 2))
    do(P.ExpirePressure(w.expired, 5))
    return w




def _world(factory: Any) -> tuple[Any, SimpleNamespace]:
    gov = factory(PARAMS)
    return gov, build_world(gov.execute)


W = _world(SpecPoolAdapter)[1]

CASES = [
    (P.Submit(1, 0, 0), InvalidBytes, "nbytes"),
    (P.Submit(1, -5, 0), InvalidBytes, "nbytes"),
    (P.Submit(1, 2**63, 0), InvalidBytes, "nbytes"),
    (P.Submit(1, 1.5, 0), InvalidBytes, "nbytes"),
    (P.Submit(1, 1, "hi"), InvalidArgument, "priority"),
    (P.Submit(9, 1, 0), UnknownHolder, "holder 9"),
    (P.Submit(1, 91, 0), CapacityDenied, "can never fit its 90 B"),
    (P.Submit(1, 1, 0), MailboxFull, "mailbox"),
    (P.TryReserve(1, 1, 0), CapacityDenied, "waiting"),
    (P.TryReserve(1, 91, 0), CapacityDenied, "can never fit its 90 B"),
    (P.Claim(1, 999), UnknownTicket, "never issued"),
    (P.Claim(1, W.retired), InvalidTransition, "already completed"),
    (P.Claim(1, W.granted), ForeignHolder, "holder 2"),
    (P.Claim(2, W.pending), InvalidTransition, "pending"),
    (P.Claim(1, W.idle), InvalidTransition, "claimed"),
    (P.Release(2, W.idle), ForeignHolder, "holder 1"),
    (P.Release(2, W.granted), InvalidTransition, "granted"),
    (P.Release(1, W.retired), InvalidTransition, "already completed"),
    (P.Cancel(2, W.idle), ForeignHolder, "holder 1"),
    (P.Cancel(1, 0), UnknownTicket, "never issued"),
    (P.Timeout(1, 999), UnknownTicket, "never issued"),
    (P.Timeout(None, W.idle), UnknownHolder, "holder None"),
    (P.SetUse(1, W.idle, 1, False), InvalidArgument, "bools"),
    (P.SetUse(2, W.granted, True, False), InvalidTransition, "granted"),
    (P.Press(1, 0, 0, 5), InvalidBytes, "target"),
    (P.Press(1, 5, 0, -1), InvalidArgument, "deadline"),
    (P.Press(7, 5, 0, 5), UnknownHolder, "holder 7"),
    (P.Answer(1, 999, (), 0), UnknownTicket, "pressure ticket 999"),
    (P.Answer(2, W.open, (), 0), ForeignHolder, "holder 1"),
    (P.Answer(1, W.stale, (), 0), StaleGeneration, "generation 0"),
    (P.Answer(1, W.answered, (), 0), StaleAnswer, "answered"),
    (P.Answer(1, W.cancelled, (), 0), StaleAnswer, "cancelled"),
    (P.Answer(1, W.expired, (), 0), StaleAnswer, "expired"),
    (P.Answer(1, W.open, (), 11), StaleAnswer, "answered at 11"),
    (P.Answer(1, W.open, (W.pinned,), 5), PinnedVictim, "pinned"),
    (P.Answer(1, W.open, (W.busy,), 5), PinnedVictim, "in flight"),
    (P.Answer(1, W.open, (W.idle, W.pinned), 5), PinnedVictim, "pinned"),  # the idle victim is not taken either
    (P.Answer(1, W.open, (W.granted,), 5), PinnedVictim, "not a claimed lease"),
    (P.Answer(1, W.open, (W.retired,), 5), PinnedVictim, "not a claimed lease"),
    (P.Answer(1, W.open, (W.idle, W.idle), 5), InvalidArgument, "distinct"),
    (P.Answer(1, W.open, [W.idle], 5), InvalidArgument, "tuple"),
    (P.Answer(1, W.open, (), -1), InvalidArgument, "now"),
    (P.CancelPressure(W.answered), InvalidTransition, "answered"),
    (P.CancelPressure(99), UnknownTicket, "pressure ticket 99"),
    (P.ExpirePressure(W.open, 5), InvalidTransition, "not expired at 5"),
    (P.ExpirePressure(W.expired, 9), InvalidTransition, "expired"),
]


def test_worlds_agree() -> None:
    spec_gov, _ = _world(SpecPoolAdapter)
    ref_gov, _ = _world(PressureAdapter)
    assert ref_gov.abstract() == spec_gov.abstract()
    check_all(ref_gov.abstract())
    b = P.buckets(ref_gov.abstract())
    assert b == {"fixed": 10, "free": 20, "reclaimable": 30, "granted": 20, "claimed": 20}


@pytest.mark.parametrize("action, error, match", CASES, ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_invalid_pressure_action_rejected_and_pool_unchanged(action, error, match) -> None:
    gov, _ = _world(PressureAdapter)
    before = gov.abstract()
    with pytest.raises(error, match=match):
        gov.execute(action)
    assert gov.abstract() == before  # the whole pool, not a field
    with pytest.raises(error):
        P.step(before, action)


def test_every_pressure_error_is_a_governor_error() -> None:
    assert all(issubclass(e, GovernorError) for _, e, _ in CASES)
