"""Which step predicates of the composed manager a step can make fail: its frame (issue #21, replay speed).

A step predicate of `invariants.manager` judges what a step changed. Per
predicate (by name, as the registry `STEP_PREDICATES` holds it), `FRAMES`
gives the parts of the state whose replacement it judges and the actions it
judges whatever changed. A step that replaced none of those parts (compared by
identity: the spec's `evolve` keeps every part it is not given, so an
unchanged part is the same object) with an action of none of those kinds
cannot make it fail; why, per predicate, is the comment beside it. A replay
event changes two or three parts of about twenty, so `check_step` runs about
half the predicates. A predicate with no entry always runs (the safe default
for one added later); `tests/test_step_frames.py` checks every entry against
the clause mutations.

Two tests read the after-state alone: the ledger's I1 fails on a charged
alias, and C1 runs `state_C1` on an alias's registration. With the authorities
unchanged that is the before-state's, which the step that last replaced them
was judged on (and `state_I1`, `state_C1` judge it in every state). A removal is
judged on a ledger without the removed authority
(`invariants.manager._on_ledger_step`): of the ledger's predicates only I1
can then fail with the authorities unchanged. Pure; reads spec values only;
never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from spec import ledger_actions as A
from spec import manager_actions as M

__all__ = ["FRAMES", "replaced", "selected"]

# The parts a frame can name, one bit each; `replaced` reads exactly these.
AUTHORITIES, ALLOCATIONS, ALLOWANCES, HOLDERS, NEXT_ALLOCATION, TICKETS, BUNDLES, VIEWS = (1 << i for i in range(8))

_ALLOWANCE_ACTIONS = (A.OpenAllowance, A.ReserveGrowth, A.MapAllowance, A.UnmapAllowance, A.TransferAllowance,
                      A.CloseAllowance)

#: predicate name -> (the parts whose replacement it judges, the action classes it judges whatever changed)
FRAMES: dict[str, tuple[int, tuple[type, ...]]] = {
    # Every existing authority compared with itself (equal); a registration names a pool that must not be bound to
    # another identity (a registration's `state_C1` on unchanged authorities: the module's note).
    "ledger_step_C1": (AUTHORITIES, (A.RegisterAuthority,)),
    # No changed record moves no charge and no `used` moved (a charged alias: the module's note); a removal is judged
    # against a ledger without the authority, so an accepted removal that removed nothing fails here.
    "ledger_step_I1": (AUTHORITIES | ALLOCATIONS, (M.RemoveAuthority,)),
    # Returns at once unless the action credits (a shrink too) or grows a lease.
    "step_I1_manager": (0, (M.CancelTicket, M.TimeoutTicket, M.AbortTx, M.Answer, M.ShrinkLease, M.GrowLease)),
    # Both clauses are gated on the action's class.
    "ledger_step_I2": (0, (A.Reserve, A.RecordCommitted)),
    # It walks only the authorities the step replaced.
    "step_I2_manager": (AUTHORITIES, ()),
    # No record changed and the id counter stayed.
    "ledger_step_I4a": (ALLOCATIONS | NEXT_ALLOCATION, ()),
    # Returns at once on an unchanged holder registry.
    "step_I4a_holders": (HOLDERS, ()),
    # Both clauses are gated on the action's class.
    "ledger_step_I4b": (0, _ALLOWANCE_ACTIONS),
    # It walks the changed allocations and allowances only.
    "ledger_step_I6": (ALLOCATIONS | ALLOWANCES, ()),
    # No allocation changed: no charge fell; no allowance changed: none was rewritten; pinned victims are judged on
    # answers.
    "step_I6_manager": (ALLOCATIONS | ALLOWANCES, (M.Answer,)),
    # A lost or terminated authority compared with itself moved nothing; none was removed.
    "step_C3_manager": (AUTHORITIES, ()),
    # No bundle changed, and no reservation became a lease (a record cannot be provisional and live at once).
    "step_I10_manager": (BUNDLES | ALLOCATIONS, ()),
    # Returns at once unless the action answers (or presses).
    "step_C5_manager": (0, (M.Answer,)),
    "step_C5_answers": (0, (M.Press, M.Answer)),
    # No ticket left pending, so none was granted past a matured one; the try-only clause reads the action.
    "step_I13_manager": (TICKETS, (M.TryReserve, M.GrowLease)),
    # No ticket's age fell and no round granted (a grant replaces the ticket's record).
    "step_I13_order": (TICKETS, ()),
    # No view was remapped or dropped.
    "step_I9_views": (VIEWS, ()),
    # No view is new, and every reservation under a mapped view is the record it was.
    "step_C6_views": (VIEWS | ALLOCATIONS, ()),
    # Both clauses are gated on the action's class.
    "step_C4_intents": (0, (M.PlanTx, M.AbortTx)),
    "step_I5_abort": (0, (M.AbortTx,)),
    # No bundle was newly poisoned; on a poisoned manager no allocation is new and no ticket newly granted.
    "step_I5_poisoned": (BUNDLES | ALLOCATIONS | TICKETS, ()),
    # No tier's charge rose (no authority replaced) and no quota was set.
    "step_I1_quota": (AUTHORITIES, (M.SetProcessQuota,)),
}


def replaced(before: Any, after: Any) -> int:
    """The parts of `FRAMES` that `after` holds as other objects than `before` (bits)."""
    lb, la = before.ledger, after.ledger
    bits = (TICKETS if before.tickets is not after.tickets else 0) | (BUNDLES if before.bundles is not after.bundles
                                                                      else 0) | (
        VIEWS if before.views is not after.views else 0)
    if lb is la:
        return bits
    return bits | (AUTHORITIES if lb.authorities is not la.authorities else 0) | (
        ALLOCATIONS if lb.allocations is not la.allocations else 0) | (
        ALLOWANCES if lb.allowances is not la.allowances else 0) | (HOLDERS if lb.holders is not la.holders else 0) | (
        NEXT_ALLOCATION if lb.next_allocation is not la.next_allocation else 0)


def selected(predicates: tuple[Any, ...], kind: type, bits: int) -> tuple[Any, ...]:
    """The predicates, in order, that a step of action class `kind` replacing the parts `bits` can make fail.

    A predicate that judges some action classes only (its `judges` attribute: it returns at once for any other,
    the wrapped ledger I6) is not selected for another class, whatever the step replaced."""
    out = []
    for p in predicates:
        frame = FRAMES.get(p.__name__)
        if frame is None or frame[0] & bits or issubclass(kind, frame[1]):
            if issubclass(kind, getattr(p, "judges", object)):
                out.append(p)
    return tuple(out)
