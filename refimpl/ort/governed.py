# GovernedRuntime: real ORT sessions under the ProcessMemoryManager. It is
# the implementation `spec.sessions` specifies, written independently: it
# measures each model's facts itself (referenced extents, transient peak,
# loop-carried state, KV geometry), leases through holders, runs ORT, and
# maps its ledger back to `spec.sessions.SessionState` in `abstract()`.
#
# Owns: admission policy over one host authority and a governed limit under
# it (limit lowering: prepare -> reclaim -> commit, C8), decline (I3),
# compatibility mode (C9), residency observations (I8b). The session is a
# reporter, not a holder: leases belong to the weight and KV holders, and the
# transient peak to the arena holder. Never calls spec transition code.
# Reclaim goes through issue #3's pressure protocol: `_make_room`, `Pressure`
# and limit lowering open a pressure ticket on the weight holder
# (`WeightHolder.reclaim` -> `refimpl.reclaim.ReclaimChannel`); the holder's
# callback answers with its own unpinned, idle cache buckets, and growth
# proceeds only with the credited bytes (short credit -> CapacityDenied).

from __future__ import annotations

import functools
import os
from typing import Any

import attrs
import immutables
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from invariants._violation import InvariantViolation
from refimpl.governor import ProcessMemoryManager
from refimpl.ort.extents import referenced_extents
from refimpl.ort.holders import KvHolder, WeightHolder
from refimpl.ort.reporter import calibrate_transient_peak
from refimpl.ort.session import make_session
from spec import sessions as S
from spec.arith import admitted_bytes, kv_bytes, kv_growth_peak, round_up
from spec.errors import (
    BudgetBelowFloor,
    CapacityDenied,
    ContextExhausted,
    GovernorError,
    HostMappedCapacityExceeded,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ModelDataError,
    ModelFileInvalid,
    SessionCreationFailed,
    UndeclaredState,
    UnknownAllocation,
)
from spec.guards import ALL_ON, GuardSet
from spec.types import Role, Tier

__all__ = ["GovernedRuntime", "MeasuredModel", "measure", "loop_carried", "decode_input"]


def loop_carried(model: onnx.ModelProto) -> frozenset[str]:
    """State the graph carries from one run to the next: inputs past_X fed by outputs present_X."""
    outs = {o.name for o in model.graph.output}
    return frozenset(i.name for i in model.graph.input
                     if i.name.startswith("past_") and "present_" + i.name[5:] in outs)


def _kv_geometry(model: onnx.ModelProto) -> tuple[int, int]:
    for i in model.graph.input:
        if i.name == "past_key":
            dims = i.type.tensor_type.shape.dim
            return dims[1].dim_value, dims[3].dim_value
    return 0, 0


@attrs.frozen
class MeasuredModel:
    path: str
    facts: S.ModelFacts
    heads: int
    dh: int


def measure(path: str, max_context: int, bucket: int) -> MeasuredModel:
    """The runtime's own measurement; a missing, empty, truncated or corrupt file is `ModelFileInvalid`."""
    if type(path) is not str or not os.path.isfile(path):
        raise ModelFileInvalid(f"model file {path!r} does not exist or is not a regular file")
    if os.path.getsize(path) == 0:
        raise ModelFileInvalid(f"model file {path!r} is empty")
    try:
        return _measure(path, max_context, bucket)
    except ModelDataError:
        raise
    except Exception as e:  # DecodeError, StopIteration, ORT's InvalidProtobuf / Fail, OSError ...
        raise ModelFileInvalid(f"model file {path!r} is not a usable ONNX model: {type(e).__name__}: {e}") from e


