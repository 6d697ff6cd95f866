"""A generic checked machine for the smaller protocol models (issue #5's admission and ORT models).

The ledger has its own `GovernorMachine`; the models added later (KV batching,
co-residency, elastic split, real ORT sessions) are described by a `Model`
value instead: how to draw a configuration, the spec's `init`/`step`, the
implementation factory, an action strategy drawn from the current
abstraction, and the state/step predicates. After every step the machine
checks, as `GovernorMachine` does: (a) the predicates, (b) refinement (same
result, same next abstract state as the spec's step), (c) a rejection raises
the spec's error type and leaves the whole abstraction unchanged (G4).

`run_model_campaign` and `find_model_counterexample` mirror
`invariants.campaign` (fixed seeds; flaky means failed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from invariants import contracts
from invariants._violation import InvariantViolation, RefinementViolation
from invariants.campaign import CampaignStats, ControlResult
from spec.errors import GovernorError
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["ModelAdapter", "Model", "SpecModelAdapter", "make_machine", "run_model_campaign",
           "find_model_counterexample"]


class ModelAdapter(Protocol):
    def execute(self, action: Any) -> Any: ...

    def abstract(self) -> Any: ...


@attrs.frozen
class Model:
    name: str
    configs: Any  # SearchStrategy of configuration values
    init: Callable[[Any], Any]  # config -> spec state
    step: Callable[[Any, Any, GuardSet], tuple[Any, Any]]
    impl: Callable[[Any, GuardSet], ModelAdapter]
    actions: Callable[[Any], Any]  # abstract state -> SearchStrategy of actions
    check_state: Callable[[Any], None]
    check_step: Callable[[Any, Any, Any], None]


class SpecModelAdapter:
    """The spec itself as the implementation (spec-layer negative controls)."""

    def __init__(self, model: Model, config: Any, guards: GuardSet) -> None:
        self.model, self.guards, self.state = model, guards, model.init(config)

    def execute(self, action: Any) -> Any:
        self.state, result = self.model.step(self.state, action, self.guards)
        return result

    def abstract(self) -> Any:
        return self.state


def _diff(a: Any, b: Any) -> str:
    if attrs.has(type(a)) and type(a) is type(b):
        out = [f"{f.name}: {getattr(a, f.name)!r} != {getattr(b, f.name)!r}"
               for f in attrs.fields(type(a)) if getattr(a, f.name) != getattr(b, f.name)]
        return "; ".join(out[:3])
    return f"{a!r} != {b!r}"


class _Base(RuleBasedStateMachine):
    model: Model
    factory: Callable[[Any], ModelAdapter]
    refine: bool = True
    stats: dict[str, Any] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.gov: ModelAdapter | None = None
        self.trace: list[Any] = []

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        config = data.draw(self.model.configs, label="config")
        self.trace.append(config)
        self.gov = type(self).factory(config)
        self.abs = self.gov.abstract()
        if self.refine and self.abs != self.model.init(config):
            raise RefinementViolation(f"initial state is not the spec's: {_diff(self.abs, self.model.init(config))}")
        self.model.check_state(self.abs)
        if self.stats is not None:
            self.stats["examples"] = self.stats.get("examples", 0) + 1

    def teardown(self) -> None:
        close = getattr(self.gov, "close", None)
        if close is not None:
            close()
        if self.stats is not None:
            self.stats["last_trace"] = list(self.trace)

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        self._do(data.draw(self.model.actions(self.abs), label="action"))

    def _do(self, action: Any) -> None:
        assert self.gov is not None
        prev = self.abs
        self.trace.append(action)
        expected, expected_err = None, None
        try:
            expected = self.model.step(prev, action, ALL_ON)
        except GovernorError as e:
            expected_err = e
        result, err = None, None
        try:
            result = self.gov.execute(action)
        except GovernorError as e:
            err = e
        now = self.gov.abstract()
        if self.stats is not None:
            self.stats["steps"] = self.stats.get("steps", 0) + 1
            key = f"rejected:{type(err).__name__}" if err else "accepted"
            self.stats[key] = self.stats.get(key, 0) + 1
        if self.refine:
            if (expected_err is None) != (err is None) or (err is not None and type(err) is not type(expected_err)):
                raise RefinementViolation(f"{action!r}: spec {type(expected_err).__name__ if expected_err else 'accepts'}"
                                          f", implementation {type(err).__name__ + ': ' + str(err) if err else 'accepts'}")
            if expected is not None and (result != expected[1] or now != expected[0]):
                raise RefinementViolation(f"{action!r}: result {result!r} vs spec {expected[1]!r}; "
                                          f"{_diff(now, expected[0])}")
        if err is not None:
            if now != prev:
                raise InvariantViolation("G4", f"{action!r} was rejected but changed {_diff(prev, now)}")
        else:
            self.model.check_step(prev, action, now)
        self.model.check_state(now)
        self.abs = now

    @invariant()
    def abstraction_is_stable(self) -> None:
        if self.gov is not None and self.gov.abstract() != self.abs:
            raise RefinementViolation("abstraction changed without a step")


def make_machine(model: Model, factory: Callable[[Any], ModelAdapter], *, refine: bool = True,
                 stats: dict[str, Any] | None = None) -> type[RuleBasedStateMachine]:
    return type(f"{model.name.title()}Machine", (_Base,), {
        "model": model, "factory": staticmethod(factory), "refine": refine, "stats": stats})


def run_model_campaign(model: Model, cfg: settings) -> CampaignStats:
    """Implementation against the spec, every guard on; an `InvariantViolation` propagates."""
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_state_machine_as_test(make_machine(model, lambda c: model.impl(c, ALL_ON), stats=stats), settings=cfg)
    rejected = {k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith("rejected:")}
    return CampaignStats(stats.get("examples", 0), stats.get("steps", 0), stats.get("accepted", 0),
                         rejected, time.perf_counter() - t0)


def find_model_counterexample(model: Model, g: Guard, layer: Layer, cfg: settings) -> ControlResult:
    """Switch `g` off in `layer`; the spec alone (invariants) or the implementation (refinement) must fail."""
    off = GuardSet.without(g.name)
    if layer is Layer.SPEC:
        factory: Callable[[Any], ModelAdapter] = lambda c: SpecModelAdapter(model, c, off)  # noqa: E731
        refine, accept = False, set(g.ids)
    else:
        factory, refine, accept = (lambda c: model.impl(c, off)), True, set(g.ids) | {"refinement", "G4"}
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    violated, message = None, "no counterexample found"
    try:
        with contracts.contracts(False):
            run_state_machine_as_test(make_machine(model, factory, refine=refine, stats=stats), settings=cfg)
    except InvariantViolation as e:
        violated, message = e.id, str(e)
    trace = tuple(repr(a) for a in stats.get("last_trace", ())) if violated else ()
    return ControlResult(g.name, layer, g.ids, violated in accept, violated,
                         len(trace) if violated else None, time.perf_counter() - t0, trace, message)
