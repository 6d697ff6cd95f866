"""The stateful checker of the pressure protocol: drive a pool governor, check refinement + invariants.

Like `invariants.ledger_machine.GovernorMachine`, for `spec.pressure`: an adapter
executes one `spec.pressure` action and returns the abstraction
(`spec.pressure.Pool`). After every step the machine checks refinement
against `spec.pressure.step` on the previous abstraction (same result, same
next pool, same typed error), that a rejection changed nothing (G4), the
step predicates on accepted actions and the state predicates always; the
trace predicates (exactly-once credit, bounded overtaking) run over the
accepted steps at the end of each example; after every step, what the
adapter observed from outside the governor (holder callbacks and whether
another thread could take the ledger lock meanwhile, I7) is checked by the
observation predicates. Rules draw mostly valid ids and
also invalid input on purpose: unknown and retired tickets, foreign holders,
bad byte counts, stale pressure answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from hypothesis import settings

from invariants.campaign import CampaignStats, ControlResult, hunt, run_machine
from invariants.checked import CheckedMachine
from invariants.clauses import recording
from invariants.pressure import check_all, check_observations, check_step, check_trace
from spec import pressure as P
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["PoolAdapter", "SpecPoolAdapter", "PoolParams", "PressureMachine",
           "run_pressure_campaign", "find_pressure_counterexample"]


@attrs.frozen
class PoolParams:
    capacity: int
    fixed: int
    holders: int
    aging_bound: int
    mailbox: int


class PoolAdapter(Protocol):
    def execute(self, action: Any) -> Any: ...

    def abstract(self) -> P.Pool: ...


class SpecPoolAdapter:
    """The spec itself as a pool governor (spec-only runs, spec negative controls)."""

    def __init__(self, params: PoolParams, guards: GuardSet = ALL_ON) -> None:
        self.pool = P.initial(params.capacity, params.fixed, params.holders, params.aging_bound, params.mailbox)
        self.guards = guards

    def execute(self, action: Any) -> Any:
        self.pool, result = P.step(self.pool, action, self.guards)
        return result

    def abstract(self) -> P.Pool:
        return self.pool


AdapterFactory = Callable[[PoolParams], PoolAdapter]
BAD_BYTES = (0, -1, 2**63, True, 1.5)


def _bytes(hi: int) -> st.SearchStrategy[Any]:
    return st.integers(0, 11).flatmap(lambda k: st.sampled_from(BAD_BYTES) if k == 0
                                      else st.integers(1, hi if k > 8 else 3))


class PressureMachine(CheckedMachine):
    """Subclass and set `adapter_factory` (a factory taking `PoolParams`)."""

    adapter_factory: AdapterFactory = SpecPoolAdapter

    def __init__(self) -> None:
        super().__init__()
        self.triples: list[tuple[P.Pool, Any, P.Pool]] = []

    @initialize(capacity=st.sampled_from((8, 12, 16)), fixed=st.sampled_from((0, 0, 2)),
                bound=st.sampled_from((1, 2, 3, 4)), mailbox=st.sampled_from((3, 8, 12)))
    def setup(self, capacity: int, fixed: int, bound: int, mailbox: int) -> None:
        params = PoolParams(capacity, fixed, 2, bound, mailbox)
        self.start(type(self).adapter_factory(params), P.initial(capacity, fixed, 2, bound, mailbox))

    def teardown(self) -> None:
        super().teardown()
        with recording(self.coverage):
            check_trace(self.triples)  # exactly-once credit, bounded overtaking

    def spec_step(self, state: P.Pool, action: Any) -> tuple[P.Pool, Any]:
        return P.step(state, action)

    def check_state(self, state: P.Pool) -> None:
        check_all(state)
        take = getattr(self.gov, "take_deliveries", None)  # only an implementation's adapter observes callbacks
        check_observations(take() if take is not None else ())

    def check_step(self, prev: P.Pool, action: Any, now: P.Pool) -> None:
        check_step(prev, action, now)
        self.triples.append((prev, action, now))

    # --- pickers -------------------------------------------------------------

    def _holder(self, data: st.DataObject, owner: int | None = None) -> Any:
        if owner is not None and data.draw(st.integers(0, 5)) > 0:
            return owner
        k = data.draw(st.integers(0, 15))
        return data.draw(st.sampled_from((0, 3, None))) if k == 0 else 1 + k % 2

    def _ticket(self, data: st.DataObject, prefer: Any = None) -> tuple[Any, Any]:
        live = self.abs.tickets
        preferred = sorted(i for i, t in live.items() if prefer is None or t.state is prefer) or sorted(live.keys())
        k = data.draw(st.integers(0, 11))
        if preferred and k > 1:
            tid = data.draw(st.sampled_from(preferred))
        elif k == 1 and self.abs.next_ticket > 1:
            tid = data.draw(st.integers(1, self.abs.next_ticket - 1))  # often retired
        else:
            tid = data.draw(st.sampled_from((0, -1, self.abs.next_ticket, None)))
        t = live.get(tid) if type(tid) is int else None
        return self._holder(data, t.holder if t else None), tid

    # --- rules -----------------------------------------------------------------

    @rule(data=st.data(), nbytes=_bytes(20), priority=st.sampled_from((0, 0, 1, 2)), try_only=st.integers(0, 4))
    def request(self, data: st.DataObject, nbytes: Any, priority: int, try_only: int) -> None:
        # Up to 20 B of pools of at most 16: some requests can never fit (quota denied, CapacityDenied).
        cls = P.TryReserve if try_only == 0 else P.Submit
        self._do(cls(self._holder(data), nbytes, priority))

    @rule(data=st.data(), count=st.integers(2, 4), nbytes=st.integers(1, 2), big=st.booleans(),
          priority=st.sampled_from((0, 0, 1, 2)))
    def burst(self, data: st.DataObject, count: int, nbytes: int, big: bool, priority: int) -> None:
        """A stream of small newcomers (what bounded aging protects waiters from), often behind a
        request just too big for what is free, so overtaking and maturing really happen (I13)."""
        from spec.tickets import TicketState as S
        holder = self._holder(data)
        other = 3 - holder if holder in (1, 2) else 1
        governed = self.abs.capacity - self.abs.fixed
        if big and self.abs.free == governed and not self.abs.tickets:
            # Nothing is held, so nothing could be "just too big": take a small lease first (steered to,
            # or a run that starts with a burst never sees overtaking: trace_I13 coverage).
            tid = self.abs.next_ticket
            self._do(P.Submit(other, 1, 0))
            if tid in self.abs.tickets and self.abs.tickets[tid].state is S.GRANTED:
                self._do(P.Claim(other, tid))
        if big and self.abs.free < governed:
            self._do(P.Submit(other, self.abs.free + 1, 0))
        for _ in range(count):
            self._do(P.Submit(holder, nbytes, priority))

    @rule(data=st.data(), high=st.sampled_from((1, 2)))
    def contend(self, data: st.DataObject, high: int) -> None:
        """Two waiters of different priorities that cannot both fit, then the lease in their way returns:
        the round must grant the higher priority first (I13 grant order). Rare by chance, so steered to."""
        from spec.tickets import TicketState as S
        n = (self.abs.capacity - self.abs.fixed) // 2 + 1  # two of these never fit together
        holder = data.draw(st.sampled_from((1, 2)))
        first = self.abs.next_ticket
        for priority in (0, high, 0):
            self._do(P.Submit(holder, n, priority))
        for tid in range(first, self.abs.next_ticket):
            t = self.abs.tickets.get(tid)
            if t is not None and t.state is S.GRANTED:
                self._do(P.Claim(holder, tid))
                self._do(P.Release(holder, tid))

    @rule(data=st.data(), nbytes=st.integers(1, 4), pinned=st.booleans(), in_flight=st.booleans())
    def lease(self, data: st.DataObject, nbytes: int, pinned: bool, in_flight: bool) -> None:
        """A holder takes a lease in one go: submit, claim if granted, flag its use."""
        from spec.tickets import TicketState as S
        holder = self._holder(data)
        before = self.abs.next_ticket
        self._do(P.Submit(holder, nbytes, 0))
        t = self.abs.tickets.get(before)
        if t is not None and t.state is S.GRANTED:
            self._do(P.Claim(holder, t.id))
            if pinned or in_flight:
                self._do(P.SetUse(holder, t.id, pinned, in_flight))

    @rule(data=st.data(), op=st.sampled_from(("claim", "claim", "release", "release", "cancel", "timeout")))
    def settle(self, data: st.DataObject, op: str) -> None:
        from spec.tickets import TicketState as S
        prefer = {"claim": S.GRANTED, "release": S.CLAIMED}.get(op)
        holder, tid = self._ticket(data, prefer)
        cls = {"claim": P.Claim, "release": P.Release, "cancel": P.Cancel, "timeout": P.Timeout}[op]
        self._do(cls(holder, tid))

    @rule(data=st.data(), pinned=st.booleans(), in_flight=st.sampled_from((False, False, True)))
    def use_a(self, data: st.DataObject, pinned: bool, in_flight: bool) -> None:
        self.use(data, pinned, in_flight)

    @rule(data=st.data(), pinned=st.booleans(), in_flight=st.sampled_from((False, False, True)))
    def use(self, data: st.DataObject, pinned: bool, in_flight: bool) -> None:
        from spec.tickets import TicketState as S
        holder, tid = self._ticket(data, S.CLAIMED)
        self._do(P.SetUse(holder, tid, pinned, in_flight))

    @rule(often=st.integers(0, 4))
    def reconfigure(self, often: int) -> None:
        # One draw in five: a reconfigure fails every pending ticket, so a frequent one would keep
        # tickets from ever maturing (I13 coverage).
        if often == 0:
            self._do(P.Reconfigure())

    @rule(data=st.data(), deadline=st.integers(0, 8), priority=st.integers(0, 2))
    def reclaim(self, data: st.DataObject, deadline: int, priority: int) -> None:
        """A holder is pressed and, in time, gives back some of its own unpinned, idle leases (C5, I6)."""
        from spec.tickets import TicketState as S
        holder = 1 + data.draw(st.integers(0, 1))
        mine = sorted(i for i, t in self.abs.tickets.items() if t.holder == holder and t.state is S.CLAIMED)
        idle = [i for i in mine if not (self.abs.tickets[i].pinned or self.abs.tickets[i].in_flight)]
        target = sum(self.abs.tickets[i].nbytes for i in idle) or 1
        pid = self.abs.next_pressure
        self._do(P.Press(holder, target, priority, deadline))
        pool = idle if data.draw(st.integers(0, 5)) else mine  # now and then a pinned or busy one (refused)
        victims = tuple(data.draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))) if pool else ()
        self._do(P.Answer(holder, pid, victims, data.draw(st.integers(0, deadline))))

    @rule(data=st.data(), want=_bytes(16), priority=st.integers(0, 2), deadline=st.integers(0, 8))
    def press(self, data: st.DataObject, want: Any, priority: int, deadline: int) -> None:
        self._do(P.Press(self._holder(data), want, priority, deadline))

    def _pressure(self, data: st.DataObject) -> Any:
        known = sorted(self.abs.pressures.keys())
        fresh = [i for i in known if self.abs.pressures[i].state.value == "open"] or known
        if fresh and data.draw(st.integers(0, 3)) > 0:
            return data.draw(st.sampled_from(fresh))
        if known and data.draw(st.integers(0, 7)) > 0:
            return data.draw(st.sampled_from(known))
        return data.draw(st.sampled_from((0, self.abs.next_pressure, None)))

    @rule(data=st.data(), now=st.integers(0, 10))
    def answer_a(self, data: st.DataObject, now: int) -> None:
        self.answer(data, now)

    @rule(data=st.data(), now=st.integers(0, 10))
    def answer(self, data: st.DataObject, now: int) -> None:
        from spec.tickets import TicketState as S
        pid = self._pressure(data)
        r = self.abs.pressures.get(pid) if type(pid) is int else None
        if r is not None and data.draw(st.integers(0, 3)) > 0:
            now = data.draw(st.integers(0, r.deadline))  # mostly in time
        holder = self._holder(data, r.holder if r else None)
        mine = sorted(i for i, t in self.abs.tickets.items() if t.holder == holder and t.state is S.CLAIMED)
        victims = tuple(data.draw(st.lists(st.sampled_from(mine), unique=True, max_size=3))) if mine else ()
        if data.draw(st.integers(0, 9)) == 0:
            victims = victims + (data.draw(st.sampled_from((0, self.abs.next_ticket, *self.abs.tickets.keys()))),)
        self._do(P.Answer(holder, pid, victims, now))

    @rule(data=st.data(), now=st.integers(0, 10), expire=st.booleans())
    def close_pressure(self, data: st.DataObject, now: int, expire: bool) -> None:
        pid = self._pressure(data)
        self._do(P.ExpirePressure(pid, now) if expire else P.CancelPressure(pid))


def run_pressure_campaign(factory: AdapterFactory, cfg: settings, *, refine: bool = True) -> CampaignStats:
    return run_machine(PressureMachine, factory, cfg, refine=refine)


def find_pressure_counterexample(g: Guard, layer: Layer, cfg: settings,
                                 refimpl_factory: Callable[[PoolParams, GuardSet], PoolAdapter]) -> ControlResult:
    """Switch `g` off in `layer`; the spec alone must violate an ID it protects, refimpl must be caught."""
    return hunt(PressureMachine, g, layer, cfg,
                spec=lambda off: lambda params: SpecPoolAdapter(params, off),
                impl=lambda off: lambda params: refimpl_factory(params, off))
