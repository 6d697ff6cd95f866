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


from spec import ledger_actions as A
from spec.lifetime_actions import GrowLease
from spec.lifecycle import ALLOCATION_TABLE, TERMINAL
from spec.ledger_state import State
from spec.records import evolve
from spec.types import AllocState, Origin

from invariants.changed import changes
from invariants.clauses import clause, conjunction

__all__ = [
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "OBSERVATION_PREDICATES",
    "observe_snapshot",
    "check_all",
    "check_step",
    "check_local",
    "LOCAL_STATE_PREDICATES",
    "predicate_names",
]

StatePredicate = Callable[[State], None]
StepPredicate = Callable[[State, Any, State], None]



#: (state, next state) pairs some table event allows, plus the terminal exits.
_ALLOWED = frozenset((src, dst) for (src, _), dst in ALLOCATION_TABLE.items())


# --- C1: one canonical authority per pool ------------------------------------

_C1_ONE = clause("C1", "state_C1", "one_ledger_per_pool",
                 "no physical pool has two ledgers that can both grant over it")
_C1_ALIAS = clause("C1", "state_C1", "alias_resolves",
                   "every alias view resolves to the one canonical ledger of its own pool")
_C1_BIND = clause("C1", "step_C1", "identity_kept",
                  "an accepted registration never binds a pool to a ledger of another tier or capacity")
_C1_STABLE = clause("C1", "step_C1", "ledger_identity_stable",
                    "no step changes an existing ledger's pool, tier or capacity")


def state_C1(s: State) -> None:
    """At most one canonical authority per pool, and per declared (device, tier); every alias resolves to one."""
    seen: dict[str, int] = {}
    on_device: dict[tuple[str, object], int] = {}
    aliases = False
    for a in s.authorities.values():
        if a.alias_of is None:
            if a.pool in seen:
                _C1_ONE.fail(f"pool {a.pool!r} has two canonical authorities: authority {seen[a.pool]} and "
                             f"authority {a.id}")
            seen[a.pool] = a.id
            where = (a.device, a.tier)
            if a.device is not None and where in on_device:
                _C1_ONE.fail(f"device {a.device!r} ({a.tier.value}) has two canonical authorities: "
                             f"authority {on_device[where]} and authority {a.id}, whatever their pools are called")
            if a.device is not None:
                on_device[where] = a.id
        else:
            aliases = True
            base = s.authorities.get(a.alias_of)
            if base is None or base.alias_of is not None or base.pool != a.pool:
                _C1_ALIAS.fail(f"alias {a.id} does not resolve to a canonical authority of pool {a.pool!r}")
    _C1_ONE.case(bool(seen))
    _C1_ALIAS.case(aliases)


def step_C1(prev: State, act: Any, nxt: State) -> None:
    """An accepted registration binds to an authority of the same identity, and adds no second ledger."""
    if isinstance(act, (A.RegisterAuthority, A.RegisterAlias)):
        state_C1(nxt)  # registration views hold every authority
    for aid, p in prev.authorities.items():
        n = nxt.authorities.get(aid)
        if n is None or (n.pool, n.tier, n.capacity, n.alias_of) != (p.pool, p.tier, p.capacity, p.alias_of):
            _C1_STABLE.fail(f"{act!r} changed authority {aid}: {p!r} -> {n!r}")
    _C1_STABLE.case(bool(prev.authorities))
    if _C1_BIND.case(isinstance(act, A.RegisterAuthority)):
        for a in nxt.authorities.values():
            if a.alias_of is None and a.pool == act.pool and (a.tier, a.capacity) != (act.tier, act.capacity):
                _C1_BIND.fail(f"{act!r} was accepted but pool {a.pool!r} is ({a.tier.value}, {a.capacity} B)")


# --- C2: leases covered by reservations --------------------------------------

_C2_KNOWN = clause("C2", "state_C2", "lease_on_known_pool",
                   "no lease sits on an unknown authority, in a tier its pool does not have, or for an unknown holder")
_C2_COVERED = clause("C2", "state_C2", "lease_within_reservation",
                     "no lease is larger than the reservation granted for it")
_C2_CHARGED = clause("C2", "state_C2", "lease_fully_charged",
                     "no provisional or live lease is charged less (or more) than its bytes")


