"""Predicates for the capacity-transaction model (C3, C4, C6, I5, I9, I10), as named clauses.

State predicates `state_<ID>(s)` hold in every reachable `TxState`; step
predicates `step_<ID>(prev, action, next)` hold for every accepted action.
Each clause states a harm (work on a lost context, a circle of holds, an
execution on unreserved bytes, a stale view read, bytes lost or doubled by
an abort, a bundle torn apart), never the guard that prevents it, and counts
the evaluations in which its case occurred (`invariants.clauses`); a clause
raises `InvariantViolation` naming its ID and its key. `check_all` /
`check_step` are the named conjunctions (Inv == C3 /\\ C4 /\\ C6 /\\ I5 /\\ I9 /\\ I10).

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec import transactions_actions as T
from spec.transactions import TxState
from spec.transactions_lifecycle import OPEN_PHASES, BundleState, ManagerState, TxPhase, ViewState
from spec.types import ContextState

from invariants.clauses import clause, conjunction

__all__ = ["STATE_PREDICATES", "STEP_PREDICATES", "check_all", "check_step", "wait_for_cycle"]

StatePredicate = Callable[[TxState], None]
StepPredicate = Callable[[TxState, Any, TxState], None]


def _held(s: TxState, tid: int) -> dict[int, int]:
    t = s.txs.get(tid)
    return dict(t.held) if t is not None else {}


# --- C3: provider and context lifetime ---------------------------------------

_C3_NO_WORK = clause("C3", "state_C3", "lost_context_gets_no_work",
                     "no open transaction needs, and no mapped view sits on, a context that is lost or terminated")
_C3_STRANDED = clause("C3", "state_C3", "stranded_only_while_lost",
                      "stranded charge exists only while its context is lost: an active context never carries it "
                      "and a confirmed termination has refunded it")


def state_C3(s: TxState) -> None:
    _C3_NO_WORK.case(any(a.context is not ContextState.ACTIVE for a in s.authorities.values()))
    _C3_STRANDED.case(any(a.stranded or a.context is ContextState.LOST for a in s.authorities.values()))
    for t in s.txs.values():
        for aid, _ in t.held + (t.needs if t.phase in OPEN_PHASES else ()):
            a = s.authorities[aid]
            if t.phase in OPEN_PHASES and a.context is not ContextState.ACTIVE:
                _C3_NO_WORK.fail(f"open transaction {t.id} still needs {a.context.value} authority {aid}")
    for v in s.views.values():
        a = s.authorities[v.authority]
        if v.state is ViewState.MAPPED and a.context is not ContextState.ACTIVE:
            _C3_NO_WORK.fail(f"view {v.id} is still mapped on {a.context.value} authority {a.id}")
    for a in s.authorities.values():
        if a.context is ContextState.ACTIVE and a.stranded:
            _C3_STRANDED.fail(f"active authority {a.id} carries {a.stranded} B stranded charge")
        if a.context is ContextState.TERMINATED and a.stranded:
            _C3_STRANDED.fail(f"terminated authority {a.id} still carries {a.stranded} B stranded charge")


_C3_LOSS = clause("C3", "step_C3", "loss_refunds_nothing",
                  "a device loss refunds nothing: the worker may still be using the bytes until termination "
                  "is confirmed")
_C3_TERMINATION = clause("C3", "step_C3", "termination_refunds_once",
                         "a confirmed termination refunds exactly the lost context's stranded charge, once")


def step_C3(prev: TxState, act: Any, nxt: TxState) -> None:
    loss = isinstance(act, T.LoseDevice) and act.authority in nxt.authorities
    _C3_LOSS.case(loss)
    if loss:
        p, n = prev.authorities[act.authority], nxt.authorities[act.authority]
        if n.used != p.used:
            _C3_LOSS.fail(f"{act!r} moved charge {p.used} -> {n.used} B before termination was confirmed")
    confirm = isinstance(act, T.ConfirmTermination)
    _C3_TERMINATION.case(confirm)
    if confirm:
        p, n = prev.authorities[act.authority], nxt.authorities[act.authority]
        refund = p.stranded if p.context is ContextState.LOST else 0
        if n.used != p.used - refund:
            _C3_TERMINATION.fail(f"{act!r} refunded {p.used - n.used} B, expected {refund} B")


# --- C4: capacity transaction ------------------------------------------------


def _waits(s: TxState) -> dict[int, tuple[int, bool]]:
    """Open transactions in hold-and-wait: id -> (lowest unheld need, whether it fits now)."""
    out: dict[int, tuple[int, bool]] = {}
    for t in s.txs.values():
        held = {a for a, _ in t.held}
        todo = [(a, n) for a, n in t.needs if a not in held]
        if t.phase not in OPEN_PHASES or not held or not todo:
            continue
        a, n = min(todo)
        auth = s.authorities.get(a)
        out[t.id] = (a, auth is not None and auth.used + n <= auth.capacity)
    return out


def wait_for_cycle(s: TxState) -> list[int] | None:
    """A hold-and-wait cycle, as transaction ids, or None.

    Transaction t waits for u when t holds something, its lowest unheld need
    does not fit now, and u holds that authority. Ordered reservation makes
    every edge go to a strictly higher authority id, so no cycle can close;
    it is what a blocking coordinator would deadlock on.
    """
    edges: dict[int, list[int]] = {}
    for tid, (a, fits) in _waits(s).items():
        if not fits:
            edges[tid] = [u.id for u in s.txs.values() if u.id != tid and any(x == a for x, _ in u.held)]
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


_C4_WITHIN = clause("C4", "state_C4", "held_within_needs",
                    "a transaction holds only authorities it declared, each for exactly the declared bytes")
_C4_PLANNED = clause("C4", "state_C4", "planned_holds_nothing",
                     "a planned transaction holds nothing: all waiting happens before any reservation")
_C4_RESERVED_RUN = clause("C4", "state_C4", "runs_on_reserved_bytes",
                          "no execution runs and nothing commits on bytes that are not all reserved (an unreserved "
                          "part is memory in use without a charge; only a lost context's part may be missing from "
                          "a committed lease set)")
_C4_SEQ = clause("C4", "state_C4", "one_identity_per_request",
                 "no two open transactions or intents share a submit sequence: each request keeps one arbitration "
                 "identity")
# No "waits only upward" clause: a wait for a lower id restates `ordered_reservation`, not a harm (a
# consistent descending order, or a downward wait that fits, deadlocks no one), and it shadowed the cycle
# clause on every cycle (each cycle has a downward edge), so the cycle could never be shown to fail.
# Named for what it checks: a circle of holds. A try-only coordinator cannot deadlock on one (it aborts
# instead); the circle is the state its abort-and-retry livelock would go round, whose progress is a
# liveness property, not this clause.
_C4_CYCLE = clause("C4", "state_C4", "no_circular_holding",
                   "no set of transactions each holds an authority the next needs and cannot get now: a circle of "
                   "holds that none can finish without another's abort, so every member waits on an abort")


def state_C4(s: TxState) -> None:
    seqs: dict[int, str] = {}
    holding = planned = running = identities = 0
    for t in s.txs.values():
        needs = dict(t.needs)
        held = dict(t.held)
        holding += bool(t.held)
        if any(needs.get(a) != n for a, n in t.held) or len(held) != len(t.held):
            _C4_WITHIN.fail(f"transaction {t.id} holds {t.held}, not a part of its needs {t.needs}")
        if t.phase is TxPhase.PLANNED:
            planned += 1
            if t.held:
                _C4_PLANNED.fail(f"planned transaction {t.id} already holds {t.held}")
        if t.phase in (TxPhase.EXECUTING, TxPhase.COMMITTED):
            running += 1
            missing = [a for a in needs if a not in held]
            if t.phase is TxPhase.COMMITTED:  # device loss strands a committed set's part (C3)
                missing = [a for a in missing if a in s.authorities
                           and s.authorities[a].context is ContextState.ACTIVE]
            if missing:
                _C4_RESERVED_RUN.fail(f"transaction {t.id} is {t.phase.value} without reservations on "
                                      f"{missing} (holds {sorted(held)} of {sorted(needs)})")
        if t.phase in OPEN_PHASES:
            identities += 1
            if t.seq in seqs:
                _C4_SEQ.fail(f"transaction {t.id} shares submit sequence {t.seq} with {seqs[t.seq]}")
            seqs[t.seq] = f"transaction {t.id}"
    for i in s.intents.values():
        identities += 1
        if i.seq in seqs:
            _C4_SEQ.fail(f"intent {i.id} shares submit sequence {i.seq} with {seqs[i.seq]}")
        seqs[i.seq] = f"intent {i.id}"
    _C4_WITHIN.case(holding > 0)
    _C4_PLANNED.case(planned > 0)
    _C4_RESERVED_RUN.case(running > 0)
    _C4_SEQ.case(identities >= 2)
    waits = _waits(s)
    cycle = wait_for_cycle(s)
    _C4_CYCLE.case(any(not fits for _, fits in waits.values()))
    if cycle:
        _C4_CYCLE.fail(f"circular holding: transactions {cycle} each hold what the next needs")


_C4_RETRY = clause("C4", "step_C4", "retry_keeps_identity",
                   "a retry takes over its intent's submit sequence, priority and age, and the intent is used up")


def step_C4(prev: TxState, act: Any, nxt: TxState) -> None:
    retry = isinstance(act, T.Plan) and act.retry is not None
    _C4_RETRY.case(retry)
    if retry:
        i, t = prev.intents[act.retry], nxt.txs[prev.next_tx]
        if (t.seq, t.priority, t.age) != (i.seq, i.priority, i.age) or act.retry in nxt.intents:
            _C4_RETRY.fail(f"{act!r}: retry has (seq, priority, age) {(t.seq, t.priority, t.age)}, "
                           f"intent had {(i.seq, i.priority, i.age)}")


# --- C6: model views ---------------------------------------------------------

_C6_LIVE = clause("C6", "state_C6", "bound_view_live",
                  "a view bound to an execution stays mapped, over a live allocation, until the execution ends")
_C6_CURRENT = clause("C6", "state_C6", "no_stale_view_read",
                     "an execution reads a view only through its current mapping generation: no stale view read")
_C6_USERS = clause("C6", "state_C6", "users_are_executions",
                   "a view's users are exactly the executions bound to it")
_C6_PRIVATE = clause("C6", "state_C6", "provisional_view_private",
                     "no execution uses another transaction's provisional (uncommitted) view")
_C6_ISSUED = clause("C6", "state_C6", "view_owned_and_issued",
                    "no view outlives its allocation, and its id and generation are ones that were issued")


def state_C6(s: TxState) -> None:
    bound = used = 0
    for t in s.txs.values():
        for vid, gen in t.bound:
            bound += 1
            v = s.views.get(vid)
            if v is None or v.state is not ViewState.MAPPED:
                _C6_LIVE.fail(f"transaction {t.id} is bound to view {vid}, which is not mapped")
            if v.generation != gen:
                _C6_CURRENT.fail(f"transaction {t.id} reads view {vid} through generation {gen}; the view is at "
                                 f"generation {v.generation}")
            if t.id not in v.users:
                _C6_USERS.fail(f"view {vid} does not list its user {t.id}")
    for v in s.views.values():
        owner = s.txs.get(v.allocation)
        if owner is None:
            _C6_LIVE.fail(f"view {v.id} outlives its allocation {v.allocation}")
        if not 1 <= v.id < s.next_view or v.generation < 1:
            _C6_ISSUED.fail(f"view {v.id} has id/generation outside the issued range")
        used += bool(v.users)
        for u in v.users:
            user = s.txs.get(u)
            if user is None or user.phase is not TxPhase.EXECUTING or all(b != v.id for b, _ in user.bound):
                _C6_USERS.fail(f"view {v.id} lists user {u}, which is not executing with it")
            if u != v.allocation and owner.phase is not TxPhase.COMMITTED:
                _C6_PRIVATE.fail(f"transaction {u} uses the provisional view {v.id} of transaction {v.allocation}")
    _C6_LIVE.case(bound > 0)
    _C6_CURRENT.case(bound > 0)
    _C6_USERS.case(bound > 0 or used > 0)
    _C6_PRIVATE.case(used > 0)
    _C6_ISSUED.case(bool(s.views))


# --- I5: failure scope -------------------------------------------------------

_I5_LEDGER = clause("I5", "state_I5", "ledger_matches_holdings",
                    "every authority's used equals what transactions hold on it plus its stranded charge: no residue "
                    "of a failure, no byte lost or doubled")


def state_I5(s: TxState) -> None:
    totals: dict[int, int] = {}
    for t in s.txs.values():
        for aid, n in t.held:
            totals[aid] = totals.get(aid, 0) + n
    _I5_LEDGER.case(bool(s.authorities))
    for a in s.authorities.values():
        if a.used != totals.get(a.id, 0) + a.stranded or a.used < 0:
            _I5_LEDGER.fail(f"authority {a.id} used {a.used} B, but transactions hold {totals.get(a.id, 0)} B "
                            f"and {a.stranded} B are stranded")


_I5_ABORT = clause("I5", "step_I5", "abort_restores_ledgers",
                   "an abort gives back exactly what the transaction held, on every authority: no byte lost or doubled")
_I5_ABORT_BUNDLES = clause("I5", "step_I5", "abort_leaves_bundles",
                           "an abort changes no state bundle (pre-commit failure restores everything)")
_I5_CORRUPT = clause("I5", "step_I5", "corrupt_ledger_charges_nothing",
                     "no byte is charged to a ledger after it was found corrupt: the failure stays inside the "
                     "poisoned worker instead of spreading into new commitments")
_I5_MISMATCH = clause("I5", "step_I5", "mismatch_poisons_one_bundle",
                      "a post-commit state/view mismatch poisons that bundle only and changes nothing else")


def step_I5(prev: TxState, act: Any, nxt: TxState) -> None:
    tid = getattr(act, "tx", None)
    aborted = isinstance(act, (T.Abort, T.Reserve)) and tid in prev.txs and tid not in nxt.txs
    _I5_ABORT.case(aborted)
    _I5_ABORT_BUNDLES.case(aborted)
    if aborted:
        held = _held(prev, tid)
        for aid, a in nxt.authorities.items():
            if a.used != prev.authorities[aid].used - held.get(aid, 0):
                _I5_ABORT.fail(f"{act!r}: authority {aid} went {prev.authorities[aid].used} -> {a.used} B, "
                               f"the transaction held {held.get(aid, 0)} B")
        if nxt.bundles != prev.bundles:
            _I5_ABORT_BUNDLES.fail(f"{act!r}: an abort changed a state bundle")
    poisoned = prev.manager is ManagerState.POISONED
    _I5_CORRUPT.case(poisoned)
    if poisoned:
        grown = {aid: (prev.authorities[aid].used, a.used) for aid, a in nxt.authorities.items()
                 if aid in prev.authorities and a.used > prev.authorities[aid].used}
        if grown:
            _I5_CORRUPT.fail(f"{act!r}: charged {grown} (before -> after, B) on a ledger found corrupt")
    mismatch = isinstance(act, T.ReportMismatch)
    _I5_MISMATCH.case(mismatch)
    if mismatch:
        for bid, b in nxt.bundles.items():
            if bid != act.bundle and b != prev.bundles[bid]:
                _I5_MISMATCH.fail(f"{act!r} poisoned bundle {bid} too")
        if (nxt.authorities, nxt.txs, nxt.views) != (prev.authorities, prev.txs, prev.views):
            _I5_MISMATCH.fail(f"{act!r} changed more than the bundle")


# --- I9: remaps fence their users --------------------------------------------

_I9_FENCE = clause("I9", "step_I9", "remap_fences_users",
                   "after a remap no execution is left reading the replaced mapping: every user of the view "
                   "observes its new generation (no stale view read)")
_I9_MONOTONE = clause("I9", "step_I9", "generation_never_back",
                      "a view's mapping generation never goes back, so an old (id, generation) key never names a "
                      "live mapping again")


def step_I9(prev: TxState, act: Any, nxt: TxState) -> None:
    remapped = [(vid, p, nxt.views[vid]) for vid, p in prev.views.items()
                if vid in nxt.views and nxt.views[vid].generation != p.generation]
    _I9_FENCE.case(bool(remapped))
    _I9_MONOTONE.case(bool(remapped))
    for vid, p, n in remapped:
        if n.generation < p.generation:
            _I9_MONOTONE.fail(f"{act!r}: view {vid} generation went back {p.generation} -> {n.generation}")
        stale = [u for u in n.users if u in nxt.txs and (vid, n.generation) not in nxt.txs[u].bound]
        if stale:
            _I9_FENCE.fail(f"{act!r}: view {vid} was remapped to generation {n.generation} while execution(s) "
                           f"{stale} still read generation {p.generation}")


# --- I10: state bundles ------------------------------------------------------

_I10_AGREE = clause("I10", "state_I10", "bundle_parts_agree",
                    "every part of a state bundle (KV, recurrent/conv, sampler, progress) is at the same version")


def state_I10(s: TxState) -> None:
    _I10_AGREE.case(bool(s.bundles))
    for b in s.bundles.values():
        if len(set(b.versions)) != 1:
            _I10_AGREE.fail(f"bundle {b.id} parts diverged: versions {b.versions}")


_I10_COMMIT_ONLY = clause("I10", "step_I10", "only_commit_moves_bundle",
                          "only a commit of the bundle's own transaction moves a bundle")
_I10_UNIT = clause("I10", "step_I10", "bundle_moves_as_unit",
                   "a bundle moves as one unit, every part by exactly one version, and a poisoned bundle never moves")


def step_I10(prev: TxState, act: Any, nxt: TxState) -> None:
    moved = [(bid, p, nxt.bundles[bid]) for bid, p in prev.bundles.items() if nxt.bundles[bid].versions != p.versions]
    _I10_COMMIT_ONLY.case(bool(moved))
    _I10_UNIT.case(bool(moved))
    for bid, p, n in moved:
        t = prev.txs.get(getattr(act, "tx", None))
        if not isinstance(act, T.Commit) or t is None or t.bundle != bid:
            _I10_COMMIT_ONLY.fail(f"{act!r} moved bundle {bid} without committing it")
        if p.state is BundleState.POISONED or n.versions != tuple(x + 1 for x in p.versions):
            _I10_UNIT.fail(f"{act!r} moved bundle {bid} {p.versions} -> {n.versions}, not as one unit")


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
    "I5": (step_I5,),
    "I9": (step_I9,),
    "I10": (step_I10,),
}


def check_all(state: TxState) -> None:
    conjunction(STATE_PREDICATES, state)


def check_step(prev: TxState, action: Any, nxt: TxState) -> None:
    conjunction(STEP_PREDICATES, prev, action, nxt)
