"""One predicate per catalog ID, over abstract state or over one step.

State predicates `state_<ID>(state)` must hold in every reachable state.
Step predicates `step_<ID>(prev, action, next)` must hold for every
*accepted* action; they are local (they read only what the action touched),
which is what makes contracts in debug builds incremental. Both raise
`InvariantViolation` naming the ID; `check_all` / `check_step` are the named
conjunctions (TLA+ style: Inv == C1 /\\ C2 /\\ I1 /\\ ...).

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


from spec import actions as A
from spec.lifecycle import ALLOCATION_TABLE, TERMINAL
from spec.state import State
from spec.types import AllocState, Origin

from invariants._violation import InvariantViolation

__all__ = [
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "check_all",
    "check_step",
    "check_local",
    "LOCAL_STATE_PREDICATES",
    "predicate_names",
]

StatePredicate = Callable[[State], None]
StepPredicate = Callable[[State, Any, State], None]


def _fail(id: str, message: str) -> None:
    raise InvariantViolation(id, message)


#: (state, next state) pairs some table event allows, plus the terminal exits.
_ALLOWED = frozenset((src, dst) for (src, _), dst in ALLOCATION_TABLE.items())


# --- C1: one canonical authority per pool ------------------------------------


def state_C1(s: State) -> None:
    """At most one canonical authority per pool; every alias resolves to a canonical one."""
    seen: dict[str, int] = {}
    for a in s.authorities.values():
        if a.alias_of is None:
            if a.pool in seen:
                _fail("C1", f"pool {a.pool!r} has two canonical authorities: {seen[a.pool]} and {a.id}")
            seen[a.pool] = a.id
        else:
            base = s.authorities.get(a.alias_of)
            if base is None or base.alias_of is not None or base.pool != a.pool:
                _fail("C1", f"alias {a.id} does not resolve to a canonical authority of pool {a.pool!r}")


def step_C1(prev: State, act: Any, nxt: State) -> None:
    """An accepted registration binds to an authority of the same identity, and adds no second ledger."""
    if isinstance(act, (A.RegisterAuthority, A.RegisterAlias)):
        state_C1(nxt)  # registration views hold every authority
    if isinstance(act, A.RegisterAuthority):
        for a in nxt.authorities.values():
            if a.alias_of is None and a.pool == act.pool and (a.tier, a.capacity) != (act.tier, act.capacity):
                _fail("C1", f"{act!r} was accepted but pool {a.pool!r} is ({a.tier.value}, {a.capacity} B)")


# --- C2: leases covered by reservations --------------------------------------


def state_C2(s: State) -> None:
    """Every allocation sits on a known authority, in its tier, within its reservation."""
    for r in s.allocations.values():
        a = s.authorities.get(r.authority)
        if a is None:
            _fail("C2", f"allocation {r.id} is on unknown authority {r.authority}")
        if r.tier is not a.tier:
            _fail("C2", f"allocation {r.id} claims tier {r.tier.value} on a {a.tier.value} pool")
        if r.holder not in s.holders:
            _fail("C2", f"allocation {r.id} names unknown holder {r.holder}")
        if not 0 < r.nbytes <= r.reserved:
            _fail("C2", f"allocation {r.id}: lease {r.nbytes} B not covered by reservation {r.reserved} B")
        if r.state in (AllocState.PROVISIONAL, AllocState.LIVE) and r.charge != r.nbytes:
            _fail("C2", f"allocation {r.id} ({r.state.value}) charges {r.charge} B for {r.nbytes} B")


# --- I1: one charge per physical identity ------------------------------------


def state_I1(s: State) -> None:
    """Each ledger's used equals its allocations' charges; aliases carry no charge."""
    totals: dict[int, int] = {}
    for r in s.allocations.values():
        totals[r.authority] = totals.get(r.authority, 0) + r.charge
    for a in s.authorities.values():
        if a.alias_of is not None and (a.used or totals.get(a.id)):
            _fail("I1", f"alias {a.id} of {a.alias_of} carries {a.used} B: the bytes are charged twice")
        if a.used != totals.get(a.id, 0):
            _fail("I1", f"authority {a.id} used {a.used} B but its allocations charge {totals.get(a.id, 0)} B")


def step_I1(prev: State, act: Any, nxt: State) -> None:
    """Conservation: each ledger moves by exactly its allocations' charge change."""
    delta: dict[int, int] = {}
    for aid in set(prev.allocations.keys()) | set(nxt.allocations.keys()):
        p, n = prev.allocations.get(aid), nxt.allocations.get(aid)
        for r, sign in ((p, -1), (n, 1)):
            if r is not None:
                delta[r.authority] = delta.get(r.authority, 0) + sign * r.charge
    for aid, a in nxt.authorities.items():
        before = prev.authorities[aid].used if aid in prev.authorities else 0
        if a.used - before != delta.get(aid, 0):
            _fail("I1", f"{act!r}: authority {aid} used moved {a.used - before} B, charges moved {delta.get(aid, 0)} B")
        if a.alias_of is not None and a.used:
            _fail("I1", f"{act!r}: alias {aid} was charged {a.used} B")


