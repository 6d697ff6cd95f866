"""A generic checked machine for the smaller protocol models (issue #5's admission and ORT models).

The manager's parts have `invariants.manager_machine.ManagerMachine`; the models added later (KV batching,
co-residency, elastic split, real ORT sessions) are described by a `Model`
value instead: how to draw a configuration, the spec's `init`/`step`, the
implementation factory, an action strategy drawn from the current
abstraction, and the state/step predicates. After every step the machine
checks, as `ManagerMachine` does: (a) the predicates, (b) refinement (same
result, same next abstract state as the spec's step), (c) a rejection raises
the spec's error type and leaves the whole abstraction unchanged (G4).

`run_model_campaign` and `find_model_counterexample` mirror
`invariants.campaign` (fixed seeds; flaky means failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from invariants.campaign import CampaignStats, ControlResult, hunt, run_machine
from invariants.checked import CheckedMachine
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
    #: What the implementation's adapter observed during a step (`adapter.take_observations()`), if any.
    check_observations: Callable[[Any], None] | None = None


class SpecModelAdapter:
    """The spec itself as the implementation (spec-layer negative controls)."""

    def __init__(self, model: Model, config: Any, guards: GuardSet) -> None:
        self.model, self.guards, self.state = model, guards, model.init(config)

    def execute(self, action: Any) -> Any:
        self.state, result = self.model.step(self.state, action, self.guards)
        return result

    def abstract(self) -> Any:
        return self.state


def _configs(machine: Any) -> Any:
    return machine.model.configs


def _actions(machine: Any) -> Any:
    return machine.model.actions(machine.abs)


class _Base(CheckedMachine):
    """The configuration and each action are rule arguments, drawn from the running machine (`st.runner()`):
    a failure prints as `state.setup(config=...)`, `state.act(action=Request(...))`, a script that runs
    with the model's action types imported, never as "Draw 3: 2" lines of an `st.data()` draw."""

    model: Model

    @initialize(config=st.runner().flatmap(_configs))
    def setup(self, config: Any) -> None:
        self.trace.append(config)
        self.start(type(self).adapter_factory(config), self.model.init(config))

    @rule(action=st.runner().flatmap(_actions))
    def act(self, action: Any) -> None:
        self._do(action)

    def spec_step(self, state: Any, action: Any) -> tuple[Any, Any]:
        return self.model.step(state, action, ALL_ON)

    def check_state(self, state: Any) -> None:
        self.model.check_state(state)
        take = getattr(self.gov, "take_observations", None)  # only an implementation's adapter observes
        if take is not None and self.model.check_observations is not None:
            self.model.check_observations(take())

    def check_step(self, prev: Any, action: Any, now: Any) -> None:
        self.model.check_step(prev, action, now)


def make_machine(model: Model) -> type[CheckedMachine]:
    """The checked machine of `model` (bind an adapter with `invariants.campaign.configure`)."""
    return type(f"{model.name.title()}Machine", (_Base,), {"model": model})


def run_model_campaign(model: Model, cfg: settings) -> CampaignStats:
    """Implementation against the spec, every guard on; an `InvariantViolation` propagates."""
    return run_machine(make_machine(model), lambda c: model.impl(c, ALL_ON), cfg)


def find_model_counterexample(model: Model, g: Guard, layer: Layer, cfg: settings) -> ControlResult:
    """Switch `g` off in `layer`; the spec alone (invariants) or the implementation (refinement) must fail."""
    return hunt(make_machine(model), g, layer, cfg,
                spec=lambda off: lambda c: SpecModelAdapter(model, c, off),
                impl=lambda off: lambda c: model.impl(c, off))
