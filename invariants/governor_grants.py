"""The grants a governor makes on its own, checked as the spec's `GrantTicket` steps (the composed campaign).

No one asks a governor to grant: it grants a waiting ticket when the bytes are there (I13). The composed
campaign (`invariants.manager_machine`) steps the spec as the replay of `ortmem-manager/2` does
(`spec.manager.step(eager=False)`: rounds age, nobody is granted) and then, for each ticket the governor's
own records show granted in that step, applies `spec.grants.GrantTicket`, in the design's arbitration
order. So each grant is a transition of its own whose legality the spec decides (it was pending, it fits
the headroom, no ticket ahead of it is owed the bytes), and the campaign counts it as an accepted
`GrantTicket`. A grant the spec refuses, or a fitting first waiter the governor leaves pending at the end
of the step, is a refinement violation naming the ticket and the clause (I2, I13). The campaign asks for
grants at rest after every step (the governors it drives grant at once); a governor that grants later is
judged by replay (`invariants.replay_grants`), which allows it.
"""

from __future__ import annotations

from typing import Any

from invariants._violation import RefinementViolation
from invariants.adapter import OwnIds
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.grants import GrantTicket, enabled_grants, next_grant
from spec.guards import ALL_ON
from spec.manager import step
from spec.tickets import TicketState

__all__ = ["governor_grants", "apply_grants"]


def governor_grants(gov: Any, m: M.Manager, result: Any, action: Any, raw: Any) -> set[int]:
    """The spec ids of the tickets pending in `m` (the spec's state after `action`, no grant made; `result`
    its result) that the governor's own records show granted: `gov`, its adapter (an `invariants.adapter.OwnIds`
    names the spec's ids in the governor's), and a `Submit`'s new ticket is the governor's own result `raw`."""
    own = isinstance(gov, OwnIds)
    got, named = (gov.gov.abstract(), gov.gov_id) if own else (gov.abstract(), lambda kind, x: x)
    out = set()
    for tid, t in m.tickets.items():
        if t.state is TicketState.PENDING:
            mine = got.tickets.get(raw if isinstance(action, M.Submit) and tid == result else named("ticket", tid))
            if mine is not None and mine.state is TicketState.GRANTED:
                out.add(tid)
    return out


def apply_grants(m: M.Manager, action: Any, granted: set[int]) -> M.Manager:
    """`m` with each ticket of `granted` granted by `GrantTicket`, per authority in ascending id, each in the
    design's order; RefinementViolation when the spec refuses one or a waiter it owes stays pending."""
    left = set(granted)
    for aid in sorted({m.tickets[t].authority for t in granted}):
        while mine := sorted(t for t in left if m.tickets[t].authority == aid):
            first = next_grant(m, aid, ALL_ON)
            tid = first.id if first is not None and first.id in left else mine[0]
            try:
                m = step(m, GrantTicket(tid), eager=False)[0]
            except GovernorError as e:
                raise RefinementViolation(f"{action!r}: the governor granted ticket {tid}, which the spec "
                                          f"refuses ({type(e).__name__}: {e})") from None
            left.discard(tid)
    for aid, tid in enabled_grants(m, ALL_ON).items():
        raise RefinementViolation(f"{action!r}: ticket {tid} fits on authority {aid} and is first in the "
                                  "design's order, but the governor left it pending (I13)")
    return m
