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
# Every runtime has an env arena (`Topology.arena`, issue #11 item 1): the
# ArenaHolder's grant is ONE lease on the host authority (the manager never
# has a second authority of the host tier, C1), every managed session (primary
# or replica) allocates from it (`session.use_env_allocators=1`) and every Run
# is capped by it [ort:env-arena-cap]; each managed model's transient peak is lent within it, an
# allowance of the ArenaHolder, never charged again (I8); a peak past the
# arena's remaining room is refused (AllowanceExceeded) before anything is
# leased. A topology without an arena (0) is refused (InvalidArgument) rather
# than given a default cap: the process's env arena keeps the cap it was
# registered with for every session that took it, and registering again
# reaches only later sessions [ort:env-arena-reregister], so a hidden default
# would either clash with the cap the process already has or disagree with
# the topology the spec is run on (whose arena says what the ledger charges); callers name the cap (the zoo's is
# `refimpl.ort.zoo.ENV_ARENA_CAP`).
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
# the arena holder, answered (0 B) at the next Run boundary
# [ort:arena-shrink]; weights are read by ORT from the lease (prepacking off
# [ort:prepacking]) or from a replica in the weight cache
# (`refimpl.ort.replicas`). On the CUDA EP the governed pool is the device's
# (`refimpl.ort.device_path`: a DEVICE authority beside the host one, weights
# and KV in leased device regions, each session's EP arena capped at its loan
# [ort:gpu-mem-limit]). Split by concept: `refimpl.ort.measure`
# (facts), `.requests` (decode path), `.lowering` (reclaim, limits),
# `.abstraction` (the refinement mapping), `.device_path` (the device
# pool's wiring); this module keeps construction and model admission.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.ort.abstraction import LedgerAbstraction
from refimpl.ort.arena import SHRINK_KEY, ArenaAnswer, ArenaHolder
from refimpl.ort.device import DeviceMemory
from refimpl.ort.device_path import DevicePath, device_memory
from refimpl.ort.holders import KvHolder, WeightHolder
from refimpl.ort.lowering import ReclaimAndLimits
from refimpl.ort.measure import MeasuredModel, decode_input, loop_carried, measure, session_providers
from refimpl.ort.replicas import Replicas
from refimpl.ort.requests import RequestPath
from refimpl.ort.session import make_session
from spec import sessions as S
from spec.arith import round_up
from spec.errors import (
    AllowanceExceeded,
    BudgetBelowFloor,
    CapacityDenied,
    GovernorError,
    HostMappedCapacityExceeded,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    ProviderUnavailable,
    SessionCreationFailed,
    UndeclaredState,
)
from spec.guards import ALL_ON, GuardSet
from spec.types import Role, Tier

__all__ = ["GovernedRuntime", "MeasuredModel", "measure", "loop_carried", "decode_input", "session_providers"]


class _Loaded:
    __slots__ = ("measured", "mode", "weights_lease", "arena_loan", "unattributed", "declared",
                 "host_mapped", "session")

    def __init__(self, measured: MeasuredModel, mode: S.Mode, declared: frozenset[str] | None,
                 host_mapped: bool) -> None:
        self.measured, self.mode, self.declared, self.host_mapped = measured, mode, declared, host_mapped
        self.weights_lease: int | None = None
        self.arena_loan: int | None = None  # the allowance lending the peak within the env arena's one lease
        self.unattributed = 0
        self.session: Any = None


