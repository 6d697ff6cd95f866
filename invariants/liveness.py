"""Liveness on the explored graph: fair cycles (Tarjan's strongly connected components) and traps, as lassos.

A finite scope's reachable graph is built whole (`build_graph`: every state, every accepted step, no depth
cut; only a state bound, which makes the graph, and any verdict on it, incomplete). Two checks read it:

- `fair_cycle(g, stay, fair, weak, along)`: is there a reachable cycle in which every state satisfies
  `stay` (a ticket stays pending), every step `along` (nobody commits), some step satisfies `fair`
  (capacity returns; an abort), and which is weakly fair to each process of `weak` (the process takes a
  step in the cycle, or some state of it offers the process no step at all)? Such a cycle, repeated
  forever, is an infinite run that meets the fairness conditions and never leaves `stay`: a liveness
  violation under that fairness. It exists iff a strongly connected component of the `stay`/`along`
  subgraph holds a `fair` step and, for each weak process, one of its steps or a state where it has none:
  a cycle through the whole component takes every step of it and visits every state (Tarjan, iterative).
- `trap(g, relevant, goal, along)`: is there a reachable `relevant` state from which no path through
  `along` states reaches a `goal` state (AG (relevant => EF goal), "completion stays reachable")? On a
  finite graph this possibility property is what makes every run reach the goal under strong fairness of
  every step (a run visits some state infinitely often, so takes each of its steps infinitely often).

A violation is a `Lasso`: the prefix from the initial state, then a cycle repeated forever (for a trap,
a bottom component the run cannot leave; a state with no step at all stutters), every step with its
state. Pure: no I/O; the clock is read only to report seconds. The properties live in
`invariants.liveness_props`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import attrs

from invariants.explore import Model
from invariants.itf import itf_trace

__all__ = ["Graph", "Lasso", "build_graph", "fair_cycle", "trap", "sccs", "render_lasso", "lasso_itf"]


@attrs.frozen
class Graph:
    model: str
    states: tuple[Any, ...]  # by number, in breadth-first order (0: the initial state)
    edges: tuple[tuple[tuple[Any, int], ...], ...]  # per state: (action, next state's number), in action order
    parent: tuple[tuple[int, Any] | None, ...]  # per state: its breadth-first (parent, action); None for 0
    complete: bool  # True iff every reachable state is in (no state bound hit)
    diameter: int
    seconds: float

    @property
    def transitions(self) -> int:
        return sum(len(e) for e in self.edges)


@attrs.frozen
class Lasso:
    """An infinite run: `initial`, the `prefix` steps, then the `cycle` steps forever (each step: action, state)."""

    initial: Any
    prefix: tuple[tuple[Any, Any], ...]
    cycle: tuple[tuple[Any, Any], ...]  # ends in the state the cycle starts from; empty: it stutters there


def build_graph(model: Model, *, max_states: int = 1_000_000) -> Graph:
    """Every state reachable from `model.initial` by `model.step` (no checks run: liveness judges the graph)."""
    t0 = time.perf_counter()
    number: dict[Hashable, int] = {model.initial: 0}
    states: list[Any] = [model.initial]
    edges: list[tuple[tuple[Any, int], ...]] = []
    parent: list[tuple[int, Any] | None] = [None]
    level = [0]
    complete, diameter = True, 0
    i = 0
    while i < len(states):  # breadth-first: states are numbered in discovery order
        s, out = states[i], []
        for action in model.actions(s):
            try:
                nxt = model.step(s, action)
            except model.rejects:
                continue
            j = number.get(nxt)
            if j is None:
                if len(states) >= max_states:
                    complete = False
                    continue
                j = number[nxt] = len(states)
                states.append(nxt)
                parent.append((i, action))
                level.append(level[i] + 1)
                diameter = max(diameter, level[i] + 1)
            out.append((action, j))
        edges.append(tuple(out))
        i += 1
    return Graph(model.name, tuple(states), tuple(edges), tuple(parent), complete, diameter,
                 time.perf_counter() - t0)


def sccs(succ: Callable[[int], Iterable[int]], nodes: Iterable[int]) -> list[list[int]]:
    """Tarjan's strongly connected components of the graph on `nodes` (iterative: no recursion limit), each
    listed after every component it reaches; a node's index is the number of nodes indexed before it."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:  # descend into w; v's remaining successors wait on `work`
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ(w))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:  # every successor of v done
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def fair_cycle(g: Graph, stay: Callable[[Any], bool], fair: Callable[[Any, Any, Any], bool],
               weak: tuple[Callable[[Any], bool], ...] = (),
               along: Callable[[Any, Any, Any], bool] = lambda s, a, n: True) -> Lasso | None:
    """A reachable cycle through `stay` states and `along` steps that takes a `fair` step and is weakly fair
    to each process of `weak` (a predicate on an action: it is that process's step), as a lasso; None if
    there is none. A process is weakly fair in a cycle iff it takes a step there or some state of the cycle
    offers it no step at all (in the whole graph: a step the cycle may not take, such as a commit, still
    counts as offered)."""
    keep = [stay(s) for s in g.states]
    inner = [tuple((a, v) for a, v in out if keep[v] and along(g.states[u], a, g.states[v]))
             for u, out in enumerate(g.edges)]

    def succ(v: int) -> Iterable[int]:
        return (j for _, j in inner[v])

    for comp in sccs(succ, (v for v in range(len(g.states)) if keep[v])):
        inside = set(comp)
        steps = [(u, a, v) for u in sorted(comp) for a, v in inner[u] if v in inside]
        must = next(((u, a, v) for u, a, v in steps if fair(g.states[u], a, g.states[v])), None)
        if must is None:
            continue
        stops: list[tuple[int, Any, int] | int] = [must]  # the steps and states the cycle must pass through
        for process in weak:
            moves = next(((u, a, v) for u, a, v in steps if process(a)), None)
            idle = next((u for u in sorted(comp) if not any(process(a) for a, _ in g.edges[u])), None)
            if moves is None and idle is None:
                break  # this process is offered a step in every state of the component, and never takes one
            stops.append(moves if moves is not None else idle)  # type: ignore[arg-type]
        else:
            start = min(comp)  # the component's first state in breadth-first order
            cycle, at = (), start
            for stop in stops:
                if isinstance(stop, int):
                    cycle, at = cycle + _path(inner, at, stop, inside), stop
                else:
                    u, a, v = stop
                    cycle, at = cycle + _path(inner, at, u, inside) + ((a, v),), v
            return _lasso(g, start, cycle + _path(inner, at, start, inside))
    return None


