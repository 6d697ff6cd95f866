"""The reusable stateful checker: drive any governor, check refinement + invariants.

A test author adapts their governor to `invariants.adapter.GovernorAdapter`
(execute one spec action, return the abstraction, in the governor's own ids)
and subclasses `GovernorMachine` with an `adapter_factory`. After every step the machine checks:

  (a) `check_all` on the new abstraction, and `check_step` for accepted steps;
  (b) refinement: the concrete step equals `spec.ledger.step` on the previous
      abstraction (same result, same next state);
  (c) a rejection raises the spec's error type and leaves the whole
      abstraction unchanged.

Ids are Hypothesis bundles (see `GovernorMachine`), so a counterexample is a
script a person can run. Rules use mostly valid ids, and on purpose also
invalid input: unknown and retired ids, foreign holders, zero, negative,
huge and non-int byte counts, aliases of missing authorities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, initialize, multiple, precondition, rule

from spec import ledger_actions as A
from spec.guards import ALL_ON, GuardSet
from spec.ledger import step as spec_step
from spec.ledger_state import EMPTY, State
from spec.ledger_state import snapshot as spec_snapshot
from spec.types import AllocState, ContextState, Role, Tier

from invariants._violation import RefinementViolation
from invariants.adapter import GovernorAdapter, SpecGovernor
from invariants.checked import CheckedMachine
from invariants.clauses import recording
from invariants.ledger import check_all, check_step, observe_snapshot
from invariants.replay_predicates import check_observed_step

__all__ = ["SpecAdapter", "GovernorMachine"]


class SpecAdapter(SpecGovernor):
    """The spec itself as a governor: used for spec-only runs (spec negative controls)."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        super().__init__(spec_step, EMPTY, guards)

    def snapshot(self, authority: int) -> Any:
        return spec_snapshot(self.state, authority)


POOLS = (("gpu0", Tier.DEVICE), ("host", Tier.HOST), ("gpu1", Tier.DEVICE))
NATURAL = dict(POOLS) | {"": Tier.DEVICE}
CAPACITIES = (16, 32, 64)
BAD_BYTES = (0, -1, -(2**63), 2**63, 2**64, True, 1.5, "8")
VIEWS = ("uma", "mapped")
#: Ids no rule's bundle holds: zero, negative, None, one far past any issued; "next" is the id the spec issues
#: next (of the kind at hand), which is unknown now and valid a step later.
BAD_IDS = (0, -1, None, 10**6, "next")


def _bytes(valid_max: int = 40) -> st.SearchStrategy[Any]:
    # Mostly small valid counts (so pools fill slowly), some large ones, some invalid.
    return st.integers(0, 9).flatmap(
        lambda k: st.sampled_from(BAD_BYTES) if k == 0 else st.integers(1, valid_max if k > 7 else 6))


#: None (the authority's own tier) two times in three; a wrong tier must be refused (C1).
_TIERS = st.sampled_from((None,) * 6 + tuple(Tier))


def _owner_or(bundle: Bundle[Any]) -> st.SearchStrategy[Any]:
    """None (the record's own holder) three times in four, else any holder: a foreign one, now and then."""
    return st.integers(0, 3).flatmap(lambda k: bundle if k == 0 else st.none())


