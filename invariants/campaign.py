"""Campaign runners: a checked machine as a measured procedure.

`run_machine` drives an implementation through a `CheckedMachine` subclass
and counts what ran; `hunt` switches one guard off and demands that the
machine find a violation of an ID that guard protects (a negative control).
The composed machine and each of its restrictions run through these two
(`invariants.manager_machine.find_counterexample` gives `hunt` its adapters). By
default all use fixed seeds (`derandomize=True`): a flaky result is a failed one.

Inside `searching(Search(seed=N, database=...))` (what `ortmem verify --seed N`
sets up) each run searches from its own seed, derived from N and the run's
name, so a new N searches new ground and the same N repeats a run exactly;
a campaign (every guard on) keeps any failure it finds in the example
database (a directory, or a Redis URL for a database shared between machines)
and replays it first next time, as Hypothesis does in a test suite. Controls
never use the database: they fail by design, and replaying another run's
counterexample would make their verdict depend on history. Every example and
step is also a progress tick (`invariants.progress`).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import attrs
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.stateful import run_state_machine_as_test

from invariants import contracts
from invariants._violation import ErrorTypeDivergence, InvariantViolation
from invariants.checked import CheckedMachine
from invariants.clauses import CLAUSES, Coverage
from invariants.mutation import Mutant
from invariants.progress import tick
from spec.guards import ALL_ON, Guard, GuardSet, Layer

__all__ = ["CampaignStats", "ControlResult", "Search", "searching", "current_search", "open_database",
           "campaign_settings", "configure", "run_machine", "hunt"]

#: off-guards -> the adapter factory a machine calls (with whatever configuration it draws).
FactoryFor = Callable[[GuardSet], Callable[..., Any]]


@attrs.frozen
class CampaignStats:
    examples: int
    steps: int
    accepted: int
    rejected: dict[str, int]
    seconds: float
    #: Action type -> accepted count (what the campaign really exercised).
    accepted_by_action: dict[str, int] = attrs.field(factory=dict)
    #: Clause key -> [evaluations, evaluations in which the clause's case occurred].
    coverage: dict[str, list[int]] = attrs.field(factory=dict)
    #: Checker-specific counts of what happened inside accepted actions (the ORT campaign: KV growths,
    #: reclaims, arena shrinks, identical-output checks); empty where a checker counts none.
    events: dict[str, int] = attrs.field(factory=dict)

    @staticmethod
    def total(runs: "list[CampaignStats]") -> "CampaignStats":
        """Several campaigns' counts added up (a checker that runs more than one machine)."""
        def add(maps: list[dict[str, int]]) -> dict[str, int]:
            out: dict[str, int] = {}
            for m in maps:
                for k, v in m.items():
                    out[k] = out.get(k, 0) + v
            return out
        cov = Coverage()
        for r in runs:
            cov.add(r.coverage)
        return CampaignStats(sum(r.examples for r in runs), sum(r.steps for r in runs),
                             sum(r.accepted for r in runs), add([r.rejected for r in runs]),
                             sum(r.seconds for r in runs), add([r.accepted_by_action for r in runs]), cov.counts,
                             add([r.events for r in runs]))


@attrs.frozen
class ControlResult:
    guard: str
    layer: Layer
    ids: tuple[str, ...]
    found: bool
    violated: str | None  # the ID the detector named ("refinement" for a divergence)
    steps: int | None  # length of the counterexample (shrunk when the budget asks for it)
    seconds: float
    counterexample: tuple[str, ...]
    message: str
    #: The clause that failed (`predicate.clause`, or "refinement" for a divergence in state or result).
    clause: str | None = None
    #: Every clause the violating step breaks (the first one included), one per predicate.
    clauses: tuple[str, ...] = ()


@attrs.frozen
class Search:
    """How the runs inside `searching` search: their seed and where a campaign keeps its failures."""

    #: None: fixed seeds (derandomized), the default; else each run's seed is derived from it and the run's name.
    seed: int | None = None
    #: A directory, or a `redis://` URL (needs the `[redis]` extra); None: no example database.
    database: str | None = None


_SEARCH: ContextVar[Search] = ContextVar("ortmem_search", default=Search())


@contextmanager
def searching(search: Search) -> Iterator[None]:
    """Run the campaigns and controls inside this block with `search`'s seed and database."""
    token = _SEARCH.set(search)
    try:
        yield
    finally:
        _SEARCH.reset(token)


def current_search() -> Search:
    return _SEARCH.get()


def open_database(where: str) -> ExampleDatabase:
    """The example database at `where`: a `redis://` (or `rediss://`, `unix://`) URL, else a directory."""
    if where.startswith(("redis://", "rediss://", "unix://")):
        # hypothesis[redis]: Hypothesis' own Redis backend, so several machines can share what they found.
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(redis.Redis.from_url(where))
    return DirectoryBasedExampleDatabase(where)


def campaign_settings(max_examples: int, steps: int, *, shrink: bool = True) -> settings:
    # Phase.reuse replays what the example database kept (a no-op without one: see `Search`).
    phases = (Phase.reuse, Phase.generate, Phase.shrink) if shrink else (Phase.reuse, Phase.generate)
    return settings(max_examples=max_examples, stateful_step_count=steps, deadline=None, database=None,
                    derandomize=current_search().seed is None, phases=phases,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)