def state_C2(s: State) -> None:
    """Every allocation sits on a known authority, in its tier, within its reservation."""
    live = False
    for r in s.allocations.values():
        a = s.authorities.get(r.authority)
        if a is None:
            _C2_KNOWN.fail(f"allocation {r.id} is on unknown authority {r.authority}")
        if r.tier is not a.tier:
            _C2_KNOWN.fail(f"allocation {r.id} claims tier {r.tier.value} on a {a.tier.value} pool")
        if r.holder not in s.holders:
            _C2_KNOWN.fail(f"allocation {r.id} names unknown holder {r.holder}")
        if not 0 < r.nbytes <= r.reserved:
            _C2_COVERED.fail(f"allocation {r.id}: lease {r.nbytes} B not covered by reservation {r.reserved} B")
        if r.state in (AllocState.PROVISIONAL, AllocState.LIVE):
            live = True
            if r.charge != r.nbytes:
                _C2_CHARGED.fail(f"allocation {r.id} ({r.state.value}) charges {r.charge} B for {r.nbytes} B")
    _C2_KNOWN.case(bool(s.allocations))
    _C2_COVERED.case(bool(s.allocations))
    _C2_CHARGED.case(live)


# --- I1: one charge per physical identity ------------------------------------

_I1_SUM = clause("I1", "state_I1", "used_is_sum_of_charges",
                 "no ledger's used figure differs from the charges of the allocations on it")
_I1_ALIAS = clause("I1", "state_I1", "alias_charges_nothing",
                   "no byte reached through an alias is charged a second time to the alias")
_I1_CONSERVED = clause("I1", "step_I1", "charge_conserved",
                       "no step moves a ledger by other than its allocations' charge change (no lost or doubled byte)")


def state_I1(s: State) -> None:
    """Each ledger's used equals its allocations' charges; aliases carry no charge."""
    totals: dict[int, int] = {}
    for r in s.allocations.values():
        totals[r.authority] = totals.get(r.authority, 0) + r.charge
    aliases = False
    for a in s.authorities.values():
        if a.alias_of is not None:
            aliases = True
            if a.used or totals.get(a.id):
                _I1_ALIAS.fail(f"alias {a.id} of authority {a.alias_of} carries {a.used} B: the bytes are charged "
                               "twice")
        if a.used != totals.get(a.id, 0):
            _I1_SUM.fail(f"authority {a.id} used {a.used} B but its allocations charge {totals.get(a.id, 0)} B")
    _I1_SUM.case(bool(totals))
    _I1_ALIAS.case(aliases)


def step_I1(prev: State, act: Any, nxt: State) -> None:
    """Conservation: each ledger moves by exactly its allocations' charge change."""
    delta: dict[int, int] = {}
    for _, p, n in changes(prev.allocations, nxt.allocations):  # an unchanged record moves nothing
        if p is not None:
            delta[p.authority] = delta.get(p.authority, 0) - p.charge
        if n is not None:
            delta[n.authority] = delta.get(n.authority, 0) + n.charge
    moved = False
    for aid, a in nxt.authorities.items():
        before = prev.authorities[aid].used if aid in prev.authorities else 0
        moved = moved or a.used != before or bool(delta.get(aid))
        if a.used - before != delta.get(aid, 0):
            _I1_CONSERVED.fail(f"{act!r}: authority {aid} used moved {a.used - before} B, "
                               f"charges moved {delta.get(aid, 0)} B")
        if a.alias_of is not None and a.used:
            _I1_CONSERVED.fail(f"{act!r}: alias {aid} was charged {a.used} B")
    _I1_CONSERVED.case(moved)


# --- I2: charge before commit ------------------------------------------------

_I2_GRANTED = clause("I2", "state_I2", "grants_within_limit",
                     "no ledger has granted more than its limit; only recorded (already taken) bytes oversubscribe")
_I2_RESERVE = clause("I2", "step_I2", "reserve_within_limit",
                     "no accepted reservation leaves its ledger past the limit")
_I2_RECORDED = clause("I2", "step_I2", "recorded_bytes_charged",
                      "bytes already taken outside the governor are never left uncharged: recording them charges "
                      "them in full, even past the limit, so the oversubscription is visible")


