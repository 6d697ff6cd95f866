"""Predicates for the capacity-transaction model: C3, C4, C6, I5, I9, I10.

State predicates `state_<ID>(s)` hold in every reachable `TxState`; step
predicates `step_<ID>(prev, action, next)` hold for every accepted action.
Both raise `InvariantViolation` naming the ID. `check_all` / `check_step`
are the named conjunctions (Inv == C3 /\\ C4 /\\ C6 /\\ I5 /\\ I9 /\\ I10).

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec import tx_actions as T
from spec.transactions import TxState, references
from spec.tx_lifecycle import OPEN_PHASES, BundleState, ManagerState, TxPhase, ViewState
from spec.types import ContextState

from invariants._violation import InvariantViolation

__all__ = ["STATE_PREDICATES", "STEP_PREDICATES", "check_all", "check_step", "wait_for_cycle"]

StatePredicate = Callable[[TxState], None]
StepPredicate = Callable[[TxState, Any, TxState], None]

_ALL_HELD = (TxPhase.RESERVED, TxPhase.PUBLISHED, TxPhase.EXECUTING)


def _fail(id: str, message: str) -> None:
    raise InvariantViolation(id, message)


def _held(s: TxState, tid: int) -> dict[int, int]:
    t = s.txs.get(tid)
    return dict(t.held) if t is not None else {}


# --- C3: provider and context lifetime ---------------------------------------


def state_C3(s: TxState) -> None:
    """Everything that references a provider finds it registered; lost contexts get no new work."""
    for t in s.txs.values():
        for aid, _ in t.held + (t.needs if t.phase in OPEN_PHASES else ()):
            a = s.authorities.get(aid)
            if a is None:
                _fail("C3", f"transaction {t.id} references removed authority {aid}")
            if t.phase in OPEN_PHASES and a.context is not ContextState.ACTIVE:
                _fail("C3", f"open transaction {t.id} still needs {a.context.value} authority {aid}")
    for v in s.views.values():
        a = s.authorities.get(v.authority)
        if a is None:
            _fail("C3", f"view {v.id} references removed authority {v.authority}")
        if v.state is ViewState.MAPPED and a.context is not ContextState.ACTIVE:
            _fail("C3", f"view {v.id} is still mapped on {a.context.value} authority {a.id}")
    for a in s.authorities.values():
        if a.context is ContextState.ACTIVE and a.stranded:
            _fail("C3", f"active authority {a.id} carries {a.stranded} B stranded charge")
        if a.context is ContextState.TERMINATED and a.stranded:
            _fail("C3", f"terminated authority {a.id} still carries {a.stranded} B stranded charge")


def step_C3(prev: TxState, act: Any, nxt: TxState) -> None:
    """Loss refunds nothing; only the first confirmed termination refunds, exactly; pinned providers stay."""
    if isinstance(act, T.LoseDevice) and act.authority in nxt.authorities:
        p, n = prev.authorities[act.authority], nxt.authorities[act.authority]
        if n.used != p.used:
            _fail("C3", f"{act!r} moved charge {p.used} -> {n.used} B before termination was confirmed")
    if isinstance(act, T.ConfirmTermination):
        p, n = prev.authorities[act.authority], nxt.authorities[act.authority]
        refund = p.stranded if p.context is ContextState.LOST else 0
        if n.used != p.used - refund:
            _fail("C3", f"{act!r} refunded {p.used - n.used} B, expected {refund} B")
    if isinstance(act, T.RemoveAuthority) and act.authority not in nxt.authorities:
        refs = references(prev, act.authority)
        if refs:
            _fail("C3", f"{act!r} removed a provider pinned by {', '.join(refs)}")


# --- C4: capacity transaction ------------------------------------------------


def wait_for_cycle(s: TxState) -> list[int] | None:
    """A hold-and-wait cycle, as transaction ids, or None.

    Transaction t waits for u when t holds something, its lowest unheld need
    does not fit now, and u holds that authority. Ordered reservation makes
    every edge go to a strictly higher authority id, so no cycle can close;
    it is what a blocking coordinator would deadlock on.
    """
    edges: dict[int, list[int]] = {}
    for t in s.txs.values():
        held = {a for a, _ in t.held}
        todo = [(a, n) for a, n in t.needs if a not in held]
        if t.phase not in OPEN_PHASES or not held or not todo:
            continue
        a, n = min(todo)
        auth = s.authorities.get(a)
        if auth is not None and auth.used + n > auth.capacity:
            edges[t.id] = [u.id for u in s.txs.values() if u.id != t.id and any(x == a for x, _ in u.held)]
    state: dict[int, int] = {}  # 1 = on the path, 2 = done

    def visit(t: int, path: list[int]) -> list[int] | None:
        state[t] = 1
        for u in edges.get(t, ()):
            if state.get(u) == 1:
                return path[path.index(u):] + [u] if u in path else [t, u]
            if u not in state:
                found = visit(u, path + [u])
                if found:
                    return found
        state[t] = 2
        return None

    for t in sorted(edges):
        if t not in state:
            found = visit(t, [t])
            if found:
                return found
    return None


def state_C4(s: TxState) -> None:
    """Held ids strictly increase; nothing held before reserving; all held before publishing."""
    seqs: dict[int, str] = {}
    for t in s.txs.values():
        ids = [a for a, _ in t.held]
        if any(x >= y for x, y in zip(ids, ids[1:])):
            _fail("C4", f"transaction {t.id} reserved authorities out of order: {ids}")
        needs = dict(t.needs)
        if any(needs.get(a) != n for a, n in t.held):
            _fail("C4", f"transaction {t.id} holds {t.held}, not a part of its needs {t.needs}")
        if t.phase is TxPhase.PLANNED and t.held:
            _fail("C4", f"planned transaction {t.id} already holds {t.held}")
        if t.phase in _ALL_HELD and set(ids) != set(needs):
            _fail("C4", f"transaction {t.id} is {t.phase.value} holding only {ids} of {sorted(needs)}")
        if t.phase in OPEN_PHASES and t.seq in seqs:
            _fail("C4", f"transaction {t.id} shares submit sequence {t.seq} with {seqs[t.seq]}")
        seqs[t.seq] = f"transaction {t.id}"
    cycle = wait_for_cycle(s)
    if cycle:
        _fail("C4", f"hold-and-wait cycle: transactions {cycle} each hold what the next needs")
    for i in s.intents.values():
        if i.seq in seqs:
            _fail("C4", f"intent {i.id} shares submit sequence {i.seq} with {seqs[i.seq]}")
        seqs[i.seq] = f"intent {i.id}"


def step_C4(prev: TxState, act: Any, nxt: TxState) -> None:
    """Reserve takes the lowest unheld need; publish only when all held; a retry keeps its identity."""
    if isinstance(act, T.Reserve) and act.tx in nxt.txs:
        t = prev.txs[act.tx]
        held = {a for a, _ in t.held}
        lowest = min(a for a, _ in t.needs if a not in held)
        if act.authority != lowest:
            _fail("C4", f"{act!r} reserved {act.authority} while {lowest} was the lowest unheld authority")
    if isinstance(act, T.Publish):
        t = prev.txs[act.tx]
        if {a for a, _ in t.held} != {a for a, _ in t.needs}:
            _fail("C4", f"{act!r} published a view holding only {t.held} of {t.needs}")
    if isinstance(act, T.Plan) and act.retry is not None:
        i, t = prev.intents[act.retry], nxt.txs[prev.next_tx]
        if (t.seq, t.priority, t.age) != (i.seq, i.priority, i.age) or act.retry in nxt.intents:
            _fail("C4", f"{act!r}: retry has (seq, priority, age) {(t.seq, t.priority, t.age)}, "
                        f"intent had {(i.seq, i.priority, i.age)}")


# --- C6: model views ---------------------------------------------------------


def state_C6(s: TxState) -> None:
    """A bound view is mapped, its allocation live and its generation the one the execution bound."""
    for t in s.txs.values():
        for vid, gen in t.bound:
            v = s.views.get(vid)
            if v is None or v.state is not ViewState.MAPPED:
                _fail("C6", f"transaction {t.id} is bound to view {vid}, which is not mapped")
            if v.generation != gen:
                _fail("C6", f"transaction {t.id} bound view {vid} at generation {gen}; it is at {v.generation}")
            if t.id not in v.users:
                _fail("C6", f"view {vid} does not list its user {t.id}")
    for v in s.views.values():
        owner = s.txs.get(v.allocation)
        if owner is None:
            _fail("C6", f"view {v.id} outlives its allocation {v.allocation}")
        if not 1 <= v.id < s.next_view or v.generation < 1:
            _fail("C6", f"view {v.id} has id/generation outside the issued range")
        for u in v.users:
            user = s.txs.get(u)
            if user is None or user.phase is not TxPhase.EXECUTING or all(b != v.id for b, _ in user.bound):
                _fail("C6", f"view {v.id} lists user {u}, which is not executing with it")
            if u != v.allocation and owner.phase is not TxPhase.COMMITTED:
                _fail("C6", f"transaction {u} uses the provisional view {v.id} of transaction {v.allocation}")


def step_C6(prev: TxState, act: Any, nxt: TxState) -> None:
    """An accepted Execute binds the view's current generation."""
    if isinstance(act, T.Execute) and act.generation != prev.views[act.view].generation:
        _fail("C6", f"{act!r} bound generation {act.generation} of a view at {prev.views[act.view].generation}")


