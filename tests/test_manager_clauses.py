"""Negative controls and clause mutations of the composed manager (`invariants.manager`).

Each cross-cutting guard switched off must produce, along a short script, a
harm that a named clause of `invariants.manager` catches (the explorer's
deterministic controls are in `test_manager_scope.py`); each clause of that
module is shown to fail on a hand-mutated state or step, so none is vacuous.
(C3 I1 I2 I6 I10 I13)
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from clause_harness import broken
from manager_harness import DEV, H1, H2, HOST, broken_by, granted, lease, run, start

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.clauses import CLAUSES
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import CapacityDenied, HolderInUse, InvalidTransition, ProviderPinned
from spec.guards import GUARDS, GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Role, Tier, ViewState

# --- negative controls: each cross-cutting guard off yields a harm a manager clause names ----------

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")


def _script_grant_charges_ledger() -> tuple[M.Manager, list[Any]]:
    return start(), [M.Submit(H1, DEV, 3), M.Submit(H2, DEV, 3), M.Claim(H1, 1), M.Claim(H2, 2)]


def _script_tx_counts_granted() -> tuple[M.Manager, list[Any]]:
    return start(), [M.Submit(H1, DEV, 3), M.PlanTx(H2, ((DEV, 3),)), M.ReserveTx(1)]


def _script_loss_keeps_charge() -> tuple[M.Manager, list[Any]]:
    return start(), [M.PlanTx(H1, ((DEV, 2),)), M.ReserveTx(1), A.LoseDevice(DEV)]


def _script_provider_pinned() -> tuple[M.Manager, list[Any]]:
    return start(), [M.Submit(H1, DEV, 3), M.RemoveAuthority(DEV)]


def _script_holder_in_use() -> tuple[M.Manager, list[Any]]:
    return start(), [M.Submit(H1, DEV, 3), M.UnregisterHolder(H1)]


def _script_limit_after_reclaim() -> tuple[M.Manager, list[Any]]:
    return start(), [M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.PrepareLimit(DEV, 1), M.Answer(H1, 1, ()),
                      M.CommitLimit(DEV)]


#: guard -> (script, the clauses of invariants.manager its harm must break somewhere along the script)
CONTROLS = {
    # The grant promises bytes the ledger never charged (partition), then the claims push used past the limit.
    "grant_charges_ledger": (_script_grant_charges_ledger, {"state_I1_manager.buckets_partition_used",
                                                            "step_I2_manager.grant_within_limit"}),
    "tx_counts_granted": (_script_tx_counts_granted, {"step_I2_manager.grant_within_limit"}),
    "loss_keeps_charge": (_script_loss_keeps_charge, {"step_C3_manager.lost_charge_kept"}),
    "limit_after_reclaim": (_script_limit_after_reclaim, {"step_I2_manager.limit_backs_every_grant"}),
    # The granted ticket's reservation is left on a ledger that is gone: its bytes can never be credited.
    "provider_pinned": (_script_provider_pinned, {"step_C3_manager.removal_drops_no_charge"}),
    # The granted ticket (and its reservation) names a holder that is gone: nobody may claim or release it.
    "holder_in_use": (_script_holder_in_use, {"step_I4a_holders.no_record_outlives_its_holder"}),
}


def test_every_manager_guard_has_a_control() -> None:
    assert sorted(CONTROLS) == _MANAGER_GUARDS and len(_MANAGER_GUARDS) == 6


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_manager_guard_off_is_caught_by_a_manager_clause(name: str) -> None:
    script, expected = CONTROLS[name]
    m, acts = script()
    off = GuardSet.without(name)
    found: set[str] = set()
    for act in acts:
        m, broken = broken_by(m, act, off)
        found |= set(broken)
    assert expected <= found, found
    assert expected <= {c.key for c in CLAUSES.values() if c.predicate in _OWN_PREDICATES}


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_manager_guard_script_is_clean_with_every_guard_on(name: str) -> None:
    m, acts = CONTROLS[name][0]()
    for act in acts:
        try:
            m = run(m, act)[0]
        except (CapacityDenied, InvalidTransition, ProviderPinned, HolderInUse):
            pass  # the guard refuses the harmful step (or the claim of a ticket it left pending); nothing changed


def test_grant_charges_ledger_off_also_breaks_conservation_and_exact_credit() -> None:
    off = GuardSet.without("grant_charges_ledger")
    m, _ = MG.step(start(), M.Submit(H1, DEV, 3), off)
    assert m.tickets[1].allocation is None and m.ledger.authorities[DEV].used == 0
    with pytest.raises(InvariantViolation, match="parts hold 3 B"):
        IM.check_all(m)
    nxt, result = MG.step(m, M.CancelTicket(H1, 1), off)
    with pytest.raises(InvariantViolation, match="reports 3 B credited"):
        IM.step_I1_manager(m, M.CancelTicket(H1, 1), nxt, result)


# --- mutations: every clause of invariants.manager can fail ------------------------------------

_OWN_PREDICATES = {"state_I1_manager", "state_I13_manager", "step_I1_manager", "step_I6_manager", "step_C3_manager",
                   "step_I2_manager", "step_I10_manager", "step_C5_manager", "step_I13_manager",
                   "state_I13_generation", "state_C4_views", "state_C6_views", "step_I9_views", "step_C6_views",
                   "state_C3_manager", "step_I4a_holders", "state_I1_tickets"}


def _with_tx() -> M.Manager:
    m, x = run(start(), M.PlanTx(H2, ((DEV, 1), (HOST, 1))))
    return run(run(m, M.ReserveTx(x))[0], M.ReserveTx(x))[0]


def _state_mut(name: str) -> M.Manager:
    if name == "partition":
        m = granted()
        a = m.ledger.authorities[DEV]
        return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, used=2))))
    if name == "one_part":
        m = _with_tx()
        return evolve(m, txs=m.txs.set(2, M.Tx(2, H2, ((DEV, 1),), (1,))))
    if name == "ticket_reserved":
        m = granted()
        return evolve(m, tickets=m.tickets.set(1, evolve(m.tickets[1], holder=H2)))
    if name == "tx_reserved":
        m = _with_tx()
        return evolve(m, txs=m.txs.set(1, evolve(m.txs[1], needs=((DEV, 2), (HOST, 1)))))
    if name == "idle_waiter":
        m, _ = lease(start(), H1, DEV, 4)
        m, _ = run(m, M.Submit(H2, DEV, 1))
        a = m.ledger.authorities[DEV]
        return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, limit=5))))
    if name == "pending_holds":
        m, alloc = lease(start(), H1, DEV, 4)
        m, _ = run(m, M.Submit(H2, DEV, 1))
        return evolve(m, tickets=m.tickets.set(2, evolve(m.tickets[2], allocation=alloc)))
    if name == "work_on_lost_context":  # dev's context was lost, and an open transaction still needs it
        m, _ = run(start(), M.PlanTx(H2, ((DEV, 1),)))
        a = m.ledger.authorities[DEV]
        lost = evolve(a, context=ContextState.LOST)
        return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, lost)))
    if name in ("view_unreserved", "stale_read", "shared_provisional", "ended_user"):
        m, x = run(start(), M.PlanTx(H2, ((DEV, 1), (HOST, 1))))
        m, _ = run(m, M.ReserveTx(x))
        if name == "view_unreserved":  # a view over a transaction still missing its HOST need
            return evolve(m, views=m.views.set(1, M.View(1, x, DEV, m.txs[x].held[0], 1, ViewState.MAPPED, ())), next_view=2)
        m, v = run(run(m, M.ReserveTx(x))[0], M.PublishView(x))
        m, _ = run(m, M.ExecuteView(x, v, 1))
        if name == "stale_read":  # the view moved on; its execution still reads generation 1
            return evolve(m, views=m.views.set(v, evolve(m.views[v], generation=2)))
        if name == "ended_user":  # x committed, its execution is still listed as the view's user
            nxt, _ = MG.step(m, M.CommitTx(x))
            return evolve(nxt, views=nxt.views.set(v, evolve(nxt.views[v], users=((x, 1),))))
        m, y = run(m, M.PlanTx(H1, ((HOST, 1),)))  # another open transaction reads x's provisional view
        return evolve(m, views=m.views.set(v, evolve(m.views[v], users=((x, 1), (y, 1)))))
    if name == "retired_kept":  # the granted ticket was cancelled (its bytes credited) but stays in the table
        m = granted()
        nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
        return evolve(nxt, tickets=nxt.tickets.set(1, evolve(m.tickets[1], state=TicketState.CANCELLED)))
    if name == "old_generation_waiter":  # the authority was reconfigured, the waiter kept waiting
        m, _ = lease(start(), H1, DEV, 4)
        m, _ = run(m, M.Submit(H2, DEV, 1))
        return evolve(m, generations=m.generations.set(DEV, 1))
    raise KeyError(name)


_STATE_MUTATIONS = {
    "partition": "state_I1_manager.buckets_partition_used",
    "one_part": "state_I1_manager.one_part_per_reservation",
    "ticket_reserved": "state_I1_manager.granted_ticket_reserved",
    "tx_reserved": "state_I1_manager.tx_held_reserved",
    "idle_waiter": "state_I13_manager.no_idle_fitting_waiter",
    "pending_holds": "state_I13_manager.pending_holds_nothing",
    "old_generation_waiter": "state_I13_generation.no_waiter_of_an_older_generation",
    "retired_kept": "state_I1_tickets.retired_ticket_gone",
    "view_unreserved": "state_C4_views.view_over_reserved_bytes",
    "stale_read": "state_C6_views.no_stale_view_read",
    "shared_provisional": "state_C6_views.provisional_view_private",
    "ended_user": "state_C6_views.users_are_running",
    "work_on_lost_context": "state_C3_manager.lost_context_gets_no_work",
}


@pytest.mark.parametrize("name", sorted(_STATE_MUTATIONS))
def test_state_clause_fails_on_mutated_state(name: str) -> None:
    bad = _state_mut(name)
    found = broken(IM.check_all, bad)
    assert _STATE_MUTATIONS[name] in found, found


def _step_mut(name: str) -> tuple[M.Manager, Any, M.Manager, Any]:
    """(before, action, a wrong after, a wrong result)."""
    if name == "credit_wrong":
        m = granted()
        nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
        return m, M.CancelTicket(H1, 1), nxt, 2
    if name == "credit_twice":
        m = granted()
        nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
        # a part still names the reservation the ledger already credited, and credits it again
        twice = evolve(nxt, tickets=nxt.tickets.set(1, m.tickets[1]))
        return twice, M.CancelTicket(H1, 1), nxt, 3
    if name == "own_action":
        m, alloc = lease(start(), H1, DEV, 2)
        nxt, _ = MG.step(m, A.Release(H1, alloc))
        return m, M.Press(H2, DEV, 1), nxt, 1
    if name == "loss_drops_allowance":
        m, wid = run(start(), A.OpenAllowance(H1, DEV, 2))
        nxt, _ = MG.step(m, A.LoseDevice(DEV))
        return m, A.LoseDevice(DEV), evolve(nxt, ledger=evolve(
            nxt.ledger, allowances=nxt.ledger.allowances.delete(wid))), None
    if name == "lost_charge":
        m = _with_tx()
        nxt, _ = MG.step(m, A.LoseDevice(DEV))
        a = nxt.ledger.authorities[DEV]
        cut = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(DEV, evolve(a, used=0))))
        return m, A.LoseDevice(DEV), cut, None
    if name == "limit_below_used":
        m, _ = lease(start(), H1, DEV, 3)
        a = m.ledger.authorities[DEV]
        low = evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(DEV, evolve(a, limit=1))))
        return m, M.CommitLimit(DEV), low, M.LimitOutcome(True, 1, ())
    if name == "grant_past_limit":
        m = start()
        nxt, _ = MG.step(m, M.Submit(H1, DEV, 3))
        a = nxt.ledger.authorities[DEV]
        low = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(DEV, evolve(a, limit=2))))
        return m, M.Submit(H1, DEV, 3), low, 1
    if name.startswith("removed_"):
        m, _ = lease(start(), H1, DEV, 2)
        if name == "removed_under_ticket":  # no charge left behind, but a waiter on the ledger that is gone
            m = run(m, M.Submit(H2, DEV, 4))[0]
            assert [t.allocation for t in m.tickets.values()] == [None]
        gone = evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.delete(DEV)))
        return m, M.RemoveAuthority(DEV), gone, None
    if name.startswith("unregistered_"):  # the holder leaves the registry while its lease or intent names it
        m = lease(start(), H1, DEV, 2)[0] if name == "unregistered_under_lease" else \
            run(run(start(), M.PlanTx(H1, ((DEV, 1),)))[0], M.AbortTx(1))[0]
        gone = evolve(m, ledger=evolve(m.ledger, holders=m.ledger.holders.delete(H1)))
        return m, M.UnregisterHolder(H1), gone, None
    if name.startswith("bundle_"):
        m, b = run(start(), M.OpenBundle())
        m, x = run(m, M.PlanTx(H1, ((DEV, 1),)))
        m, _ = run(run(m, M.JoinBundle(x, b))[0], M.ReserveTx(x))
        nxt, held = MG.step(m, M.CommitTx(x))
        assert nxt.bundles[b].versions == (1, 1, 1, 1)  # the intact step advances every part
        if name == "bundle_stuck":  # the leases commit, the bundle stays behind
            return m, M.CommitTx(x), evolve(nxt, bundles=m.bundles), held
        if name == "bundle_one_part":  # only the KV part moves
            return m, M.CommitTx(x), evolve(nxt, bundles=nxt.bundles.set(b, M.Bundle(b, (1, 0, 0, 0)))), held
        if name == "bundle_poisoned":  # a poisoned bundle's transaction commits anyway
            bad = evolve(m, bundles=m.bundles.set(b, evolve(m.bundles[b], poisoned=True)))
            return bad, M.CommitTx(x), evolve(nxt, bundles=nxt.bundles.set(b, evolve(nxt.bundles[b], poisoned=True))), held
        if name == "bundle_without_commit":  # a bundle moves in a step that commits nothing
            return m, M.OpenBundle(), evolve(m, bundles=m.bundles.set(b, M.Bundle(b, (1, 1, 1, 1)))), 2
    if name in ("pinned_victim", "late_answer", "closed_answer", "old_generation_answer"):
        m, alloc = lease(start(), H1, DEV, 2)
        m, pid = run(m, M.Press(H1, DEV, 2, 0, 5))
        released = MG.step(m, A.Release(H1, alloc))[0]  # the bytes leave as an answer would release them
        if name == "pinned_victim":  # the holder pinned the lease, and the answer took it anyway
            return evolve(m, uses=m.uses.set(alloc, (True, False))), M.Answer(H1, pid, (alloc,), 5), released, 2
        if name == "late_answer":  # answered at 6, due at 5
            return m, M.Answer(H1, pid, (alloc,), 6), released, 2
        if name == "closed_answer":  # the pressure was cancelled before the answer
            return evolve(m, pressures=m.pressures.delete(pid)), M.Answer(H1, pid, (alloc,), 5), released, 2
        # the authority was reconfigured since the pressure opened
        return evolve(m, generations=m.generations.set(DEV, 1)), M.Answer(H1, pid, (alloc,), 5), released, 2
    if name == "matured_overtaken":  # with the aging guard off, a 1 B ticket is granted past a matured 4 B waiter
        m, _ = lease(start(), H1, DEV, 3)
        m, w = run(m, M.Submit(H2, DEV, 4))
        m = evolve(m, tickets=m.tickets.set(w, evolve(m.tickets[w], age=m.aging_bound)))
        act = M.Submit(H1, DEV, 1)
        assert MG.step(m, act)[0].tickets[w + 1].state.value == "pending"  # intact: the round stops at the waiter
        nxt, tid = MG.step(m, act, GuardSet.without("aging"))
        return m, act, nxt, tid
    if name == "terminated_keeps_stranded":  # termination refunded the lost lease's bytes, kept its record
        m, alloc = lease(start(), H1, DEV, 2)
        m, _ = run(m, A.LoseDevice(DEV))
        nxt, _ = MG.step(m, A.ConfirmTermination(DEV))
        kept = evolve(nxt.ledger, allocations=nxt.ledger.allocations.set(alloc, m.ledger.allocations[alloc]))
        return m, A.ConfirmTermination(DEV), evolve(nxt, ledger=kept), None
    if name in ("view_id_reused", "generation_back"):
        m, x = run(start(), M.PlanTx(H2, ((DEV, 1),)))
        m, v = run(run(m, M.ReserveTx(x))[0], M.PublishView(x))
        if name == "generation_back":  # remapped twice: generation 2 went back to 1
            m, _ = run(m, M.RemapView(v))
            return m, M.RemapView(v), evolve(m, views=m.views.set(v, evolve(m.views[v], generation=1))), 1
        m, y = run(m, M.PlanTx(H2, ((HOST, 1),)))
        m, _ = run(m, M.ReserveTx(y))
        nxt, w = MG.step(m, M.PublishView(y))  # y's view took x's id, and the next id did not move
        reused = nxt.views.delete(w).set(v, evolve(nxt.views[w], id=v))
        return m, M.PublishView(y), evolve(nxt, views=reused, next_view=m.next_view), v
    if name == "remap_under_reader":  # the view moved to generation 2 under its execution (bound at 1)
        m, x = run(start(), M.PlanTx(H2, ((DEV, 1),)))
        m, v = run(run(m, M.ReserveTx(x))[0], M.PublishView(x))
        m, _ = run(m, M.ExecuteView(x, v, 1))
        return m, M.RemapView(v), evolve(m, views=m.views.set(v, evolve(m.views[v], generation=2))), 2
    if name in ("drop_under_reader", "release_under_view"):  # a committed view, bound by a later execution y
        m, x = run(start(), M.PlanTx(H2, ((DEV, 1),)))
        m, v = run(run(m, M.ReserveTx(x))[0], M.PublishView(x))
        m, (lease_id,) = run(m, M.CommitTx(x))
        m, y = run(m, M.PlanTx(H2, ((HOST, 1),)))
        m = run(run(run(m, M.ReserveTx(y))[0], M.PublishView(y))[0], M.ExecuteView(y, v, 1))[0]
        if name == "drop_under_reader":  # the view went while y, still open, reads it
            return m, M.DropView(v), evolve(m, views=m.views.delete(v)), None
        # the lease under the mapped view was released: y reads bytes the ledger credited back
        released = evolve(m, ledger=MG.step(evolve(m, views=m.views.delete(v)), A.Release(H2, lease_id))[0].ledger)
        return m, A.Release(H2, lease_id), released, None
    if name == "try_overtakes":  # a try-only 1 B taken while a 4 B ticket waits
        m, _ = lease(start(), H1, DEV, 3)
        m, _ = run(m, M.Submit(H2, DEV, 4))
        nxt, alloc = MG.step(m, A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING))
        return m, M.TryReserve(H1, DEV, 1), nxt, alloc
    if name.startswith("shrink_"):  # H1's 3 B lease on DEV and H2's 1 B one; H1 gives back 1 B (all 3: to_nothing)
        m, alloc = lease(start(), H1, DEV, 3)
        m, other = lease(m, H2, DEV, 1)
        act = M.ShrinkLease(H1, alloc, 3 if name == "shrink_to_nothing" else 1)
        led = m.ledger
        r, a = led.allocations[alloc], led.authorities[DEV]
        n = {"shrink_to_nothing": 0, "shrink_keeps_lease": 3, "shrink_takes_more": 1}.get(name, 2)  # bytes after
        credit = {"shrink_to_nothing": 3, "shrink_credits_twice": 2, "shrink_takes_more": 2}.get(name, 1)  # used falls
        allocs = led.allocations.set(alloc, evolve(r, nbytes=n, charge=n if name != "shrink_keeps_lease" else 3))
        if name == "shrink_moves_another":  # the credit is right, but another holder's lease lost a byte too
            allocs = allocs.set(other, evolve(allocs[other], reserved=2))
        after = evolve(m, ledger=evolve(led, allocations=allocs,
                                        authorities=led.authorities.set(DEV, evolve(a, used=a.used - credit))))
        return m, act, after, None
    if name.startswith("grow_"):  # H1's 2 B lease on DEV and H2's 1 B one; H1's lease grows by 1 B, then tampered
        m, alloc = lease(start(), H1, DEV, 2)
        m, other = lease(m, H2, DEV, 1)
        act = M.GrowLease(H1, alloc, 1)
        if name == "grow_overtakes":  # a 3 B ticket waits (it lacks 2 B of 1 B free) and the grow takes the byte
            m, _ = run(m, M.Submit(H2, DEV, 3))
            return m, act, MG.step(m, act, GuardSet.without("try_only"))[0], None
        if name == "grow_past_limit":  # 2 B more of 1 B free
            return m, M.GrowLease(H1, alloc, 2), MG.step(m, M.GrowLease(H1, alloc, 2),
                                                         GuardSet.without("try_only"))[0], None
        nxt = MG.step(m, act)[0]
        led = nxt.ledger
        r, a = led.allocations[alloc], led.authorities[DEV]
        r = {"grow_charges_nothing": r, "grow_leases_nothing": m.ledger.allocations[alloc],
             "grow_charge_lags": evolve(r, charge=2), "grow_past_reservation": evolve(r, reserved=2),
             "grow_takes_more": evolve(r, reserved=4, nbytes=4, charge=4),
             "grow_quarantines": evolve(r, state=AllocState.QUARANTINED)}.get(name, r)
        used = {"grow_charges_nothing": 3, "grow_takes_more": 5}.get(name, 4)
        allocs = led.allocations.set(alloc, r)
        if name == "grow_moves_another":  # the charge is right, but another holder's lease changed too
            allocs = allocs.set(other, evolve(allocs[other], reserved=2))
        return m, act, evolve(nxt, ledger=evolve(led, allocations=allocs,
                                                 authorities=led.authorities.set(DEV, evolve(a, used=used)))), None
    raise KeyError(name)


_STEP_MUTATIONS = {
    "pinned_victim": "step_I6_manager.pinned_never_reclaimed",
    "late_answer": "step_C5_manager.stale_answer_credits_nothing",
    "closed_answer": "step_C5_manager.stale_answer_credits_nothing",
    "old_generation_answer": "step_C5_manager.stale_answer_credits_nothing",
    "try_overtakes": "step_I13_manager.allocator_never_overtakes_a_waiter",
    "matured_overtaken": "step_I13_manager.matured_not_overtaken",
    "remap_under_reader": "step_I9_views.remap_fences_users",
    "generation_back": "step_I9_views.generation_never_back",
    "view_id_reused": "step_C6_views.view_names_fresh",
    "terminated_keeps_stranded": "step_C3_manager.termination_refunds_once",
    "drop_under_reader": "step_I9_views.drop_fences_users",
    "release_under_view": "step_C6_views.view_bytes_kept",
    "bundle_stuck": "step_I10_manager.bundle_moves_with_its_leases",
    "bundle_one_part": "step_I10_manager.bundle_moves_with_its_leases",
    "bundle_poisoned": "step_I10_manager.bundle_moves_with_its_leases",
    "bundle_without_commit": "step_I10_manager.bundle_moves_with_its_leases",
    "credit_wrong": "step_I1_manager.credit_exactly_once",
    "credit_twice": "step_I1_manager.credit_exactly_once",
    "own_action": "step_I6_manager.charge_falls_by_own_action",
    "loss_drops_allowance": "step_I6_manager.allowance_changes_by_own_action",
    "lost_charge": "step_C3_manager.lost_charge_kept",
    "removed_under_lease": "step_C3_manager.removal_drops_no_charge",
    "removed_under_ticket": "step_C3_manager.removal_drops_no_charge",
    "unregistered_under_lease": "step_I4a_holders.no_record_outlives_its_holder",
    "unregistered_with_intent": "step_I4a_holders.no_record_outlives_its_holder",
    "shrink_to_nothing": "step_I1_manager.shrink_credits_what_the_lease_loses",
    "shrink_keeps_lease": "step_I1_manager.shrink_credits_what_the_lease_loses",
    "shrink_credits_twice": "step_I1_manager.shrink_credits_what_the_lease_loses",
    "shrink_moves_another": "step_I1_manager.shrink_credits_what_the_lease_loses",
    "shrink_takes_more": "step_I1_manager.shrink_credits_what_the_lease_loses",  # credited as lost, not as given
    "grow_charges_nothing": "step_I1_manager.grow_charges_what_the_lease_gains",
    "grow_leases_nothing": "step_I1_manager.grow_charges_what_the_lease_gains",
    "grow_charge_lags": "step_I1_manager.grow_charges_what_the_lease_gains",
    "grow_past_reservation": "step_I1_manager.grow_charges_what_the_lease_gains",
    "grow_takes_more": "step_I1_manager.grow_charges_what_the_lease_gains",  # charged as gained, not as asked
    "grow_moves_another": "step_I1_manager.grow_charges_what_the_lease_gains",
    "grow_quarantines": "step_I1_manager.grow_charges_what_the_lease_gains",  # bytes charged to no lease
    "grow_overtakes": "step_I13_manager.allocator_never_overtakes_a_waiter",  # a grow is a try-only charge
    "grow_past_limit": "step_I2_manager.grant_within_limit",  # I2 judges every charge, a grow's too
    "limit_below_used": "step_I2_manager.limit_backs_every_grant",
    "grant_past_limit": "step_I2_manager.grant_within_limit",
}


@pytest.mark.parametrize("name", sorted(_STEP_MUTATIONS))
def test_step_clause_fails_on_mutated_step(name: str) -> None:
    before, act, after, result = _step_mut(name)
    found = broken(IM.check_step, before, act, after, result)
    assert _STEP_MUTATIONS[name] in found, found


def test_a_shrink_whose_round_grants_a_waiter_breaks_nothing() -> None:
    """The near miss of shrink_credits_what_the_lease_loses: used falls by the shrink and rises by the grant it
    made room for, on one authority of two."""
    m, alloc = lease(start(), H1, DEV, 4)
    m, t = run(m, M.Submit(H2, DEV, 2))
    nxt, _ = run(m, M.ShrinkLease(H1, alloc, 3))
    assert nxt.tickets[t].allocation is not None and nxt.ledger.authorities[DEV].used == 3
    assert broken(IM.check_step, m, M.ShrinkLease(H1, alloc, 3), nxt, None) == []


def test_a_grow_to_the_limit_of_a_pinned_lease_breaks_nothing() -> None:
    """The near miss of grow_charges_what_the_lease_gains and of the I2 and I13 clauses a grow meets: a pinned lease
    takes every byte left, while a ticket waits on the other authority."""
    m, alloc = lease(start(), H1, DEV, 2)
    m, _ = run(lease(run(m, M.SetUse(H1, alloc, True, False))[0], H2, HOST, 4)[0], M.Submit(H2, HOST, 1))
    assert m.tickets[3].state is TicketState.PENDING
    nxt, _ = run(m, M.GrowLease(H1, alloc, 2))  # run judges the step with every clause
    assert nxt.ledger.authorities[DEV].used == 4 and nxt.ledger.allocations[alloc].reserved == 4


def test_every_manager_clause_has_a_mutation() -> None:
    own = {k for k, c in CLAUSES.items() if c.predicate in _OWN_PREDICATES}
    assert own == set(_STATE_MUTATIONS.values()) | set(_STEP_MUTATIONS.values())