@functools.lru_cache(maxsize=32)
def _measure(path: str, max_context: int, bucket: int) -> MeasuredModel:
    """The runtime's own measurement: referenced extents (never file sizes), the peak at max context."""
    rep = referenced_extents(path)  # typed errors for missing / overlapping / out-of-range ranges
    referenced = rep.referenced_bytes + rep.embedded_bytes
    file_bytes = os.path.getsize(path) + rep.file_bytes
    proto = onnx.load(path, load_external_data=False)
    heads, dh = _kv_geometry(proto)
    carried = loop_carried(proto)
    if carried:
        d = heads * dh
        past = np.zeros((1, heads, max_context - 1, dh), np.float32)
        feeds = [{"x": np.ones((1, 1, d), np.float32), "past_key": past, "past_value": past}]
    else:
        x = next(i for i in proto.graph.input)
        n = x.type.tensor_type.shape.dim[1].dim_value
        feeds = [{x.name: np.ones((1, n), np.float32)}]
    peak = calibrate_transient_peak(path, feeds)[0].transient_peak_bytes
    bpt = 2 * 2 * heads * dh * 4 if carried else 0  # K and V, two ping-pong sides, float32
    facts = S.ModelFacts(referenced, file_bytes, peak, carried, bpt, max_context if carried else 0,
                         bucket if carried else 0)
    return MeasuredModel(path, facts, heads, dh)


def decode_input(rid: int, step: int, d_model: int) -> np.ndarray:
    """The deterministic token input of request `rid` at `step` (governed and reference runs share it)."""
    return np.random.default_rng(rid * 100_003 + step).standard_normal((1, 1, d_model)).astype(np.float32)


class _Loaded:
    __slots__ = ("measured", "mode", "weights_lease", "arena_lease", "unattributed", "declared", "host_mapped",
                 "session")

    def __init__(self, measured: MeasuredModel, mode: S.Mode, declared: frozenset[str] | None,
                 host_mapped: bool) -> None:
        self.measured, self.mode, self.declared, self.host_mapped = measured, mode, declared, host_mapped
        self.weights_lease: int | None = None
        self.arena_lease: int | None = None
        self.unattributed = 0
        self.session: Any = None


def _path_peak(f: S.ModelFacts) -> int:
    """The largest KV charge on one request's way to max context: the last growth, old and new buffers live."""
    if f.max_context <= f.bucket:
        return f.max_context * f.bytes_per_token
    last = (f.max_context - 1) // f.bucket * f.bucket
    return (last + f.max_context) * f.bytes_per_token