class GovernorMachine(CheckedMachine):
    """The ledger's machine. Subclass and set `adapter_factory` (a no-argument adapter factory).

    Ids the governor issues are Hypothesis bundles (`holders`, `authorities`, `allocations` ...), so a
    failure prints as a script that runs: `holders_0 = state.register_holder(name='kv')`, then
    `provisional_0 = state.reserve(holder=holders_0, ...)`, `live_0 = state.commit(alloc=provisional_0, ...)`.
    An allocation moves between bundles with its lifecycle: a reservation is `provisional` until a
    commit or cancel consumes it, a committed one is `live` until a release consumes it, and every one
    stays in `allocations`, where `settle_any` draws it again, retired or not (a stale id must be
    refused). `misuse` sends ids no bundle holds. A value such as `nbytes='reserved'` or `by=None`
    is resolved against the state when the rule runs (the reservation's size, the record's owner).
    """

    adapter_factory: Callable[[], GovernorAdapter] = SpecAdapter
    own_ids = True

    # WEIGHTS: Hypothesis picks among the enabled rules uniformly, so a rule bound to a second (or third)
    # name runs that much more often; every copy prints, and replays, as the method itself. Holder work
    # (reserve, commit, release) and observation get the weight of the old machine's mix, so pools fill,
    # leases settle and every clause's case occurs (ortmem verify's R1), and mutants are found.

    holders = Bundle("holders")
    authorities = Bundle("authorities")
    allocations = Bundle("allocations")
    provisional = Bundle("provisional")
    live = Bundle("live")
    allowances = Bundle("allowances")

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

    # --- helpers -----------------------------------------------------------------

    def _issue(self, action: Any, counter: str) -> Any:
        """Run `action`; the id it issued (the spec's `counter` moved), or no bundle entry when refused."""
        before = getattr(self.abs, counter)
        self._do(action)
        return before if getattr(self.abs, counter) != before else multiple()

    def _owner(self, by: Any, record: Any) -> Any:
        """The holder a settling action names: `by`, or with None the record's own (or holder 1 if none)."""
        if by is not None:
            return by
        return record.holder if record is not None else 1

    def _usable_pools(self) -> int:
        """Authorities (aliases included) whose device is not lost: a lost one refuses all holder work."""
        ctx = {i: a.context for i, a in self.abs.authorities.items() if a.alias_of is None}
        return sum(ctx.get(a.alias_of if a.alias_of is not None else i) is ContextState.ACTIVE
                   for i, a in self.abs.authorities.items())

    def _bad(self, bad: Any, nxt: int) -> Any:
        return nxt if bad == "next" else bad

    # --- environment: registrations and device events -----------------------------

    @initialize(target=holders, count=st.integers(1, 3))
    def setup_holders(self, count: int) -> Any:
        # Start where work can happen: some holders (and, below, one device pool).
        return multiple(*[self.register_holder(f"h{i}") for i in range(count)])

    @initialize(target=authorities, capacity=st.sampled_from(CAPACITIES))
    def setup_pool(self, capacity: int) -> Any:
        return self._issue(A.RegisterAuthority("gpu0", Tier.DEVICE, capacity), "next_authority")

    # Registrations stop at a few holders and pools (`precondition`): past that they only dilute holder work,
    # and the rules left are the ones that fill pools, commit and settle (what the clauses are about).

    @precondition(lambda self: len(self.abs.holders) < 5)
    @rule(target=holders, name=st.sampled_from(("weights", "kv", "arena", "")))
    def register_holder(self, name: str) -> Any:
        return self._issue(A.RegisterHolder(name), "next_holder")

    @precondition(lambda self: self._usable_pools() < 4)
    @rule(target=authorities, name=st.sampled_from(("gpu0", "gpu0", "host", "host", "gpu1", "gpu1", "")),
          tier=st.sampled_from((None, None, None) + tuple(Tier)),
          capacity=st.sampled_from(CAPACITIES + (0, -5, True)))
    def register_authority(self, name: str, tier: Tier | None, capacity: Any) -> Any:
        """A pool (tier None: the pool's natural tier; another tier, now and then, must be refused)."""
        return self._issue(A.RegisterAuthority(name, NATURAL[name] if tier is None else tier, capacity),
                           "next_authority")

    @precondition(lambda self: self._usable_pools() < 4)
    @rule(target=authorities, of=authorities, view=st.sampled_from(VIEWS + ("",)))
    def register_alias(self, of: int, view: str) -> Any:
        return self._issue(A.RegisterAlias(of, view), "next_authority")

    @rule(authority=authorities, event=st.sampled_from(("observe",) * 6 + ("lose", "terminate", "terminate")))
    def environment(self, authority: int, event: str) -> None:
        """Read one authority's figures, or (rarer) the device is lost or its termination confirmed."""
        if event == "observe":
            self._observe(authority)
        else:
            self._do(A.ConfirmTermination(authority) if event == "terminate" else A.LoseDevice(authority))
    environment_weight_2 = environment

    def _observe(self, authority: int) -> None:
        """The figures must equal the spec's reading and an independent one (C8, I2)."""
        if not hasattr(self.gov, "snapshot") or authority not in self.abs.authorities:
            return
        got = self.gov.snapshot(authority)
        if self.check_refinement:
            want = spec_snapshot(self.abs, authority)
            if got != want:
                raise RefinementViolation(f"snapshot({authority}): {got!r} vs spec {want!r}")
        self._count("observations")
        with recording(self.coverage):
            observe_snapshot(self.abs, authority, got)

    # --- holder work on allocations -------------------------------------------------

    @rule(targets=(provisional, allocations), holder=holders, authority=authorities,
          tier=_TIERS, role=st.sampled_from(Role), nbytes=_bytes())
    def reserve(self, holder: int, authority: int, tier: Tier | None, role: Role, nbytes: Any) -> Any:
        """A reservation (tier None: the authority's own tier; another one, now and then, must be refused)."""
        return self._issue(A.Reserve(holder, authority, self._tier(authority, tier), nbytes, role),
                           "next_allocation")
    reserve_weight_2 = reserve_weight_3 = reserve  # weight 3 (see WEIGHTS)

    @rule(targets=(live, allocations), holder=holders, authority=authorities,
          tier=_TIERS, role=st.sampled_from(Role), nbytes=_bytes())
    def record_committed(self, holder: int, authority: int, tier: Tier | None, role: Role, nbytes: Any) -> Any:
        return self._issue(A.RecordCommitted(holder, authority, self._tier(authority, tier), nbytes, role),
                           "next_allocation")

    def _tier(self, authority: int, tier: Tier | None) -> Any:
        a = self.abs.authorities.get(authority)
        return tier if tier is not None or a is None else a.tier

    @rule(target=live, alloc=consumes(provisional), by=_owner_or(holders),
          nbytes=st.one_of(st.sampled_from(("reserved", "reserved", "reserved+1")), _bytes()))
    def commit(self, alloc: int, by: Any, nbytes: Any) -> Any:
        """Commit a reservation: all of it ('reserved'), part of it, or just past it ('reserved+1', refused: C2)."""
        rec = self.abs.allocations.get(alloc)
        if isinstance(nbytes, str):
            nbytes = (rec.reserved if rec is not None else 1) + (nbytes == "reserved+1")
        self._do(A.Commit(self._owner(by, rec), alloc, nbytes))
        now = self.abs.allocations.get(alloc)
        return alloc if now is not None and now.state is AllocState.LIVE else multiple()
    commit_weight_2 = commit_weight_3 = commit

    @rule(alloc=consumes(provisional), by=_owner_or(holders))
    def cancel(self, alloc: int, by: Any) -> None:
        self._do(A.Cancel(self._owner(by, self.abs.allocations.get(alloc)), alloc))

    @rule(alloc=consumes(live), by=_owner_or(holders))
    def release(self, alloc: int, by: Any) -> None:
        self._do(A.Release(self._owner(by, self.abs.allocations.get(alloc)), alloc))
    release_weight_2 = release

    @rule(alloc=live, by=_owner_or(holders), nbytes=st.one_of(st.just("charge"), _bytes()))
    def quarantine(self, alloc: int, by: Any, nbytes: Any) -> None:
        """Part of a lease stays unusable (up to its charge: 'charge')."""
        rec = self.abs.allocations.get(alloc)
        if nbytes == "charge":
            nbytes = rec.charge if rec is not None else 1
        self._do(A.Quarantine(self._owner(by, rec), alloc, nbytes))

    @rule(alloc=allocations, by=_owner_or(holders), op=st.sampled_from(("commit", "cancel", "release")),
          nbytes=_bytes())
    def settle_any(self, alloc: int, by: Any, op: str, nbytes: Any) -> None:
        """Any allocation ever issued, whatever its state now: retired ids and wrong states must be refused."""
        h = self._owner(by, self.abs.allocations.get(alloc))
        self._do(A.Commit(h, alloc, nbytes) if op == "commit" else (A.Cancel if op == "cancel" else A.Release)(h, alloc))

    # --- allowances -------------------------------------------------------------------

    @rule(target=allowances, holder=holders, authority=authorities,
          limit=st.one_of(st.just("rest"), st.integers(1, 40), _bytes(24)))
    def open_allowance(self, holder: int, authority: int, limit: Any) -> Any:
        """An allowance; 'rest': all the pool's capacity its open allowances do not promise yet (I4b's edge)."""
        if limit == "rest":
            a = self.abs.authorities.get(authority)
            pool = a.alias_of if a is not None and a.alias_of is not None else authority
            cap = self.abs.authorities[pool].capacity if pool in self.abs.authorities else 1
            promised = sum(w.limit for w in self.abs.allowances.values() if w.authority == pool)
            limit = max(1, cap - promised)
        return self._issue(A.OpenAllowance(holder, authority, limit), "next_allowance")
    open_allowance_weight_2 = open_allowance

    @rule(allowance=allowances, by=_owner_or(holders), op=st.sampled_from(("grow", "grow", "map", "unmap")),
          nbytes=st.one_of(st.just("room"), st.just("room"), _bytes(24)))
    def allowance_bytes(self, allowance: int, by: Any, op: str, nbytes: Any) -> None:
        """Reserve growth, map, unmap: mostly within the step's room ('room': free limit, reserved, mapped)."""
        w = self.abs.allowances.get(allowance)
        if nbytes == "room":
            room = 0 if w is None else {"grow": w.limit - w.reserved - w.mapped, "map": w.reserved,
                                        "unmap": w.mapped}[op]
            nbytes = max(1, room)
        cls = {"grow": A.ReserveGrowth, "map": A.MapAllowance, "unmap": A.UnmapAllowance}[op]
        self._do(cls(self._owner(by, w), allowance, nbytes))

    @rule(allowance=allowances, to=allowances, by=_owner_or(holders),
          nbytes=st.one_of(st.just("free"), st.just("free"), _bytes(24)))
    def transfer(self, allowance: int, to: int, by: Any, nbytes: Any) -> None:
        """Move limit between allowances ('free': all of the source's free limit): only within one pool (I4b)."""
        w = self.abs.allowances.get(allowance)
        if nbytes == "free":
            nbytes = max(1, w.limit - w.reserved - w.mapped) if w is not None else 1
        self._do(A.TransferAllowance(self._owner(by, w), allowance, to, nbytes))

    @rule(allowance=allowances, by=_owner_or(holders))
    def close_allowance(self, allowance: int, by: Any) -> None:
        self._do(A.CloseAllowance(self._owner(by, self.abs.allowances.get(allowance)), allowance))

    # --- ids no bundle holds ------------------------------------------------------------

    @rule(holder=holders, authority=authorities, bad=st.sampled_from(BAD_IDS),
          where=st.sampled_from(("holder", "authority", "alias", "device", "allocation", "allowance", "transfer")))
    def misuse(self, holder: int, authority: int, bad: Any, where: str) -> None:
        """An id no bundle holds, in one position: refused with a typed error, nothing changes (G4)."""
        s = self.abs
        if where == "holder":
            self._do(A.Reserve(self._bad(bad, s.next_holder), authority, Tier.DEVICE, 1, Role.KV))
        elif where == "authority":
            self._do(A.Reserve(holder, self._bad(bad, s.next_authority), Tier.DEVICE, 1, Role.KV))
        elif where == "alias":
            self._do(A.RegisterAlias(self._bad(bad, s.next_authority), "uma"))
        elif where == "device":
            self._do(A.LoseDevice(self._bad(bad, s.next_authority)))
        elif where == "allocation":
            self._do(A.Release(holder, self._bad(bad, s.next_allocation)))
        elif where == "allowance":
            self._do(A.ReserveGrowth(holder, self._bad(bad, s.next_allowance), 1))
        else:
            live = sorted(s.allowances)
            self._do(A.TransferAllowance(holder, live[0] if live else 1, self._bad(bad, s.next_allowance), 1))
