"""I13 on the composed manager: the design's grant order, stated from the tickets' own fields, and the aging measure.

`served_before` is the order of DESIGN-FACTS section 6 (matured tickets first, oldest first; then higher
priority first, oldest first), written here independently of `spec.arith.arbitration_key`, which the spec
sorts by. `rounds_to_maturity` is the aging measure: how many more rounds a waiting ticket can be passed
over before returned capacity accumulates for it. The step clauses read one composed step per authority:
which waiters the round considered (pending before, or submitted by this step) and which it granted.

- `grant_order`: no waiter that fit at its turn in that order is passed over for a later one.
- `passed_over_ages`: a waiter's age never falls, and a round that grants others ages it by one (up to the
  bound): a lagging age never matures, so later tickets overtake it without end. Retiring a pending ticket
  is no round (D10): its grant pass ages nobody.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.clauses import clause
from invariants.manager_quota import room
from spec import manager_actions as M
from spec.grants import GrantTicket
from spec.tickets import TicketState

__all__ = ["served_before", "rounds_to_maturity", "step_I13_order"]

_T = TicketState


def served_before(a: Any, b: Any, bound: int) -> bool:
    """True iff arbitration must consider ticket `a` before ticket `b` (ids are submit order)."""
    am, bm = a.age >= bound, b.age >= bound
    if am != bm:
        return am
    if not am and a.priority != b.priority:
        return a.priority > b.priority
    return a.id < b.id


def rounds_to_maturity(t: Any, bound: int) -> int:
    """The aging measure: rounds `t` may still be passed over before it matures (0: matured)."""
    return max(0, bound - t.age)


class _Key:
    """A sort key wrapping `served_before` (a comparison, so the order is stated once)."""

    __slots__ = ("t", "bound")

    def __init__(self, t: Any, bound: int) -> None:
        self.t, self.bound = t, bound

    def __lt__(self, other: _Key) -> bool:
        return served_before(self.t, other.t, self.bound)


_ORDER = clause("I13", "step_I13_order", "grant_order",
                "no waiting ticket that fits is passed over for one after it in grant order (matured tickets first, "
                "oldest first; then higher priority first; then oldest first): a request that could be served waits "
                "while a later one in the design's order takes the bytes")
_AGING = clause("I13", "step_I13_order", "passed_over_ages",
                "no waiting ticket is passed over without moving toward maturity: its age never falls while it waits, "
                "and a round that grants other tickets on its authority ages it by one up to the aging bound; a "
                "ticket whose age lags never matures, and later tickets overtake it without end (retiring a pending "
                "ticket is no round, D10: its grant pass ages nobody)")


def step_I13_order(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    bound, was_tickets, first_new = after.aging_bound, before.tickets, before.next_ticket
    # One walk of the tickets after the step gives both readings below.
    # `stayed`: every ticket pending after the step that existed before it: the lifecycle enters PENDING only from
    # IDLE by a submit with a fresh id, so on a legal step that is a ticket that waited through it; a ticket taken
    # back to pending (an illegal un-grant) is judged too, and its age may not fall either.
    # `rounds`, per authority: (the waiters this step's arbitration considered, as aged in `after`; those it granted).
    stayed: list[tuple[int, M.Ticket]] = []
    rounds: dict[int, tuple[list[M.Ticket], list[M.Ticket]]] = {}
    for tid, t in after.tickets.items():
        p = was_tickets.get(tid)
        state = t.state
        if p is not None:
            if state is _T.PENDING:
                stayed.append((p.age, t))
            if p.state is not _T.PENDING:
                continue  # it did not wait through the step
        elif tid < first_new:
            continue  # not a ticket this step submitted
        if state is _T.PENDING or state is _T.GRANTED:
            considered, granted = rounds.setdefault(t.authority, ([], []))
            considered.append(t)
            if state is _T.GRANTED:
                granted.append(t)
    for was, t in stayed:
        if t.age < was:
            _AGING.fail(f"{act!r}: waiting ticket {t.id}'s age fell {was} -> {t.age}")
    passed = paired = False  # some round granted and passed a waiter over / considered two tickets or more
    for considered, granted in rounds.values():
        if granted:
            passed, paired = passed or len(considered) > len(granted), paired or len(considered) >= 2
    _AGING.case(bool(stayed) or passed)
    _ORDER.case(paired)
    if not passed:
        return  # no round granted past a waiter: none was passed over, and none granted out of order
    gone = before.tickets.get(act.ticket) if isinstance(act, (M.CancelTicket, M.TimeoutTicket)) else None
    for aid, (considered, granted) in rounds.items():
        waiting = [t for t in considered if t.state is _T.PENDING]
        if not granted or not waiting:
            continue
        no_round = gone is not None and gone.authority == aid and gone.state is _T.PENDING  # D10: a grant pass
        no_round = no_round or isinstance(act, GrantTicket)  # one grant of the round an earlier event ran
        for t in waiting if not no_round else ():
            was = before.tickets[t.id].age if t.id in before.tickets else 0
            if t.age < min(was + 1, bound):
                _AGING.fail(f"{act!r}: ticket {t.id} (age {was}) was passed over by a round on authority {aid} that "
                            f"granted ticket(s) {sorted(g.id for g in granted)}, but is aged {t.age}, not "
                            f"{min(was + 1, bound)} (bound {bound}, {rounds_to_maturity(t, bound)} round(s) from "
                            "maturity)")
        # What the round could hand out: the headroom left after it plus what it granted.
        a = after.ledger.authorities.get(aid)
        if a is None:
            continue
        charge = {g.id: after.ledger.allocations[g.allocation].charge if g.allocation in after.ledger.allocations
                  else g.nbytes for g in granted}
        free = room(after, a) + sum(charge.values())
        order = sorted(considered, key=lambda t: _Key(t, bound))
        for i, t in enumerate(order):
            if t.id in charge:
                free -= charge[t.id]
                continue
            later = [g.id for g in order[i + 1:] if g.id in charge]
            if later and t.nbytes <= free:
                _ORDER.fail(f"{act!r}: ticket {t.id} ({t.nbytes} B, priority {t.priority}, age {t.age}) fit in the "
                            f"{free} B left at its turn on authority {aid} but waits, while ticket(s) {later} after it "
                            f"in grant order were granted")
