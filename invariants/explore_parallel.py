"""Level-synchronous parallel exploration: one worker process per core; states never leave their worker.

Each worker holds a share of the current BFS level and expands it: every
accepted step is checked with `check_step` where it is taken, and the next
state stays in the worker that made it, which reports only its fingerprint
(`hash(state)`, 64 bits; of its orbit key under symmetry, `Model.key`) with the step that reached it (parent's index,
action's index). The coordinator dedups by fingerprint over every level so
far, numbers the new states in serial order and tells each worker which of
its next states to keep (one holder per state, preferring worker
`fingerprint % n` among those that made it). Holders check each kept state
with `check_state`. A state never moves, so the first levels are shared
(every worker expands all of them alike) until a level is large enough to
deal out round-robin; each worker then explores from its share. Pickling whole states cost more than
expanding them (about 70 us a state), so only integers cross processes.

Counts equal the serial explorer's (levels advance together, so a state is
first seen at its BFS depth), up to fingerprint collisions, as with
`explore(..., fingerprints=True)`. Counterexamples are shortest and the
serial explorer's own: a level's states are numbered by their least
(parent number, action index) arrival, which is the serial explorer's
discovery order, and the least violating step (or newly seen state) of the
shallowest level is the one the serial explorer meets first. The
coordinator keeps one parent pointer per state and re-executes the path from
the initial state to rebuild the actions, the message and every broken clause.

Workers are forked (`multiprocessing` "fork"), so a model's closures need
not pickle. `max_states` is checked between levels only (a level is never
cut), unlike the serial explorer, which stops mid-level.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from array import array
from collections.abc import Sequence
from itertools import count
from multiprocessing.connection import Connection
from typing import Any

from invariants._violation import InvariantViolation
from invariants.clauses import collecting
from invariants.explore import ExploreResult, Model, no_cyclic_gc, replay_states

__all__ = ["explore_parallel"]

#: Until a level has this many states per worker, every worker holds and expands all of it (the first levels
#: are small): from then on each holds every n-th state, and a state stays with the worker that made it.
_SHARED_BELOW = 32

Key = tuple[int, int]  # (parent's number in its level, action index): a state's arrival, in serial order


def explore_parallel(model: Model, *, max_depth: int, max_states: int = 1_000_000,
                     workers: int | None = None, levels: list[dict] | None = None) -> ExploreResult:
    """`explore(model, max_depth=..., fingerprints=True)` over `workers` processes (default: one per core).

    `levels`, if given, receives one record per level: its states, the wall seconds, the coordinator's CPU seconds
    (numbering and dealing out, between the replies), and the workers' CPU seconds (the busiest one's, all)."""
    with no_cyclic_gc():  # the forked workers inherit it
        return _explore_parallel(model, max_depth, max_states, workers, levels)


def _explore_parallel(model: Model, max_depth: int, max_states: int, workers: int | None,
                      levels: list[dict] | None = None) -> ExploreResult:
    t0, c0 = time.perf_counter(), time.process_time()
    n = workers or os.cpu_count() or 1
    try:
        model.check_state(model.initial)
    except InvariantViolation as e:
        return ExploreResult(model.name, 1, 0, 0, 0, False, time.perf_counter() - t0, e.id, str(e), (), e.clause,
                             trace=(model.initial,))
    ctx = mp.get_context("fork")
    pipes = [ctx.Pipe() for _ in range(n)]
    ends = [end for pipe in pipes for end in pipe]
    procs = [ctx.Process(target=_worker, args=(model, child, [e for e in ends if e is not child]), daemon=True)
             for _, child in pipes]
    for p in procs:
        p.start()
    for _, child in pipes:  # the workers hold these: a worker that dies is then an EOFError here, not a hang
        child.close()
    conns = [parent for parent, _ in pipes]
    seen: set[int] = {_fingerprint(model, model.initial)}
    parents: list[list[Key]] = [[(-1, -1)]]  # per level, per state number: its arrival
    # Per worker: (index among the next states it made, state number); -1 is the initial state (levels start shared).
    keep: list[list[tuple[int, int]]] = [[(-1, 0)]] * n
    states, transitions, rejected, depth = 1, 0, 0, 0
    step_bad: Key | None = None
    bad: tuple[int, Key] | None = None  # (level, arrival)
    fixpoint = bound_hit = False
    shared = True
    worker_cpu = critical_cpu = 0.0
    try:
        for level in count():  # ends by a break, at max_depth at the latest
            expand = level < max_depth and step_bad is None  # a level with a bad step into it is only checked
            w0, p0 = time.perf_counter(), time.process_time()
            for c, k in zip(conns, keep):
                c.send((k, expand))
            replies = [c.recv() for c in conns]
            for r in replies:
                if isinstance(r, BaseException):
                    raise r
            wsum, wmax = sum(r[7] for r in replies), max(r[7] for r in replies)
            worker_cpu += wsum
            critical_cpu += wmax
            was_shared = shared
            state_bad = min((r[0] for r in replies if r[0] is not None), default=None)
            found = [k for k in (step_bad, None if state_bad is None else parents[level][state_bad]) if k is not None]
            if found:
                bad = (level, min(found))
                break
            if not expand:
                if levels is not None:  # the last level is only checked
                    levels.append(_record(level, 0, 0, was_shared, w0, p0, wmax, wsum))
                break
            if shared:  # every worker expanded the whole level alike: count it once
                replies = replies[:1]
            transitions += sum(r[1] for r in replies)
            rejected += sum(r[2] for r in replies)
            step_bad = min((r[3] for r in replies if r[3] is not None), default=None)
            keep, level_parents = _dedup(replies, seen, n)
            if shared:
                shared = len(level_parents) < _SHARED_BELOW * n
                keep = [keep[0]] * n if shared else [keep[0][w::n] for w in range(n)]
            if levels is not None:
                levels.append(_record(level, len(parents[level]), len(level_parents), was_shared, w0, p0, wmax, wsum))
            depth = level + 1  # levels expanded, as the serial explorer counts them
            if not level_parents:
                fixpoint = True  # the level made no new state: every reachable state is found and expanded
                break
            parents.append(level_parents)
            states += len(level_parents)
            if states >= max_states:
                bound_hit = True
                break
    finally:
        for c in conns:
            try:
                c.send(None)
            except OSError:  # that worker is gone already (its error is the one being raised)
                pass
        for p in procs:
            p.join()
    own = time.process_time() - c0
    cpu = (own + worker_cpu, own + critical_cpu)
    if bad is None:
        return ExploreResult(model.name, states, transitions, rejected, depth, fixpoint, time.perf_counter() - t0,
                             None, "no violation", (), None, (), *cpu, bound_hit, len(parents) - 1)
    level, (parent, action) = bad
    path = [action]
    for lv in range(level - 1, 0, -1):
        parent, action = parents[lv][parent]
        path.append(action)
    return _rebuild(model, tuple(reversed(path)), states, transitions, rejected, depth, t0, cpu, bound_hit)


def _record(level: int, expanded: int, new: int, shared: bool, w0: float, p0: float, wmax: float,
            wsum: float) -> dict:
    """One level's record for `levels`: its figures, and its wall and CPU seconds since `w0` and `p0`."""
    return {"level": level, "expanded": expanded, "new": new, "shared": shared,
            "wall_seconds": round(time.perf_counter() - w0, 4),
            "coordinator_cpu_seconds": round(time.process_time() - p0, 4),
            "worker_cpu_max": round(wmax, 4), "worker_cpu_sum": round(wsum, 4)}


