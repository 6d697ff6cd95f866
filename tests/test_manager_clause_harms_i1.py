"""I1 on the composed manager: each harm the partition and credit clauses exist for, with its near miss.

`test_manager_clauses.py` shows every clause of `invariants.manager` can fail; here each I1 clause is shown
to fail on the harm it states (a grant backed by someone else's bytes, a reservation claimed by two parts,
a byte of an authority unaccounted for, a credit of bytes already credited) even when another record
nearby is broken or skipped first, and its report names the records a reader needs. Also: the manager's
registries run every ledger predicate on the one ledger (`_merge`, `_on_ledger_state`, `_on_ledger_step`,
rebuilt here so a weakened wrapper is noticed, not frozen at import). (I1 I6 C1)
"""

from __future__ import annotations

import pytest
from attrs import evolve
from clause_harness import violation
from manager_harness import DEV, H1, H2, HOST, granted, lease, run, start

from invariants import ledger as LP
from invariants import manager as IM
from invariants.manager_quota import step_I1_quota
from invariants.step_frames import ALLOCATIONS, selected
from invariants._violation import InvariantViolation
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import Tier


def _set_used(m: M.Manager, aid: int, used: int) -> M.Manager:
    a = m.ledger.authorities[aid]
    return evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.set(aid, evolve(a, used=used))))


def _with_tx() -> tuple[M.Manager, int]:
    """Transaction 1 of H2 holds both its reservations (DEV 1 B, HOST 1 B)."""
    m, x = run(start(), M.PlanTx(H2, ((DEV, 1), (HOST, 1))))
    return run(run(m, M.ReserveTx(x))[0], M.ReserveTx(x))[0], x


# --- state_I1_manager: granted_ticket_reserved ---------------------------------------------------


def test_grant_backed_by_another_holders_lease_is_named_after_an_unbacked_grant() -> None:
    # Ticket 1's grant is backed by nothing (the partition's harm); ticket 2's by H1's lease: both are wrong,
    # and the first must not hide the second from the clause that names a grant on someone else's bytes.
    m, alloc = lease(start(), H1, DEV, 2)
    m, t1 = run(m, M.Submit(H2, DEV, 1))
    t2 = t1 + 1
    bad = evolve(m, tickets=m.tickets.set(t1, evolve(m.tickets[t1], allocation=None)).set(
        t2, M.Ticket(t2, H2, DEV, 2, 0, m.tickets[t1].role, 0, TicketState.GRANTED, alloc)))
    assert list(bad.tickets) == [t1, t2]  # the unbacked grant is read first
    e = violation(IM.state_I1_manager, bad)
    assert e.clause == "state_I1_manager.granted_ticket_reserved"
    assert str(e).startswith(f"I1: granted ticket {t2} (holder {H2}, authority {DEV}, 2 B) references "
                             f"Allocation(id={alloc}, authority={DEV}, holder={H1},")


def test_grant_backed_by_its_own_reservation_passes() -> None:
    m, _ = lease(start(), H1, DEV, 2)
    IM.state_I1_manager(run(m, M.Submit(H2, DEV, 1))[0])


# --- state_I1_manager: tx_held_reserved ----------------------------------------------------------


def test_transaction_holding_more_reservations_than_needs_is_named() -> None:
    m, x = _with_tx()
    bad = evolve(m, txs=m.txs.set(x, evolve(m.txs[x], needs=((DEV, 1),))))  # HOST's byte is held for no need
    e = violation(IM.state_I1_manager, bad)
    assert (e.clause, str(e)) == ("state_I1_manager.tx_held_reserved",
                                  f"I1: transaction {x} holds 2 reservations for 1 needs")


def test_transaction_reservation_of_another_size_is_named() -> None:
    m, x = _with_tx()
    held = m.txs[x].held
    bad = evolve(m, txs=m.txs.set(x, evolve(m.txs[x], needs=((DEV, 2), (HOST, 1)))))
    e = violation(IM.state_I1_manager, bad)
    assert e.clause == "state_I1_manager.tx_held_reserved"
    assert str(e).startswith(f"I1: transaction {x} (holder {H2}) holds {held[0]} for ({DEV}, 2 B): Allocation(")


# --- state_I1_manager: one_part_per_reservation ---------------------------------------------------


def test_reservation_claimed_by_a_ticket_and_a_transaction_names_both() -> None:
    m, x = run(start(), M.PlanTx(H2, ((DEV, 1),)))
    m, _ = run(m, M.ReserveTx(x))
    alloc = m.txs[x].held[0]
    # A granted ticket of the same holder, authority and size claims the transaction's reservation too.
    bad = evolve(m, tickets=m.tickets.set(1, M.Ticket(1, H2, DEV, 1, 0, m.ledger.allocations[alloc].role, 0,
                                                        TicketState.GRANTED, alloc)))
    e = violation(IM.state_I1_manager, bad)
    assert (e.clause, str(e)) == ("state_I1_manager.one_part_per_reservation",
                                  f"I1: allocation {alloc} is held by ticket 1, transaction {x}")