class GovernedRuntime(RequestPath, ReclaimAndLimits, LedgerAbstraction, DevicePath):
    """One governed pool (host, or a device's), a governed limit, real sessions; `execute` takes `spec.sessions` actions."""

    def __init__(self, topology: S.Topology, limit: int, sources: dict[str, str], max_context: int = 16,
                 bucket: int = 4, guards: GuardSet = ALL_ON,
                 inputs: Callable[[int, int, int], np.ndarray] = decode_input,
                 provider: str = "CPUExecutionProvider", prepack: bool = False, trace: Any = None,
                 device: DeviceMemory | None = None, host_capacity: int | None = None) -> None:
        if type(limit) is not int or not 0 <= limit <= topology.capacity:
            raise InvalidBytes(f"limit must be an int in [0, {topology.capacity}], got {limit!r}")
        if limit < topology.headroom:
            raise BudgetBelowFloor(f"limit {limit} is below the headroom {topology.headroom}")
        self.topology, self.sources, self.guards = topology, sources, guards
        self.max_context, self.bucket = max_context, bucket
        # Every managed session allocates from the process's one env arena, capped by ORT at
        # `topology.arena` bytes (a Run over it fails for that Run: RunFailed, the ledger exact).
        arena_cap = topology.arena
        if type(arena_cap) is not int or not 0 <= arena_cap <= topology.capacity:
            raise InvalidBytes(f"arena must be an int in [0, {topology.capacity}], got {arena_cap!r}")
        if arena_cap == 0:
            raise InvalidArgument("the topology has no env arena (arena = 0): every managed session allocates "
                                  "from the process's one env arena (ArenaHolder), so the topology must name "
                                  "its cap (one per process; the zoo's is refimpl.ort.zoo.ENV_ARENA_CAP)")
        if arena_cap + topology.headroom > limit:
            raise CapacityDenied(f"the env arena's {arena_cap} B and the headroom {topology.headroom} B do not "
                                 f"fit the limit {limit}")
        self.arena_cap = arena_cap
        if provider not in ("CPUExecutionProvider", "CUDAExecutionProvider"):
            raise InvalidArgument(f"provider must be the CPU or CUDA execution provider, got {provider!r}")
        if provider not in ort.get_available_providers():
            raise ProviderUnavailable(f"{provider} is not in this onnxruntime build: "
                                      f"{ort.get_available_providers()}")
        self.provider = provider
        # The device path (`refimpl.ort.device_path`): on the CUDA EP always; on the CPU EP only with a
        # CPU stand-in `device`. None: the host path (one host pool, as before).
        self.memory = device_memory(provider, device)
        self.prepack = prepack  # True: ORT packs its own (uncharged) weight copy [ort:prepacking]
        # Arena pressure is answered at Run boundaries (C5): `Pressure` leaves a pending shrink; the next
        # decode Run carries ORT's arena shrinkage [ort:arena-shrink] and, when it ends, the pressure is
        # answered. The arena's
        # charge is the env arena's cap, which a shrink cannot lower: it credits 0 B, and what the
        # shrink returned to the OS is recorded as residency (VmRSS around the Run), apart from charge.
        self.arena_pending = 0  # == len(self._arena_pressures): the decode fast path reads one int
        self._arena_pressures: list[int] = []  # the manager's open pressure tickets on the arena holder
        self.arena_shrinks = 0
        self.arena_answers: list[ArenaAnswer] = []
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry(SHRINK_KEY, "cpu:0" if self.memory is None else self._pressure_shrink())
        # `trace`: a sink for one event per ledger operation. The negative control of C8 (a lowering that
        # commits whether or not it holds) switches the manager's own commit check off with it.
        pmm_guards = ALL_ON if guards.on("lower_limit_atomic") else GuardSet.without("limit_after_reclaim")
        self.pmm = ProcessMemoryManager(guards=pmm_guards, trace=trace)
        self.host_auth = self.pmm.register_authority("host", Tier.HOST, self._host_capacity(host_capacity))
        # The governed pool, the one `spec.sessions` models: the host authority, or the device's (C1: one
        # authority per pool; the host authority stays the process's one shared host quota).
        self.auth = self.host_auth if self.memory is None else self._device_authority()
        self.tier = Tier.HOST if self.memory is None else Tier.DEVICE
        # The governed limit is the authority's, set through the limits part, less the headroom I8c keeps
        # free: the manager itself then refuses any grant into the headroom, and a lowering's pressure
        # tickets ask for exactly what the new limit needs back (`limit` adds the headroom on reading).
        if self._ledger_limit(limit) < topology.capacity:
            self.pmm.lower_limit(self.auth, self._ledger_limit(limit))  # nothing leased yet: no pressure
        if self.memory is None:
            self.weights = WeightHolder(self.pmm, self.auth)
            # The replicas are cache bytes ORT reads [ort:prepacking] (item 3).
            self.replicas = Replicas(self.weights, self._session_options)
            self.kv = KvHolder(self.pmm, self.auth)
        else:
            self._device_holders()
        # A limit change's ticket on the arena: its charge (the env arena's cap) is one no answer can lower,
        # so the holder answers zero at once (a Pressure's arena ticket is opened without delivery and waits
        # for a Run boundary, `refimpl.ort.requests`).
        def zero(pmm: ProcessMemoryManager, pid: int, _target: int) -> None:
            pmm.answer(self.arena, pid, ())

        self.env_arena = self._pool_arena(arena_cap, zero)
        self.arena = self.env_arena.id
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

    def _pool_arena(self, arena_cap: int, zero: Callable[..., None]) -> ArenaHolder:
        """The pool's arena: the host env arena, or on the device path the EP arenas' one device lease."""
        if self.memory is not None:
            return self._device_arena(arena_cap, zero)
        # The env arena (issue #11 item 4, C1): ONE lease in this host pool, on the authority every other
        # holder uses, of exactly the cap in force in this process (registering again would reach only later
        # sessions [ort:env-arena-reregister]; another cap is refused, typed, naming both). Each managed
        # model's measured transient peak is lent within that lease (an allowance of the ArenaHolder, I8),
        # never charged a second time. No second authority of the host tier is ever registered. Every
        # runtime has one: there is no per-session-arena mode.
        return ArenaHolder(self.pmm, self.auth, arena_cap, on_pressure=zero)

    # --- figures ---------------------------------------------------------

    @property
    def limit(self) -> int:
        """The governed limit: the host authority's limit in the manager (the only limit, issue #11) plus the
        headroom, which the manager's limit keeps free."""
        return self.pmm.snapshot(self.auth).limit + self.topology.headroom

    def _ledger_limit(self, governed: int) -> int:
        """The authority's limit in the manager for a governed limit: the headroom is kept under it (I8c)."""
        return governed - self.topology.headroom

    def used(self) -> int:
        return self.pmm.snapshot(self.auth).used  # the ledger is the source of every charge

    def _pinned(self) -> int:
        return self.used() - self.weights.cache_bytes


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
        m = measure(self.sources[a.source], self.max_context, self.bucket, self.peak_device)
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
        env = self.env_arena
        if env.lent + f.transient_peak > env.grant and self.guards.on("arena_room"):  # I8
            raise AllowanceExceeded(f"{a.name}: transient peak {f.transient_peak} B, the env arena lends "
                                    f"{env.lent} B of its {env.grant} B")
        charge = weights  # the peak is lent within the arena's lease, already charged
        if self._pinned() + charge + t.headroom > self.limit:
            raise CapacityDenied(f"{a.name}: does not fit even with the weight cache reclaimed")
        released = self._make_room(charge)
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
        if f.transient_peak:  # lent within the one arena lease, not charged again
            rec.arena_loan = self.env_arena.lend(f.transient_peak, enforce=self.guards.on("arena_room"))
        # The device path: the session's EP arena is capped at this model's loan (`refimpl.ort.device_path`)
        # [ort:gpu-mem-limit]; what the EP allocates outside that arena is not bounded by it
        # [ort:gpu-mem-limit-outside]. The env arena stays the CPU-side arena (feeds, fetches, CPU-placed
        # nodes) on the host authority [ort:env-arena-scope].
        rec.session = ort.InferenceSession(m.path, so, providers=self._providers(name, rec))
        if self.provider not in rec.session.get_providers():  # an EP that did not load [ort:cuda-fallback]
            raise ProviderUnavailable(f"{name}: asked for {self.provider}, the session runs on "
                                      f"{rec.session.get_providers()}")

    def _session_options(self) -> ort.SessionOptions:
        """The ORT options of every managed session (primary or replica)."""
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.enable_mem_pattern = False
        so.add_session_config_entry("session.use_env_allocators", "1")  # the ArenaHolder's env arena, always
        # With prepacking on, ORT copies MatMul weights into its own packed buffers at session creation
        # and never reads the leased ones again (writing into the lease changes no output)
        # [ort:prepacking], so the governed bytes would be bookkeeping beside ORT and the packed copy
        # uncharged. Off, every Run reads the leased initializers [ort:prepacking] (and
        # tests/ort/test_ort_weights.py).
        if not self.prepack:
            so.add_session_config_entry("session.disable_prepacking", "1")
        return so

    def _undo_admission(self, name: str, rec: _Loaded) -> None:
        self._repay(rec)
        if name in self.weights.models:
            self.weights.evict(name)
        rec.weights_lease, rec.session = None, None

    def _decline(self, a: S.Decline) -> None:
        if not isinstance(a.role, Role):
            raise InvalidArgument(f"role must be a Role, got {a.role!r}")
        self.declined.add(a.role)
        if self.guards.on("honest_decline"):  # I3
            self.not_enforced.add(a.role.value)

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
            self._repay(rec)
            rec.weights_lease = self.pmm.record_committed(self.weights.id, self.auth, self.tier,
                                                          max(1, a.nbytes), Role.WEIGHTS)
            self.weights.models[a.model] = (rec.weights_lease, self.weights.models[a.model][1])
        self.residency[a.model] = S.Residency(a.nbytes, a.source)

    # --- the refinement mapping -------------------------------------------

    def close(self) -> None:
        for pid in self._arena_pressures:  # never answered: retired, they record nothing
            self.pmm.cancel_pressure(pid)
        self._arena_pressures, self.arena_pending = [], 0
        for m in list(self.replicas.by_model):
            self.replicas.drop(m)
        for rid in list(self.requests):
            self.kv.close(rid)
        self.requests.clear()
        for r in self.models.values():  # no session outlives the weights it reads
            r.session = None
        self.weights.close()
        for r in self.models.values():
            self._repay(r)
            r.session = None
        self.models.clear()
        # The env arena's lease stays charged: ORT's cap outlives the runtime (`refimpl.ort.arena`). The
        # device path's arena lease goes back: its caps died with the sessions.
        if self.memory is not None:
            self.env_arena.release()

    def _repay(self, rec: _Loaded) -> None:
        """Give a model's loan within the env arena back (its peak stops being lent; the lease stays)."""
        if rec.arena_loan is not None:
            self.env_arena.repay(rec.arena_loan)
        rec.arena_loan = None
