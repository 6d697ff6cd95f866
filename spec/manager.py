"""The composed ProcessMemoryManager: `step(manager, action) -> (manager, result)`, pure.

Theory of operation. `spec.manager_actions` holds the state, the actions and
their contract; this module is the transition function. There is one ledger,
`Manager.ledger`, and it is `spec.ledger`'s state, driven only through
`spec.ledger.step`: a granted ticket is a ledger Reserve, a claim a Commit,
a cancel of a granted ticket or an abort a Cancel, a pressure answer a
Release of the holder's own leases. The parts (`spec.manager_parts`) keep
what is not bytes.

One `step`:
  1. the action's handler validates (first failing check decides the typed
     error, raised before any state is built: a rejection changes nothing)
     and applies it;
  2. arbitration (I13): for each canonical authority with pending tickets, in
     ascending id, a round runs when `limit - used` rose in the action, the
     action was a `Submit` on it, or it retired a granted ticket on it. Pending tickets age, then
     `spec.grants`' one rule grants them one at a time (`GrantTicket`: a ledger
     Reserve charged at grant) in `spec.arith.arbitration_key` order, each that
     fits, until a matured misfit ends the round. With `eager=False` (the replay
     of `ortmem-manager/2`) rounds only age: every grant is an explicit action.
     Cancelling or timing out a *pending* ticket is not a round (D10, as the
     design's table and upstream have it): it ages nobody. Capacity did not
     change, but the retired ticket may have been the matured misfit that
     ended the last round, so a grant pass follows in the same order with
     the same stop rule and no ageing: a waiter that fits is not left
     pending (it grants nothing unless the retired ticket was that misfit).

State bundles (I10): a transaction that joined a bundle advances every part
of it in the same step as its CommitTx turns its reservations into leases;
a poisoned bundle (ReportMismatch, I5) refuses the commit (`spec.manager_tx`). A poisoned manager
(CorruptLedger, I5) refuses every action that would grant new charge, before its handler runs.

Device loss is one mechanism for every part: the ledger loses the device,
then tickets, pressures and limit changes on it are dropped and every
transaction needing it is aborted (its bytes elsewhere are cancelled, its
bytes on the lost device stay charged until `ConfirmTermination`).

No I/O, no clock, no threads, no numpy.
"""

from __future__ import annotations

from typing import Any

from spec.records import evolve

from spec import ledger_actions as A
from spec import ledger as machine
from spec import manager_actions as M
from spec.errors import InvalidArgument, InvalidTransition
from spec.grants import GRANT_HANDLERS, grant_all
from spec.guards import ALL_ON, GuardSet
from spec.ledger import _holder_allocation, check_bytes
from spec.manager_parts import PART_HANDLERS, referenced
from spec.manager_tx import CHARGING, TX_HANDLERS, refuse_poisoned
from spec.quota import check_quota, headroom
from spec.manager_views import VIEW_HANDLERS, end_execution, lose_views
from spec.refusals import every_refusal
from spec.tickets import TicketState
from spec.types import AllocState

__all__ = ["ACTIONS", "step", "apply", "refusals", "alternatives"]

_T = TicketState


def apply(m: M.Manager, action: Any, guards: GuardSet = ALL_ON) -> M.Manager:
    """The next manager, or a typed rejection (manager unchanged)."""
    return step(m, action, guards)[0]


def refusals(m: M.Manager, action: Any, guards: GuardSet = ALL_ON) -> tuple[Any, ...]:
    """Every refusal whose precondition holds for `action` in `m`, from `step`'s own checks (`spec.refusals`).

    Every check that a later check could follow refuses through `GuardSet.refuse`; the list ends only at an
    ill-typed argument (checked first, before any state) or a failed lookup whose record the later checks need."""
    return every_refusal(step, m, action, guards)


def alternatives(m: M.Manager, action: Any, guards: GuardSet = ALL_ON) -> tuple[tuple[M.Manager, Any], ...]:
    """The other outcomes the design allows where `step` refuses (`spec.ledger.alternatives`, on the ledger)."""
    if _HANDLERS.get(type(action)) is not _ledger_action:
        return ()
    return tuple((evolve(m, ledger=ledger), result) for ledger, result in machine.alternatives(m.ledger, action, guards))


def step(m: M.Manager, action: Any, guards: GuardSet = ALL_ON, eager: bool = True) -> tuple[M.Manager, Any]:
    """The next manager and the action's result, as `spec.manager_actions` documents them.

    `eager=False` (the replay of `ortmem-manager/2`): rounds age but grant nobody; every grant is an explicit
    `GrantTicket` (`spec.grants`), decided by the same rule the eager rounds apply."""
    handler = _HANDLERS.get(type(action))
    if handler is None:
        raise InvalidArgument(f"not a manager action: {action!r:.120}")
    if isinstance(action, CHARGING):
        refuse_poisoned(m, guards)
    nxt, result = handler(m, action, guards)
    if nxt is m:
        return m, result  # nothing changed (a cancel of a retired ticket): no round
    if nxt.uses:
        nxt = _live_uses(nxt)
    return _arbitrate(m, action, nxt, guards, eager), result


