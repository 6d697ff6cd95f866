"""spec/transactions.py scripted: device loss of a committed lease set, and the names in refusals (C3, C4, I5).

tests/test_tx_scenarios.py walks the lifecycle; these pin what the first
mutation run found unpinned: what a loss does to a *committed* lease set on
the lost authority (stranded, not refunded, until termination; the
`refund_after_termination` guard off refunds at loss), the one refund at
termination, and the exact messages of id and lifecycle refusals.
"""

from __future__ import annotations

import pytest

from spec import transactions as S
from spec import tx_actions as T
from spec.errors import InvalidArgument, InvalidTransition
from spec.guards import ALL_ON, GuardSet
from spec.tx_lifecycle import TxPhase, ViewKind, ViewState
from spec.types import ContextState


def run(*actions, state=S.TX_EMPTY, guards=ALL_ON):
    results = []
    for a in actions:
        state, r = S.step(state, a, guards)
        results.append(r)
    return state, results


def committed(guards=ALL_ON):
    """Authorities 1 (100 B) and 2 (50 B); transaction 1 committed holding 30 B on 1 and 20 B on 2, view 1 on 1."""
    return run(
        T.AddAuthority("gpu0", 100), T.AddAuthority("gpu1", 50),
        T.Plan(((1, 30), (2, 20)), 0, ViewKind.CONTIGUOUS),
        T.Reserve(1, 1), T.Reserve(1, 2), T.Publish(1), T.Execute(1, 1, 1), T.Commit(1),
        guards=guards,
    )[0]


def test_committed_lease_set() -> None:
    s = committed()
    assert s.txs[1].phase is TxPhase.COMMITTED
    assert s.txs[1].held == ((1, 30), (2, 20))
    assert (s.authorities[1].used, s.authorities[2].used) == (30, 20)


def test_loss_strands_a_committed_lease_set_until_termination() -> None:
    s, _ = run(T.LoseDevice(1), state=committed())
    a = s.authorities[1]
    assert (a.context, a.used, a.stranded) == (ContextState.LOST, 30, 30)
    assert s.txs[1].held == ((2, 20),)  # the lost part leaves the lease set; the rest stays
    assert s.authorities[2] == committed().authorities[2]
    assert (s.views[1].state, s.views[1].users) == (ViewState.INVALID, ())
    s, _ = run(T.ConfirmTermination(1), state=s)
    a = s.authorities[1]
    assert (a.context, a.used, a.stranded) == (ContextState.TERMINATED, 0, 0)


def test_repeated_loss_and_termination_change_nothing() -> None:
    lost, _ = run(T.LoseDevice(1), state=committed())
    assert run(T.LoseDevice(1), state=lost)[0] == lost
    done, _ = run(T.ConfirmTermination(1), state=lost)
    assert run(T.ConfirmTermination(1), state=done)[0] == done
    assert run(T.LoseDevice(1), state=done)[0] == done


def test_refund_after_termination_off_refunds_at_loss() -> None:
    # The guard's harm: the lost bytes are credited back while the device may still hold them.
    off = GuardSet.without("refund_after_termination")
    s, _ = run(T.LoseDevice(1), state=committed(off), guards=off)
    a = s.authorities[1]
    assert (a.context, a.used, a.stranded) == (ContextState.LOST, 0, 0)
    assert s.txs[1].held == ((2, 20),)


@pytest.mark.parametrize(("act", "msg"), [
    (T.Release("1"), r"^tx must be an int id, got '1'$"),
    (T.LoseDevice("1"), r"^authority must be an int id, got '1'$"),
    (T.ConfirmTermination(1.0), r"^authority must be an int id, got 1\.0$"),
], ids=["release", "lose", "confirm"])
def test_invalid_id_names_the_field(act, msg) -> None:
    with pytest.raises(InvalidArgument, match=msg):
        S.step(committed(), act)


def test_invalid_release_of_an_open_transaction() -> None:
    s, _ = run(T.AddAuthority("gpu0", 100), T.Plan(((1, 30),), 0, ViewKind.CONTIGUOUS))
    with pytest.raises(InvalidTransition, match=r"^transaction 1: no transition for event 'release' in phase 'planned'$"):
        S.step(s, T.Release(1))


def test_invalid_confirm_termination_of_an_active_context() -> None:
    with pytest.raises(InvalidTransition,
                       match=r"^authority 1: no transition for event 'confirm-termination' in state 'active'$"):
        S.step(committed(), T.ConfirmTermination(1))