def _dedup(replies: list[Any], seen: set[int], n: int) -> tuple[list[list[tuple[int, int]]], list[Key]]:
    """Number the level's new states by least arrival; pick one holder each (its own fingerprint share first)."""
    best: dict[int, list[Any]] = {}  # fingerprint -> [least arrival, holder, holder's index]
    for w, r in enumerate(replies):
        fps, par, act = r[4], r[5], r[6]
        for j in range(len(fps)):
            fp = fps[j]
            if fp in seen:
                continue
            key = (par[j], act[j])
            b = best.get(fp)
            if b is None:
                best[fp] = [key, w, j]
                continue
            if key < b[0]:
                b[0] = key
            if w == fp % n and b[1] != w:
                b[1], b[2] = w, j
    seen.update(best)
    order = sorted(best.values())  # by arrival: one (parent, action) makes one state, so the rest never ties
    keep: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for number, (_, w, j) in enumerate(order):
        keep[w].append((j, number))
    return keep, [b[0] for b in order]


def _worker(model: Model, conn: Connection, inherited: Sequence[Connection] = ()) -> None:
    """Serve levels until told to stop or the coordinator is gone: the fork copied every pipe's ends into this
    process, and holding them would keep each pipe open (so this worker's `recv` would wait forever) after the
    coordinator died, so only this worker's own end stays open here."""
    for end in inherited:
        end.close()
    made: list[Any] = []  # next states made at the last expansion, by index
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the coordinator is gone
            return
        if msg is None:
            return
        try:
            reply, made = _level(model, made, *msg)
            conn.send(reply)
        except BaseException as e:  # noqa: BLE001 - the coordinator re-raises it
            conn.send(e)


