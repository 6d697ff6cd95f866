"""The pressure campaign: the composed machine restricted to tickets, arbitration and holder pressure (C5 I6 I7 I13).

A focused campaign is a restriction of the one composed model, never a second model (issue #21): the
`PressureMachine` is `invariants.manager_machine.ManagerMachine` with only its ticket, release, allocator,
pressure and environment rules (`PRESSURE_RULES`; every other part's rule is switched off), the same
`spec.manager.step`, the same refinement and the same predicates (`invariants.manager`), the composed
machine's steered `burst` (small newcomers behind a request just too big for the headroom, until that request
matures and is then granted: I13's aging bound, bounded overtaking) and `order_among_waiters` (two waiters of
different priorities behind one lease: the grant order chooses), plus one steered rule of its own: an answer
after its pressure's deadline (StaleAnswer, C5). `situations` counts what the
campaign reached (`PRESSURE_SITUATIONS`), so a run that never matures a ticket shows it.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from invariants.manager_machine import ManagerMachine, restrict
from spec import manager_actions as M
from spec.tickets import TicketState

__all__ = ["PRESSURE_RULES", "PRESSURE_SITUATIONS", "PressureMachine", "pressure_situations", "late_answer_refused"]

_T = TicketState

#: The composed machine's rules this restriction keeps (with its own steered `answer_late`; `burst` and
#: `order_among_waiters` are the composed machine's).
PRESSURE_RULES = ("submit", "ticket", "wait_for_release", "release_lease", "direct_reserve", "press_and_answer",
                  "pressure", "environment", "burst", "order_among_waiters", "answer_late")

#: What the campaign must reach (counted per accepted step, `CampaignStats.events`).
PRESSURE_SITUATIONS = ("aging bound reached", "matured misfit granted", "grant order chose among waiters",
                       "pressed", "answered", "pressure cancelled", "pressure expired", "late answer refused")


def pressure_situations(prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
    """The pressure cases an accepted step met, read from the two abstractions."""
    out = []
    bound = now.aging_bound
    if any(t.state is _T.PENDING and t.age >= bound and (p := prev.tickets.get(t.id)) is not None and p.age < bound
           for t in now.tickets.values()):
        out.append("aging bound reached")
    fresh = [t for t in now.tickets.values() if t.state is _T.GRANTED
             and (t.id >= prev.next_ticket or prev.tickets[t.id].state is _T.PENDING)]
    if any(t.id in prev.tickets and prev.tickets[t.id].age >= bound for t in fresh):
        out.append("matured misfit granted")
    if fresh and any(t.state is _T.PENDING and t.authority in {f.authority for f in fresh}
                     for t in now.tickets.values()) or len(fresh) >= 2:
        out.append("grant order chose among waiters")
    kind = {M.Press: "pressed", M.Answer: "answered", M.CancelPressure: "pressure cancelled",
            M.ExpirePressure: "pressure expired"}.get(type(action))
    return (*out, kind) if kind else tuple(out)


def late_answer_refused(m: M.Manager, action: Any) -> bool:
    """True iff `action` answers, naming a victim, an open pressure of `m` past its deadline (refused: C5)."""
    p = m.pressures.get(action.pressure) if isinstance(action, M.Answer) else None
    return (p is not None and p.deadline is not None and action.now is not None and action.now > p.deadline
            and bool(action.victims))


class PressureMachine(ManagerMachine):
    """The composed machine, restricted to the pressure rules (`PRESSURE_RULES`); same adapters, same spec."""

    def situations(self, prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
        return pressure_situations(prev, action, now)

    def _do(self, action: Any) -> Any:
        if late_answer_refused(self.abs, action):  # refused steps count no situation: counted here
            self._count("event:late answer refused")
        return super()._do(action)

    @rule(data=st.data())
    def answer_late(self, data: st.DataObject) -> None:
        """A pressure answered after its deadline, naming an idle lease: refused with StaleAnswer, credits
        nothing (C5); then it expires. Random answers are mostly on time, so this is steered to."""
        leases = [r for r in self._leases() if r.id not in self.abs.uses]
        if not leases:
            return
        r = data.draw(st.sampled_from(leases))
        pid, deadline = self.abs.next_pressure, data.draw(st.integers(0, 3))
        self._do(M.Press(r.holder, r.authority, r.charge, 0, deadline))
        if pid in self.abs.pressures:
            self._do(M.Answer(r.holder, pid, (r.id,), deadline + data.draw(st.integers(1, 2))))
            if pid in self.abs.pressures and data.draw(st.booleans()):
                self._do(M.ExpirePressure(pid, deadline + 1))


restrict(PressureMachine, PRESSURE_RULES)  # every composed rule outside `PRESSURE_RULES` is switched off
