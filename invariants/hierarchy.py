"""Predicates of the cooperative hierarchy (C10, I11), as conjunctions of named harm clauses.

Each clause states a harm the design forbids, read from the figures of both
sides (the coordinator's `free`/`quota`, each worker's own `slice`,
`committed`, `reserved`), never a flag a guard writes and never the guard's own
test: "no byte a live worker uses goes uncharged", not "the epoch was checked".
The OS ceiling is recomputed here from the machine figures, independently of
`spec.hierarchy`'s helpers.

A clause is `fn(...) -> (antecedent_held, problem | None)`: whether the case it
is about occurred in this evaluation, and what went wrong. `evaluate` returns
every clause's outcome (for coverage counts); the predicates raise
`InvariantViolation(ID, "clause: problem")` on the first failing clause.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invariants.clauses import clause, conjunction
from spec import hierarchy as H

__all__ = ["state_C10_hierarchy", "step_C10_hierarchy", "state_I11_hierarchy", "step_I11_hierarchy",
           "CLAUSES", "evaluate", "STATE_PREDICATES", "STEP_PREDICATES", "check_state", "check_step"]

Outcome = tuple[bool, "str | None"]
_EX, _DEAD, _SPAWNED = H.WorkerState.EXITED, H.ProcState.DEAD, H.WorkerState.SPAWNED


def _first(items: list[str]) -> str | None:
    return items[0] if items else None


# --- state clauses (C10) -------------------------------------------------------------


def quota_within_serving(s: H.HierarchyState) -> Outcome:
    """Delegated quotas sum to at most the serving quota."""
    total = sum(w.quota for w in s.workers.values())
    return total > 0, (None if total <= s.serving_quota else f"quotas sum to {total} > serving quota {s.serving_quota}")


def slices_within_serving(s: H.HierarchyState) -> Outcome:
    """What the workers that may still run believe they hold sums to at most the serving quota."""
    total = sum(w.slice for w in s.workers.values() if w.state is not _EX)
    return total > 0, (None if total <= s.serving_quota else
                       f"workers not yet exited hold slices summing to {total} > serving quota {s.serving_quota}")


def conservation(s: H.HierarchyState) -> Outcome:
    """Every byte of the serving quota is either free at the coordinator or charged to exactly one worker."""
    total = s.free + sum(w.quota for w in s.workers.values())
    held = any(w.quota or w.returned for w in s.workers.values())
    return held, (None if total == s.serving_quota else
                  f"free {s.free} + quotas {total - s.free} = {total} != serving quota {s.serving_quota}")


def slice_charged(s: H.HierarchyState) -> Outcome:
    """No worker that may still run uses a byte the coordinator does not charge to it (linked attribution, I1)."""
    bad = [f"worker {i}: slice {w.slice} > quota {w.quota}" for i, w in s.workers.items()
           if w.state is not _EX and w.slice > w.quota]
    return any(w.slice for w in s.workers.values() if w.state is not _EX), _first(bad)


def charge_has_owner(s: H.HierarchyState) -> Outcome:
    """A live worker whose view is current is charged exactly its slice: no quota is charged that nobody can use."""
    bad = [f"worker {i}: quota {w.quota} but its own slice is {w.slice}" for i, w in s.workers.items()
           if w.state is not _EX and w.proc is not _DEAD and w.synced and w.quota != w.slice]
    return any(w.quota for w in s.workers.values() if w.proc is not _DEAD and w.synced), _first(bad)


def _usable(w: H.Worker) -> int:
    """Units a worker process can use now: what it holds, or what its slice lets it take (0 once dead)."""
    if w.state is _EX or w.proc is _DEAD:
        return 0
    return max(w.slice, w.committed + w.reserved)


def units_not_doubled(s: H.HierarchyState) -> Outcome:
    """The units the coordinator can still grant plus those each worker is charged or can use never exceed the
    serving quota, in every process's view combined: no unit is usable twice."""
    total = s.free + sum(max(w.quota, _usable(w)) for w in s.workers.values())
    held = any(_usable(w) for w in s.workers.values())
    return held, (None if total <= s.serving_quota else
                  f"grantable {s.free} + per worker max(charged, usable) = {total} > serving quota {s.serving_quota}"
                  f" ({', '.join(f'{i}: {w.quota}/{_usable(w)}' for i, w in s.workers.items())})")


