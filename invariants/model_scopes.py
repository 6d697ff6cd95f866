"""Explorer scopes for the admission models and the real-session model: deterministic controls beyond the ledger.

Each scope turns one pure spec model into an `explore.Model`: a fixed small
configuration and, per state, every well-typed action the scope allows, in a
fixed order. Breadth-first search then finds a shortest counterexample for a
switched-off guard with no dependence on Hypothesis' search (rule R4 of
`refimpl.verify.verdict_rules`). The session model uses synthetic `ModelFacts` (the spec
takes the reporter's figures as input), so no ONNX Runtime is needed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from invariants import admission as AP
from invariants import sessions as SP
from invariants.explore import ExploreResult, Model, explore
from invariants.manager_scope import COMPLETE_SCOPES, PRESSURE_SCOPE, TX_SCOPE, control_model, manager_model
from spec import admission as AD
from spec import sessions as SS
from spec.errors import GovernorError
from spec.guards import GuardSet
from spec.types import Role

__all__ = ["SCOPES", "explore_scopes", "combine"]


def _model(name: str, initial: Any, step: Callable[..., tuple[Any, Any]], actions: Callable[[Any], Iterator[Any]],
           check_state: Callable[[Any], None], check_step: Callable[[Any, Any, Any], None],
           guards: GuardSet) -> Model:
    return Model(name, initial, lambda s, a: step(s, a, guards)[0], actions, check_state, check_step,
                 (GovernorError,))


# --- KV batching (I12) -----------------------------------------------------------


def _batch_actions(s: AD.BatchState) -> Iterator[Any]:
    if s.next_id <= 3:
        for peak in (1, 2, 3):
            yield AD.Submit(peak)
    for rid in sorted(s.requests):
        yield AD.Advance(rid, 1)
        yield AD.Advance(rid, 2)
        yield AD.Finish(rid)


def batch(guards: GuardSet) -> Model:
    return _model("kv_batch", AD.new_batch(4), AD.step_batch, _batch_actions, AP.check_state,
                  AP.check_transition, guards)


# --- co-residency (I12) ----------------------------------------------------------

_CO = (8, {"p": (3, True), "a": (4, False), "b": (3, False), "c": (5, False), "d": (1, False)})


def _co_actions(s: AD.CoState) -> Iterator[Any]:
    for name in sorted(s.models):
        if s.models[name].work < 2:
            yield AD.Want(name)
        yield AD.Load(name)
        yield AD.Serve(name)
        yield AD.Evict(name)


def coresidency(guards: GuardSet) -> Model:
    return _model("coresidency", AD.new_coresidency(*_CO), AD.step_coresidency, _co_actions, AP.check_state,
                  AP.check_transition, guards)


# --- elastic KV against weights (I8c) ----------------------------------------------


def _elastic_actions(s: AD.ElasticState) -> Iterator[Any]:
    yield AD.Decode()
    yield AD.Decode(0)
    yield AD.Decode(1)
    yield AD.Prefetch()
    yield AD.Retire()


def elastic(guards: GuardSet) -> Model:
    # budget 13: pinned 1 + last growth peak (4 + 6) + headroom 2 fits exactly; the cache takes the rest.
    return _model("elastic", AD.new_elastic(13, 2, 1, 6, 2, 1), AD.step_elastic, _elastic_actions,
                  AP.check_state, AP.check_transition, guards)


# --- real-session model (I3 I8 I8b I8c C7 C8 C9), synthetic reporter figures ---------

_TOPOLOGY = SS.Topology(capacity=4096, reserve=0, granule=256, host_mapped_capacity=1000, headroom=128,
                        source="explorer scope")
_FACTS = SS.ModelFacts(referenced=1000, file_bytes=2000, transient_peak=100, loop_carried=frozenset({"kv"}),
                       bytes_per_token=64, max_context=8, bucket=4)
_LOADS = (
    SS.LoadModel("m", "scope", _FACTS, frozenset({"kv"}), False),
    SS.LoadModel("m", "scope", _FACTS, frozenset(), False),
    SS.LoadModel("m", "scope", _FACTS, None, False),
    SS.LoadModel("m", "scope", _FACTS, frozenset({"kv"}), True),
    SS.LoadModel("big", "scope", SS.ModelFacts(2000, 2000, 100, frozenset(), 0, 0, 0), frozenset(), True),
)


#: With an env arena of 150 B (issue #11): one model's peak (100 B) fits, a second's does not (I8).
_ARENA_TOPOLOGY = attrs.evolve(_TOPOLOGY, arena=150, source="explorer scope, env arena 150 B")
_ARENA_LOADS = _LOADS + (SS.LoadModel("n", "scope", _FACTS, frozenset({"kv"}), False),)


def _session_actions(s: SS.SessionState, loads: tuple[SS.LoadModel, ...] = _LOADS) -> Iterator[Any]:
    for load in loads:
        if load.name not in s.models:
            yield load
    if "m" in s.models and s.next_request <= 2:
        yield SS.Open("m")
    for rid in sorted(s.requests):
        yield SS.Decode(rid)
        yield SS.Close(rid)
    yield SS.Prefetch()
    yield SS.Pressure(512)
    if not s.declined:
        yield SS.Decline(Role.KV)
        yield SS.Decline(Role.WEIGHTS)
    for new in (s.limit - 512, 2048, 5000):
        yield SS.LowerLimit(new)
    for name in sorted(s.models):
        if name not in s.residency:
            yield SS.ObserveResidency(name, 700, "/proc/self/smaps Rss")


#: `sessions` runs without an env arena (arena 0, each peak its own charge): a spec-only configuration
#: (`GovernedRuntime` refuses it), kept as the smaller state space of the rules the arena does not touch;
#: the arena's own rules are explored by `sessions_arena`.
def sessions(guards: GuardSet) -> Model:
    return _model("sessions", SS.new_sessions(_TOPOLOGY, 3072), SS.step_sessions, _session_actions,
                  SP.check_state, SP.check_transition, guards)


def sessions_arena(guards: GuardSet) -> Model:
    return _model("sessions_arena", SS.new_sessions(_ARENA_TOPOLOGY, 3072), SS.step_sessions,
                  lambda s: _session_actions(s, _ARENA_LOADS), SP.check_state, SP.check_transition, guards)


#: Scope per model name, as the checkers name them.
SCOPES: dict[str, Callable[[GuardSet], Model]] = {
    "kv_batch": batch, "coresidency": coresidency, "elastic": elastic, "sessions": sessions,
    "sessions_arena": sessions_arena,
    # The pressure restriction of the composed spec (`invariants.manager_scope.PRESSURE_SCOPE`): the pressure
    # checker's scope, every guard on and each of its guards' controls.
    "manager_pressure": lambda g: manager_model(g, PRESSURE_SCOPE, name="manager_pressure"),
    # The transactions restriction of the composed spec (`invariants.manager_scope.TX_SCOPE`): the transactions
    # checker's scope, every guard on and each of its guards' controls.
    "manager_tx": lambda g: manager_model(g, TX_SCOPE, name="manager_tx"),
    "manager": control_model,  # `invariants.manager_scope`: the composed spec, its guards' controls
    # The composed spec's complete scopes (`invariants.manager_scope.COMPLETE_SCOPES`), symmetry on.
    **{name: (lambda g, scope=scope, name=name: manager_model(g, scope, symmetry=True, name=name))
       for profile in COMPLETE_SCOPES.values() for name, scope in profile.items()},
}


def explore_scopes(names: tuple[str, ...], off: GuardSet, *, max_depth: int | Mapping[str, int],
                   max_states: int) -> ExploreResult:
    """Exhaust each named scope with `off` guards switched off; one result, the first violation (if any) kept.

    `max_depth` is one cut for all, or one per scope name. Each scope's own result is kept in `parts`."""
    runs = []
    for name in names:
        depth = max_depth if isinstance(max_depth, int) else max_depth[name]
        r = explore(SCOPES[name](off), max_depth=depth, max_states=max_states)
        runs.append(r)
        if r.found:
            break
    return combine(runs)


def combine(runs: list[ExploreResult]) -> ExploreResult:
    """One result of several scopes' runs: summed counts, complete iff each is, the first violation kept."""
    bad = next((r for r in runs if r.found), None)
    first = bad or runs[0]
    return ExploreResult("+".join(r.model for r in runs), sum(r.states for r in runs),
                         sum(r.transitions for r in runs), sum(r.rejected for r in runs), max(r.depth for r in runs),
                         all(r.complete for r in runs), sum(r.seconds for r in runs), first.violated,
                         first.message, first.counterexample, first.clause, first.clauses,
                         sum(r.cpu_seconds for r in runs), sum(r.critical_cpu_seconds for r in runs),
                         any(r.bound_hit for r in runs), max(r.diameter for r in runs), first.trace,
                         tuple(runs))
