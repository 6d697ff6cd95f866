"""The composed manager's capacity transactions, retry intents, state bundles and poisoning (C4, I5, I10).

Theory of operation. A transaction plans its needs, reserves them try-only
in ascending authority id (a ledger Reserve each, never a wait), and commits
them as leases or aborts, cancelling each. Its arbitration identity (submit
sequence, priority, age) outlives an abort as a zero-byte *intent*, keyed by
the aborted transaction's id: a retry names it in `PlanTx(retry=)` and takes
its place back instead of queueing behind every newcomer (C4, I13: "retry
keeps arbitration identity, holds nothing"). In this process scope nothing
waits, so no transition orders transactions by that identity: the intent is
what a retry carries into any arbitration that does (the coordinator's, C10)
and what the trace shows. C4's progress here (no fair run of aborts forever
without a commit, `invariants.manager_tx_scope`) rests on the ordered,
try-only reservation.

Poisoning (I5): the shared ledger found corrupt (`CorruptLedger`, the
environment's action) poisons the whole manager for good: its pending
tickets fail and every action that would grant new charge is refused with
ManagerPoisoned, before its arguments are looked at.
No I/O, no clock, no threads, no numpy.
"""

from __future__ import annotations

from typing import Any

from spec import ledger_actions as A
from spec import ledger as machine
from spec import manager_actions as M
from spec.errors import (
    BundlePoisoned,
    CapacityDenied,
    ForeignHolder,
    InvalidArgument,
    InvalidTransition,
    ManagerPoisoned,
    UnknownBundle,
    UnknownIntent,
    UnknownTransaction,
)
from spec.quota import headroom
from spec.guards import GuardSet
from spec.ledger import _active, _authority, _holder, check_bytes
from spec.manager_parts import canonical, check_priority, without_limit_check
from spec.records import evolve
from spec.tickets import TicketEvent, TicketState, next_ticket_state
from spec.types import BundlePart, Role

__all__ = ["TX_HANDLERS", "CHARGING", "refuse_poisoned"]

#: Actions that would grant new charge: `spec.manager.step` refuses them first while the manager is poisoned (I5).
CHARGING: tuple[type, ...] = (M.Submit, M.TryReserve, M.GrowLease, M.PlanTx, M.ReserveTx, A.Reserve,
                              A.RecordCommitted, A.ReserveGrowth)


def refuse_poisoned(m: M.Manager, guards: GuardSet) -> None:
    # Verify a poisoned manager grants nothing new: the ledger it would charge is corrupt (I5).
    if m.poisoned and guards.on("poisoned_manager_refuses"):
        guards.refuse("poisoned", ManagerPoisoned("the shared ledger was found corrupt; the manager grants nothing"))


def _tx(m: M.Manager, xid: object) -> M.Tx:
    x = m.txs.get(xid) if type(xid) is int else None
    if x is None:
        if type(xid) is int and 1 <= xid < m.next_tx:
            raise InvalidTransition(f"transaction {xid} is already retired")
        raise UnknownTransaction(f"transaction {xid!r} was never planned")
    return x


def _intent(m: M.Manager, iid: object, holder: int, guards: GuardSet) -> M.Intent:
    i = m.intents.get(iid) if type(iid) is int else None
    if i is None:
        if type(iid) is int and 1 <= iid < m.next_tx and iid not in m.txs:
            raise InvalidTransition(f"intent {iid} was already retried (or its transaction committed)")
        raise UnknownIntent(f"intent {iid!r} was never left by an abort")
    if i.holder != holder:
        guards.refuse("owner", ForeignHolder(f"intent {i.id} belongs to holder {i.holder}, not holder {holder}"))
    return i


# --- capacity transactions (C4, I5): try-only, in authority id order -------------------


def _plan_tx(m: M.Manager, act: M.PlanTx, guards: GuardSet) -> tuple[M.Manager, int]:
    needs = act.needs
    # The arguments' types first, before any state is looked at: an ill-typed need is bad input whatever the state.
    if (type(needs) is not tuple or not needs
            or any(type(n) is not tuple or len(n) != 2 or type(n[0]) is not int or type(n[1]) is not int for n in needs)
            or len({aid for aid, _ in needs}) != len(needs)):
        raise InvalidArgument(f"needs must be a non-empty tuple of (int authority, int nbytes) pairs with distinct "
                              f"authorities, got {needs!r:.80}")
    check_priority(act.priority, guards)
    for _, n in needs:
        check_bytes(n, "nbytes", guards=guards)
    h = _holder(m.ledger, act.holder, guards)
    for aid, _ in needs:
        _active(canonical(m, aid, guards), guards)
    intent = None if act.retry is None else _intent(m, act.retry, h.id, guards)
    xid = m.next_tx
    # Verify a retry takes back its intent's place: submit sequence, priority and age (C4, I13).
    if intent is not None and guards.on("retry_keeps_identity"):
        seq, priority, age = intent.seq, intent.priority, intent.age
    else:
        seq, priority, age = xid, act.priority, 0
    # Verify the needs are reserved in stable authority id order, so no two transactions hold-and-miss (C4).
    order = tuple(sorted(needs)) if guards.on("ordered_reservation") else needs
    x = M.Tx(xid, h.id, order, (), None, seq, priority, age)
    intents = m.intents if intent is None else m.intents.delete(intent.id)
    return evolve(m, txs=m.txs.set(x.id, x), next_tx=x.id + 1, intents=intents), x.id


