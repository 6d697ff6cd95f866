"""The reusable stateful checker: drive any governor, check refinement + invariants.

A test author adapts their governor to `GovernorAdapter` (execute one spec
action, return the abstraction) and subclasses `GovernorMachine` with an
`adapter_factory`. After every step the machine checks:

  (a) `check_all` on the new abstraction, and `check_step` for accepted steps;
  (b) refinement: the concrete step equals `spec.ledger.step` on the previous
      abstraction (same result, same next state);
  (c) a rejection raises the spec's error type and leaves the whole
      abstraction unchanged.

Rules draw mostly valid ids from the current abstraction, and on purpose
also invalid input: unknown and retired ids, foreign holders, zero,
negative, huge and non-int byte counts, aliases of missing authorities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from spec import ledger_actions as A
from spec.guards import ALL_ON, GuardSet
from spec.ledger import step as spec_step
from spec.ledger_state import EMPTY, State
from spec.ledger_state import snapshot as spec_snapshot
from spec.types import AllocState, Role, Tier

from invariants._violation import RefinementViolation
from invariants.checked import CheckedMachine
from invariants.clauses import recording
from invariants.ledger import check_all, check_step, observe_snapshot
from invariants.replay_predicates import check_observed_step

__all__ = ["GovernorAdapter", "SpecAdapter", "GovernorMachine"]


class GovernorAdapter(Protocol):
    """What the machine needs from a governor under test."""

    def execute(self, action: Any) -> Any:
        """Perform `action`; return its result or raise the spec's `GovernorError`."""

    def abstract(self) -> State:
        """The governor's state mapped to spec state (the refinement mapping)."""