def state_I2(s: State) -> None:
    """Granted charge never exceeds the limit; only recorded bytes may oversubscribe."""
    granted: dict[int, int] = {}
    for r in s.allocations.values():
        if r.origin is Origin.GRANTED:
            granted[r.authority] = granted.get(r.authority, 0) + r.charge
    for a in s.authorities.values():
        if granted.get(a.id, 0) > a.limit:
            _I2_GRANTED.fail(f"authority {a.id}: {granted[a.id]} B granted against a {a.limit} B limit")
        if a.used < 0:
            _I2_GRANTED.fail(f"authority {a.id}: used is negative ({a.used} B)")
    _I2_GRANTED.case(bool(granted))


def step_I2(prev: State, act: Any, nxt: State) -> None:
    """An accepted reservation leaves its ledger within the limit; a recorded allocation is charged in full."""
    if _I2_RESERVE.case(isinstance(act, A.Reserve)):
        for aid, a in nxt.authorities.items():
            before = prev.authorities[aid].used if aid in prev.authorities else 0
            if a.used > before and a.used > a.limit:
                _I2_RESERVE.fail(f"{act!r} granted past the limit: used {a.used} B > {a.limit} B")
    if _I2_RECORDED.case(isinstance(act, A.RecordCommitted)):
        new = [n for _, p, n in changes(prev.allocations, nxt.allocations) if p is None]
        if len(new) != 1 or new[0].charge != act.nbytes:
            _I2_RECORDED.fail(f"{act!r} was accepted but charged {[r.charge for r in new]} B")
        a = nxt.authorities[new[0].authority]
        if a.used != prev.authorities[new[0].authority].used + act.nbytes:
            _I2_RECORDED.fail(f"{act!r}: authority {a.id} used {a.used} B does not include the recorded bytes")


# --- I4a: physical ownership -------------------------------------------------

_I4A_ISSUED = clause("I4a", "state_I4a", "ids_issued",
                     "no live allocation carries an id that was never issued, and none lingers in a terminal state")
_I4A_FRESH = clause("I4a", "step_I4a", "ids_fresh",
                    "no allocation id is reissued and the id counter never goes back")
_I4A_OWNER = clause("I4a", "step_I4a", "holder_fixed",
                    "no allocation changes holder")
_I4A_LIFECYCLE = clause("I4a", "step_I4a", "lifecycle_followed",
                        "no allocation moves, changes or leaves the ledger outside its lifecycle table")


def state_I4a(s: State) -> None:
    """Every live id was issued (1 .. next-1) and no record is in a terminal state."""
    for r in s.allocations.values():
        if not 1 <= r.id < s.next_allocation:
            _I4A_ISSUED.fail(f"allocation {r.id} outside the issued range 1..{s.next_allocation - 1}")
        if r.state in TERMINAL:
            _I4A_ISSUED.fail(f"allocation {r.id} kept in terminal state {r.state.value}")
    _I4A_ISSUED.case(bool(s.allocations))


def step_I4a(prev: State, act: Any, nxt: State) -> None:
    """Ids are fresh, holders fixed, and each record moves only along the lifecycle table."""
    if nxt.next_allocation < prev.next_allocation:
        _I4A_FRESH.fail(f"{act!r}: id counter went back from {prev.next_allocation} to {nxt.next_allocation}")
    fresh = moved = False
    diff = changes(prev.allocations, nxt.allocations)  # an unchanged record breaks none of these
    born = 0
    for aid, p, n in diff:
        if n is None:
            continue
        if p is None:
            fresh, born = True, born + 1
            if aid < prev.next_allocation:
                _I4A_FRESH.fail(f"{act!r}: reissued allocation id {aid}")
            continue
        if n.holder != p.holder:
            _I4A_OWNER.fail(f"{act!r}: allocation {aid} changed holder {p.holder} -> holder {n.holder}")
        if n.state is p.state:
            # The table's self-loops change the lease's bytes and charge only: downwards (a shrink), or upwards
            # with its reservation by the one action that grows a lease (GrowLease; any other growth is a leak).
            if (p.state, p.state) in _ALLOWED and (
                    n.nbytes < p.nbytes and n == evolve(p, nbytes=n.nbytes, charge=n.charge)
                    or isinstance(act, GrowLease) and n.nbytes > p.nbytes
                    and n == evolve(p, reserved=n.reserved, nbytes=n.nbytes, charge=n.charge)):
                moved = True
            elif n != p:
                _I4A_LIFECYCLE.fail(f"{act!r}: allocation {aid} changed while staying {p.state.value}")
        else:
            moved = True
            if (p.state, n.state) not in _ALLOWED:
                _I4A_LIFECYCLE.fail(f"{act!r}: allocation {aid} moved {p.state.value} -> {n.state.value}")
    kept = len(nxt.allocations) > born  # some record was in both states
    for aid, p, n in diff:
        if p is not None and n is None:
            moved = True
            if not any((p.state, t) in _ALLOWED for t in TERMINAL):
                _I4A_LIFECYCLE.fail(f"{act!r}: allocation {aid} left the ledger from {p.state.value}")
    _I4A_FRESH.case(fresh)
    _I4A_OWNER.case(kept)
    _I4A_LIFECYCLE.case(moved)