def within_slice(s: H.HierarchyState) -> Outcome:
    """A worker's local charge stays within its slice."""
    bad = [f"worker {i}: committed {w.committed} + reserved {w.reserved} > slice {w.slice}"
           for i, w in s.workers.items() if w.state is not _EX and w.committed + w.reserved > w.slice]
    return any(w.committed + w.reserved for w in s.workers.values()), _first(bad)


def unauthenticated_hold_nothing(s: H.HierarchyState) -> Outcome:
    """A worker that never authenticated holds no quota."""
    bad = [f"worker {i} never authenticated but holds quota {w.quota}" for i, w in s.workers.items()
           if w.state is _SPAWNED and (w.quota or w.slice)]
    return any(w.state is _SPAWNED for w in s.workers.values()), _first(bad)


def exited_hold_nothing(s: H.HierarchyState) -> Outcome:
    """Once its exit is observed a worker is charged nothing."""
    bad = [f"worker {i} exited but is charged {w.quota}" for i, w in s.workers.items() if w.state is _EX and w.quota]
    return any(w.state is _EX for w in s.workers.values()), _first(bad)


def deferring_holds_nothing(s: H.HierarchyState) -> Outcome:
    """A worker awaiting quota holds no open reservation and no quota above what it committed."""
    waiting = {i.worker for i in s.intents.values()}
    bad = [f"worker {i} awaits quota but keeps reserved {w.reserved}, slice {w.slice} > committed {w.committed}"
           for i, w in s.workers.items() if i in waiting and w.proc is not _DEAD
           and (w.reserved or w.slice > w.committed)]
    return bool(waiting), _first(bad)


# --- step clauses (C10) ---------------------------------------------------------------