def trap(g: Graph, relevant: Callable[[Any], bool], goal: Callable[[Any], bool],
         along: Callable[[Any], bool] = lambda s: True) -> Lasso | None:
    """A reachable `relevant` `along` state with no path through `along` states to a `goal` state, as a lasso
    (the prefix to it, then on through `along` states into a bottom component of them); None if there is none."""
    preds: list[list[int]] = [[] for _ in g.states]
    for u, out in enumerate(g.edges):
        for _, v in out:
            preds[v].append(u)
    ok = [along(s) for s in g.states]
    reach = [ok[v] and goal(s) for v, s in enumerate(g.states)]
    todo = deque(v for v in range(len(g.states)) if reach[v])
    while todo:
        v = todo.popleft()
        for u in preds[v]:
            if not reach[u] and ok[u]:
                reach[u] = True
                todo.append(u)
    bad = next((v for v, s in enumerate(g.states) if ok[v] and relevant(s) and not reach[v]), None)
    if bad is None:
        return None
    # Continue from it, through `along` states only, into a bottom component of that subgraph: a run that keeps
    # to `along` and, from there, can never reach a goal.
    below = _reachable(g, bad, ok)
    comps = sccs(lambda v: (j for _, j in g.edges[v] if ok[j]), sorted(below))
    bottom = next(c for c in comps if all(j in set(c) for v in c for _, j in g.edges[v] if ok[j]))
    start, inside = min(bottom), set(bottom)
    lead = _path(g.edges, bad, start, below)
    step_in = next(((a, v) for a, v in g.edges[start] if v in inside), None)
    cycle = () if step_in is None else (step_in,) + _path(g.edges, step_in[1], start, inside)
    return _lasso(g, bad, lead + cycle, prefix_extra=len(lead))


