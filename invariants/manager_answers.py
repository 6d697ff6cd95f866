"""C5 on the composed manager: pressure is a request, and the holder's answer is its own choice.

A press asks; it takes nothing. An answer gives back exactly the leases the holder named, and reports
their bytes; a zero answer takes nothing (the requester fails or defers, nothing is forced). A late or
closed pressure's answer is `invariants.manager.step_C5_manager`. Each clause reads the allocation
records of both states, never the handler's checks.

The cancellation mailbox is no state of the composed spec (a posted cancel is applied as the CancelTicket
it stands for), so the focused model's mailbox clauses have no counterpart here: there is no slot to lack.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.clauses import clause
from spec import manager_actions as M
from spec.types import AllocState

__all__ = ["step_C5_answers"]

_PRESS = clause("C5", "step_C5_answers", "press_takes_nothing",
                "opening a pressure ticket takes nothing from anyone: no byte, lease, ticket or transaction moves")
_CHOICE = clause("C5", "step_C5_answers", "answer_is_holders_choice",
                 "an answer gives back exactly the leases the holder chose: only its named victims stop being live "
                 "leases, every one of them does, and the answer reports exactly their bytes, never more")
_ZERO = clause("C5", "step_C5_answers", "zero_answer_takes_nothing",
               "after a zero answer every holder keeps every lease and no authority's used falls: the requester "
               "fails or defers, nothing is forced")


def _live(m: M.Manager) -> dict[int, Any]:
    return {i: r for i, r in m.ledger.allocations.items() if r.state is AllocState.LIVE}


def step_C5_answers(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    press = isinstance(act, M.Press)
    _PRESS.case(press)
    if press and (after.ledger.allocations != before.ledger.allocations or after.tickets != before.tickets
                  or after.txs != before.txs
                  or any(a.used != before.ledger.authorities[i].used for i, a in after.ledger.authorities.items()
                         if i in before.ledger.authorities)):
        _PRESS.fail(f"{act!r}: opening a pressure ticket moved bytes, leases, tickets or transactions")
    answer = isinstance(act, M.Answer)
    _CHOICE.case(answer)
    _ZERO.case(answer and not act.victims)
    if not answer:
        return
    was, now = _live(before), _live(after)
    left = sorted(i for i in was if i not in now)
    named = set(act.victims)
    if not act.victims:
        fell = [i for i, a in after.ledger.authorities.items()
                if i in before.ledger.authorities and a.used < before.ledger.authorities[i].used]
        if left or fell:
            _ZERO.fail(f"{act!r}: a zero answer took lease(s) {left} / lowered used on authorities {fell}")
    if set(left) - named:
        _CHOICE.fail(f"{act!r}: lease(s) {sorted(set(left) - named)} left though the holder did not name them")
    if named - set(left):
        _CHOICE.fail(f"{act!r}: named victim(s) {sorted(named - set(left))} are still live leases")
    gave = sum(was[i].charge for i in left if i in named)
    if result != gave:
        _CHOICE.fail(f"{act!r}: the answer reports {result!r} B released, the holder gave back {gave} B")
