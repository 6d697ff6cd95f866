"""Bounded-exhaustive exploration: breadth-first over every action sequence in a scope.

Generic over the model: a `Model` bundles an initial state, a step function
(`step(state, action) -> next state`, raising one of `rejects` for a disabled
action), an action enumerator (`actions(state)`: every action to try there,
which is what bounds the scope) and the invariant checks (`check_state`,
`check_step`, raising `InvariantViolation`). States must be hashable: they
are deduplicated, so each distinct state is expanded once.

Breadth-first order makes the first counterexample a shortest one; it is
returned as the action list from the initial state. The ledger's scope lives
in `invariants.ledger_scope`; other protocols plug in their own `Model`.

Pure: no I/O, no threads. The clock is read only to report states per second.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections import deque
from collections.abc import Iterator
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.progress import tick
from invariants.clauses import collecting

__all__ = ["Model", "ExploreResult", "explore", "replay_states", "render_counterexample", "no_cyclic_gc"]


@attrs.frozen
class Model:
    """Everything the explorer needs to know about one specification."""

    name: str
    initial: Hashable
    step: Callable[[Any, Any], Any]
    actions: Callable[[Any], Iterable[Any]]
    check_state: Callable[[Any], None]
    check_step: Callable[[Any, Any, Any], None]
    #: Exceptions `step` raises for a disabled action (the state stays unchanged).
    rejects: tuple[type[BaseException], ...] = ()
    #: The seen-set's key of a state (None: the state itself). A symmetry reduction's orbit key
    #: (`invariants.explore_symmetry`) keeps one state per orbit; it must meet that module's soundness rules.
    key: Callable[[Any], Hashable] | None = None


@attrs.frozen
class ExploreResult:
    model: str
    states: int  # distinct states reached (initial included)
    transitions: int  # accepted steps tried (each checked)
    rejected: int  # disabled actions tried
    depth: int  # deepest level fully or partly expanded
    #: True iff a fixpoint: every reachable state was found and expanded (no state left at the depth cut, no state
    #: bound hit, no violation). Only then is the run "complete"; otherwise it covers every state "to depth d".
    complete: bool
    seconds: float
    violated: str | None  # the ID of the first violation found, else None
    message: str
    counterexample: tuple[Any, ...]  # shortest action list reaching the violation
    clause: str | None = None  # the clause that failed (`predicate.clause`)
    clauses: tuple[str, ...] = ()  # every clause the violating step breaks (one per predicate)
    #: CPU seconds used, all processes together, and along the critical path (the serial explorer's are its own
    #: CPU time; a parallel one's, per level, the busiest worker's): unlike `seconds`, these do not grow with load
    #: from other processes, so they estimate a speedup on idle cores where the machine is shared.
    cpu_seconds: float = 0.0
    critical_cpu_seconds: float = 0.0
    bound_hit: bool = False  # True iff `max_states` stopped the search (some state within the depth cut unexpanded)
    diameter: int = 0  # the greatest breadth-first depth of a state reached (of the whole graph iff `complete`)
    #: The states along the counterexample: the initial one, then the state after each action (empty if none).
    trace: tuple[Any, ...] = ()
    #: The per-scope results a combined run is made of (`invariants.model_scopes.explore_scopes`), else empty.
    parts: tuple["ExploreResult", ...] = ()

    @property
    def exhausted(self) -> bool:
        """Every state within the depth cut was expanded (no state bound hit, no violation): "to depth d"."""
        return not self.bound_hit and not self.found

    @property
    def coverage(self) -> str:
        """How much of the scope the run covered, in words: "complete" only for a fixpoint."""
        if self.found:
            return f"stopped at a violation at depth {len(self.counterexample)}"
        if self.bound_hit:
            return f"state bound hit at depth {self.depth}"
        return f"complete, diameter {self.diameter}" if self.complete else f"to depth {self.depth}"

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float(self.states)

    @property
    def found(self) -> bool:
        return self.violated is not None


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the block (restored after, as it was).

    An exploration keeps every state it saw alive, so each full collection walks all of them again
    (about a tenth of the composed scope's time); the states are acyclic immutable records, freed by
    reference counting, and any cyclic garbage a model makes is collected once the block ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def explore(model: Model, *, max_depth: int, max_states: int = 1_000_000, fingerprints: bool = False) -> ExploreResult:
    """Expand every state reachable in <= max_depth steps; stop at the first violation.

    With `fingerprints`, the seen-set keeps each state's 64-bit hash instead of the state (TLC's
    fingerprints): less memory and no deep equality on a revisit, at the price of a collision
    (two distinct states, one hash) silently pruning a state, which is rare but possible.
    """
    with no_cyclic_gc():
        return _explore(model, max_depth, max_states, fingerprints)


def _explore(model: Model, max_depth: int, max_states: int, fingerprints: bool) -> ExploreResult:
    t0, c0 = time.perf_counter(), time.process_time()
    canon = model.key or _same
    key: Callable[[Any], Hashable] = (lambda s: hash(canon(s))) if fingerprints else canon
    parent: dict[Hashable, tuple[Hashable, Any] | None] = {key(model.initial): None}
    frontier: deque[tuple[Hashable, int]] = deque([(model.initial, 0)])
    transitions = rejected = depth = diameter = 0
    bound_hit = cut = False

    def done(violated: str | None, message: str, path: tuple[Any, ...], clause: str | None = None,
             broken: tuple[str, ...] = ()) -> ExploreResult:
        cpu = time.process_time() - c0
        fixpoint = not (bound_hit or cut) and violated is None
        return ExploreResult(model.name, len(parent), transitions, rejected, depth, fixpoint,
                             time.perf_counter() - t0, violated, message, path, clause, broken, cpu, cpu,
                             bound_hit, diameter, replay_states(model, path) if violated else ())

    try:
        model.check_state(model.initial)
    except InvariantViolation as e:
        return done(e.id, str(e), (), e.clause)
    while frontier:
        state, d = frontier.popleft()
        if d >= max_depth:
            cut = True  # not expanded: whether it has an unseen successor is not known
            continue
        depth = max(depth, d + 1)
        here = key(state)
        for action in model.actions(state):
            try:
                nxt = model.step(state, action)
            except model.rejects:
                rejected += 1
                continue
            transitions += 1
            k = key(nxt)
            seen = k in parent
            try:
                model.check_step(state, action, nxt)
                if not seen:
                    model.check_state(nxt)
            except InvariantViolation as e:
                with collecting() as found:
                    try:  # a model whose checks are not registry conjunctions still raises here
                        model.check_step(state, action, nxt)
                        model.check_state(nxt)
                    except InvariantViolation:
                        pass
                broken = tuple(dict.fromkeys([e.clause or e.id, *found]))
                return done(e.id, str(e), _path(parent, here) + (action,), e.clause, broken)
            if seen:
                continue
            if len(parent) >= max_states:
                bound_hit = True
                continue
            parent[k] = (here, action)
            diameter = max(diameter, d + 1)
            frontier.append((nxt, d + 1))
            if len(parent) % 1024 == 0:  # live count for `ortmem verify`'s progress (a no-op elsewhere)
                tick("states", 1024)
    return done(None, "no violation", ())


def _same(state: Hashable) -> Hashable:
    return state


def _path(parent: dict[Hashable, tuple[Hashable, Any] | None], state: Hashable) -> tuple[Any, ...]:
    out: list[Any] = []
    link = parent[state]
    while link is not None:
        state, action = link
        out.append(action)
        link = parent[state]
    return tuple(reversed(out))


def replay_states(model: Model, actions: tuple[Any, ...]) -> tuple[Any, ...]:
    """The states an action list passes through from the initial state (the initial one first)."""
    out = [model.initial]
    for a in actions:
        out.append(model.step(out[-1], a))
    return tuple(out)


def render_counterexample(r: ExploreResult) -> str:
    """The counterexample as numbered steps, each action followed by the state it led to; the violation last."""
    lines = [f" 0. (initial)\n     {r.trace[0]!r}"] if r.trace else []
    for i, a in enumerate(r.counterexample):
        lines.append(f"{i + 1:>2}. {a!r}")
        if r.trace:  # empty (a scripted control's result) or one state per action after the initial one
            lines.append(f"     -> {r.trace[i + 1]!r}")
    lines.append(f"=> {r.message}" if r.found else "=> no violation")
    return "\n".join(lines) + "\n"