class GovernedRuntime:
    """One host pool, a governed limit, real sessions; `execute` takes `spec.sessions` actions."""

    def __init__(self, topology: S.Topology, limit: int, sources: dict[str, str], max_context: int = 16,
                 bucket: int = 4, guards: GuardSet = ALL_ON, trace: Any = None) -> None:
        if type(limit) is not int or not 0 <= limit <= topology.capacity:
            raise InvalidBytes(f"limit must be an int in [0, {topology.capacity}], got {limit!r}")
        if limit < topology.headroom:
            raise BudgetBelowFloor(f"limit {limit} is below the headroom {topology.headroom}")
        self.topology, self.limit, self.sources, self.guards = topology, limit, sources, guards
        self.max_context, self.bucket = max_context, bucket
        self.pmm = ProcessMemoryManager(trace=trace)  # `trace`: a sink for one event per ledger operation
        self.auth = self.pmm.register_authority("host", Tier.HOST, topology.capacity)
        self.weights = WeightHolder(self.pmm, self.auth, topology.capacity)
        self.kv = KvHolder(self.pmm, self.auth)
        self.arena = self.pmm.register_holder("arena")
        self.models: dict[str, _Loaded] = {}
        self.requests: dict[int, tuple[str, int]] = {}  # rid -> (model, kv capacity in tokens)
        self.declined: set[Role] = set()
        self.not_enforced: set[str] = set()
        self.residency: dict[str, S.Residency] = {}
        self.next_request = 1
        self.last_output: np.ndarray | None = None

    # --- figures ---------------------------------------------------------

    def used(self) -> int:
        return self.pmm.snapshot(self.auth).used  # the ledger is the source of every charge

    def _pinned(self) -> int:
        return self.used() - self.weights.cache_bytes

    def _make_room(self, nbytes: int) -> int:
        """Ask the weight holder to yield the cache bytes that `nbytes` more need (elastic path, I8c)."""
        over = self.used() + nbytes + self.topology.headroom - self.limit
        if over <= 0:
            return 0
        credited = self.weights.reclaim(over)  # a pressure ticket on the weight holder (C5)
        if credited < over:  # zero is legal for the holder; the requester fails, nothing is forced
            raise CapacityDenied(f"the weight holder's answer credited {credited} of {over} B")
        return credited

    # --- actions ---------------------------------------------------------

    def execute(self, a: Any) -> Any:
        handler = {S.LoadModel: self._load, S.Open: self._open, S.Decode: self._decode, S.Close: self._close,
                   S.Prefetch: self._prefetch, S.Pressure: self._pressure, S.Decline: self._decline,
                   S.LowerLimit: self._lower, S.ObserveResidency: self._observe}.get(type(a))
        if handler is None:
            raise InvalidArgument(f"not a session action: {a!r}")
        return handler(a)

    def _load(self, a: S.LoadModel) -> int:
        if type(a.name) is not str or not a.name:
            raise InvalidArgument(f"name must be a non-empty str, got {a.name!r}")
        if a.name in self.models:
            raise InvalidTransition(f"model {a.name!r} is already loaded")
        if type(a.source) is not str or a.source not in self.sources or not isinstance(a.facts, S.ModelFacts):
            raise InvalidArgument(f"unknown model source {a.source!r:.80}")
        if a.declared is not None and (type(a.declared) is not frozenset
                                       or not all(type(x) is str for x in a.declared)):
            raise InvalidArgument(f"declared must be None or a frozenset of state names, got {a.declared!r:.80}")
        if type(a.host_mapped) is not bool:
            raise InvalidArgument(f"host_mapped must be a bool, got {a.host_mapped!r:.80}")
        m = measure(self.sources[a.source], self.max_context, self.bucket)
        f, t = m.facts, self.topology
        if a.host_mapped and f.referenced > t.host_mapped_capacity and self.guards.on("host_mapped_capacity"):  # C7
            raise HostMappedCapacityExceeded(f"{a.name}: {f.referenced} B host-mapped, {t.host_mapped_capacity} B")
        if a.declared is None or Role.WEIGHTS in self.declined:
            rec = _Loaded(m, S.Mode.COMPAT if a.declared is None else S.Mode.DECLINED, a.declared, a.host_mapped)
            rec.unattributed = f.referenced + f.transient_peak
            try:
                rec.session = make_session(m.path)
            except Exception as e:
                if isinstance(e, (GovernorError, InvariantViolation)):
                    raise
                raise SessionCreationFailed(f"{a.name}: ORT could not create the session: {e}") from e
            if self.guards.on("honest_decline"):  # I3
                self.not_enforced.add(f"model:{a.name}" if a.declared is None else Role.WEIGHTS.value)
            self.models[a.name] = rec
            return 0
        missing = f.loop_carried - a.declared
        if missing and self.guards.on("declare_loop_carried"):  # C9
            raise UndeclaredState(f"{a.name}: loop-carried {sorted(missing)} not declared")
        counted = f.referenced if self.guards.on("referenced_extents") else f.file_bytes  # I8
        weights = round_up(counted, t.granule)
        if self._pinned() + admitted_bytes(counted, t.granule, f.transient_peak) + t.headroom > self.limit:
            raise CapacityDenied(f"{a.name}: does not fit even with the weight cache reclaimed")
        released = self._make_room(weights + f.transient_peak)
        rec = _Loaded(m, S.Mode.MANAGED, a.declared, a.host_mapped)
        try:
            self._admit_session(a.name, rec, weights)
        except BaseException as e:
            self._undo_admission(a.name, rec)  # every lease taken for it goes back: nothing stays charged
            if isinstance(e, Exception) and not isinstance(e, (CapacityDenied, InvariantViolation)):
                raise SessionCreationFailed(f"{a.name}: ORT failed after admission ({type(e).__name__}: {e}); "
                                            "its weight and arena leases were returned") from e
            raise
        self.models[a.name] = rec
        return released

    def _admit_session(self, name: str, rec: _Loaded, weights: int) -> None:
        m, f = rec.measured, rec.measured.facts
        proto = onnx.load(m.path)
        arrays = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_mem_pattern = False
        rec.weights_lease = self.weights.admit(name, weights, arrays, so)
        if f.transient_peak:
            rec.arena_lease = self.pmm.reserve(self.arena, self.auth, Tier.HOST, f.transient_peak, Role.ARENA)
            self.pmm.commit(self.arena, rec.arena_lease, f.transient_peak)
        rec.session = ort.InferenceSession(m.path, so, providers=["CPUExecutionProvider"])

    def _undo_admission(self, name: str, rec: _Loaded) -> None:
        if rec.arena_lease is not None:
            held = self.pmm.abstract().allocations.get(rec.arena_lease)
            if held is not None and held.state.value == "provisional":
                self.pmm.cancel(self.arena, rec.arena_lease)
            elif held is not None:
                self.pmm.release(self.arena, rec.arena_lease)
            rec.arena_lease = None
        if name in self.weights.models:
            self.weights.evict(name)
        rec.weights_lease, rec.session = None, None

    def _open(self, a: S.Open) -> int:
        rec = self.models.get(a.model) if type(a.model) is str and a.model else None
        if type(a.model) is not str or not a.model:
            raise InvalidArgument(f"model must be a non-empty str, got {a.model!r}")
        if rec is None or rec.mode is not S.Mode.MANAGED or not rec.measured.facts.bytes_per_token:
            raise InvalidTransition(f"{a.model!r} is not a loaded, managed model with KV")
        f = rec.measured.facts
        weights = sum(self._charge(r.weights_lease) + self._charge(r.arena_lease) for r in self.models.values())
        paths = sum(_path_peak(self.models[m].measured.facts) for m, _ in self.requests.values()) + _path_peak(f)
        if weights + paths + self.topology.headroom > self.limit:  # I8c: guaranteed path for every request
            raise CapacityDenied(f"{a.model}: no guaranteed path to max context")
        cap = min(f.bucket, f.max_context)
        released = self._make_room(kv_bytes(cap, f.bytes_per_token))
        rid, self.next_request = self.next_request, self.next_request + 1
        self.kv.open(rid, rec.measured.heads, rec.measured.dh, cap, f.bytes_per_token)
        self.requests[rid] = (a.model, cap)
        return rid

    def _request(self, rid: object) -> tuple[str, int]:
        if type(rid) is not int or rid not in self.requests:
            raise UnknownAllocation(f"request {rid!r} is not open")
        return self.requests[rid]

    def _decode(self, a: S.Decode) -> int:
        model, cap = self._request(a.rid)
        rec = self.models[model]
        f = rec.measured.facts
        tokens = self.kv.bundles[a.rid].tokens
        if tokens >= f.max_context:
            raise ContextExhausted(f"request {a.rid} holds {tokens} = max context")
        released = 0
        if tokens == cap:
            new = min(cap + f.bucket, f.max_context)
            extra = kv_growth_peak(cap, new, f.bytes_per_token) - kv_bytes(cap, f.bytes_per_token)
            if self._pinned() + extra + self.topology.headroom > self.limit:
                raise CapacityDenied(f"request {a.rid}: growth needs {extra} B")
            released = self._make_room(extra)
            self.kv.grow(a.rid, new, f.bytes_per_token)
            self.requests[a.rid] = (model, new)
        x = decode_input(a.rid, tokens, rec.measured.heads * rec.measured.dh)
        self.last_output = self.kv.step(a.rid, rec.session, x)
        return released

    def _close(self, a: S.Close) -> None:
        self._request(a.rid)
        self.kv.close(a.rid)
        del self.requests[a.rid]

    def _prefetch(self, a: S.Prefetch) -> int:
        room = self.limit - self.used() - self.topology.headroom
        if room > 0:
            self.weights.fill(room)
        return max(0, room)

    def _pressure(self, a: S.Pressure) -> int:
        if type(a.target) is not int or a.target <= 0:
            raise InvalidBytes(f"target must be a positive int, got {a.target!r}")
        return self.weights.reclaim(a.target)

    def _decline(self, a: S.Decline) -> None:
        if not isinstance(a.role, Role):
            raise InvalidArgument(f"role must be a Role, got {a.role!r}")
        self.declined.add(a.role)
        if self.guards.on("honest_decline"):  # I3
            self.not_enforced.add(a.role.value)

    def _lower(self, a: S.LowerLimit) -> S.LoweringReport:
        new = a.new
        if type(new) is not int or new < 0 or new > self.topology.capacity:
            raise InvalidBytes(f"limit must be an int in [0, {self.topology.capacity}], got {new!r}")
        if new < self.topology.headroom:
            raise BudgetBelowFloor(f"limit {new} is below the headroom {self.topology.headroom}")
        old = self.limit
        over = self.used() + self.topology.headroom - new  # prepare
        released = self.weights.reclaim(over) if over > 0 else 0  # reclaim
        done = (("reclaim weight cache", released),) if released else ()
        ok = self.used() + self.topology.headroom <= new
        if ok or not self.guards.on("lower_limit_atomic"):  # C8: commit only if it holds
            self.limit = new
        return S.LoweringReport(ok, old, new, done)

    def _observe(self, a: S.ObserveResidency) -> None:
        if type(a.model) is not str or not a.model:
            raise InvalidArgument(f"model must be a non-empty str, got {a.model!r}")
        rec = self.models.get(a.model)
        if rec is None:
            raise InvalidTransition(f"model {a.model!r} is not loaded")
        if type(a.nbytes) is not int or a.nbytes < 0:
            raise InvalidBytes(f"nbytes must be a non-negative int, got {a.nbytes!r}")
        if type(a.source) is not str or not a.source:
            raise InvalidArgument(f"source must be a non-empty str, got {a.source!r}")
        if not self.guards.on("residency_not_charge") and rec.mode is S.Mode.MANAGED:  # I8b
            # Negative control: a demotion rewrites the weight lease to the observed size.
            self.pmm.release(self.weights.id, rec.weights_lease)
            if rec.arena_lease is not None:
                self.pmm.release(self.arena, rec.arena_lease)
                rec.arena_lease = None
            rec.weights_lease = self.pmm.record_committed(self.weights.id, self.auth, Tier.HOST,
                                                          max(1, a.nbytes), Role.WEIGHTS)
            self.weights.models[a.model] = (rec.weights_lease, self.weights.models[a.model][1])
        self.residency[a.model] = S.Residency(a.nbytes, a.source)

    # --- the refinement mapping -------------------------------------------

    def _charge(self, lease: int | None, allocs: Any = None) -> int:
        if lease is None:
            return 0
        allocs = allocs if allocs is not None else self.pmm.abstract().allocations
        return allocs[lease].charge

    def abstract(self) -> S.SessionState:
        allocs = self.pmm.abstract().allocations
        models = {}
        for name, r in self.models.items():
            f = r.measured.facts
            admitted = self._charge(r.weights_lease, allocs) + self._charge(r.arena_lease, allocs)
            models[name] = S.LoadedModel(f, r.mode, admitted, r.unattributed, r.mode is not S.Mode.COMPAT,
                                         r.declared, r.host_mapped)
        reqs = {rid: S.Request(m, self.kv.bundles[rid].tokens, cap) for rid, (m, cap) in self.requests.items()}
        return S.SessionState(self.topology, self.limit, immutables.Map(models), immutables.Map(reqs),
                              self.weights.cache_bytes, frozenset(self.declined), frozenset(self.not_enforced),
                              immutables.Map(self.residency), self.next_request)

    def report(self) -> S.GovernanceReport:
        """C8's figures read from the manager's ledger (this runtime's own computation, not the spec's)."""
        allocs = self.pmm.abstract().allocations
        weights = sum(self._charge(r.weights_lease, allocs) + self._charge(r.arena_lease, allocs)
                      for r in self.models.values())
        kv = sum(cap * self.models[m].measured.facts.bytes_per_token for m, cap in self.requests.values())
        cache = self.weights.cache_bytes
        used = weights + kv + cache
        return S.GovernanceReport(
            unit="charge (bytes)", limit=self.limit, used=used, available=max(0, self.limit - used),
            oversubscribed=max(0, used - self.limit), reclaimable=cache,
            unattributed=sum(r.unattributed for r in self.models.values()),
            by_role=((Role.WEIGHTS.value, weights), (Role.KV.value, kv), ("weight cache", cache)),
            not_enforced=frozenset(self.not_enforced),
            residency=tuple((k, v.nbytes, v.source) for k, v in sorted(self.residency.items())))

    def close(self) -> None:
        for rid in list(self.requests):
            self.kv.close(rid)
        self.requests.clear()
        self.weights.close()
        for r in self.models.values():
            if r.arena_lease is not None:
                self.pmm.release(self.arena, r.arena_lease)
            r.session = None
        self.models.clear()