def _live_uses(m: M.Manager) -> M.Manager:
    """`m` with the use flags of leases that stopped being LIVE (released, quarantined, lost) dropped."""
    allocs = m.ledger.allocations
    gone = [i for i in m.uses if i not in allocs or allocs[i].state is not AllocState.LIVE]
    if not gone:
        return m
    uses = m.uses
    for i in gone:
        uses = uses.delete(i)
    return evolve(m, uses=uses)


# --- arbitration (I13) -------------------------------------------------------------


def _arbitrate(before: M.Manager, action: Any, m: M.Manager, guards: GuardSet, eager: bool) -> M.Manager:
    """Run a round on every authority whose headroom rose in the action, that a Submit targeted, or on which
    it retired a granted ticket; a grant pass that ages nobody where it retired a pending one (D10); then the
    rounds the tiers' process quotas owe (`_quota_rounds`)."""
    waiting = sorted({t.authority for t in m.tickets.values() if t.state is _T.PENDING})
    done: set[int] = set()
    gone = before.tickets.get(action.ticket) if isinstance(action, (M.CancelTicket, M.TimeoutTicket)) else None
    for aid in waiting:
        a0, a1 = before.ledger.authorities.get(aid), m.ledger.authorities.get(aid)
        if a1 is None:
            continue  # removed under its waiters (provider_pinned off): no ledger to grant from
        rose = a0 is None or a1.limit - a1.used > a0.limit - a0.used
        submitted = isinstance(action, M.Submit) and action.authority == aid
        retired = gone is not None and gone.authority == aid  # a live ticket: the accepted action retired it
        if rose or submitted or (retired and gone.state is not _T.PENDING):
            m = _round(m, aid, guards, eager=eager)
        elif retired:
            # Not a round (D10): nobody ages; but the retired waiter may have been the matured misfit that
            # ended the last round, and a waiter that fits must not stay pending (I13).
            m = _round(m, aid, guards, age=False, eager=eager)
        else:
            continue
        done.add(aid)
    return _quota_rounds(before, m, done, guards, eager)


def _quota_rounds(before: M.Manager, m: M.Manager, done: set[int], guards: GuardSet, eager: bool) -> M.Manager:
    """Then a round, in ascending id, on every other waiting authority of a tier with a quota (before or after)
    whose `spec.quota.headroom` rose: bytes credited on another authority of its tier, a quota raised or removed."""
    if not (before.quotas or m.quotas):
        return m
    # The headroom is read with the grants of the rounds so far made (`seen`), as eager rounds make them first: a
    # lazy step (eager=False) must age the same tickets, or a grant made later would find them a round older.
    seen = m if eager else _granted(m, done, guards)
    for aid in sorted({t.authority for t in m.tickets.values() if t.state is _T.PENDING} - done):
        a0, a1 = before.ledger.authorities.get(aid), seen.ledger.authorities.get(aid)
        if a0 is not None and a1 is not None and (
                headroom(seen.quotas, seen.ledger, a1) > headroom(before.quotas, before.ledger, a0)):
            m = _round(m, aid, guards, eager=eager)
            seen = m if eager else _granted(m, done | {aid}, guards)
    return m


def _granted(m: M.Manager, aids: set[int], guards: GuardSet) -> M.Manager:
    """`m` with every grant the rounds on `aids` would have made, in ascending id (what eager rounds hold)."""
    for aid in sorted(aids):
        m = grant_all(m, aid, guards)
    return m


def _round(m: M.Manager, aid: int, guards: GuardSet, age: bool = True, eager: bool = True) -> M.Manager:
    """One round on authority `aid`: age every pending ticket, then grant each enabled ticket in turn.

    The grants are `spec.grants`' rule applied until no ticket is enabled: the greedy pass in arbitration
    order with its stop at a matured misfit (I13). `age=False`: the grant pass alone, ageing nobody (D10).
    `eager=False`: the ageing alone; the grants are explicit `GrantTicket` actions (`ortmem-manager/2`)."""
    tickets = m.tickets
    if age:
        bound = m.aging_bound
        for t in m.tickets.values():
            if t.authority == aid and t.state is _T.PENDING:
                tickets = tickets.set(t.id, _aged(t, bound))
    if eager:
        return grant_all(m, aid, guards, tickets)  # one new manager for the ageing and the grants
    return m if tickets is m.tickets else evolve(m, tickets=tickets)


def _aged(t: M.Ticket, bound: int) -> M.Ticket:
    """`t` one round older, capped at the bound (built directly: `evolve` is the explorer's hot spot)."""
    return M.Ticket(t.id, t.holder, t.authority, t.nbytes, t.priority, t.role, min(t.age + 1, bound), t.state,
                    t.allocation, t.generation)


# --- the ledger's own actions --------------------------------------------------------