def _reachable(g: Graph, v: int, ok: list[bool]) -> set[int]:
    seen, todo = {v}, [v]
    while todo:
        for _, j in g.edges[todo.pop()]:
            if ok[j] and j not in seen:
                seen.add(j)
                todo.append(j)
    return seen


def _path(edges: Sequence[tuple[tuple[Any, int], ...]], src: int, dst: int,
          within: set[int]) -> tuple[tuple[Any, int], ...]:
    """The shortest steps over `edges` (per state: (action, next state)) from `src` to `dst` through `within`
    (empty if they are the same state); the callers' `dst` is always reachable so."""
    back: dict[int, tuple[int, Any] | None] = {src: None}
    todo = deque([src])
    while dst not in back:
        u = todo.popleft()
        for a, v in edges[u]:
            if v in within and v not in back:
                back[v] = (u, a)
                todo.append(v)
    out = []
    v = dst
    while back[v] is not None:
        u, a = back[v]
        out.append((a, v))
        v = u
    return tuple(reversed(out))


def _lasso(g: Graph, start: int, steps: tuple[tuple[Any, int], ...], prefix_extra: int = 0) -> Lasso:
    """The breadth-first path to `start`, then `steps` (the first `prefix_extra` of them still prefix)."""
    head = []
    v = start
    while g.parent[v] is not None:
        u, a = g.parent[v]
        head.append((a, v))
        v = u
    head.reverse()
    named = [(a, g.states[v]) for a, v in (*head, *steps)]
    cut = len(head) + prefix_extra
    return Lasso(g.states[0], tuple(named[:cut]), tuple(named[cut:]))


def render_lasso(lasso: Lasso) -> str:
    """The lasso as numbered steps, each with the state it led to; the cycle marked, and repeated forever."""
    lines = [f" 0. (initial)\n     {lasso.initial!r}"]
    for i, (a, s) in enumerate(lasso.prefix):
        lines.append(f"{i + 1:>2}. {a!r}\n     -> {s!r}")
    n = len(lasso.prefix)
    if lasso.cycle:
        lines.append(f"-- cycle: steps {n + 1}..{n + len(lasso.cycle)} repeat forever --")
        for i, (a, s) in enumerate(lasso.cycle):
            lines.append(f"{n + i + 1:>2}. {a!r}\n     -> {s!r}")
    else:
        lines.append("-- no step here keeps to the property's states: the run stutters in this state forever --")
    return "\n".join(lines) + "\n"


def lasso_itf(lasso: Lasso, meta: dict[str, Any]) -> dict[str, Any]:
    """The lasso as an ITF trace: the prefix, then the cycle without its last state (the cycle's first state
    again), `loop` the index of that first state; the step that closes the cycle is `#meta.loop_action`."""
    steps = (*lasso.prefix, *lasso.cycle[:-1])
    states = (lasso.initial, *(s for _, s in steps))
    if not lasso.cycle:  # it stutters in its last state: that state loops to itself
        return itf_trace(states, [a for a, _ in steps], {**meta, "loop_action": "stutter"}, len(states) - 1)
    return itf_trace(states, [a for a, _ in steps], {**meta, "loop_action": repr(lasso.cycle[-1][0])},
                     len(lasso.prefix))
