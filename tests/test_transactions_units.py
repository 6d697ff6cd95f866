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
from spec.errors import InvalidArgument, InvalidTransition, ProviderPinned, UnknownBundle, UnknownIntent
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


# --- abort releases everything (I5) ----------------------------------------------------------


def three_held(guards=ALL_ON):
    """Authorities 1..3 (100 B each); transaction 1 holds 10, 20 and 30 B on them, reserved."""
    s, _ = run(T.AddAuthority("a", 100), T.AddAuthority("b", 100), T.AddAuthority("c", 100),
               T.Plan(((1, 10), (2, 20), (3, 30)), 0, ViewKind.CONTIGUOUS),
               T.Reserve(1, 1), T.Reserve(1, 2), T.Reserve(1, 3), guards=guards)
    assert s.txs[1].phase is TxPhase.RESERVED
    return s


def test_abort_releases_every_reservation_and_leaves_an_intent() -> None:
    s, (iid,) = run(T.Abort(1), state=three_held())
    assert [s.authorities[a].used for a in (1, 2, 3)] == [0, 0, 0]
    assert 1 not in s.txs
    assert s.intents[iid] == S.Intent(iid, 1, 0, 1)


def test_full_abort_off_leaks_all_but_the_first_reservation() -> None:
    # The guard's harm: bytes stay charged to a transaction that no longer exists.
    off = GuardSet.without("full_abort")
    s, _ = run(T.Abort(1), state=three_held(off), guards=off)
    assert [s.authorities[a].used for a in (1, 2, 3)] == [0, 20, 30]


# --- references pin a provider (C3) -------------------------------------------------------


def test_references_name_stranded_charge() -> None:
    s, _ = run(T.LoseDevice(1), state=committed())
    assert S.references(s, 1) == ["view 1", "30 B stranded charge"]
    assert S.references(s, 2) == ["transaction 1"]
    assert S.references(s, 9) == []


def test_invalid_remove_of_a_referenced_authority_names_the_references() -> None:
    s, _ = run(T.LoseDevice(1), state=committed())
    with pytest.raises(ProviderPinned, match=r"^authority 1 is pinned by view 1, 30 B stranded charge$"):
        S.step(s, T.RemoveAuthority(1))


def test_provider_pinned_off_removes_a_referenced_authority() -> None:
    # The guard's harm: transaction 1 still holds 20 B on an authority that no longer exists.
    s, _ = run(T.RemoveAuthority(2), state=committed(), guards=GuardSet.without("provider_pinned"))
    assert 2 not in s.authorities and s.txs[1].held == ((1, 30), (2, 20))


# --- lookups name the record --------------------------------------------------------------


def test_invalid_unknown_bundle_names_it() -> None:
    with pytest.raises(UnknownBundle, match=r"^bundle 9 is not known$"):
        S.step(committed(), T.ReportMismatch(9))


def test_invalid_used_intent_names_it() -> None:
    s, (iid,) = run(T.Abort(1), state=three_held())
    s, _ = run(T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, retry=iid), state=s)
    with pytest.raises(InvalidTransition, match=rf"^intent {iid} is already used by a retry$"):
        S.step(s, T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, retry=iid))


def test_invalid_unknown_intent_names_it() -> None:
    with pytest.raises(UnknownIntent, match=r"^intent 5 is not known$"):
        S.step(committed(), T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, retry=5))


# --- one control per guard of the transaction path (C4, C3, I10) ----------------------------


def planned():
    s, _ = run(T.AddAuthority("a", 100), T.AddAuthority("b", 100), T.Plan(((1, 10), (2, 20)), 0, ViewKind.CONTIGUOUS))
    return s


@pytest.mark.parametrize("held", [0, 1], ids=["planned", "reserving"])
def test_invalid_publish_before_every_authority_is_held(held) -> None:
    s, _ = run(*[T.Reserve(1, 1)][:held], state=planned())
    phase = ("planned", "reserving")[held]
    with pytest.raises(InvalidTransition, match=rf"^transaction 1: no transition for event 'publish' in phase '{phase}'$"):
        S.step(s, T.Publish(1))


@pytest.mark.parametrize("held", [0, 1], ids=["planned", "reserving"])
def test_publish_after_all_held_off_publishes_a_view_over_unreserved_bytes(held) -> None:
    off = GuardSet.without("publish_after_all_held")
    s, _ = run(*[T.Reserve(1, 1)][:held], state=planned(), guards=off)
    s, (vid,) = run(T.Publish(1), state=s, guards=off)
    # The harm: a provisional view exists while authority 2's 20 B were never reserved.
    assert s.txs[1].phase is TxPhase.PUBLISHED
    assert s.views[vid].allocation == 1 and s.authorities[2].used == 0


def test_publish_of_a_reserved_transaction_with_the_guard_off_is_the_normal_path() -> None:
    off = GuardSet.without("publish_after_all_held")
    s, _ = run(T.Reserve(1, 1), T.Reserve(1, 2), state=planned(), guards=off)
    s, _ = run(T.Publish(1), state=s, guards=off)
    assert s.txs[1].phase is TxPhase.PUBLISHED
    with pytest.raises(InvalidTransition, match=r"^transaction 1: no transition for event 'publish' in phase 'published'$"):
        S.step(s, T.Publish(1), off)


def bundled(guards=ALL_ON):
    s, _ = run(T.AddAuthority("a", 100), T.OpenBundle(), T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, bundle=1),
               T.Reserve(1, 1), T.Publish(1), T.Execute(1, 1, 1), guards=guards)
    return s


def test_commit_advances_every_part_of_the_bundle() -> None:
    s, _ = run(T.Commit(1), state=bundled())
    assert s.bundles[1].versions == (1, 1, 1, 1)


def test_atomic_bundle_off_advances_one_part_only() -> None:
    # The guard's harm: KV at version 1 beside recurrent, sampler and progress state at 0 (I10).
    off = GuardSet.without("atomic_bundle")
    s, _ = run(T.Commit(1), state=bundled(off), guards=off)
    assert s.bundles[1].versions == (1, 0, 0, 0)


def test_invalid_commit_before_execute_names_the_phase() -> None:
    s, _ = run(T.Reserve(1, 1), T.Reserve(1, 2), state=planned())
    with pytest.raises(InvalidTransition, match=r"^transaction 1: no transition for event 'commit' in phase 'reserved'$"):
        S.step(s, T.Commit(1))


@pytest.mark.parametrize("act", [T.Publish("1"), T.Commit("1"), T.Abort("1")], ids=repr)
def test_invalid_tx_id_type_names_the_field(act) -> None:
    with pytest.raises(InvalidArgument, match=r"^tx must be an int id, got '1'$"):
        S.step(planned(), act)


def lost_while_open(guards=ALL_ON):
    """Transaction 1 holds 10 B on authority 1 and 20 B on 2 (reserved, not committed); authority 1 is lost."""
    s, _ = run(T.Reserve(1, 1), T.Reserve(1, 2), T.LoseDevice(1), state=planned(), guards=guards)
    return s


def test_loss_aborts_an_open_transaction_stranding_only_the_lost_part() -> None:
    s = lost_while_open()
    assert 1 not in s.txs
    a, b = s.authorities[1], s.authorities[2]
    assert (a.used, a.stranded, b.used, b.stranded) == (10, 10, 0, 0)


def test_refund_after_termination_off_refunds_an_aborted_open_transaction_at_loss() -> None:
    s = lost_while_open(GuardSet.without("refund_after_termination"))
    a = s.authorities[1]
    assert (a.used, a.stranded) == (0, 0)