# --- I2: charge before commit ------------------------------------------------


def state_I2(s: State) -> None:
    """Granted charge never exceeds the limit; only recorded bytes may oversubscribe."""
    granted: dict[int, int] = {}
    for r in s.allocations.values():
        if r.origin is Origin.GRANTED:
            granted[r.authority] = granted.get(r.authority, 0) + r.charge
    for a in s.authorities.values():
        if granted.get(a.id, 0) > a.limit:
            _fail("I2", f"authority {a.id}: {granted[a.id]} B granted against a {a.limit} B limit")
        if a.used < 0:
            _fail("I2", f"authority {a.id}: used is negative ({a.used} B)")


def step_I2(prev: State, act: Any, nxt: State) -> None:
    """An accepted reservation leaves its ledger within the limit."""
    if isinstance(act, A.Reserve):
        for aid, a in nxt.authorities.items():
            before = prev.authorities[aid].used if aid in prev.authorities else 0
            if a.used > before and a.used > a.limit:
                _fail("I2", f"{act!r} granted past the limit: used {a.used} B > {a.limit} B")


# --- I4a: physical ownership -------------------------------------------------


def state_I4a(s: State) -> None:
    """Every live id was issued (1 .. next-1) and no record is in a terminal state."""
    for r in s.allocations.values():
        if not 1 <= r.id < s.next_allocation:
            _fail("I4a", f"allocation {r.id} outside the issued range 1..{s.next_allocation - 1}")
        if r.state in TERMINAL:
            _fail("I4a", f"allocation {r.id} kept in terminal state {r.state.value}")


def step_I4a(prev: State, act: Any, nxt: State) -> None:
    """Ids are fresh, holders fixed, and each record moves only along the lifecycle table."""
    if nxt.next_allocation < prev.next_allocation:
        _fail("I4a", f"{act!r}: id counter went back from {prev.next_allocation} to {nxt.next_allocation}")
    for aid, n in nxt.allocations.items():
        p = prev.allocations.get(aid)
        if p is None:
            if aid < prev.next_allocation:
                _fail("I4a", f"{act!r}: reissued allocation id {aid}")
            continue
        if n.holder != p.holder:
            _fail("I4a", f"{act!r}: allocation {aid} changed holder {p.holder} -> {n.holder}")
        if n.state is p.state:
            if n != p:
                _fail("I4a", f"{act!r}: allocation {aid} changed while staying {p.state.value}")
        elif (p.state, n.state) not in _ALLOWED:
            _fail("I4a", f"{act!r}: allocation {aid} moved {p.state.value} -> {n.state.value}")
    for aid, p in prev.allocations.items():
        if aid not in nxt.allocations and not any((p.state, t) in _ALLOWED for t in TERMINAL):
            _fail("I4a", f"{act!r}: allocation {aid} left the ledger from {p.state.value}")


# --- I4b: allowance ownership ------------------------------------------------