def _level(model: Model, made: list[Any], keep: list[tuple[int, int]], expand: bool) -> tuple[tuple, list[Any]]:
    """Check this worker's share of a level, then expand it. `keep` is in ascending state number, so the first
    violating state, and the first violating step, found here are this worker's least."""
    c0 = time.process_time()
    frontier = [(number, model.initial if j < 0 else made[j]) for j, number in keep]
    state_bad: int | None = None
    for number, s in frontier:
        try:
            model.check_state(s)
        except InvariantViolation:
            state_bad = number
            break
    nxt_made: list[Any] = []
    fps, par, act = array("q"), array("q"), array("q")
    transitions = rejected = 0
    step_bad: Key | None = None
    if expand and state_bad is None:
        for number, s in frontier:
            for i, action in enumerate(model.actions(s)):
                try:
                    nxt = model.step(s, action)
                except model.rejects:
                    rejected += 1
                    continue
                transitions += 1
                try:
                    model.check_step(s, action, nxt)
                except InvariantViolation:
                    if step_bad is None:
                        step_bad = (number, i)
                    continue
                fps.append(_fingerprint(model, nxt))
                par.append(number)
                act.append(i)
                nxt_made.append(nxt)
    return (state_bad, transitions, rejected, step_bad, fps, par, act, time.process_time() - c0), nxt_made


def _fingerprint(model: Model, s: Any) -> int:
    """The 64-bit hash of the state's seen-set key (its orbit's, under a symmetry reduction)."""
    return hash(s if model.key is None else model.key(s))


def _rebuild(model: Model, path: tuple[int, ...], states: int, transitions: int, rejected: int, depth: int,
             t0: float, cpu: tuple[float, float], bound_hit: bool) -> ExploreResult:
    """Re-execute the violating path from the initial state; judge its last step as the serial explorer does."""
    s, actions = model.initial, []
    for i in path[:-1]:
        a = list(model.actions(s))[i]
        s = model.step(s, a)
        actions.append(a)
    act = list(model.actions(s))[path[-1]]
    nxt = model.step(s, act)
    actions.append(act)
    try:
        model.check_step(s, act, nxt)
        model.check_state(nxt)
    except InvariantViolation as e:
        with collecting() as found:
            try:
                model.check_step(s, act, nxt)
                model.check_state(nxt)
            except InvariantViolation:
                pass
        broken = tuple(dict.fromkeys([e.clause or e.id, *found]))
        return ExploreResult(model.name, states, transitions, rejected, depth, False, time.perf_counter() - t0,
                             e.id, str(e), tuple(actions), e.clause, broken, *cpu, bound_hit, depth,
                             replay_states(model, tuple(actions)))
    raise AssertionError(f"path {path} was reported violating but its replay passes")  # a nondeterministic model