# --- state_I1_manager: buckets_partition_used ------------------------------------------------------


def test_used_with_no_record_behind_it_is_named_with_zero_parts() -> None:
    bad = _set_used(start(), HOST, 1)  # a byte of HOST nobody holds
    e = violation(IM.state_I1_manager, bad)
    assert (e.clause, str(e)) == ("state_I1_manager.buckets_partition_used",
                                  f"I1: authority {HOST}: used 1 B, but parts hold 0 B and other charges are 0 B")


def test_used_past_a_lease_is_named_with_the_lease_as_other_charge() -> None:
    m, _ = lease(start(), H1, DEV, 2)
    e = violation(IM.state_I1_manager, _set_used(m, DEV, 3))
    assert (e.clause, str(e)) == ("state_I1_manager.buckets_partition_used",
                                  f"I1: authority {DEV}: used 3 B, but parts hold 0 B and other charges are 2 B")


def test_alias_does_not_end_the_partition_of_later_authorities() -> None:
    # An alias registered between two pools: the pool after it must still be checked.
    m = M.initial()
    for act in (A.RegisterAuthority("dev", Tier.DEVICE, 4), A.RegisterAlias(1, "dev-view"),
                A.RegisterAuthority("host", Tier.HOST, 4), A.RegisterHolder("h1")):
        m = run(m, act)[0]
    assert [a.alias_of for a in m.ledger.authorities.values()] == [None, 1, None]
    m, _ = lease(m, H1, 3, 2)
    IM.state_I1_manager(m)  # near miss: intact
    e = violation(IM.state_I1_manager, _set_used(m, 3, 1))  # one of the lease's bytes is lost
    assert (e.clause, str(e)) == ("state_I1_manager.buckets_partition_used",
                                  "I1: authority 3: used 1 B, but parts hold 0 B and other charges are 2 B")


# --- step_I1_manager: credit_exactly_once -------------------------------------------------------------


def test_credit_of_a_reservation_already_credited_is_named() -> None:
    m = granted()
    nxt, _ = MG.step(m, M.CancelTicket(H1, 1))
    twice = evolve(nxt, tickets=nxt.tickets.set(1, m.tickets[1]))  # the part still names the credited bytes
    e = violation(IM.step_I1_manager, twice, M.CancelTicket(H1, 1), nxt, 3)
    assert (e.clause, str(e)) == ("step_I1_manager.credit_exactly_once",
                                  "I1: CancelTicket(holder=1, ticket=1) retires allocation 1, which was already "
                                  "credited")


def test_credit_that_leaves_the_reservation_charged_is_named() -> None:
    m = granted()
    e = violation(IM.step_I1_manager, m, M.CancelTicket(H1, 1), m, 3)  # reports 3 B, keeps the 3 B charged
    assert (e.clause, str(e)) == ("step_I1_manager.credit_exactly_once",
                                  "I1: CancelTicket(holder=1, ticket=1) retired allocation 1, but it is still charged")


def test_exact_credit_passes() -> None:
    m = granted()
    nxt, credited = MG.step(m, M.CancelTicket(H1, 1))
    assert credited == 3
    IM.step_I1_manager(m, M.CancelTicket(H1, 1), nxt, credited)


# --- the ledger's predicates on the manager's one ledger ----------------------------------------------


def _unwrapped(table: dict[str, tuple]) -> dict[str, list]:
    """Per ID, its predicates with each ledger wrapper replaced by the ledger predicate it runs."""
    return {id: [p.__wrapped__ if p.__name__.startswith("ledger_") else p for p in preds]
            for id, preds in table.items()}


def test_registries_run_each_ledger_predicate_before_the_managers_own() -> None:
    own = {"I1": (IM.step_I1_manager,), "I10": (IM.step_I10_manager,)}
    built = IM._merge(own, {"C1": (LP.step_C1,), "I1": (LP.step_I1,)}, IM._on_ledger_step)
    assert _unwrapped(built) == {"C1": [LP.step_C1], "I1": [LP.step_I1, IM.step_I1_manager],
                                 "I10": [IM.step_I10_manager]}
    assert [p.__name__ for p in built["I1"]] == ["ledger_step_I1", "step_I1_manager"]
    # The published registries are that composition of the ledger's and the manager's predicates.
    assert _unwrapped(IM.STEP_PREDICATES)["I1"] == [LP.step_I1, IM.step_I1_manager, step_I1_quota]
    assert _unwrapped(IM.STATE_PREDICATES)["I1"] == [LP.state_I1, IM.state_I1_manager, IM.state_I1_tickets]
    assert all(_unwrapped(IM.STEP_PREDICATES)[id][:len(ps)] == list(ps) for id, ps in LP.STEP_PREDICATES.items())


