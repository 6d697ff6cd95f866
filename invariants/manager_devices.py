"""Harm clauses of the composed manager's device contexts and provider lifetime (C3).

A lost device keeps its charge until its termination is confirmed (its
context may still be using the bytes), and confirmed termination refunds
that stranded charge exactly once; a lost or terminated context gets no new
work; a removed authority leaves no charge, allowance, alias or part's record
behind. Each clause reads the records, never the guards that prevent the
harm. Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.clauses import clause
from spec import manager_actions as M
from spec.types import AllocState, ContextState

__all__ = ["state_C3_manager", "step_C3_manager"]


_C3_KEPT = clause("C3", "step_C3_manager", "lost_charge_kept",
                  "no lost device's charge is refunded before its termination is confirmed: its context may still "
                  "be using the bytes")
_C3_REFUND = clause("C3", "step_C3_manager", "termination_refunds_once",
                    "confirmed termination refunds a lost context's stranded charge exactly once: every charge the "
                    "loss kept leaves the ledger, and used falls by exactly their sum")


def step_C3_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    lost = [x for x in after.ledger.authorities.values() if x.alias_of is None and x.context is ContextState.LOST]
    _C3_KEPT.case(bool(lost))
    for x in lost:
        p = before.ledger.authorities.get(x.id)
        if p is not None and x.used < p.used:
            _C3_KEPT.fail(f"{act!r}: lost authority {x.id}'s used fell {p.used} -> {x.used} B before termination")
    ended = [(p, x) for x in after.ledger.authorities.values() if x.alias_of is None
             and x.context is ContextState.TERMINATED and (p := before.ledger.authorities.get(x.id)) is not None
             and p.context is ContextState.LOST]
    _C3_REFUND.case(bool(ended))
    for p, x in ended:
        stranded = [r for r in before.ledger.allocations.values()
                    if r.authority == x.id and r.state is AllocState.DEVICE_LOST]
        kept = [r.id for r in stranded if r.id in after.ledger.allocations]
        refund = sum(r.charge for r in stranded)
        if kept or x.used != p.used - refund:
            _C3_REFUND.fail(f"{act!r}: authority {x.id} terminated with stranded charge {refund} B: used "
                            f"{p.used} -> {x.used} B, allocation(s) {kept} still recorded")
    _step_C3_removed(before, act, after)


_C3_NO_WORK = clause("C3", "state_C3_manager", "lost_context_gets_no_work",
                     "a lost or terminated context gets no new work: no open transaction needs an authority whose "
                     "context is not active")


def state_C3_manager(m: M.Manager) -> None:
    dead = {a.id for a in m.ledger.authorities.values() if a.context is not ContextState.ACTIVE}
    _C3_NO_WORK.case(bool(dead) and bool(m.txs))
    for x in m.txs.values() if dead else ():
        on = [aid for aid, _ in x.needs if aid in dead]
        if on:
            _C3_NO_WORK.fail(f"open transaction {x.id} needs authority {on}, whose context is not active")


_C3_REMOVED = clause("C3", "step_C3_manager", "removal_drops_no_charge",
                     "no removed authority leaves a charge, an allowance, an alias or a part's record behind: bytes "
                     "booked on a ledger that is gone could never be refunded nor governed")


def _naming(m: M.Manager, aid: int) -> list[str]:
    """The records of `m` that name authority `aid` (read from every table, not the handler's pin list)."""
    out = [f"allocation {r.id}" for r in m.ledger.allocations.values() if r.authority == aid]
    out += [f"allowance {w.id}" for w in m.ledger.allowances.values() if w.authority == aid]
    out += [f"alias {a.id}" for a in m.ledger.authorities.values() if a.alias_of == aid]
    out += [f"ticket {t.id}" for t in m.tickets.values() if t.authority == aid]
    out += [f"pressure {p.id}" for p in m.pressures.values() if p.authority == aid]
    out += [f"limit change on authority {aid}"] if aid in m.changes else []
    return out + [f"transaction {x.id}" for x in m.txs.values() if aid in dict(x.needs)]


def _step_C3_removed(before: M.Manager, act: Any, after: M.Manager) -> None:
    gone = [aid for aid in before.ledger.authorities if aid not in after.ledger.authorities]
    _C3_REMOVED.case(bool(gone))
    for aid in gone:
        left = _naming(after, aid)
        if left:
            _C3_REMOVED.fail(f"{act!r}: authority {aid} is gone but {', '.join(left[:4])} still name it")
