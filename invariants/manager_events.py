"""The composed campaign's cases of interest: where parts meet, read from the abstractions around a step.

`invariants.manager_machine.ManagerMachine.situations` counts these, for every
accepted step, as the campaign's events (`CampaignStats.events`), so a case the
campaign never reached shows as a missing count rather than a silent pass
(issue #21: a limit raised while tickets wait, a device lost holding a
quarantined lease, a loss that unwinds a two-ledger transaction, a release, a
lease shrink, a cancel or a pressure answer whose round grants a waiter, aliases, allowances and
oversubscription meeting tickets and transactions). Reads spec states only.
"""

from __future__ import annotations

from typing import Any

from spec import ledger_actions as A
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import AllocState

__all__ = ["SITUATIONS", "situations"]

#: Every case `situations` names (a campaign that reaches each counts every one).
SITUATIONS = (
    "limit raised while tickets wait",
    "device lost holding a quarantined lease",
    "loss unwinds a two-ledger transaction",
    "release followed by a granting round",
    "lease shrink followed by a granting round",
    "pressure answer grants a waiter",
    "a cancel or timeout grants a waiter",
    "limit-change pressure answered",
    "part reserves beside an alias",
    "ticket or transaction beside an allowance",
    "part acts on an oversubscribed ledger",
    "a retry takes back an aborted attempt's place",
)


def situations(prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
    """Where parts meet (issue #21), read from the abstractions around an accepted step."""
    out = []
    waiting = {t.authority for t in prev.tickets.values() if t.state is TicketState.PENDING}
    granted = [t for t in now.tickets.values() if t.state is TicketState.GRANTED
               and (p := prev.tickets.get(t.id)) is not None and p.state is TicketState.PENDING]
    if isinstance(action, M.CommitLimit) and action.authority in waiting and (
            now.ledger.authorities[action.authority].limit > prev.ledger.authorities[action.authority].limit):
        out.append("limit raised while tickets wait")
    if isinstance(action, A.LoseDevice):
        held = [r for r in prev.ledger.allocations.values() if r.authority == action.authority]
        if any(r.state is AllocState.QUARANTINED for r in held):
            out.append("device lost holding a quarantined lease")
        if any(len(t.needs) > 1 and t.held and action.authority in dict(t.needs) for t in prev.txs.values()):
            out.append("loss unwinds a two-ledger transaction")
    if isinstance(action, A.Release) and granted:
        out.append("release followed by a granting round")
    if isinstance(action, M.ShrinkLease) and granted:
        out.append("lease shrink followed by a granting round")
    if isinstance(action, M.Answer) and granted:
        out.append("pressure answer grants a waiter")
    if isinstance(action, (M.CancelTicket, M.TimeoutTicket)) and granted:
        out.append("a cancel or timeout grants a waiter")
    if isinstance(action, M.Answer) and action.pressure in prev.pressures and prev.pressures[action.pressure].change:
        out.append("limit-change pressure answered")
    if isinstance(action, (A.Reserve, M.ReserveTx, M.Submit)) and any(
            a.alias_of is not None for a in prev.ledger.authorities.values()):
        out.append("part reserves beside an alias")
    if isinstance(action, (M.Submit, M.ReserveTx)) and any(prev.ledger.allowances.values()):
        out.append("ticket or transaction beside an allowance")
    if isinstance(action, (M.Submit, M.ReserveTx, M.Claim)) and any(
            a.used > a.limit for a in prev.ledger.authorities.values()):
        out.append("part acts on an oversubscribed ledger")
    if isinstance(action, M.PlanTx) and action.retry is not None:
        out.append("a retry takes back an aborted attempt's place")
    return tuple(out)