# --- I5: failure scope -------------------------------------------------------


def state_I5(s: TxState) -> None:
    """Every ledger equals what transactions hold plus stranded charge: no residue of a failure."""
    totals: dict[int, int] = {}
    for t in s.txs.values():
        for aid, n in t.held:
            totals[aid] = totals.get(aid, 0) + n
    for a in s.authorities.values():
        if a.used != totals.get(a.id, 0) + a.stranded or a.used < 0:
            _fail("I5", f"authority {a.id} used {a.used} B, but transactions hold {totals.get(a.id, 0)} B "
                        f"and {a.stranded} B are stranded")


def step_I5(prev: TxState, act: Any, nxt: TxState) -> None:
    """An abort restores every ledger exactly; a poisoned manager grants nothing; mismatch poisons one bundle."""
    tid = getattr(act, "tx", None)
    if isinstance(act, (T.Abort, T.Reserve)) and tid in prev.txs and tid not in nxt.txs:
        held = _held(prev, tid)
        for aid, a in nxt.authorities.items():
            if a.used != prev.authorities[aid].used - held.get(aid, 0):
                _fail("I5", f"{act!r}: authority {aid} went {prev.authorities[aid].used} -> {a.used} B, "
                            f"the transaction held {held.get(aid, 0)} B")
        if nxt.bundles != prev.bundles:
            _fail("I5", f"{act!r}: an abort changed a state bundle")
    if prev.manager is ManagerState.POISONED and isinstance(act, T.GRANTS):
        _fail("I5", f"{act!r} was granted by a poisoned manager")
    if isinstance(act, T.ReportMismatch):
        for bid, b in nxt.bundles.items():
            if bid != act.bundle and b != prev.bundles[bid]:
                _fail("I5", f"{act!r} poisoned bundle {bid} too")
        if (nxt.authorities, nxt.txs, nxt.views) != (prev.authorities, prev.txs, prev.views):
            _fail("I5", f"{act!r} changed more than the bundle")