class SpecAdapter:
    """The spec itself as a governor: used for spec-only runs (spec negative controls)."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.state, self.guards = EMPTY, guards

    def execute(self, action: Any) -> Any:
        self.state, result = spec_step(self.state, action, self.guards)
        return result

    def snapshot(self, authority: int) -> Any:
        return spec_snapshot(self.state, authority)

    def abstract(self) -> State:
        return self.state


POOLS = (("gpu0", Tier.DEVICE), ("host", Tier.HOST), ("gpu1", Tier.DEVICE))
CAPACITIES = (16, 32, 64)
BAD_BYTES = (0, -1, -(2**63), 2**63, 2**64, True, 1.5, "8")
VIEWS = ("uma", "mapped")


def _bytes(valid_max: int = 40) -> st.SearchStrategy[Any]:
    # Mostly small valid counts (so pools fill slowly), some large ones, some invalid.
    return st.integers(0, 9).flatmap(
        lambda k: st.sampled_from(BAD_BYTES) if k == 0 else st.integers(1, valid_max if k > 7 else 6))


class GovernorMachine(CheckedMachine):
    """The ledger's machine. Subclass and set `adapter_factory` (a no-argument adapter factory)."""

    adapter_factory: Callable[[], GovernorAdapter] = SpecAdapter

    def __init__(self) -> None:
        super().__init__()
        self.start(type(self).adapter_factory(), EMPTY)

    def spec_step(self, state: State, action: Any) -> tuple[State, Any]:
        return spec_step(state, action)

    def check_state(self, state: State) -> None:
        check_all(state)

    def check_step(self, prev: State, action: Any, now: State) -> None:
        check_step(prev, action, now)
        # The implementation's observed next state: a grant must have charged what it granted.
        check_observed_step(prev, action, now)

    # --- id pickers ----------------------------------------------------------

    def _pick(self, data: st.DataObject, ids: Any, nxt: int) -> Any:
        known = sorted(ids)
        bad = st.sampled_from([0, -1, nxt, nxt + 7, None])
        if known:
            # Mostly valid ids, so that deep states are reached; sometimes invalid ones.
            return data.draw(bad) if data.draw(st.integers(0, 9)) == 0 else data.draw(st.sampled_from(known))
        return data.draw(bad)

    def _holder(self, data: st.DataObject, owner: int | None = None) -> Any:
        if owner is not None and data.draw(st.integers(0, 3)) > 0:
            return owner
        return self._pick(data, self.abs.holders.keys(), self.abs.next_holder)

    def _retired_or_live(self, data: st.DataObject, live: Any, nxt: int) -> Any:
        retired = [i for i in range(1, nxt) if i not in live]
        if retired and data.draw(st.integers(0, 4)) == 0:
            return data.draw(st.sampled_from(retired))
        return self._pick(data, live, nxt)

    # --- rules ---------------------------------------------------------------

    @rule(data=st.data())
    def observe(self, data: st.DataObject) -> None:
        """Read one authority's figures (C8, I2): they must equal the spec's reading and an independent one."""
        if not self.abs.authorities or not hasattr(self.gov, "snapshot"):
            return
        aid = data.draw(st.sampled_from(sorted(self.abs.authorities)))
        got = self.gov.snapshot(aid)
        if self.check_refinement:
            want = spec_snapshot(self.abs, aid)
            if got != want:
                raise RefinementViolation(f"snapshot({aid}): {got!r} vs spec {want!r}")
        self._count("observations")
        with recording(self.coverage):
            observe_snapshot(self.abs, aid, got)

    @initialize(holders=st.integers(1, 3), capacity=st.sampled_from(CAPACITIES))
    def setup(self, holders: int, capacity: int) -> None:
        # Start where work can happen: some holders and one device pool.
        for i in range(holders):
            self._do(A.RegisterHolder(f"h{i}"))
        self._do(A.RegisterAuthority("gpu0", Tier.DEVICE, capacity))

    @rule(data=st.data(), kind=st.sampled_from(("authority",) * 3 + ("alias",) * 2 + ("holder", "lose", "terminate")))
    def environment(self, data: st.DataObject, kind: str) -> None:
        """Registrations and device events (rarer than holder work)."""
        if kind == "authority":
            name, natural = data.draw(st.sampled_from(POOLS))
            tier = natural if data.draw(st.integers(0, 3)) else data.draw(st.sampled_from(Tier))
            capacity = data.draw(st.sampled_from(CAPACITIES + (0, -5, True)))
            self._do(A.RegisterAuthority(data.draw(st.sampled_from((name,) * 6 + ("",))), tier, capacity))
        elif kind == "alias":
            of = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority)
            self._do(A.RegisterAlias(of, data.draw(st.sampled_from(VIEWS + ("",)))))
        elif kind == "holder":
            self._do(A.RegisterHolder(data.draw(st.sampled_from(("weights", "kv", "arena", "")))))
        else:
            aid = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority)
            self._do(A.LoseDevice(aid) if kind == "lose" else A.ConfirmTermination(aid))

    @rule(data=st.data(), tier=st.sampled_from(Tier), role=st.sampled_from(Role), nbytes=_bytes(), recorded=st.integers(0, 7))
    def admit(self, data: st.DataObject, tier: Tier, role: Role, nbytes: Any, recorded: int) -> None:
        aid = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority)
        a = self.abs.authorities.get(aid)
        if a is not None and data.draw(st.integers(0, 3)) > 0:
            tier = a.tier
        cls = A.RecordCommitted if recorded == 0 else A.Reserve
        self._do(cls(self._holder(data), aid, tier, nbytes, role))

    def _allocation(self, data: st.DataObject, prefer: Any = None) -> tuple[Any, Any]:
        preferred = [r.id for r in self.abs.allocations.values() if r.state is prefer]
        if preferred and data.draw(st.integers(0, 3)) > 0:
            aid = data.draw(st.sampled_from(preferred))
        else:
            aid = self._retired_or_live(data, self.abs.allocations.keys(), self.abs.next_allocation)
        rec = self.abs.allocations.get(aid)
        return self._holder(data, rec.holder if rec else None), aid

    @rule(data=st.data(), op=st.sampled_from(("commit",) * 3 + ("cancel", "release", "release", "quarantine")),
          nbytes=_bytes())
    def settle(self, data: st.DataObject, op: str, nbytes: Any) -> None:
        """Holder work on an existing allocation: commit, cancel, release, quarantine."""
        if op == "commit":
            holder, aid = self._allocation(data, AllocState.PROVISIONAL)
            rec = self.abs.allocations.get(aid)
            if rec is not None:
                k = data.draw(st.integers(0, 5))
                if k >= 2:
                    nbytes = data.draw(st.integers(1, rec.reserved))
                elif k == 1:  # just past the reservation: the boundary C2's commit rule guards
                    nbytes = rec.reserved + data.draw(st.integers(1, 4))
            self._do(A.Commit(holder, aid, nbytes))
        elif op == "quarantine":
            holder, aid = self._allocation(data, AllocState.LIVE)
            rec = self.abs.allocations.get(aid)
            if rec is not None and data.draw(st.integers(0, 2)) > 0:
                nbytes = data.draw(st.integers(0, rec.charge))
            self._do(A.Quarantine(holder, aid, nbytes))
        else:
            holder, aid = self._allocation(data, AllocState.PROVISIONAL if op == "cancel" else AllocState.LIVE)
            self._do((A.Cancel if op == "cancel" else A.Release)(holder, aid))

    def _allowance(self, data: st.DataObject) -> tuple[Any, Any]:
        wid = self._retired_or_live(data, self.abs.allowances.keys(), self.abs.next_allowance)
        w = self.abs.allowances.get(wid)
        return self._holder(data, w.holder if w else None), wid

    @rule(data=st.data(), op=st.sampled_from(("open", "open", "grow", "grow", "map", "unmap", "transfer", "close")),
          nbytes=_bytes(24))
    def allowance(self, data: st.DataObject, op: str, nbytes: Any) -> None:
        """Allowance work: open, reserve growth, map, unmap, transfer, close."""
        if op == "open":
            aid = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority)
            limit = data.draw(st.integers(1, 40)) if data.draw(st.booleans()) else nbytes
            self._do(A.OpenAllowance(self._holder(data), aid, limit))
            return
        holder, wid = self._allowance(data)
        if op == "transfer":
            # Mostly to another allowance of the same pool and within the source's free limit: a random
            # pair almost never qualifies, and a transfer that is refused checks nothing (I4b coverage).
            w = self.abs.allowances.get(wid)
            peers = sorted(x.id for x in self.abs.allowances.values()
                           if w is not None and x.id != w.id and x.authority == w.authority)
            if peers and data.draw(st.integers(0, 3)) > 0:
                target = data.draw(st.sampled_from(peers))
                free = w.limit - w.reserved - w.mapped
                if free > 0 and data.draw(st.integers(0, 3)) > 0:
                    nbytes = data.draw(st.integers(1, free))
            else:
                target = self._retired_or_live(data, self.abs.allowances.keys(), self.abs.next_allowance)
            self._do(A.TransferAllowance(holder, wid, target, nbytes))
        elif op == "close":
            self._do(A.CloseAllowance(holder, wid))
        else:
            # Mostly within the allowance's room for the step (free limit, reserved, mapped), as for transfers.
            w = self.abs.allowances.get(wid)
            room = 0 if w is None else {"grow": w.limit - w.reserved - w.mapped, "map": w.reserved, "unmap": w.mapped}[op]
            if room > 0 and data.draw(st.integers(0, 3)) > 0:
                nbytes = data.draw(st.integers(1, room))
            cls = {"grow": A.ReserveGrowth, "map": A.MapAllowance, "unmap": A.UnmapAllowance}[op]
            self._do(cls(holder, wid, nbytes))