def test_ledger_state_predicate_judges_the_managers_ledger() -> None:
    wrapped = IM._on_ledger_state(LP.state_I1)
    assert (wrapped.__name__, wrapped.__wrapped__) == ("ledger_state_I1", LP.state_I1)
    m, _ = lease(start(), H1, DEV, 2)
    wrapped(m)  # near miss
    assert violation(wrapped, _set_used(m, DEV, 3)).clause.startswith("state_I1.")


def test_ledger_conservation_judges_a_manager_action() -> None:
    wrapped = IM._on_ledger_step(LP.step_I1)
    assert (wrapped.__name__, wrapped.__wrapped__) == ("ledger_step_I1", LP.step_I1)
    assert selected((wrapped,), M.Submit, ALLOCATIONS) == (wrapped,)  # it judges every action
    m = start()
    act = M.Submit(H1, DEV, 3)
    nxt, tid = MG.step(m, act)
    wrapped(m, act, nxt, tid)  # near miss
    e = violation(wrapped, m, act, _set_used(nxt, DEV, 2), tid)  # 3 B reserved, 2 B counted
    assert e.clause.startswith("step_I1.") and str(e).startswith("I1: Submit(holder=1, authority=1, nbytes=3")


def test_ledger_i6_leaves_a_transactions_credit_to_the_manager() -> None:
    # AbortTx names no holder; the ledger's I6 would call the credit a theft. The manager's I6 judges it.
    wrapped = IM._on_ledger_step(LP.step_I6)
    assert wrapped.__name__ == "ledger_step_I6"
    # It says so: `check_step` does not select it for a part's action (`invariants.step_frames.selected`).
    assert selected((wrapped,), M.AbortTx, ALLOCATIONS) == () and selected((wrapped,), A.Release, ALLOCATIONS) == (wrapped,)
    m, x = _with_tx()
    nxt, credited = MG.step(m, M.AbortTx(x))
    assert credited == 2
    wrapped(m, M.AbortTx(x), nxt, credited)
    with pytest.raises(InvariantViolation):
        LP.step_I6(m.ledger, M.AbortTx(x), nxt.ledger)  # what the wrapper spares the manager's step


def test_ledger_i6_judges_a_ledger_release_by_another_holder() -> None:
    wrapped = IM._on_ledger_step(LP.step_I6)
    m, alloc = lease(start(), H1, DEV, 2)
    wrapped(m, A.Release(H1, alloc), MG.step(m, A.Release(H1, alloc))[0])  # near miss: its own release
    taken = MG.step(m, A.Release(H1, alloc))[0]
    e = violation(wrapped, m, A.Release(H2, alloc), taken)  # H2 released H1's lease
    assert (e.clause, str(e)) == ("step_I6.only_owner_reduces_charge",
                                  f"I6: Release(holder={H2}, allocation={alloc}) reduced holder {H1}'s allocation "
                                  f"{alloc} by 2 B")


def test_removal_hides_only_the_removed_authority_from_the_ledgers_identity_check() -> None:
    wrapped = IM._on_ledger_step(LP.step_C1)
    m = start()
    nxt, res = MG.step(m, M.RemoveAuthority(DEV))
    assert DEV not in nxt.ledger.authorities
    wrapped(m, M.RemoveAuthority(DEV), nxt, res)  # a removal is no identity change of the ledger (C1)
    host = nxt.ledger.authorities[HOST]
    bad = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(HOST, evolve(host,
                                                                                                   capacity=8))))
    e = violation(wrapped, m, M.RemoveAuthority(DEV), bad, res)  # ...but HOST's pool changed under it
    assert e.clause.startswith("step_C1.") and f"changed authority {HOST}" in str(e)


def test_identity_change_of_the_authority_a_manager_action_names_is_seen() -> None:
    wrapped = IM._on_ledger_step(LP.step_C1)
    m = start()
    act = M.Submit(H1, DEV, 1)
    nxt, tid = MG.step(m, act)
    wrapped(m, act, nxt, tid)
    dev = nxt.ledger.authorities[DEV]
    bad = evolve(nxt, ledger=evolve(nxt.ledger, authorities=nxt.ledger.authorities.set(DEV, evolve(dev,
                                                                                                  capacity=8))))
    e = violation(wrapped, m, act, bad, tid)
    assert e.clause.startswith("step_C1.") and f"changed authority {DEV}" in str(e)