# --- I9: remap only when unused ----------------------------------------------


def step_I9(prev: TxState, act: Any, nxt: TxState) -> None:
    """A view some execution uses keeps its allocation and generation; generations never go back."""
    for vid, p in prev.views.items():
        n = nxt.views.get(vid)
        if n is None:
            continue
        if n.generation < p.generation:
            _fail("I9", f"{act!r}: view {vid} generation went back {p.generation} -> {n.generation}")
        if p.users and (n.generation, n.allocation) != (p.generation, p.allocation):
            _fail("I9", f"{act!r}: view {vid} was remapped to generation {n.generation} while "
                        f"execution(s) {list(p.users)} used generation {p.generation}")


# --- I10: state bundles ------------------------------------------------------


def state_I10(s: TxState) -> None:
    """Every part of a bundle is at the same committed version."""
    for b in s.bundles.values():
        if len(set(b.versions)) != 1:
            _fail("I10", f"bundle {b.id} parts diverged: versions {b.versions}")


def step_I10(prev: TxState, act: Any, nxt: TxState) -> None:
    """Only a commit moves a bundle, every part by exactly one; a poisoned bundle never moves."""
    for bid, p in prev.bundles.items():
        n = nxt.bundles[bid]
        if n.versions == p.versions:
            continue
        t = prev.txs.get(getattr(act, "tx", None))
        if not isinstance(act, T.Commit) or t is None or t.bundle != bid:
            _fail("I10", f"{act!r} moved bundle {bid} without committing it")
        if p.state is BundleState.POISONED or n.versions != tuple(x + 1 for x in p.versions):
            _fail("I10", f"{act!r} moved bundle {bid} {p.versions} -> {n.versions}, not as one unit")


STATE_PREDICATES: dict[str, tuple[StatePredicate, ...]] = {
    "C3": (state_C3,),
    "C4": (state_C4,),
    "C6": (state_C6,),
    "I5": (state_I5,),
    "I10": (state_I10,),
}

STEP_PREDICATES: dict[str, tuple[StepPredicate, ...]] = {
    "C3": (step_C3,),
    "C4": (step_C4,),
    "C6": (step_C6,),
    "I5": (step_I5,),
    "I9": (step_I9,),
    "I10": (step_I10,),
}


def check_all(state: TxState) -> None:
    for preds in STATE_PREDICATES.values():
        for p in preds:
            p(state)


def check_step(prev: TxState, action: Any, nxt: TxState) -> None:
    for preds in STEP_PREDICATES.values():
        for p in preds:
            p(prev, action, nxt)