def _ledger_action(m: M.Manager, act: Any, guards: GuardSet) -> tuple[M.Manager, Any]:
    ledger, result = machine.step(m.ledger, act, guards)
    return (m if ledger is m.ledger else evolve(m, ledger=ledger)), result


def _reserve(m: M.Manager, act: A.Reserve, guards: GuardSet) -> tuple[M.Manager, Any]:
    """The ledger's Reserve (its checks first), admitted within the tier's process quota too (`spec.quota`)."""
    nxt, result = _ledger_action(m, act, guards)
    a = m.ledger.authorities[act.authority]
    check_quota(m.quotas, m.ledger, a if a.alias_of is None else m.ledger.authorities[a.alias_of], act.nbytes,
                guards)
    return nxt, result


def _part_owned_action(m: M.Manager, act: Any, guards: GuardSet) -> tuple[M.Manager, Any]:
    """Commit / Cancel / Release / Quarantine: the ledger's lookups and ownership, then the parts' claim."""
    if isinstance(act, A.Commit):
        check_bytes(act.nbytes, "nbytes", guards=guards)
    if isinstance(act, A.Quarantine):
        check_bytes(act.released, "released", allow_zero=True, guards=guards)
    rec = _holder_allocation(m.ledger, act, guards)
    refs = referenced(m)
    # Verify no one settles bytes a ticket or a transaction holds: that part owns them (I1).
    if rec.id in refs:
        guards.refuse("part", InvalidTransition(f"allocation {rec.id} is held by {refs[rec.id]}: settle it "
                                                "through that part"))
    return _ledger_action(m, act, guards)


def _lose_device(m: M.Manager, act: A.LoseDevice, guards: GuardSet) -> tuple[M.Manager, None]:
    ledger = machine.step(m.ledger, act, guards)[0]  # the ledger's validation and loss (no refund)
    a = m.ledger.authorities[act.authority]
    aid = a.alias_of if a.alias_of is not None else a.id
    on_lost = {v.id for v in m.views.values() if v.authority == aid}
    bound = {u for v in m.views.values() if v.id in on_lost for u, _ in v.users}
    hit = [x for x in m.txs.values() if any(n_aid == aid for n_aid, _ in x.needs) or x.id in bound]
    # Verify a transaction's reservation on the lost device stays charged until termination (C3, I6).
    if not guards.on("loss_keeps_charge"):
        pre = m.ledger
        for x in hit:
            for (n_aid, _), alloc in zip(x.needs, x.held):
                if n_aid == aid:
                    pre = machine.step(pre, A.Cancel(x.holder, alloc), guards)[0]
        ledger = machine.step(pre, act, guards)[0]
    txs = m.txs
    for x in hit:
        for (n_aid, _), alloc in zip(x.needs, x.held):
            if n_aid != aid:
                ledger = machine.step(ledger, A.Cancel(x.holder, alloc), guards)[0]
        txs = txs.delete(x.id)
    tickets = m.tickets
    for t in m.tickets.values():
        if t.authority == aid:
            tickets = tickets.delete(t.id)  # a granted ticket's allocation is DEVICE_LOST: charged until confirmed
    pressures = m.pressures
    for p in m.pressures.values():
        if p.authority == aid:
            pressures = pressures.delete(p.id)
    changes = m.changes.delete(aid) if aid in m.changes else m.changes
    m = evolve(m, ledger=ledger, tickets=tickets, pressures=pressures, txs=txs, changes=changes)
    for x in hit:
        m = end_execution(m, x.id, drop_own=True)  # aborted: its execution ends, its own view goes
    return lose_views(m, aid), None


def _ending(drop_own: bool) -> Any:
    """The part's CommitTx / AbortTx (looked up per call), then the transaction's execution ends."""
    def run(m: M.Manager, act: Any, guards: GuardSet) -> tuple[M.Manager, Any]:
        nxt, result = TX_HANDLERS[type(act)](m, act, guards)
        return end_execution(nxt, act.tx, drop_own), result
    return run


_HANDLERS: dict[type, Any] = {
    **{kind: _ledger_action for kind in (
        A.RegisterAuthority, A.RegisterAlias, A.RegisterHolder, A.RecordCommitted,
        A.ConfirmTermination, A.OpenAllowance, A.ReserveGrowth, A.MapAllowance, A.UnmapAllowance,
        A.TransferAllowance, A.CloseAllowance)},
    **{kind: _part_owned_action for kind in (A.Commit, A.Cancel, A.Release, A.Quarantine)},
    A.Reserve: _reserve,
    A.LoseDevice: _lose_device,
    **PART_HANDLERS,
    **TX_HANDLERS,
    **VIEW_HANDLERS,
    **GRANT_HANDLERS,
    M.CommitTx: _ending(drop_own=False),
    M.AbortTx: _ending(drop_own=True),
}

#: Every action kind `step` takes: the governor's verbs, its own grant (`GrantTicket`) and the environment's events.
ACTIONS: tuple[type, ...] = tuple(_HANDLERS)
