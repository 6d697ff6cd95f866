# The "ort" checker: a stateful machine over REAL ORT sessions.
#
# Loads built models (weights admitted by referenced bytes), opens requests,
# runs decode steps through ORT with KV growing in buckets, applies pressure,
# lowers limits, declines, observes residency, closes. After every step the
# generic machine (invariants.model_machine) checks refinement against
# `spec.sessions` and the session predicates; this adapter adds the check
# that governance never changes results: each decode's output and KV equal
# an ungoverned session's run on the same inputs, bit for bit. It also reads
# the governor's own trace (one event per ledger operation, delivered as each
# operation returns) and, after every accepted one, compares the bytes charged
# to KV leases with the bytes the open requests' tokens occupy, counted from
# the decodes it ran itself (`observed_I8c_kv_leased`): the inside of a KV
# growth is no state of the spec, so only this can see a lease released early.
#
# Owns: the model zoo for one process (built once, in a temporary folder) and
# the ungoverned reference sessions. Must not touch: the runtime's ledger.

from __future__ import annotations

import os
import tempfile
from typing import Any

import attrs
import numpy as np
from hypothesis import strategies as st

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.campaign import CampaignStats, ControlResult, campaign_settings
from invariants.model_machine import Model, find_model_counterexample, run_model_campaign
from invariants.sessions import KvCover, PaddedTwin, check_observations, check_state, check_transition
from refimpl.verify.checker_api import CheckerRun
from refimpl.ort.faults import INJECTED_RUN_FAILURE, failing_runs
from refimpl.ort.generations import hunt_scripts, run_scripts
from refimpl.ort.device import StandInMemory
from refimpl.ort.governed import GovernedRuntime, decode_input
from refimpl.ort.residency import INJECTED, file_rss, process_rss
from refimpl.ort.session import make_session
from refimpl.ort.measure import weight_bytes
from refimpl.ort.zoo import ENV_ARENA_CAP, build_padded_twins, build_zoo, reporter_facts
from refimpl.topology import scaled_topology
from spec import sessions as S
from spec.arith import kv_bytes
from spec.errors import RunFailed
from spec.guards import ALL_ON, Guard, GuardSet, Layer
from spec.types import Role

__all__ = ["OrtWorld", "OrtAdapter", "OrtChecker", "MAX_CONTEXT", "BUCKET", "CAPACITY", "HEADROOM", "ENV_ARENA_CAP"]

MAX_CONTEXT, BUCKET = 16, 4  # four buckets per request: three growths to max context
CAPACITY, HEADROOM, GRANULE = 512 * 1024, 4096, 4096
LIMITS = (96 * 1024, 160 * 1024, 256 * 1024)
HOST_MAPPED = (0, 32 * 1024)
NAMES = ("a", "b", "c")
#: Every managed session of the campaign allocates from this process's one env arena, capped by ORT at
#: `ENV_ARENA_CAP` bytes [ort:env-arena-cap] (defined once, in `refimpl.ort.zoo`, for every runtime over
#: the zoo). Registering the env arena again would reach only sessions created afterwards, the earlier
#: ones keeping the old cap [ort:env-arena-reregister], so the cap is one per process, not one per
#: runtime's grant. The cap is carved from the host pool's topology (C1: the arena is one lease in that
#: pool, never a second authority) and every limit keeps room for it.


#: Which pool the campaign governs (issue #22 item 3): "host" (the CPU EP, one host pool), "stand-in"
#: (the device path on the CPU EP over a CPU stand-in for device memory: no CUDA), "cuda" (the device
#: path on the CUDA EP; needs a GPU).
PATHS = ("host", "stand-in", "cuda")
_CUDA = "CUDAExecutionProvider"