def _seeded(machine: type[CheckedMachine], name: str) -> type[CheckedMachine]:
    """Give `machine` its own seed under `--seed N` (Hypothesis reads this attribute, as its `@seed` sets it)."""
    seed = current_search().seed
    if seed is not None:
        machine._hypothesis_internal_use_seed = zlib.crc32(f"{seed}:{name}".encode())  # type: ignore[attr-defined]
    return machine


class _LiveStats(dict):  # type: ignore[type-arg]
    """A machine's shared counters; each new example or step is also a progress tick."""

    def __setitem__(self, key: str, value: Any) -> None:
        if key in ("examples", "steps"):
            tick(key)
        super().__setitem__(key, value)


def configure(base: type[CheckedMachine], factory: Callable[..., Any], *, refine: bool = True,
              stats: dict[str, Any] | None = None, tolerate_error_type: bool = False) -> type[CheckedMachine]:
    """A subclass of `base` bound to an adapter factory, refinement on/off and shared counters."""
    return type(base.__name__, (base,), {
        "adapter_factory": staticmethod(factory), "check_refinement": refine, "stats": stats,
        "tolerate_error_type": tolerate_error_type})


def run_machine(base: type[CheckedMachine], factory: Callable[..., Any], cfg: settings, *,
                refine: bool = True) -> CampaignStats:
    """Run the machine; an `InvariantViolation` propagates (the campaign failed)."""
    stats: dict[str, Any] = _LiveStats()
    where = current_search().database
    if where is not None:
        cfg = settings(cfg, database=open_database(where))
    t0 = time.perf_counter()
    run_state_machine_as_test(_seeded(configure(base, factory, refine=refine, stats=stats), base.__name__),
                              settings=cfg)
    return _stats(stats, time.perf_counter() - t0)


def _stats(stats: dict[str, Any], seconds: float) -> CampaignStats:
    rejected = {k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith("rejected:")}
    accepted = {k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith("accepted:")}
    events = {k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith("event:")}
    cov = stats.get("coverage")
    return CampaignStats(stats.get("examples", 0), stats.get("steps", 0), stats.get("accepted", 0),
                         rejected, seconds, accepted, dict(cov.counts) if cov is not None else {}, events)


def hunt(base: type[CheckedMachine], g: Guard | Mutant, layer: Layer, cfg: settings, *,
         spec: FactoryFor, impl: FactoryFor | None) -> ControlResult:
    """Switch guard `g` off in `layer` (or, for a mutant, keep every guard on) and search for a harm.

    Spec layer: the spec alone (`spec(off)`) is driven and only invariants can
    detect. Refimpl layer: the implementation (`impl(off)`) runs with contracts
    off against the intact spec, so refinement (a divergence in state or
    result) or an invariant must detect; two refusals that differ only in
    error type are not a harm and do not count. A mutant (already applied by
    the caller, see `invariants.mutation.applied`) runs with every guard on and
    refinement off in either layer: only the clauses of its IDs can detect it.
    """
    if isinstance(g, Mutant):
        off, refine, accept = ALL_ON, False, set(g.ids)
        factory = spec(off) if layer is Layer.SPEC else _need(impl, g.name)(off)
    elif layer is Layer.SPEC:
        off = GuardSet.without(g.name)
        factory, refine, accept = spec(off), False, set(g.ids)
    else:
        off = GuardSet.without(g.name)
        factory, refine, accept = _need(impl, g.name)(off), True, set(g.ids) | {"refinement", "G4"}
    stats: dict[str, Any] = _LiveStats()
    t0 = time.perf_counter()
    violated, clause, message = None, None, "no counterexample found"
    machine = _seeded(configure(base, factory, refine=refine, stats=stats, tolerate_error_type=True),
                      f"{base.__name__}:{g.name}:{layer.value}")
    try:
        with contracts.contracts(False):
            run_state_machine_as_test(machine, settings=cfg)
    except ErrorTypeDivergence as e:
        violated, clause, message = "refinement:error-type", e.clause, f"not a harm (error type only): {e}"
    except InvariantViolation as e:
        violated, clause, message = e.id, e.clause, str(e)
    except Exception as e:  # noqa: BLE001 - the implementation crashed: reported, never a harm of the ID
        # A mutant can break the implementation's own bookkeeping so that a later call raises (a retired ticket
        # kept in the table is retired twice: KeyError). That is no clause detecting the harm, so it is not
        # `found`; the search stops there and says so instead of taking the whole run down.
        violated, message = "crash", f"the implementation crashed: {type(e).__name__}: {str(e)[:200]}"
    broken: list[str] = [clause] if clause else []
    last = stats.get("last_step")
    if violated and violated != "crash" and not violated.startswith("refinement") and last is not None:
        machine, prev, action, now, accepted = last
        with contracts.contracts(False):
            broken += machine.failing_clauses(prev, action, now, accepted)
    trace = tuple(repr(a) for a in stats.get("last_trace", ())) if violated else ()
    # A harm of the right ID: the first violation, or any clause of the ID the same step breaks.
    found = violated in accept or any(k in CLAUSES and CLAUSES[k].id in accept for k in broken)
    return ControlResult(g.name, layer, g.ids, found, violated,
                         len(trace) if violated else None, time.perf_counter() - t0, trace, message, clause,
                         tuple(dict.fromkeys(broken)))


def _need(impl: FactoryFor | None, name: str) -> FactoryFor:
    if impl is None:
        raise ValueError(f"{name}: a refimpl-layer control needs an implementation factory")
    return impl
