"""spec/transactions.py scripted: device loss of a committed lease set, and the names in refusals (C3, C4, I5).

tests/test_tx_scenarios.py walks the lifecycle; these pin what the first
mutation run found unpinned: what a loss does to a *committed* lease set on
the lost authority (stranded, not refunded, until termination), the one refund at
termination, and the exact messages of id and lifecycle refusals.
"""

from __future__ import annotations

import pytest

from spec import transactions as S
from spec import transactions_actions as T
from spec.errors import (
    CapacityDenied,
    DeviceLost,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ManagerPoisoned,
    ReservationOrder,
    StaleGeneration,
    IdentityMismatch,
    UnknownAuthority,
    UnknownBundle,
    UnknownIntent,
    UnknownTransaction,
    UnknownView,
    ViewInUse,
)
from spec.guards import ALL_ON, GuardSet
from spec.transactions_lifecycle import TxPhase, ViewKind, ViewState
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


@pytest.mark.parametrize(("act", "error", "msg"), [
    (T.Release("1"), InvalidArgument, r"^tx must be an int id, got '1'$"),
    # the manager's composed verbs run these: a non-int id is an unknown authority there, and here
    (T.LoseDevice("1"), UnknownAuthority, r"^authority '1' is not known$"),
    (T.ConfirmTermination(1.0), UnknownAuthority, r"^authority 1\.0 is not known$"),
], ids=["release", "lose", "confirm"])
def test_invalid_id_names_the_field(act, error, msg) -> None:
    with pytest.raises(error, match=msg):
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


# --- refusals name what was wrong, on both sides of each boundary -----------------------------


def executing():
    """planned() with both authorities reserved, published (view 1) and executing on view 1."""
    s, _ = run(T.Reserve(1, 1), T.Reserve(1, 2), T.Publish(1), T.Execute(1, 1, 1), state=planned())
    return s


def with_committed_view():
    """Authorities 1, 2; transaction 1 committed (view 1 on authority 1); transaction 2 needs 20 B on 2, published (view 2)."""
    s, _ = run(T.Plan(((2, 20),), 0, ViewKind.CONTIGUOUS), T.Reserve(2, 2), T.Publish(2), state=committed())
    return s


