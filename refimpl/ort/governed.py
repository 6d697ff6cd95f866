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
# Reclaim goes through the one manager's pressure part (issue #10):
# `_make_room`, `Pressure` and limit lowering open a pressure ticket on the
# weight holder (`WeightHolder.reclaim` -> `pmm.press`); the holder's callback
# answers with its own unpinned, idle cache buckets, and growth proceeds only
# with the credited bytes (short credit -> CapacityDenied). The governed limit
# is the authority's limit in the manager (issue #11): construction sets it
# through the limits part, `LowerLimit` goes prepare -> pressure -> commit
# there (or keeps the old limit), and `self.limit` reads it back.
#
# Issue #11: decodes run on bindings built once per KV bucket (the hot path
# is lookups, one compare and ORT's Run); growth is two-phase (grow -> Run ->
# install, abandon on failure) so an ORT failure (`RunFailed`) keeps no
# grown lease; `abstract()` reads every charge from the manager's allocations
# by holder and role; arena pressure is a pressure ticket of the manager on
# the arena holder, answered (0 B) at the next Run boundary;
# weights are read by ORT from the lease (prepacking off) or from a replica
# in the weight cache (`refimpl.ort.replicas`); CUDA sessions cap their
# arena at the model's grant. XXX: this module is over the ~500-line guide
# and should split (decode path / admission).

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import attrs
import immutables
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from invariants._violation import InvariantViolation
from refimpl.governor import ProcessMemoryManager
from refimpl.ort.arena import SHRINK_KEY, ArenaAnswer, env_arena
from refimpl.ort.replicas import Replicas
from refimpl.ort.residency import process_rss
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
    ProviderUnavailable,
    RunFailed,
    SessionCreationFailed,
    UndeclaredState,
    UnknownAllocation,
)
from spec.guards import ALL_ON, GuardSet
from spec.types import Role, Tier

__all__ = ["GovernedRuntime", "MeasuredModel", "measure", "loop_carried", "decode_input", "session_providers"]


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