def no_return_before_exit(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """Quota leaves a worker only when the worker has given it up itself (its slice no longer holds it) or its
    exit has been observed."""
    held, bad = False, []
    for i, w in prev.workers.items():
        n = nxt.workers.get(i)
        if n is None:  # its record is gone: no exit observed, and whatever quota it held went with it
            held = held or w.quota > 0
            if w.quota:
                bad.append(f"worker {i} vanished holding {w.quota} units of quota: no exit was observed")
            continue
        taken = w.quota - n.quota
        if taken <= 0:
            continue
        held = True
        exited = w.proc is _DEAD and n.state is _EX
        if not exited and n.slice > n.quota:
            bad.append(f"worker {i} lost {taken} units of quota (now {n.quota}) while its own slice still holds "
                       f"{n.slice}, and it has not exited")
    return held, _first(bad)


_NOT_LIVE = (H.WorkerState.SPAWNED, H.WorkerState.FENCED, _EX)


def non_live_gains_nothing(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """A worker that is not live (spawned but not authenticated, fenced, exited) is delegated nothing more, and
    an identity the coordinator never spawned is delegated nothing at all."""
    held, bad = False, []
    for i, w in prev.workers.items():
        if w.state in _NOT_LIVE:
            held = True
            n = nxt.workers.get(i)
            if n is not None and (n.quota > w.quota or n.slice > w.slice):  # a vanished worker gained nothing
                bad.append(f"{w.state.value} worker {i} grew from quota {w.quota}/slice {w.slice} to "
                           f"{n.quota}/{n.slice}")
    for i, n in nxt.workers.items():
        if i not in prev.workers:
            held = True
            if n.quota or n.slice:
                bad.append(f"worker {i} appeared holding quota {n.quota}/slice {n.slice}")
    return held, _first(bad)


def lost_reply_uses_nothing_uncharged(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """After a call whose reply was lost (or a crash between the journal write and the reply), no worker can use a
    unit the coordinator does not charge to it: the caller assumed the worst."""
    if getattr(act, "fate", H.DELIVERED) == H.DELIVERED:
        return False, None
    bad = [f"worker {i} can use {_usable(w)} units but is charged {w.quota}" for i, w in nxt.workers.items()
           if _usable(w) > w.quota]
    return True, _first(bad)


_JOURNALED = ("state", "seq", "quota", "returned")


def restart_loses_nothing(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """A coordinator restart loses no journaled figure: a forgotten grant is a unit granted twice, a forgotten
    return or exit a unit lost, an epoch gone back re-admits an old connection's messages."""
    if not isinstance(act, H.Restart):
        return False, None
    if nxt.free != prev.free:
        return True, f"the free balance moved across a restart: {prev.free} -> {nxt.free}"
    for i, w in prev.workers.items():
        n = nxt.workers.get(i)
        was, now = tuple(getattr(w, f) for f in _JOURNALED), n and tuple(getattr(n, f) for f in _JOURNALED)
        if was != now:
            return True, f"worker {i}'s journaled {_JOURNALED} moved across a restart: {was} -> {now}"
        if n.epoch < w.epoch:
            return True, f"worker {i}'s epoch went back across a restart: {w.epoch} -> {n.epoch}"
    if (nxt.intents, nxt.tickets) != (prev.intents, prev.tickets):
        return True, "an intent or a reclaim ticket was lost or changed across a restart"
    return True, None


def _os_free(s: H.HierarchyState) -> int:
    live = sum(w.committed + w.reserved for w in s.workers.values() if w.proc is not _DEAD)
    return s.machine - sum(s.outside.values()) - live


#: The worker record of an identity a state does not hold: no slice, nothing committed or reserved.
_NOBODY = H.Worker(H.WorkerState.SPAWNED, H.ProcState.RUNNING, 0, 0, 0, 0, 0, 0, 0)


def reserve_within_budget(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """A worker's new reservation fits min(its slice, what the OS had left): budget = min(quota, OS ceiling)."""
    if not isinstance(act, H.Reserve):
        return False, None
    # A worker absent from a state holds nothing there (never spawned before; vanished after, which
    # no_return_before_exit judges).
    w, n = prev.workers.get(act.worker, _NOBODY), nxt.workers.get(act.worker, _NOBODY)
    grown = (n.committed + n.reserved) - (w.committed + w.reserved)
    room = min(w.slice - w.committed - w.reserved, max(0, _os_free(prev)))
    return True, (None if grown <= room else
                  f"worker {act.worker} reserved {grown} B with {room} B left of min(slice, OS ceiling)")


def intent_keeps_place(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """A deferred intent keeps its worker, bytes, submit sequence and priority; its age grows, bounded."""
    held, bad = False, []
    for k, i in prev.intents.items():
        j = nxt.intents.get(k)
        if j is None:
            continue
        held = True
        if (j.worker, j.nbytes, j.priority, j.seq) != (i.worker, i.nbytes, i.priority, i.seq):
            bad.append(f"intent {k} changed from {i!r} to {j!r}")
        elif not i.age <= j.age <= nxt.aging_cap:
            bad.append(f"intent {k} aged from {i.age} to {j.age} (bound {nxt.aging_cap})")
    return held, _first(bad)


def matured_not_overtaken(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """Once an intent has matured, no later-submitted intent of any priority is granted ahead of it."""
    if not isinstance(act, H.Arbitrate):
        return False, None
    matured = [i for k, i in prev.intents.items() if i.age + 1 >= prev.aging_cap and k in nxt.intents]
    granted = [i for k, i in prev.intents.items() if k not in nxt.intents]
    bad = [f"intent {g.seq} (submitted after matured intent {m.seq}) was granted ahead of it"
           for m in matured for g in granted if g.seq > m.seq]
    return bool(matured), _first(bad)


# --- I11 --------------------------------------------------------------------------------


def no_outside_target(s: H.HierarchyState) -> Outcome:
    """No reclaim ticket waits on a program outside the hierarchy: it never agreed to give anything back."""
    bad = [f"reclaim ticket {k} targets {t.target!r}, which is not a worker" for k, t in s.tickets.items()
           if t.target not in s.workers]
    return bool(s.tickets), _first(bad)


def outside_only_lowers_ceiling(prev: H.HierarchyState, act: Any, nxt: H.HierarchyState) -> Outcome:
    """Outside usage changes no quota, no slice and no free balance; it only moves the OS ceiling."""
    if not isinstance(act, H.Outside):
        return False, None
    if nxt.free != prev.free:
        return True, f"outside program {act.name!r} moved the coordinator's free balance {prev.free} -> {nxt.free}"
    moved = [i for i, w in prev.workers.items()
             if i not in nxt.workers or (w.quota, w.slice) != (nxt.workers[i].quota, nxt.workers[i].slice)]
    if moved:
        return True, f"outside program {act.name!r} changed the quota of worker {moved[0]}"
    lowered = (_os_free(prev) - _os_free(nxt)) == act.delta
    return True, None if lowered else f"OS ceiling moved by {_os_free(prev) - _os_free(nxt)}, not {act.delta}"


Clause = Callable[..., Outcome]

CLAUSES: dict[str, tuple[tuple[str, Clause], ...]] = {
    "state_C10_hierarchy": tuple((f.__name__, f) for f in (
        quota_within_serving, slices_within_serving, conservation, slice_charged, charge_has_owner,
        units_not_doubled, within_slice, unauthenticated_hold_nothing, exited_hold_nothing,
        deferring_holds_nothing)),
    "step_C10_hierarchy": tuple((f.__name__, f) for f in (
        no_return_before_exit, non_live_gains_nothing, reserve_within_budget, intent_keeps_place,
        matured_not_overtaken, lost_reply_uses_nothing_uncharged, restart_loses_nothing)),
    "state_I11_hierarchy": (("no_outside_target", no_outside_target),),
    "step_I11_hierarchy": (("outside_only_lowers_ceiling", outside_only_lowers_ceiling),),
}


def evaluate(predicate: str, *args: Any) -> list[tuple[str, bool, str | None]]:
    """Every clause of `predicate` on `args`: (clause, antecedent held, problem or None)."""
    return [(name, *fn(*args)) for name, fn in CLAUSES[predicate]]


#: The same clauses in the project's clause registry (`invariants.clauses`): coverage and R1-R3.
_REGISTERED = {(pred, name): clause("C10" if "C10" in pred else "I11", pred, name, (fn.__doc__ or name).strip())
               for pred, named in CLAUSES.items() for name, fn in named}


def _raise(predicate: str, *args: Any) -> None:
    """Count every clause's evaluation and case, then fail on the first problem (the ID is the clause's own)."""
    first = None
    for name, held, problem in evaluate(predicate, *args):
        _REGISTERED[(predicate, name)].case(held)
        if problem is not None and first is None:
            first = (name, problem)
    if first is not None:
        _REGISTERED[(predicate, first[0])].fail(f"{first[0]}: {first[1]}")


def state_C10_hierarchy(s: Any) -> None:
    """Quota sums, conservation, linked attribution, no unit usable twice, charge until exit, deferring holds
    nothing."""
    if isinstance(s, H.HierarchyState):
        _raise("state_C10_hierarchy", s)


def step_C10_hierarchy(prev: Any, act: Any, nxt: Any) -> None:
    """No return before exit, nothing to a non-live identity, budget = min(slice, ceiling), intents keep their
    place, a lost reply leaves nothing uncharged, a restart loses nothing."""
    if isinstance(prev, H.HierarchyState):
        _raise("step_C10_hierarchy", prev, act, nxt)


def state_I11_hierarchy(s: Any) -> None:
    """No reclaim ticket targets an outside program."""
    if isinstance(s, H.HierarchyState):
        _raise("state_I11_hierarchy", s)


def step_I11_hierarchy(prev: Any, act: Any, nxt: Any) -> None:
    """Outside usage only lowers the OS ceiling."""
    if isinstance(prev, H.HierarchyState):
        _raise("step_I11_hierarchy", prev, act, nxt)


STATE_PREDICATES = {"C10": (state_C10_hierarchy,), "I11": (state_I11_hierarchy,)}
STEP_PREDICATES = {"C10": (step_C10_hierarchy,), "I11": (step_I11_hierarchy,)}


def check_state(s: Any) -> None:
    conjunction(STATE_PREDICATES, s)


def check_step(prev: Any, act: Any, nxt: Any) -> None:
    conjunction(STEP_PREDICATES, prev, act, nxt)