_P = (T.Plan, ((1, 10),), 0, ViewKind.CONTIGUOUS)
TX_MESSAGES = [
    ("not-an-action", planned, object(), InvalidArgument, r"^not a transaction action: <object object at "),
    ("name", planned, T.AddAuthority("", 5), InvalidArgument, r"^name must be a non-empty str, got ''$"),
    ("capacity", planned, T.AddAuthority("c", 0), InvalidBytes, r"^capacity must be in \[1, 2\*\*63-1\], got 0$"),
    ("needs-type", planned, T.Plan([(1, 10)], 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs must be a tuple of 1\.\.8 \(authority, bytes\) pairs, got \[\(1, 10\)\]$"),
    ("needs-too-many", planned, T.Plan(tuple((i, 1) for i in range(1, 10)), 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs must be a tuple of 1\.\.8 "),
    ("pair-type", planned, T.Plan(([1, 10],), 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs must hold \(authority, bytes\) pairs, got \[1, 10\]$"),
    ("pair-length", planned, T.Plan(((1, 10, 3),), 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs must hold \(authority, bytes\) pairs, got \(1, 10, 3\)$"),
    ("needs-authority", planned, T.Plan((("1", 10),), 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs authority must be an int id, got '1'$"),
    ("needs-bytes", planned, T.Plan(((1, 0),), 0, ViewKind.CONTIGUOUS), InvalidBytes,
     r"^needs bytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("needs-twice", planned, T.Plan(((1, 10), (1, 5)), 0, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^needs name an authority twice: \[1, 1\]$"),
    ("priority", planned, T.Plan(((1, 10),), 10, ViewKind.CONTIGUOUS), InvalidArgument,
     r"^priority must be an int in \[0, 9\], got 10$"),
    ("kind", planned, T.Plan(((1, 10),), 0, "contiguous"), InvalidArgument, r"^kind must be a ViewKind, got 'contiguous'$"),
    ("bundle", planned, T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, bundle="1"), InvalidArgument,
     r"^bundle must be an int id, got '1'$"),
    ("retry", planned, T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, retry="1"), InvalidArgument,
     r"^retry must be an int id, got '1'$"),
    ("over-capacity", planned, T.Plan(((1, 101),), 0, ViewKind.CONTIGUOUS), CapacityDenied,
     r"^authority 1: 101 B needed, capacity is 100 B$"),
    ("lost", lambda: run(T.LoseDevice(1), state=planned())[0], T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS), DeviceLost,
     r"^authority 1 \(a\) context is lost$"),
    ("reserve-tx", planned, T.Reserve("1", 1), InvalidArgument, r"^tx must be an int id, got '1'$"),
    ("reserve-authority", planned, T.Reserve(1, "1"), InvalidArgument, r"^authority must be an int id, got '1'$"),
    ("not-needed", lambda: run(T.AddAuthority("c", 100), state=planned())[0], T.Reserve(1, 3), InvalidArgument,
     r"^transaction 1 does not need authority 3$"),
    ("held", lambda: run(T.Reserve(1, 1), state=planned())[0], T.Reserve(1, 1), InvalidTransition,
     r"^transaction 1 already holds authority 1$"),
    ("order", planned, T.Reserve(1, 2), ReservationOrder, r"^transaction 1 must reserve authority 1 before 2$"),
    ("execute-tx", executing, T.Execute("1", 1, 1), InvalidArgument, r"^tx must be an int id, got '1'$"),
    ("execute-view", executing, T.Execute(1, "1", 1), InvalidArgument, r"^view must be an int id, got '1'$"),
    ("generation", executing, T.Execute(1, 1, 0), InvalidArgument, r"^generation must be an int >= 1, got 0$"),
    ("bound", executing, T.Execute(1, 1, 1), InvalidTransition, r"^transaction 1 already binds view 1$"),
    ("execute-phase", lambda: run(T.Plan(((2, 5),), 0, ViewKind.CONTIGUOUS), state=committed())[0], T.Execute(2, 1, 1),
     InvalidTransition, r"^transaction 2: no transition for event 'execute' in phase 'planned'$"),
    ("provisional", lambda: run(T.Plan(((2, 5),), 0, ViewKind.CONTIGUOUS), T.Reserve(3, 2), T.Publish(3),
                                state=with_committed_view())[0],
     T.Execute(3, 2, 1), InvalidArgument, r"^view 2 is the provisional view of transaction 2$"),
    ("view-lost", lambda: run(T.LoseDevice(1), state=with_committed_view())[0], T.Execute(2, 1, 1), DeviceLost,
     r"^view 1 is invalid: its device context was lost$"),
    ("stale", lambda: run(T.Remap(1), state=with_committed_view())[0], T.Execute(2, 1, 1), StaleGeneration,
     r"^view 1 is at generation 2, not 1$"),
    ("remap-view", executing, T.Remap("1"), InvalidArgument, r"^view must be an int id, got '1'$"),
    ("remap-lost", lambda: run(T.LoseDevice(1), state=committed())[0], T.Remap(1), DeviceLost,
     r"^view 1 is invalid: its device context was lost$"),
    ("remap-in-use", executing, T.Remap(1), ViewInUse, r"^view 1 is bound to execution\(s\) \[1\]$"),
    ("abort-committed", committed, T.Abort(1), InvalidTransition,
     r"^transaction 1: no transition for event 'abort' in phase 'committed'$"),
    ("retired", lambda: run(T.Abort(1), state=planned())[0], T.Publish(1), InvalidTransition,
     r"^transaction 1 is already aborted or released$"),
    ("never", planned, T.Publish(0), UnknownTransaction, r"^transaction 0 is not known$"),
    ("poisoned", lambda: run(T.CorruptLedger(), state=planned())[0], T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS),
     ManagerPoisoned, r"^the ledger was found corrupt; the manager grants nothing$"),
]


@pytest.mark.parametrize(("make", "act", "error", "msg"), [m[1:] for m in TX_MESSAGES], ids=[m[0] for m in TX_MESSAGES])
def test_invalid_tx_action_message(make, act, error, msg) -> None:
    s = make()
    with pytest.raises(error, match=msg):
        S.step(s, act)


def test_plan_of_exactly_the_capacity_and_of_max_needs() -> None:
    s, _ = run(*[T.AddAuthority(f"x{i}", 100) for i in range(8)])
    s, (t1, t2) = run(T.Plan(((1, 100),), 0, ViewKind.CONTIGUOUS),
                      T.Plan(tuple((i, 1) for i in range(1, 9)), 9, ViewKind.OPAQUE), state=s)
    assert len(s.txs[t2].needs) == 8 and s.txs[t1].needs == ((1, 100),)


def test_reserve_of_exactly_the_free_bytes() -> None:
    s, (_, _, r) = run(T.AddAuthority("a", 100), T.Plan(((1, 100),), 0, ViewKind.CONTIGUOUS), T.Reserve(1, 1))
    assert (r, s.txs[1].phase, s.authorities[1].used) == (None, TxPhase.RESERVED, 100)


def test_add_authority_by_name_returns_the_existing_one() -> None:
    s, (a, b) = run(T.AddAuthority("a", 100), T.AddAuthority("a", 100))
    assert (a, b, s.authorities[1].capacity, s.next_authority) == (1, 1, 100, 2)


def test_invalid_add_authority_of_a_known_name_with_another_capacity_is_an_identity_mismatch() -> None:
    s, _ = run(T.AddAuthority("a", 100))
    with pytest.raises(IdentityMismatch, match=r"^pool 'a' is registered with 100 B, not 7 B$"):  # C1
        S.step(s, T.AddAuthority("a", 7))


def test_ordered_reservation_off_holds_out_of_order() -> None:
    # The guard's harm: holding 2 while waiting for 1 is the half of a hold-and-wait cycle (C4).
    s, _ = run(T.Reserve(1, 2), state=planned(), guards=GuardSet.without("ordered_reservation"))
    assert s.txs[1].held == ((2, 20),)


def test_invalid_reserve_after_an_early_publish_names_the_phase() -> None:
    off = GuardSet.without("publish_after_all_held")
    s, _ = run(T.Publish(1), state=planned(), guards=off)
    with pytest.raises(InvalidTransition, match=r"^transaction 1: no transition for event 'reserve' in phase 'published'$"):
        S.step(s, T.Reserve(1, 1), off)


def test_current_generation_off_binds_a_stale_mapping() -> None:
    s, _ = run(T.Remap(1), state=with_committed_view())
    s, _ = run(T.Execute(2, 1, 1), state=s, guards=GuardSet.without("current_generation"))
    assert s.txs[2].bound == ((1, 1),) and s.views[1].generation == 2


def test_remap_when_idle_off_remaps_under_an_execution() -> None:
    s, (gen,) = run(T.Remap(1), state=executing(), guards=GuardSet.without("remap_when_idle"))
    assert (gen, s.views[1].users) == (2, (1,))


def test_poisoned_manager_refuses_off_grants() -> None:
    # The guard's harm: a manager whose ledger is known corrupt keeps granting (I5).
    s, (_, t) = run(T.CorruptLedger(), T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS), state=planned(),
                    guards=GuardSet.without("poisoned_manager_refuses"))
    assert s.txs[t].phase is TxPhase.PLANNED


def test_retry_keeps_its_arbitration_identity() -> None:
    s, _ = run(T.Plan(((1, 10),), 5, ViewKind.CONTIGUOUS), state=planned())  # transaction 2, seq 2
    s, (iid,) = run(T.Abort(1), state=s)
    s, (t,) = run(T.Plan(((1, 10),), 3, ViewKind.CONTIGUOUS, retry=iid), state=s)
    assert (s.txs[t].seq, s.txs[t].priority, s.txs[t].age, s.next_seq) == (1, 0, 1, 3)
    assert iid not in s.intents


def test_retry_keeps_identity_off_starts_over() -> None:
    # The guard's harm: a retried transaction loses its place and its age, so it can starve (C4).
    off = GuardSet.without("retry_keeps_identity")
    s, (iid,) = run(T.Abort(1), state=planned(), guards=off)
    s, (t,) = run(T.Plan(((1, 10),), 3, ViewKind.CONTIGUOUS, retry=iid), state=s, guards=off)
    assert (s.txs[t].seq, s.txs[t].priority, s.txs[t].age, s.next_seq) == (2, 3, 0, 3)


def test_atomic_bundle_off_keeps_advancing_one_part() -> None:
    off = GuardSet.without("atomic_bundle")
    s, _ = run(T.Commit(1), T.Plan(((1, 10),), 0, ViewKind.CONTIGUOUS, bundle=1), T.Reserve(2, 1), T.Publish(2),
               T.Execute(2, 2, 1), T.Commit(2), state=bundled(off), guards=off)
    assert s.bundles[1].versions == (2, 0, 0, 0)


@pytest.mark.parametrize(("make", "act", "error", "msg"), [
    (committed, T.Remap(9), UnknownView, r"^view 9 is not known$"),
    (lambda: run(T.Release(1), state=committed())[0], T.Remap(1), InvalidTransition, r"^view 1 is already dropped$"),
], ids=["unknown-view", "dropped-view"])
def test_invalid_lookup_names_the_record(make, act, error, msg) -> None:
    with pytest.raises(error, match=msg):
        S.step(make(), act)
