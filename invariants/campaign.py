"""Campaign runners: the stateful checker as a measured procedure.

`run_campaign` drives a governor through the `GovernorMachine` and counts
what ran; `find_counterexample` switches one guard off and demands that the
machine find a violation of an ID that guard protects (a negative control).
Both use fixed seeds (`derandomize=True`): a flaky result is a failed one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.machine import GovernorAdapter, GovernorMachine, SpecAdapter
from spec.guards import Guard, GuardSet, Layer

__all__ = ["CampaignStats", "ControlResult", "run_campaign", "find_counterexample", "campaign_settings"]

AdapterFactory = Callable[[GuardSet], GovernorAdapter]


@attrs.frozen
class CampaignStats:
    examples: int
    steps: int
    accepted: int
    rejected: dict[str, int]
    seconds: float


@attrs.frozen
class ControlResult:
    guard: str
    layer: Layer
    ids: tuple[str, ...]
    found: bool
    violated: str | None  # the ID the detector named ("refinement" for a divergence)
    steps: int | None  # length of the shrunk counterexample
    seconds: float
    counterexample: tuple[str, ...]
    message: str


def campaign_settings(max_examples: int, steps: int, *, shrink: bool = True) -> settings:
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=max_examples, stateful_step_count=steps, deadline=None, database=None,
                    derandomize=True, phases=phases, suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False, print_blob=False)


def _machine(factory: Callable[[], GovernorAdapter], refine: bool, stats: dict[str, Any]) -> type[GovernorMachine]:
    return type("CampaignMachine", (GovernorMachine,), {
        "adapter_factory": staticmethod(factory), "check_refinement": refine, "stats": stats})


def run_campaign(factory: Callable[[], GovernorAdapter], cfg: settings, *, refine: bool = True) -> CampaignStats:
    """Run the machine; an `InvariantViolation` propagates (the campaign failed)."""
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_state_machine_as_test(_machine(factory, refine, stats), settings=cfg)
    rejected = {k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith("rejected:")}
    return CampaignStats(stats.get("examples", 0), stats.get("steps", 0), stats.get("accepted", 0),
                         rejected, time.perf_counter() - t0)


def find_counterexample(g: Guard, layer: Layer, cfg: settings,
                        refimpl_factory: AdapterFactory | None = None) -> ControlResult:
    """Switch guard `g` off in `layer` and search for a violation of an ID it protects.

    Spec layer: the spec alone is driven and only invariants can detect.
    Refimpl layer: refimpl runs with contracts off against the intact spec,
    so refinement (or an invariant on the abstraction) must detect.
    """
    off = GuardSet.without(g.name)
    if layer is Layer.SPEC:
        factory: Callable[[], GovernorAdapter] = lambda: SpecAdapter(off)  # noqa: E731
        refine, accept = False, set(g.ids)
    else:
        assert refimpl_factory is not None
        factory = lambda: refimpl_factory(off)  # noqa: E731
        refine, accept = True, set(g.ids) | {"refinement", "G4"}
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    violated, message = None, "no counterexample found"
    try:
        with contracts.contracts(False):
            run_state_machine_as_test(_machine(factory, refine, stats), settings=cfg)
    except InvariantViolation as e:
        violated, message = e.id, str(e)
    trace = tuple(repr(a) for a in stats.get("last_trace", ())) if violated else ()
    return ControlResult(g.name, layer, g.ids, violated in accept, violated,
                         len(trace) if violated else None, time.perf_counter() - t0, trace, message)