def session_providers(provider: str, grant: int) -> list[Any]:
    """The `providers` list for a managed session; on CUDA the device arena is capped at the model's grant.

    `gpu_mem_limit` caps the CUDA EP's BFC arena (weights copied to the device and activations; not
    cuDNN workspaces or the CUDA context, ORT-NOTES 2.3); `kSameAsRequested` keeps the arena from
    doubling past what is asked; the max-workspace cuDNN search is off. CPU stays as ORT's fallback for
    nodes the CUDA EP lacks, and the provider assertion after creation catches a whole-session fallback.
    """
    if provider != "CUDAExecutionProvider":
        return ["CPUExecutionProvider"]
    return [("CUDAExecutionProvider", {"device_id": "0", "gpu_mem_limit": str(grant),
                                       "arena_extend_strategy": "kSameAsRequested",
                                       "cudnn_conv_use_max_workspace": "0"}), "CPUExecutionProvider"]


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
                 bucket: int = 4, guards: GuardSet = ALL_ON,
                 inputs: Callable[[int, int, int], np.ndarray] = decode_input,
                 arena_cap: int | None = None, provider: str = "CPUExecutionProvider",
                 prepack: bool = False, trace: Any = None) -> None:
        if type(limit) is not int or not 0 <= limit <= topology.capacity:
            raise InvalidBytes(f"limit must be an int in [0, {topology.capacity}], got {limit!r}")
        if limit < topology.headroom:
            raise BudgetBelowFloor(f"limit {limit} is below the headroom {topology.headroom}")
        self.topology, self.sources, self.guards = topology, sources, guards
        self.max_context, self.bucket = max_context, bucket
        # With `arena_cap`, every managed session allocates from the process's one env arena, capped by
        # ORT at `arena_cap` (a Run over it fails for that Run: RunFailed, the ledger exact).
        self.arena_cap = arena_cap
        if provider not in ("CPUExecutionProvider", "CUDAExecutionProvider"):
            raise InvalidArgument(f"provider must be the CPU or CUDA execution provider, got {provider!r}")
        if provider not in ort.get_available_providers():
            raise ProviderUnavailable(f"{provider} is not in this onnxruntime build: "
                                      f"{ort.get_available_providers()}")
        self.provider = provider
        self.prepack = prepack  # True: ORT packs its own (uncharged) weight copy and never reads the lease
        if arena_cap is not None:
            env_arena(arena_cap)
        # Arena pressure is answered at Run boundaries (C5): `Pressure` leaves a pending shrink; the next
        # decode Run carries ORT's arena shrinkage and, when it ends, the pressure is answered. The arena's
        # charge is each model's measured peak, which a shrink cannot lower: it credits 0 B, and what the
        # shrink returned to the OS is recorded as residency (VmRSS around the Run), apart from charge.
        self.arena_pending = 0  # == len(self._arena_pressures): the decode fast path reads one int
        self._arena_pressures: list[int] = []  # the manager's open pressure tickets on the arena holder
        self.arena_shrinks = 0
        self.arena_answers: list[ArenaAnswer] = []
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry(SHRINK_KEY, "cpu:0")
        # `trace`: a sink for one event per ledger operation. The negative control of C8 (a lowering that
        # commits whether or not it holds) switches the manager's own commit check off with it.
        pmm_guards = ALL_ON if guards.on("lower_limit_atomic") else GuardSet.without("limit_after_reclaim")
        self.pmm = ProcessMemoryManager(guards=pmm_guards, trace=trace)
        self.auth = self.pmm.register_authority("host", Tier.HOST, topology.capacity)
        if limit < topology.capacity:  # the governed limit is the authority's: set through the limits part
            self.pmm.prepare_limit(self.auth, limit)
            self.pmm.commit_limit(self.auth)
        self.weights = WeightHolder(self.pmm, self.auth)
        self.replicas = Replicas(self.weights, self._session_options)  # cache bytes ORT reads (item 3)
        self.kv = KvHolder(self.pmm, self.auth)
        self.arena = self.pmm.register_holder("arena")
        self.models: dict[str, _Loaded] = {}
        self.requests: dict[int, tuple[str, int]] = {}  # rid -> (model, kv capacity in tokens)
        self.declined: set[Role] = set()
        self.not_enforced: set[str] = set()
        self.residency: dict[str, S.Residency] = {}
        self.next_request = 1
        self.inputs = inputs  # (rid, step, d_model) -> the step's token input; shared with reference runs
        self.last_output: np.ndarray | None = None  # the last decode's output (a view, valid until the next)
        self._handlers = {S.LoadModel: self._load, S.Open: self._open, S.Decode: self._decode,
                          S.Close: self._close, S.Prefetch: self._prefetch, S.Pressure: self._pressure,
                          S.Decline: self._decline, S.LowerLimit: self._lower, S.ObserveResidency: self._observe}

    # --- figures ---------------------------------------------------------

    @property
    def limit(self) -> int:
        """The governed limit: the host authority's limit in the manager (the only limit, issue #11)."""
        return self.pmm.snapshot(self.auth).limit

    def used(self) -> int:
        return self.pmm.snapshot(self.auth).used  # the ledger is the source of every charge

    def _pinned(self) -> int:
        return self.used() - self.weights.cache_bytes

    def _make_room(self, nbytes: int) -> int:
        """Ask the weight holder to yield the cache bytes that `nbytes` more need (elastic path, I8c)."""
        over = self.used() + nbytes + self.topology.headroom - self.limit
        if over <= 0:
            return 0
        credited = self._reclaim_weights(over)  # a pressure ticket on the weight holder (C5)
        if credited < over:  # zero is legal for the holder; the requester fails, nothing is forced
            raise CapacityDenied(f"the weight holder's answer credited {credited} of {over} B")
        return credited

    def _reclaim_weights(self, target: int) -> int:
        """A pressure ticket on the weight holder; replicas in buckets it may take are dropped first."""
        before = set(self.replicas.by_model)
        self.replicas.before_reclaim(target)  # ORT stops reading bytes before they stop being leased
        try:
            return self.weights.reclaim(target)
        finally:
            self.replicas.stale()
            for model in before - set(self.replicas.by_model):
                self._rebind(model)

    def _rebind(self, model: str) -> None:
        """Re-bind every open request of `model` to the session now serving it (replica or primary)."""
        session = self.replicas.session_of(model, self.models[model].session)
        for rid, (m, _) in self.requests.items():
            if m == model:
                b = self.kv.bundles[rid]
                b.session = session
                b.bind()

    # --- actions ---------------------------------------------------------

    def execute(self, a: Any) -> Any:
        handler = self._handlers.get(type(a))
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
                rec.session = make_session(m.path, provider=self.provider)
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
            if isinstance(e, Exception) and not isinstance(e, (CapacityDenied, ProviderUnavailable,
                                                               InvariantViolation)):
                raise SessionCreationFailed(f"{a.name}: ORT failed after admission ({type(e).__name__}: {e}); "
                                            "its weight and arena leases were returned") from e
            raise
        self.models[a.name] = rec
        return released

    def _admit_session(self, name: str, rec: _Loaded, weights: int) -> None:
        m, f = rec.measured, rec.measured.facts
        proto = onnx.load(m.path)
        arrays = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        so = self._session_options()
        rec.weights_lease = self.weights.admit(name, weights, arrays, so)
        if f.transient_peak:
            rec.arena_lease = self.pmm.reserve(self.arena, self.auth, Tier.HOST, f.transient_peak, Role.ARENA)
            self.pmm.commit(self.arena, rec.arena_lease, f.transient_peak)
        admitted = weights + f.transient_peak
        rec.session = ort.InferenceSession(m.path, so, providers=session_providers(self.provider, admitted))
        if self.provider not in rec.session.get_providers():  # CUDA falls back to CPU silently (ORT-NOTES 1)
            raise ProviderUnavailable(f"{name}: asked for {self.provider}, the session runs on "
                                      f"{rec.session.get_providers()}")

    def _session_options(self) -> ort.SessionOptions:
        """The ORT options of every managed session (primary or replica)."""
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_mem_pattern = False
        if self.arena_cap is not None:
            so.add_session_config_entry("session.use_env_allocators", "1")
        # Measured (ORT 1.32, CPU): with prepacking on, ORT copies MatMul weights into its own packed
        # buffers at session creation and never reads the leased ones again (writing into the lease
        # changes no output), so the governed bytes would be bookkeeping beside ORT and the packed copy
        # uncharged. Off, every Run reads the leased initializers (tests/ort/test_ort_weights.py).
        if not self.prepack:
            so.add_session_config_entry("session.disable_prepacking", "1")
        return so

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
        self._make_room(kv_bytes(cap, f.bytes_per_token))
        rid, self.next_request = self.next_request, self.next_request + 1
        self.kv.open(rid, rec.measured.heads, rec.measured.dh, cap, f.bytes_per_token,
                     self.replicas.session_of(a.model, rec.session))
        self.requests[rid] = (a.model, cap)
        return rid

    def _request(self, rid: object) -> tuple[str, int]:
        if type(rid) is not int or rid not in self.requests:
            raise UnknownAllocation(f"request {rid!r} is not open")
        return self.requests[rid]

    def _decode(self, a: S.Decode) -> int:
        # The hot path (issue #11 item 7): lookups, one compare, and the bucket's prebuilt binding.
        rid = a.rid
        req = self.requests.get(rid) if type(rid) is int else None
        if req is None:
            raise UnknownAllocation(f"request {rid!r} is not open")
        model, cap = req
        b = self.kv.bundles[rid]
        tokens = b.tokens
        if tokens < cap and not self.arena_pending:
            try:
                self.last_output = self.kv.step(rid, self.inputs(rid, tokens, b.x.size))
            except (GovernorError, InvariantViolation):
                raise
            except Exception as e:  # ORT's error (arena cap, binding shape...): an environment event
                raise self._run_failed(rid, tokens, e, grown=False) from e
            return 0
        rec = self.models[model]
        f = rec.measured.facts
        if tokens >= f.max_context:
            raise ContextExhausted(f"request {a.rid} holds {tokens} = max context")
        if tokens < cap:  # pressure is pending on the arena: this Run is the boundary that answers it
            self._run_shrinking(rid, tokens, b)
            return 0
        new = min(cap + f.bucket, f.max_context)
        extra = kv_growth_peak(cap, new, f.bytes_per_token) - kv_bytes(cap, f.bytes_per_token)
        if self._pinned() + extra + self.topology.headroom > self.limit:
            raise CapacityDenied(f"request {a.rid}: growth needs {extra} B")
        released = self._make_room(extra)
        grown = self.kv.grow(rid, new, f.bytes_per_token)  # old bucket still the request's
        try:
            self.last_output = self.kv.run(grown, self.inputs(rid, tokens, b.x.size))
        except BaseException as e:
            self.kv.abandon(grown)  # no grown lease is kept for a step that did not happen
            if isinstance(e, (GovernorError, InvariantViolation)) or not isinstance(e, Exception):
                raise
            raise self._run_failed(rid, tokens, e, grown=True) from e
        self.kv.install(rid, grown)
        self.requests[rid] = (model, new)
        return released

    def _run_shrinking(self, rid: int, tokens: int, b: Any) -> None:
        before = process_rss()
        try:
            self.last_output = self.kv.step(rid, self.inputs(rid, tokens, b.x.size), self._shrink)
        except (GovernorError, InvariantViolation):
            raise
        except Exception as e:  # not answered: the tickets stay open, the next Run boundary tries again
            raise self._run_failed(rid, tokens, e, grown=False) from e
        after = process_rss()
        self.arena_shrinks += 1
        due, self._arena_pressures, self.arena_pending = self._arena_pressures, [], 0
        for pid in due:  # the Run boundary: the arena holder answers; its charge is the peak, it credits 0 B
            released = self.pmm.answer(self.arena, pid, ())
            self.arena_answers.append(ArenaAnswer(pid, released, None if before is None else before.nbytes,
                                                  None if after is None else after.nbytes))

    @staticmethod
    def _run_failed(rid: int, tokens: int, e: Exception, grown: bool) -> RunFailed:
        what = "; the grown bucket's lease was returned, the request keeps its old bucket" if grown else ""
        return RunFailed(f"request {rid} step {tokens}: ORT's Run failed ({type(e).__name__}: {e}); the step "
                         f"was not applied{what}")

    def _close(self, a: S.Close) -> None:
        self._request(a.rid)
        self.kv.close(a.rid)
        del self.requests[a.rid]

    def _prefetch(self, a: S.Prefetch) -> int:
        room = self.limit - self.used() - self.topology.headroom
        if room > 0:
            self.weights.fill(room)
            for model in self.replicas.place(self.models):  # borrowed bytes ORT will read
                self._rebind(model)
        return max(0, room)

    def _pressure(self, a: S.Pressure) -> int:
        if type(a.target) is not int or a.target <= 0:
            raise InvalidBytes(f"target must be a positive int, got {a.target!r}")
        released = self._reclaim_weights(a.target)
        if self.requests:  # the arena's share: a ticket of the manager, answered at the next Run boundary
            self._arena_pressures.append(self.pmm.open_pressure(self.arena, self.auth, a.target))
            self.arena_pending = len(self._arena_pressures)
        return released

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
        over = self.used() + self.topology.headroom - new  # what the new limit needs back, headroom kept
        released = self._reclaim_weights(over) if over > 0 else 0  # pressure on the weight holder (C5)
        done = (("reclaim weight cache", released),) if released else ()
        ok = self.used() + self.topology.headroom <= new
        if ok or not self.guards.on("lower_limit_atomic"):  # C8: commit only if it holds
            # The manager's limits part: prepare (its pressure tickets, if used is still above `new`, are
            # retired by the commit) -> commit, which keeps the old limit unless used fits under `new`.
            self.pmm.prepare_limit(self.auth, new)
            self.pmm.commit_limit(self.auth)
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

    def _ledger_view(self) -> tuple[Any, dict[str, int]]:
        """The manager's allocations, and their charge on this runtime's pool summed per role."""
        allocs = self.pmm.abstract().allocations
        by_role = {Role.WEIGHTS.value: 0, Role.ARENA.value: 0, Role.KV.value: 0}
        for rec in allocs.values():
            if rec.authority == self.auth and rec.charge:
                by_role[rec.role.value] = by_role.get(rec.role.value, 0) + rec.charge
        return allocs, by_role

    def _kv_tokens(self, rid: int, allocs: Any) -> int:
        """A request's KV capacity as its holder's lease on the ledger charges it (issue #11 item 2)."""
        model = self.models[self.requests[rid][0]].measured.facts
        rec = allocs.get(self.kv.bundles[rid].lease)
        charge = rec.charge if rec is not None and rec.holder == self.kv.id and rec.role is Role.KV else 0
        return charge // model.bytes_per_token

    def _cache_charge(self, allocs: Any) -> int:
        """The weight cache as the ledger charges the weight holder's cache leases."""
        total = 0
        for aid, _ in self.weights.cache:
            rec = allocs.get(aid)
            if rec is not None and rec.holder == self.weights.id and rec.role is Role.WEIGHTS:
                total += rec.charge
        return total

    def abstract(self) -> S.SessionState:
        """The refinement mapping: every charge read from the manager's allocations by holder and role."""
        allocs, by_role = self._ledger_view()
        models = {}
        for name, r in self.models.items():
            f = r.measured.facts
            admitted = self._charge(r.weights_lease, allocs) + self._charge(r.arena_lease, allocs)
            models[name] = S.LoadedModel(f, r.mode, admitted, r.unattributed, r.mode is not S.Mode.COMPAT,
                                         r.declared, r.host_mapped)
        reqs = {rid: S.Request(m, self.kv.bundles[rid].tokens, self._kv_tokens(rid, allocs))
                for rid, (m, _) in self.requests.items()}
        return S.SessionState(self.topology, self.limit, immutables.Map(models), immutables.Map(reqs),
                              self._cache_charge(allocs), frozenset(self.declined), frozenset(self.not_enforced),
                              immutables.Map(self.residency), self.next_request, immutables.Map(by_role))

    def report(self) -> S.GovernanceReport:
        """C8's figures read from the manager's ledger (this runtime's own computation, not the spec's)."""
        allocs, _ = self._ledger_view()
        weights = sum(self._charge(r.weights_lease, allocs) + self._charge(r.arena_lease, allocs)
                      for r in self.models.values())
        kv = sum(self._kv_tokens(rid, allocs) * self.models[m].measured.facts.bytes_per_token
                 for rid, (m, _) in self.requests.items())
        cache = self._cache_charge(allocs)
        used = weights + kv + cache
        return S.GovernanceReport(
            unit="charge (bytes)", limit=self.limit, used=used, available=max(0, self.limit - used),
            oversubscribed=max(0, used - self.limit), reclaimable=cache,
            unattributed=sum(r.unattributed for r in self.models.values()),
            by_role=((Role.WEIGHTS.value, weights), (Role.KV.value, kv), ("weight cache", cache)),
            not_enforced=frozenset(self.not_enforced),
            residency=tuple((k, v.nbytes, v.source) for k, v in sorted(self.residency.items())))

    def close(self) -> None:
        for pid in self._arena_pressures:  # never answered: retired, they record nothing
            self.pmm.cancel_pressure(pid)
        self._arena_pressures, self.arena_pending = [], 0
        for m in list(self.replicas.by_model):
            self.replicas.drop(m)
        for rid in list(self.requests):
            self.kv.close(rid)
        self.requests.clear()
        self.weights.close()
        for r in self.models.values():
            if r.arena_lease is not None:
                self.pmm.release(self.arena, r.arena_lease)
            r.session = None
        self.models.clear()