# --- I4b: allowance ownership ------------------------------------------------

_I4B_BOUND = clause("I4b", "state_I4b", "allowance_within_limit",
                    "no allowance has reserved plus mapped bytes beyond its limit")
_I4B_PROMISE = clause("I4b", "state_I4b", "promises_within_capacity",
                      "no pool has promised allowances beyond its capacity")
_I4B_NO_CHARGE = clause("I4b", "step_I4b", "allowance_moves_no_charge",
                        "no allowance action moves a ledger's charge")
_I4B_TRANSFER = clause("I4b", "step_I4b", "transfer_conserves",
                       "no transfer creates or destroys allowance limit")


def state_I4b(s: State) -> None:
    """reserved + mapped <= limit per allowance; limits per authority <= its capacity."""
    promised: dict[int, int] = {}
    for w in s.allowances.values():
        if w.reserved < 0 or w.mapped < 0 or w.reserved + w.mapped > w.limit:
            _I4B_BOUND.fail(f"allowance {w.id}: reserved {w.reserved} + mapped {w.mapped} > limit {w.limit}")
        promised[w.authority] = promised.get(w.authority, 0) + w.limit
    for aid, total in promised.items():
        a = s.authorities.get(aid)
        if a is None or total > a.capacity:
            _I4B_PROMISE.fail(f"authority {aid}: allowance limits {total} B exceed capacity")
    _I4B_BOUND.case(any(w.reserved or w.mapped for w in s.allowances.values()))
    _I4B_PROMISE.case(bool(promised))


def step_I4b(prev: State, act: Any, nxt: State) -> None:
    """Allowance actions move no charge; a transfer keeps the sum of limits."""
    if _I4B_NO_CHARGE.case(isinstance(act, (A.OpenAllowance, A.ReserveGrowth, A.MapAllowance, A.UnmapAllowance,
                                            A.TransferAllowance, A.CloseAllowance))):
        for aid, a in nxt.authorities.items():
            if aid in prev.authorities and a.used != prev.authorities[aid].used:
                _I4B_NO_CHARGE.fail(f"{act!r} moved charge on authority {aid}")
    if _I4B_TRANSFER.case(isinstance(act, A.TransferAllowance)):
        diff = changes(prev.allowances, nxt.allowances)  # unchanged allowances add the same to both sums
        before = sum(p.limit for _, p, _ in diff if p is not None)
        after = sum(n.limit for _, _, n in diff if n is not None)
        if before != after:
            _I4B_TRANSFER.fail(f"{act!r} changed total allowance limits {before} -> {after}")


# --- I6: only holders give bytes back ----------------------------------------

_I6_CHARGE = clause("I6", "step_I6", "only_owner_reduces_charge",
                    "no holder's charge falls except by that holder's own action (or a confirmed termination)")
_I6_ALLOWANCE = clause("I6", "step_I6", "only_owner_changes_allowance",
                       "no holder's allowance is changed by anyone else (a transfer may only grow its target)")