def state_I4b(s: State) -> None:
    """reserved + mapped <= limit per allowance; limits per authority <= its capacity."""
    promised: dict[int, int] = {}
    for w in s.allowances.values():
        if w.reserved < 0 or w.mapped < 0 or w.reserved + w.mapped > w.limit:
            _fail("I4b", f"allowance {w.id}: reserved {w.reserved} + mapped {w.mapped} > limit {w.limit}")
        promised[w.authority] = promised.get(w.authority, 0) + w.limit
    for aid, total in promised.items():
        a = s.authorities.get(aid)
        if a is None or total > a.capacity:
            _fail("I4b", f"authority {aid}: allowance limits {total} B exceed capacity")


def step_I4b(prev: State, act: Any, nxt: State) -> None:
    """Allowance actions move no charge; a transfer keeps the sum of limits."""
    if isinstance(act, (A.OpenAllowance, A.ReserveGrowth, A.MapAllowance, A.UnmapAllowance,
                        A.TransferAllowance, A.CloseAllowance)):
        for aid, a in nxt.authorities.items():
            if aid in prev.authorities and a.used != prev.authorities[aid].used:
                _fail("I4b", f"{act!r} moved charge on authority {aid}")
    if isinstance(act, A.TransferAllowance):
        before = sum(w.limit for w in prev.allowances.values())
        after = sum(w.limit for w in nxt.allowances.values())
        if before != after:
            _fail("I4b", f"{act!r} changed total allowance limits {before} -> {after}")


# --- I6: only holders give bytes back ----------------------------------------


def step_I6(prev: State, act: Any, nxt: State) -> None:
    """Every charge decrease is the owning holder's action (or a confirmed termination)."""
    for aid, p in prev.allocations.items():
        n = nxt.allocations.get(aid)
        if (n.charge if n is not None else 0) >= p.charge:
            continue
        if isinstance(act, A.ConfirmTermination) and p.state is AllocState.DEVICE_LOST:
            continue
        if getattr(act, "holder", None) != p.holder:
            _fail("I6", f"{act!r} reduced holder {p.holder}'s allocation {aid} by {p.charge - (n.charge if n else 0)} B")
    for wid, p in prev.allowances.items():
        n = nxt.allowances.get(wid)
        if n != p and getattr(act, "holder", None) != p.holder:
            if isinstance(act, A.TransferAllowance) and wid == act.target and n is not None and n.limit > p.limit:
                continue
            _fail("I6", f"{act!r} changed holder {p.holder}'s allowance {wid}")


# --- registries --------------------------------------------------------------

STATE_PREDICATES: dict[str, tuple[StatePredicate, ...]] = {
    "C1": (state_C1,),
    "C2": (state_C2,),
    "I1": (state_I1,),
    "I2": (state_I2,),
    "I4a": (state_I4a,),
    "I4b": (state_I4b,),
}

STEP_PREDICATES: dict[str, tuple[StepPredicate, ...]] = {
    "C1": (step_C1,),
    "I1": (step_I1,),
    "I2": (step_I2,),
    "I4a": (step_I4a,),
    "I4b": (step_I4b,),
    "I6": (step_I6,),
}


def check_all(state: State) -> None:
    """Inv: the conjunction of every state predicate."""
    for preds in STATE_PREDICATES.values():
        for p in preds:
            p(state)


def check_step(prev: State, action: Any, nxt: State) -> None:
    """Next: the conjunction of every step predicate for one accepted action."""
    for preds in STEP_PREDICATES.values():
        for p in preds:
            p(prev, action, nxt)


def predicate_names(id: str) -> list[str]:
    """Qualified names of the predicates registered for `id`."""
    found = list(STATE_PREDICATES.get(id, ())) + list(STEP_PREDICATES.get(id, ()))
    return [f"invariants.predicates.{p.__name__}" for p in found]




#: State predicates that stay valid on a partial view holding the touched
#: records plus, for each authority in it, all of its allowances.
LOCAL_STATE_PREDICATES: tuple[StatePredicate, ...] = (state_C2, state_I4a, state_I4b)


def check_local(prev: State, action: Any, nxt: State) -> None:
    """The incremental contract: step predicates plus local state predicates on partial views."""
    check_step(prev, action, nxt)
    for p in LOCAL_STATE_PREDICATES:
        p(nxt)
