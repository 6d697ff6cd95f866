"""The composed campaign's pressure rules: press, answer, cancel, expire; the try-only path and use flags; reconfigure.

A mixin of `invariants.manager_machine.ManagerMachine` (its helpers `_do`,
`_leases`, `_pick`, `_holder`, `_authority`, `_nbytes`, `_owner` and the
abstraction `abs`): holder pressure with priorities and deadlines (C5),
answers on time, late or with no time, expiry, pinned and in-flight leases
named as victims (I6), the allocator path beside waiters (I7, I13), and
reconfigures that fail older waiters and stale older pressures.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from spec import manager_actions as M
from spec.types import Role

__all__ = ["PressureRules"]


class PressureRules:
    """Rules and helpers over `spec.manager`'s pressure part (mixed into ManagerMachine)."""

    abs: Any
    _do: Any
    _leases: Any
    _pick: Any
    _holder: Any
    _authority: Any
    _nbytes: Any
    _owner: Any

    def _try_reserve_and_pin(self, data: st.DataObject) -> None:
        """The allocator path (a lease now or CapacityDenied now, I7, I13); the holder flags a lease in use
        and a pressure then names it (PinnedVictim, I6), or clears the flags first."""
        self._do(M.TryReserve(self._holder(data), self._authority(data), self._nbytes(data),
                              data.draw(st.integers(0, 2)), Role.STAGING,
                              data.draw(st.sampled_from((None, None, None, None, None, 256, 6)))))  # D13
        leases = self._leases()
        if not leases:
            return
        r = data.draw(st.sampled_from(leases))
        aid = self._pick(data, self.abs.ledger.allocations.keys(), self.abs.ledger.next_allocation, [r.id])
        flags = data.draw(st.sampled_from(((True, False), (False, True), (True, True), (False, False))))
        self._do(M.SetUse(self._owner(data, r.holder), aid, *flags))
        if data.draw(st.booleans()):
            pid = self.abs.next_pressure
            self._do(M.Press(r.holder, r.authority, r.charge))
            if pid in self.abs.pressures:
                self._do(M.Answer(r.holder, pid, (r.id,)))
                if pid in self.abs.pressures:
                    self._do(M.SetUse(r.holder, r.id, False, False))
                    self._do(M.Answer(r.holder, pid, (r.id,)))

    def _reconfigure(self, data: st.DataObject) -> None:
        """The topology changes: older waiters fail; an older pressure's answer is stale (C5)."""
        aid = self._authority(data)
        older = [p for p in self.abs.pressures.values() if p.authority == aid]
        self._do(M.Reconfigure(aid))
        if older and data.draw(st.booleans()):
            p = data.draw(st.sampled_from(older))
            if p.id in self.abs.pressures:
                self._answer(data, p.id)

    @rule(data=st.data())
    def press_and_answer(self, data: st.DataObject) -> None:
        """Pressure on a holder that has leases; it answers with some of its own (zero is legal)."""
        leases = self._leases()
        if leases and data.draw(st.integers(0, 4)):
            r = data.draw(st.sampled_from(leases))
            holder, aid = r.holder, r.authority
        else:
            holder, aid = self._holder(data), self._authority(data)
        pid = self.abs.next_pressure
        deadline = data.draw(st.sampled_from((None, 0, 2, 5)))  # C5: a deadline, or none
        self._do(M.Press(holder, aid, self._nbytes(data), data.draw(st.integers(0, 2)), deadline))
        if pid in self.abs.pressures and data.draw(st.integers(0, 2)):
            self._answer(data, pid)
        elif pid in self.abs.pressures and deadline is not None and data.draw(st.booleans()):
            if data.draw(st.integers(0, 3)) == 0:
                self._do(M.ExpirePressure(pid, deadline))  # on time: refused
            self._do(M.ExpirePressure(pid, deadline + 1))  # nobody answered by the deadline
        elif pid in self.abs.pressures:
            self._do(M.CancelPressure(pid))  # withdrawn before the holder answers

    def _answer(self, data: st.DataObject, pid: int) -> None:
        p = self.abs.pressures[pid]
        mine = [r.id for r in self._leases(p.holder, p.authority)]
        if data.draw(st.integers(0, 7)) == 0:  # sometimes other holders' leases (ForeignHolder, I6)
            mine = [r.id for r in self._leases(None, p.authority) if r.holder != p.holder]
        victims = tuple(data.draw(st.lists(st.sampled_from(mine), unique=True, max_size=3))) if mine else ()
        if data.draw(st.integers(0, 15)) == 0:
            victims = data.draw(st.sampled_from(((0,), (1, 1), (self.abs.ledger.next_allocation,))))
        # On time mostly; sometimes late (StaleAnswer, C5) or with no time for a pressure that has a deadline.
        due = p.deadline if p.deadline is not None else 3
        k = data.draw(st.integers(0, 9))  # on time mostly: a refused answer checks none of its victims
        now = None if k == 0 else due + 1 if k == 1 else due
        self._do(M.Answer(self._owner(data, p.holder), pid, victims, now))

    @rule(data=st.data(), op=st.sampled_from(("answer", "answer", "cancel", "expire")))
    def pressure(self, data: st.DataObject, op: str) -> None:
        pid = self._pick(data, self.abs.pressures.keys(), self.abs.next_pressure)
        if op == "answer" and pid in self.abs.pressures:
            self._answer(data, pid)
        elif op == "answer":
            self._do(M.Answer(self._holder(data), pid, ()))  # a closed pressure's answer: StaleAnswer (C5)
        elif op == "expire":
            p = self.abs.pressures.get(pid)
            due = p.deadline if p is not None and p.deadline is not None else 0
            self._do(M.ExpirePressure(pid, due + data.draw(st.integers(0, 2))))
        else:
            self._do(M.CancelPressure(pid))