def _reserve_tx(m: M.Manager, act: M.ReserveTx, guards: GuardSet) -> tuple[M.Manager, int]:
    x = _tx(m, act.tx)
    if len(x.held) == len(x.needs):
        raise InvalidTransition(f"transaction {x.id} already holds every need")
    aid, n = x.needs[len(x.held)]
    a = _authority(m.ledger, aid)
    _active(a, guards)
    room, ledger_guards = headroom(m.quotas, m.ledger, a), guards
    # Verify the headroom counts bytes granted to unclaimed tickets: they are already the ledger's (I1, I2).
    if not guards.on("tx_counts_granted"):
        room += sum(t.nbytes for t in m.tickets.values() if t.authority == aid and t.state is TicketState.GRANTED)
        ledger_guards = without_limit_check(guards)
    if n > room:  # at the ledger Reserve's own site: one refusal, listed once
        guards.refuse("limit", CapacityDenied(f"authority {aid}: transaction {x.id} needs {n} B, {max(0, room)} B "
                                              "free (try-only: it never waits)"))
    ledger, alloc = machine.step(m.ledger, A.Reserve(x.holder, aid, a.tier, n, Role.STATE), ledger_guards)
    return evolve(m, ledger=ledger, txs=m.txs.set(x.id, evolve(x, held=x.held + (alloc,)))), alloc


def _commit_tx(m: M.Manager, act: M.CommitTx, guards: GuardSet) -> tuple[M.Manager, tuple[int, ...]]:
    x = _tx(m, act.tx)
    if len(x.held) != len(x.needs):
        guards.refuse("held", InvalidTransition(f"transaction {x.id} holds {len(x.held)} of its {len(x.needs)} "
                                                "needs"))
    bundles = m.bundles
    if x.bundle is not None:
        b = bundles[x.bundle]
        if b.poisoned:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; abort and rebuild")
        # Verify the bundle's parts advance together, in the same step as the leases (I10).
        versions = tuple(v + 1 if guards.on("atomic_bundle") or i == 0 else v for i, v in enumerate(b.versions))
        bundles = bundles.set(b.id, evolve(b, versions=versions))
    ledger = m.ledger
    for (_, n), alloc in zip(x.needs, x.held):  # (only the held needs, where "held" was waived)
        ledger = machine.step(ledger, A.Commit(x.holder, alloc, n), guards)[0]
    return evolve(m, ledger=ledger, txs=m.txs.delete(x.id), bundles=bundles), x.held


def _abort_tx(m: M.Manager, act: M.AbortTx, guards: GuardSet) -> tuple[M.Manager, int]:
    x = _tx(m, act.tx)
    ledger, credited = m.ledger, 0
    # Verify an abort cancels every reservation the transaction holds, not only its first (I5).
    for alloc in x.held if guards.on("full_abort") else x.held[:1]:
        credited += ledger.allocations[alloc].charge
        ledger = machine.step(ledger, A.Cancel(x.holder, alloc), guards)[0]
    # The attempt's place outlives it at zero bytes, one abort older (bounded aging, C4, I13).
    intent = M.Intent(x.id, x.holder, x.seq, x.priority, min(x.age + 1, m.aging_bound))
    return evolve(m, ledger=ledger, txs=m.txs.delete(x.id), intents=m.intents.set(x.id, intent)), credited


# --- state bundles (I5, I10) ---------------------------------------------------------------


def _bundle(m: M.Manager, bid: object) -> M.Bundle:
    b = m.bundles.get(bid) if type(bid) is int else None
    if b is None:
        raise UnknownBundle(f"bundle {bid!r} is not known")
    return b


def _open_bundle(m: M.Manager, act: M.OpenBundle, guards: GuardSet) -> tuple[M.Manager, int]:
    b = M.Bundle(m.next_bundle, (0,) * len(BundlePart))
    return evolve(m, bundles=m.bundles.set(b.id, b), next_bundle=b.id + 1), b.id


def _join_bundle(m: M.Manager, act: M.JoinBundle, guards: GuardSet) -> tuple[M.Manager, None]:
    x = _tx(m, act.tx)
    b = _bundle(m, act.bundle)
    if x.bundle is not None:
        guards.refuse("bundle", InvalidTransition(f"transaction {x.id} is already in bundle {x.bundle}"))
    if b.poisoned:
        raise BundlePoisoned(f"bundle {b.id} is poisoned; the engine must rebuild it")
    return evolve(m, txs=m.txs.set(x.id, evolve(x, bundle=b.id))), None


def _report_mismatch(m: M.Manager, act: M.ReportMismatch, guards: GuardSet) -> tuple[M.Manager, None]:
    b = _bundle(m, act.bundle)
    # A post-commit disagreement poisons the smallest rebuildable unit: this bundle only (I5).
    return evolve(m, bundles=m.bundles.set(b.id, evolve(b, poisoned=True))), None


def _corrupt_ledger(m: M.Manager, act: M.CorruptLedger, guards: GuardSet) -> tuple[M.Manager, None]:
    if m.poisoned:
        return m, None  # poisoned for good: a second report changes nothing
    tickets = m.tickets
    for t in m.tickets.values():
        if t.state is TicketState.PENDING:
            next_ticket_state(t.state, TicketEvent.RECONFIGURE, f"ticket {t.id}")
            tickets = tickets.delete(t.id)  # a waiter fails: it would be granted from a corrupt ledger (I5)
    return evolve(m, tickets=tickets, poisoned=True), None


TX_HANDLERS: dict[type, Any] = {
    M.PlanTx: _plan_tx,
    M.ReserveTx: _reserve_tx,
    M.CommitTx: _commit_tx,
    M.AbortTx: _abort_tx,
    M.OpenBundle: _open_bundle,
    M.JoinBundle: _join_bundle,
    M.ReportMismatch: _report_mismatch,
    M.CorruptLedger: _corrupt_ledger,
}