def step_I6(prev: State, act: Any, nxt: State) -> None:
    """Every charge decrease is the owning holder's action (or a confirmed termination)."""
    fell = altered = False
    for aid, p, n in changes(prev.allocations, nxt.allocations):  # an unchanged charge did not fall
        if p is None or (n.charge if n is not None else 0) >= p.charge:
            continue
        fell = True
        if isinstance(act, A.ConfirmTermination) and p.state is AllocState.DEVICE_LOST:
            continue
        if getattr(act, "holder", None) != p.holder:
            _I6_CHARGE.fail(f"{act!r} reduced holder {p.holder}'s allocation {aid} by "
                            f"{p.charge - (n.charge if n else 0)} B")
    for wid, p, n in changes(prev.allowances, nxt.allowances):
        if p is not None:
            altered = True
            if getattr(act, "holder", None) != p.holder:
                if isinstance(act, A.TransferAllowance) and wid == act.target and n is not None and n.limit > p.limit:
                    continue
                _I6_ALLOWANCE.fail(f"{act!r} changed holder {p.holder}'s allowance {wid}")
    _I6_CHARGE.case(fell)
    _I6_ALLOWANCE.case(altered)


# --- observation: what a snapshot reports (C8, I2) ------------------------------

_I2_VISIBLE = clause("I2", "observe_snapshot", "oversubscription_reported",
                     "an oversubscribed ledger (recorded bytes past the limit) is never reported as within it")
_C8_AVAILABLE = clause("C8", "observe_snapshot", "available_excludes_growth",
                       "a snapshot never reports as available bytes that are used or reserved for growth")


def observe_snapshot(s: State, authority: int, snap: Any) -> None:
    """A snapshot's figures equal a reading of the records: used, growth reserved, available, oversubscribed."""
    a = s.authorities.get(authority)
    if a is None:  # nothing registered, or an id never issued: no ledger whose bytes the figures could be
        _C8_AVAILABLE.fail(f"authority {authority} is in no record (never registered, or removed), yet a snapshot "
                           f"reports it: {snap!r}")
    if a.alias_of is not None:
        a = s.authorities[a.alias_of]
    used = sum(r.charge for r in s.allocations.values() if r.authority == a.id)
    growth = sum(w.reserved for w in s.allowances.values() if w.authority == a.id)
    if _I2_VISIBLE.case(used > a.limit) and snap.oversubscribed != used - a.limit:
        _I2_VISIBLE.fail(f"authority {a.id}: {used} B charged against a {a.limit} B limit, "
                         f"reported oversubscribed {snap.oversubscribed} B")
    if used <= a.limit and snap.oversubscribed != 0:
        _I2_VISIBLE.fail(f"authority {a.id}: reported oversubscribed {snap.oversubscribed} B within its limit")
    free = a.limit - used - growth
    # Judged on every read, an idle ledger's too (its whole limit is available); the case counts the reads where
    # charged or growth bytes could be passed off as available.
    _C8_AVAILABLE.case(growth > 0 or used > 0)
    if snap.available != (free if free > 0 else 0):
        _C8_AVAILABLE.fail(f"authority {a.id}: available {snap.available} B, but limit {a.limit} - used {used} "
                           f"- growth {growth} gives {max(0, free)} B")
    if snap.used != used or snap.growth_reserved != growth:
        _C8_AVAILABLE.fail(f"authority {a.id}: snapshot used {snap.used} / growth {snap.growth_reserved} B, "
                           f"records give {used} / {growth} B")


#: Predicates over what a read returns (state, authority, snapshot), run by the machine's `observe` rule.
OBSERVATION_PREDICATES: dict[str, tuple[Callable[..., None], ...]] = {
    "I2": (observe_snapshot,),
    "C8": (observe_snapshot,),
}


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
    conjunction(STATE_PREDICATES, state)


def check_step(prev: State, action: Any, nxt: State) -> None:
    """Next: the conjunction of every step predicate for one accepted action."""
    conjunction(STEP_PREDICATES, prev, action, nxt)


def predicate_names(id: str) -> list[str]:
    """Qualified names of the predicates registered for `id`."""
    found = list(STATE_PREDICATES.get(id, ())) + list(STEP_PREDICATES.get(id, ()))
    return [f"invariants.ledger.{p.__name__}" for p in found]




#: State predicates that stay valid on a partial view holding the touched
#: records plus, for each authority in it, all of its allowances.
LOCAL_STATE_PREDICATES: tuple[StatePredicate, ...] = (state_C2, state_I4a, state_I4b)


def check_local(prev: State, action: Any, nxt: State) -> None:
    """The incremental contract: step predicates plus local state predicates on partial views."""
    check_step(prev, action, nxt)
    for p in LOCAL_STATE_PREDICATES:
        p(nxt)