class OrtWorld:
    """The models, their reporter facts and ungoverned reference sessions, built once per process."""

    def __init__(self, path: str = "host") -> None:
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        self.path = path
        self.provider = _CUDA if path == "cuda" else "CPUExecutionProvider"
        self._dir = tempfile.TemporaryDirectory(prefix="ortmem-zoo-")
        self.sources = build_zoo(self._dir.name)
        self.twins = build_padded_twins(self._dir.name)  # I8's metamorphic twins (more dead space, same graph)
        peak_on = "cuda:0" if path == "cuda" else "cpu"
        self.facts = {k: reporter_facts(p, MAX_CONTEXT, BUCKET, peak_on) for k, p in self.sources.items()}
        # Ungoverned twins: the same ORT options as managed sessions (prepacking off [ort:prepacking]), no
        # governance, on
        # the same EP as the governed sessions.
        self.reference = {k: make_session(p, provider=self.provider, prepack=False) for k, p in self.sources.items()}
        #: The pool's arena: the process's env arena cap on the CPU EP; on CUDA the device arena's lease,
        #: room for the three models' calibrated EP arena caps (a second dec_wide then does not fit).
        peaks = sum(f.transient_peak for f in self.facts.values())
        self.arena_cap = ENV_ARENA_CAP if path != "cuda" else max(ENV_ARENA_CAP, -(-peaks // GRANULE) * GRANULE)
        #: What happened inside accepted actions, summed over every adapter of this world.
        self.events: dict[str, int] = {}

    def count(self, event: str, n: int = 1) -> None:
        self.events[event] = self.events.get(event, 0) + n

    def take_events(self) -> dict[str, int]:
        out, self.events = self.events, {}
        return out

    def load(self, name: str, source: str) -> S.LoadModel:
        """The action loading model `source` as `name`, its loop-carried inputs declared."""
        f = self.facts[source]
        return S.LoadModel(name, source, f, f.loop_carried)

    def topology(self, host_mapped: int = 0, arena: int | None = None) -> S.Topology:
        """The campaign's pool; `arena`: the pool's arena inside it (the world's by default; 0 only for
        the spec's own scopes: `GovernedRuntime` refuses a topology without an arena)."""
        return scaled_topology(CAPACITY, HEADROOM, GRANULE, host_mapped, self.arena_cap if arena is None else arena)

    def runtime(self, topology: S.Topology, limit: int, guards: GuardSet = ALL_ON, trace: Any = None) -> GovernedRuntime:
        """A governed runtime over this world's models, on this world's path."""
        device = StandInMemory() if self.path == "stand-in" else None
        return GovernedRuntime(topology, limit, self.sources, MAX_CONTEXT, BUCKET, guards, provider=self.provider,
                               trace=trace, device=device)


class OrtAdapter:
    """GovernedRuntime plus the identical-output check against ungoverned sessions."""

    def __init__(self, world: OrtWorld, config: tuple[int, int], guards: GuardSet) -> None:
        limit, host_mapped = config
        self.world = world
        self.kv_leases: dict[int, int] = {}  # KV lease id -> bytes charged, folded from the trace
        self.held: dict[int, int] = {}  # open request -> KV bytes its decoded tokens occupy (own count)
        self.observed: list[KvCover | PaddedTwin] = []
        self.rt = world.runtime(world.topology(host_mapped), limit, guards, trace=self._on_event)
        self.sources: dict[str, str] = {}  # loaded name -> source
        self.past: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _on_event(self, e: dict[str, Any]) -> None:
        """One ledger operation, as the governor's trace reports it: fold the KV leases, then observe."""
        p, ids = e["payload"], e["ids"]
        rt = getattr(self, "rt", None)  # events of the runtime's own set-up come before it is assigned
        if rt is None or p.get("outcome") != "accepted" or ids.get("holder") != rt.kv.id:
            return
        if e["kind"] == "reserve" and p.get("role") == Role.KV.value:
            self.kv_leases[p["result"]] = p["nbytes"]  # `ortmem-manager/2`: the issued id is the payload's result
        elif e["kind"] == "commit" and ids.get("allocation") in self.kv_leases:
            self.kv_leases[ids["allocation"]] = p["nbytes"]
        elif e["kind"] in ("release", "cancel"):
            self.kv_leases.pop(ids.get("allocation"), None)
        else:
            return
        where = f"{e['kind']}({', '.join(f'{k}={v}' for k, v in sorted(ids.items()))})"
        self.observed.append(KvCover(where, sum(self.kv_leases.values()), sum(self.held.values())))

    def take_observations(self) -> list[KvCover | PaddedTwin]:
        out, self.observed = self.observed, []
        return out

    def _bpt(self, rid: int) -> int:
        return self.world.facts[self.sources[self.rt.requests[rid][0]]].bytes_per_token

    def execute(self, a: Any) -> Any:
        b = self.rt.kv.bundles.get(a.rid) if isinstance(a, S.Decode) and type(a.rid) is int else None
        tokens, cap = (b.tokens, b.cap) if b is not None else (0, 0)
        cache, shrinks = self.rt.weights.cache_bytes, self.rt.arena_shrinks
        placed, dropped = self.rt.replicas.placed, self.rt.replicas.dropped
        on_replica = b is not None and b.session is not self.rt.models[self.rt.requests[a.rid][0]].session
        if isinstance(a, S.Close) and a.rid in self.held:
            closing = self.held.pop(a.rid)  # the caller is done with its tokens: they need no lease now
        try:
            # A refusal raises: only accepted actions are counted below.
            result = self._run_fails(a) if isinstance(a, S.RunFails) else self.rt.execute(a)
        except BaseException:
            if isinstance(a, S.Close) and a.rid in self.past:
                self.held[a.rid] = closing
            raise
        self.world.count("replicas_placed", self.rt.replicas.placed - placed)
        self.world.count("replicas_dropped", self.rt.replicas.dropped - dropped)
        if on_replica:  # this decode's Run read weights from the borrowed cache
            self.world.count("decodes_on_cache_replica")
        if self.rt.arena_shrinks > shrinks:  # arena pressure answered at this Run boundary
            self.world.count("arena_shrinks", self.rt.arena_shrinks - shrinks)
        if self.rt.weights.cache_bytes < cache:  # the weight holder yielded cache through a pressure ticket
            self.world.count("reclaims")
            self.world.count(f"reclaims:{type(a).__name__}")
        if isinstance(a, S.LoadModel):
            self.sources[a.name] = a.source
            twin = self.world.twins.get(a.source)
            if twin is not None and a.declared is not None:  # managed: charged by its weight files (I8)
                (charged, size), (twin_charged, twin_size) = weight_bytes(self.world.sources[a.source]), weight_bytes(twin)
                self.observed.append(PaddedTwin(a.source, charged, size, twin_charged, twin_size))
        elif isinstance(a, S.Open):
            m = self.rt.models[a.model].measured
            empty = np.zeros((1, m.heads, 0, m.dh), np.float32)
            self.past[result] = (empty, empty)
            self.held[result] = 0
        elif isinstance(a, S.Decode):
            if self.rt.kv.bundles[a.rid].cap != cap:
                self.world.count("kv_growths")
            self._check_identical(a.rid, tokens)
            self.world.count("identical_decodes")
            self.held[a.rid] = kv_bytes(self.past[a.rid][0].shape[2], self._bpt(a.rid))
        elif isinstance(a, S.Close):
            del self.past[a.rid]
        return result

    def _run_fails(self, a: S.RunFails) -> int:
        """The environment event `RunFails`: the decode of `a.rid` with ORT refusing its Run (INJECTED)."""
        b = self.rt.kv.bundles.get(a.rid) if type(a.rid) is int else None
        growth = b is not None and b.tokens >= b.cap
        with failing_runs() as fired:
            try:
                self.rt.execute(S.Decode(a.rid))  # refused as a Decode is (unknown, exhausted, no room): raises
            except RunFailed as e:
                self.world.count("run_failures_injected")
                if growth:
                    self.world.count("run_failures_after_growth")
                return e.released  # type: ignore[attr-defined, no-any-return]
        # The harness's own defect, not the runtime's: the injected fault never reached ORT.
        raise RuntimeError(f"{a!r}: {INJECTED_RUN_FAILURE}, but the decode succeeded ({len(fired)} Runs)")

    def _check_identical(self, rid: int, tokens: int) -> None:
        model = self.rt.requests[rid][0]
        m = self.rt.models[model].measured
        x = decode_input(rid, tokens, m.heads * m.dh)
        pk, pv = self.past[rid]
        y, k, v = self.world.reference[self.sources[model]].run(None, {"x": x, "past_key": pk, "past_value": pv})
        gk, gv = self.rt.kv.present(rid)
        if not (np.array_equal(y, self.rt.last_output) and np.array_equal(k, gk) and np.array_equal(v, gv)):
            # C9: the governed KV bundle (and the output read through it) is the ungoverned run's, bit for bit.
            raise InvariantViolation("C9", f"request {rid} step {tokens}: governed output or KV differs from the "
                                           f"ungoverned run", clause="ort.identical_to_ungoverned")
        self.past[rid] = (k, v)

    def abstract(self) -> S.SessionState:
        return self.rt.abstract()

    def close(self) -> None:
        self.held.clear()  # the run is over: nothing is in use any more
        self.rt.close()


def _actions(world: OrtWorld, s: S.SessionState) -> Any:
    loaded = sorted(s.models.keys())
    rids = sorted(s.requests.keys())
    model = st.sampled_from(loaded * 3 + ["zz"]) if loaded else st.just("zz")
    rid = st.sampled_from(rids * 4 + [0, s.next_request]) if rids else st.sampled_from([0, s.next_request])

    def load(name: str, source: str, decl: str, host_mapped: bool) -> S.LoadModel:
        f = world.facts[source]
        declared = {"full": f.loop_carried, "none": None, "extra": f.loop_carried | {"sampler"},
                    "partial": frozenset(sorted(f.loop_carried)[1:])}[decl]
        return S.LoadModel(name, source, f, declared, host_mapped)

    # Steered (TLC-style coverage showed 3 accepted decodes in a quick run): once a model is loaded, open
    # requests on it; once requests are open, decode them (every decode is a real ORT run checked bit for
    # bit); and observe a loaded model's residency with a well-formed figure. The malformed and unknown
    # choices before them stay, so refusals are still exercised.
    # A load that leaves a loop-carried state undeclared must be refused (C9): drawn here as often as the
    # steered actions below, so the extra branches do not crowd it out.
    steered = [st.builds(load, st.sampled_from(NAMES), st.sampled_from(sorted(world.sources)), st.just("partial"),
                         st.just(False))]
    # The cases C7 and C9 are about must occur too: a host-mapped model (C7) and one in compatibility mode
    # (C9, declared nothing) loaded, while none is; each stays loaded for the steps after it.
    if not any(m.host_mapped for m in s.models.values()):
        steered.append(st.builds(load, st.sampled_from(NAMES), st.sampled_from(sorted(world.sources)),
                                 st.just("full"), st.just(True)))
    if not any(m.mode is S.Mode.COMPAT for m in s.models.values()):
        steered.append(st.builds(load, st.sampled_from(NAMES), st.sampled_from(sorted(world.sources)),
                                 st.just("none"), st.just(False)))
    with_kv = sorted(n for n, m in s.models.items() if m.mode is S.Mode.MANAGED and m.facts.bytes_per_token)
    kv_sources = sorted(k for k, f in world.facts.items() if f.bytes_per_token)
    if not with_kv:  # nothing to open a request on yet: a well-formed load of a model with KV
        steered += [st.builds(load, st.sampled_from(NAMES), st.sampled_from(kv_sources), st.just("full"),
                              st.sampled_from((False, False, True))) for _ in range(3)]
    elif not rids:
        steered += [st.builds(S.Open, st.sampled_from(with_kv)) for _ in range(3)]
    else:
        steered.append(st.builds(S.Open, st.sampled_from(with_kv)))
    if loaded:
        # A well-formed observation of a loaded model: a real figure read from /proc under its source (I8b).
        steered.append(st.builds(lambda m, which: observe(world, m, which), st.sampled_from(loaded),
                                 st.sampled_from(("process", "files"))))
    growing = [r for r in rids if s.requests[r].tokens < s.models[s.requests[r].model].facts.max_context]
    if growing:  # the longest request first, so decodes go past a bucket and KV really grows (I8c)
        deepest = max(growing, key=lambda r: (s.requests[r].tokens, -r))
        # Distinct strategy objects: `one_of` draws each distinct branch once, so `[x] * 3` weighs nothing.
        steered += [st.just(S.Decode(deepest)) for _ in range(5)] + [st.builds(S.Decode, st.sampled_from(growing))]
    return st.one_of(
        st.builds(load, st.sampled_from(NAMES + ("",)), st.sampled_from(sorted(world.sources)),
                  st.sampled_from(("full",) * 4 + ("none", "extra", "partial")), st.sampled_from((False,) * 4 + (True,))),
        st.builds(S.Open, model),
        *[st.builds(S.Decode, rid)] * (8 if rids else 2),  # decodes dominate once requests are open (depth)
        st.builds(S.Close, rid),
        st.builds(S.RunFails, rid),  # the environment: ORT fails this decode's Run (INJECTED) [ort:run-terminate]
        st.just(S.Prefetch()),
        st.builds(S.Pressure, st.sampled_from([1, 4096, 10**6, 0, -1])),
        st.builds(S.Decline, st.sampled_from([Role.WEIGHTS, Role.KV, "weights"])),
        st.builds(S.LowerLimit, st.sampled_from([s.limit - 4096, s.limit // 2, s.used + HEADROOM, HEADROOM - 1,
                                                 max(HEADROOM, s.pinned + HEADROOM - 1), max(HEADROOM, s.pinned + HEADROOM - 1),
                                                 CAPACITY + 1, s.limit + 8192, -1])),
        # Invented figures only under an "injected:" label (and "" / -1: malformed input, refused) ...
        st.builds(S.ObserveResidency, model, st.sampled_from([0, 100, 20000, -1]),
                  st.sampled_from([INJECTED + "fault-injection figure", ""])),
        # ... and real ones, read from /proc when the action is drawn, under their own source (I8b).
        st.builds(lambda m, which: observe(world, m, which), model, st.sampled_from(("process", "files"))),
        *steered,
    )


def observe(world: OrtWorld, model: str, which: str, paths: tuple[str, ...] | None = None) -> S.ObserveResidency:
    """A residency observation with a REAL figure: VmRSS, or smaps Rss of the model files' mappings."""
    fig = process_rss() if which == "process" else file_rss(paths or _files(world))
    if fig is None:  # /proc unreadable: say so rather than put a number under its name
        return S.ObserveResidency(model, 0, INJECTED + "no real residency figure readable here")
    return S.ObserveResidency(model, fig.nbytes, fig.source)


def _files(world: OrtWorld) -> tuple[str, ...]:
    out = []
    for p in world.sources.values():
        base = os.path.dirname(p)
        out.append(p)
        out += [os.path.join(base, n) for n in os.listdir(base) if n.endswith(".bin")]
    return tuple(out)


def ort_model(world: OrtWorld) -> Model:
    configs = st.tuples(st.sampled_from(LIMITS), st.sampled_from(HOST_MAPPED))
    return Model(
        name="ort_sessions",
        configs=configs,
        init=lambda c: S.new_sessions(world.topology(c[1]), c[0]),
        step=S.step_sessions,
        impl=lambda c, g: OrtAdapter(world, c, g),
        actions=lambda s: _actions(world, s),
        check_state=check_state,
        check_step=check_transition,
        check_observations=check_observations,
    )


class OrtChecker:
    """Real ORT sessions under the governor (I3 I8 I8b I8c C7 C8 C9), refimpl vs `spec.sessions`."""

    name = "ort"

    def __init__(self, path: str = "host") -> None:
        self.path = path  # "host" for `ortmem verify`; the device paths run from tests/ort and gpu_check.sh
        self._world: OrtWorld | None = None

    @property
    def world(self) -> OrtWorld:
        if self._world is None:
            self._world = OrtWorld(self.path)
        return self._world

    def campaign(self, budget: Any) -> Any:
        """Hypothesis' random actions plus scripted generations to max context, both fully checked."""
        world = self.world
        world.take_events()
        # A tenth of the ledger campaign's examples, at most 200 (a thirtieth met some clauses' cases under
        # 20 times in quick); the scripted generations below add the depth (three growths per request).
        cfg = campaign_settings(max(1, min(200, budget.campaign_examples // 10)), budget.campaign_steps)
        with contracts.contracts(True):
            random_part = run_model_campaign(ort_model(world), cfg)
            scripted = run_scripts(ort_model(world), world.facts, HEADROOM, scripts_for(budget), paths=world.sources)
        stats = CampaignStats.total([random_part, scripted])
        stats = attrs.evolve(stats, events={**world.take_events(), "scripted_runs": scripted.examples})
        return CheckerRun(stats)

    def control(self, guard: Guard, layer: Layer, budget: Any) -> ControlResult:
        # The scripted generations first (deterministic, and deep: every bucket of every request),
        # then Hypothesis. Refimpl-layer searches drive real sessions: fewer examples, but not so few
        # that a perturbation of generation order (e.g. import order) loses the counterexample.
        found = hunt_scripts(ort_model(self.world), guard, layer, self.world.facts, HEADROOM, CONTROL_SCRIPTS,
                             paths=self.world.sources)
        if found is not None:
            return found
        n = budget.control_examples // (4 if layer is Layer.SPEC else 8)
        cfg = campaign_settings(max(1, n), budget.control_steps, shrink=budget.shrink)
        return find_model_counterexample(ort_model(self.world), guard, layer, cfg)


#: Scripted runs per control: each reaches max context on every request (dozens of decodes).
CONTROL_SCRIPTS = 3


def scripts_for(budget: Any) -> int:
    """Scripted generations per campaign: quick (600 examples) 6, thorough (4000) 40."""
    return max(2, budget.campaign_examples // 100)
