"""Abstract model of governed ORT sessions: exact bytes, decline, residency, limits, topology, state declarations.

The spec `refimpl.ort.governed.GovernedRuntime` refines. One host pool whose
topology (capacity after a safety reserve, granule, host-mapped read
capacity, headroom) is fixed at start; a governed limit under it. Models are
loaded with the facts the session reporter gives (referenced bytes, file
bytes, transient peak, loop-carried state, KV geometry): the spec trusts
the facts, the implementation must measure them itself. Requests hold KV in
buckets; the weight holder borrows the rest as a reclaimable cache and
yields it under pressure, on KV growth and on limit lowering.

With an env arena (`Topology.arena`, issue #11), the arena is ONE charge in
this pool, its grant, leased at start; each managed model's transient peak
is lent within it (an allowance of the arena's lease), never charged a
second time, and a model whose peak does not fit the arena's remaining room
is refused (`AllowanceExceeded`, nothing changes).

Covers I8 (admitted = roundup(referenced, granule) + peak), I3 (declined or
compatibility bytes are reported not enforced), I8b (observed residency is
a sourced field apart from charge), C7 (host-mapped reads within the
reported capacity, rounding by the reported granule), C8 (figures; lowering
is prepare -> reclaim -> commit, a failure keeps the old limit and lists the
completed actions) and C9 (managed mode declares every loop-carried state;
no declaration = reported compatibility mode). ORT's own failures are
environment events: `RunFails` is a decode whose Run fails (over the env
arena's cap, a binding's shape, an injected fault); the step is not applied,
no grown lease is kept, the request keeps its bucket and stays decodable.
Pure: no I/O, no ORT.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import immutables

from spec.arith import admitted_bytes, available, kv_bytes, kv_growth_peak, oversubscribed, round_up
from spec.errors import (
    AllowanceExceeded,
    BudgetBelowFloor,
    CapacityDenied,
    ContextExhausted,
    HostMappedCapacityExceeded,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UndeclaredState,
    UnknownAllocation,
)
from spec.guards import ALL_ON, GuardSet
from spec.types import Role

__all__ = [
    "Mode", "Topology", "ModelFacts", "LoadedModel", "Request", "Residency", "LoweringReport", "SessionState",
    "GovernanceReport", "LoadModel", "Open", "Decode", "RunFails", "Close", "Prefetch", "Pressure", "Decline", "LowerLimit",
    "ObserveResidency", "new_sessions", "step_sessions", "report", "path_peak", "floor_tokens", "ledger_of",
]


class Mode(enum.Enum):
    MANAGED = "managed"  # charged, enforced
    COMPAT = "compat"  # no state declaration: unattributed, no prefix reuse, not enforced (C9)
    DECLINED = "declined"  # its class of bytes is declined: unattributed, not enforced (I3)

    def __repr__(self) -> str:
        return f"Mode.{self.name}"


@attrs.frozen
class Topology:
    capacity: int  # host ceiling minus the safety reserve (C7)
    reserve: int
    granule: int  # mapping granularity rounding uses (C7, I8)
    host_mapped_capacity: int  # distinct host-mapped bytes one execution may read; unreported = 0
    headroom: int  # kept free under the limit (I8c)
    source: str  # where the numbers came from
    #: The process's env arena cap, leased ONCE from this pool at start (C1: no second authority books
    #: it); every managed session's Runs allocate in it and ORT caps them at it. Each managed model's
    #: transient peak is lent within that one lease (an allowance), never charged a second time; a peak
    #: that does not fit the arena's remaining room is refused. 0: no env arena, each managed model's
    #: peak is its own ARENA charge in this pool (sessions keep their own arenas). The runtime never
    #: runs that way (`GovernedRuntime` refuses arena 0: every managed session uses the env arena, issue
    #: #11 item 1); the spec keeps it for the explorer's `sessions` scope (invariants/model_scopes.py),
    #: the smaller state space of the rules the arena does not touch (admission by referenced bytes, KV
    #: buckets, cache reclaim, limits, decline, residency); `sessions_arena` and the ort checker's
    #: refinement run with an env arena.
    arena: int = 0


def _names_repr(names: frozenset[str] | None) -> str:
    """A set of state names printed sorted: a counterexample reads the same in every process (str hashes vary)."""
    return repr(names) if not names else "frozenset({" + ", ".join(map(repr, sorted(names))) + "})"


@attrs.frozen
class ModelFacts:
    """What the session reporter reports for one model (the session owns nothing: it is a reporter)."""

    referenced: int  # bytes of the extents the graph references (I8)
    file_bytes: int  # size of the containing files: never admitted
    transient_peak: int
    loop_carried: frozenset[str] = attrs.field(repr=_names_repr)
    bytes_per_token: int  # KV bytes per token as held (0 if no KV)
    max_context: int
    bucket: int  # tokens per KV growth step


@attrs.frozen
class LoadedModel:
    facts: ModelFacts
    mode: Mode
    admitted: int  # charged weight + transient bytes; 0 unless managed
    unattributed: int
    prefix_reuse: bool
    declared: frozenset[str] | None = attrs.field(repr=_names_repr)
    host_mapped: bool


@attrs.frozen
class Request:
    model: str
    tokens: int
    kv_tokens: int  # KV capacity held, in tokens


@attrs.frozen
class Residency:
    nbytes: int
    source: str  # I8b: a residency figure names where it came from


@attrs.frozen
class LoweringReport:
    ok: bool
    old_limit: int
    new_limit: int
    completed: tuple[tuple[str, int], ...]  # (action, bytes) done before commit or failure


@attrs.frozen
class SessionState:
    topology: Topology
    limit: int
    models: immutables.Map = immutables.Map()  # name -> LoadedModel
    requests: immutables.Map = immutables.Map()  # rid -> Request
    cache: int = 0  # borrowed weight bytes, reclaimable
    declined: frozenset = frozenset()  # Roles declined (I3)
    not_enforced: frozenset = frozenset()  # labels reported as "limits advisory, not enforced"
    residency: immutables.Map = immutables.Map()  # model -> Residency
    next_request: int = 1
    #: What the ledger charges, per role ("weights", "arena", "kv"): the spec's ledger holds exactly the
    #: bytes its records account for (weights without the transient peak plus the cache; the peak; KV).
    #: An implementation reads it from its manager's allocations, apart from its own records (C8, I1).
    ledger: immutables.Map = immutables.Map()
    #: Ledgers of the pool's tier (host) that can grant in the runtime's manager: one, the pool's own
    #: (C1). The env arena is a lease in it, never a second authority sized to its cap.
    host_authorities: int = 1

    def kv_charge(self, r: Request) -> int:
        return kv_bytes(r.kv_tokens, self.models[r.model].facts.bytes_per_token)

    @property
    def lent(self) -> int:
        """The transient peaks lent within the env arena's lease (0 without an env arena)."""
        if not self.topology.arena:
            return 0
        return sum(m.facts.transient_peak for m in self.models.values() if m.mode is Mode.MANAGED)

    @property
    def pinned(self) -> int:
        # With an env arena, its grant is one charge and the peaks in `admitted` lie within it.
        arena = self.topology.arena - self.lent
        return (sum(m.admitted for m in self.models.values()) + arena
                + sum(self.kv_charge(r) for r in self.requests.values()))

    @property
    def used(self) -> int:
        return self.pinned + self.cache


@attrs.frozen
class GovernanceReport:
    """C8 figures, all charge; residency figures carry their source (I8b); I3 labels."""

    unit: str
    limit: int
    used: int
    available: int
    oversubscribed: int
    reclaimable: int
    unattributed: int
    by_role: tuple[tuple[str, int], ...]
    not_enforced: frozenset
    residency: tuple[tuple[str, int, str], ...]


# --- actions -------------------------------------------------------------


@attrs.frozen
class LoadModel:
    name: str
    source: str  # which built model (the implementation resolves it to files)
    facts: ModelFacts
    declared: frozenset[str] | None = attrs.field(repr=_names_repr)  # None: no declaration, compatibility mode (C9)
    host_mapped: bool = False


@attrs.frozen
class Open:
    model: str


@attrs.frozen
class Decode:
    rid: int


@attrs.frozen
class RunFails:
    """The environment: the next decode Run of `rid` fails in ORT. Refused as `Decode` is; else not applied."""

    rid: int


@attrs.frozen
class Close:
    rid: int


@attrs.frozen
class Prefetch:
    """The weight holder borrows what the limit, charges and headroom leave."""


@attrs.frozen
class Pressure:
    target: int


@attrs.frozen
class Decline:
    role: Role


@attrs.frozen
class LowerLimit:
    new: int


@attrs.frozen
class ObserveResidency:
    model: str
    nbytes: int
    source: str


def new_sessions(topology: Topology, limit: int) -> SessionState:
    if type(limit) is not int or not 0 <= limit <= topology.capacity:
        raise InvalidBytes(f"limit must be an int in [0, {topology.capacity}], got {limit!r}")
    if limit < topology.headroom:
        raise BudgetBelowFloor(f"limit {limit} is below the headroom {topology.headroom}")
    if type(topology.arena) is not int or not 0 <= topology.arena <= topology.capacity:
        raise InvalidBytes(f"arena must be an int in [0, {topology.capacity}], got {topology.arena!r}")
    if topology.arena and topology.arena + topology.headroom > limit:  # the one arena lease, at start
        raise CapacityDenied(f"the env arena's {topology.arena} B and the headroom {topology.headroom} B do not "
                             f"fit the limit {limit}")
    return _with_ledger(SessionState(topology, limit))


def ledger_of(s: SessionState) -> immutables.Map:
    """The charge per role that the records account for (the spec's ledger is exactly its records)."""
    managed = [m for m in s.models.values() if m.mode is Mode.MANAGED]
    peaks = sum(m.facts.transient_peak for m in managed)
    arena = s.topology.arena or peaks  # the env arena's one lease, or each model's peak charged apart
    weights = sum(m.admitted for m in managed) - peaks + s.cache
    kv = sum(s.kv_charge(r) for r in s.requests.values())
    return immutables.Map({Role.WEIGHTS.value: weights, Role.ARENA.value: arena, Role.KV.value: kv})


def _with_ledger(s: SessionState) -> SessionState:
    return attrs.evolve(s, ledger=ledger_of(s))


def floor_tokens(f: ModelFacts) -> int:
    return min(f.bucket, f.max_context)


def path_peak(f: ModelFacts) -> int:
    """The largest KV charge on the way to max context: the last growth's copy peak (I8c)."""
    if f.max_context <= f.bucket:
        return kv_bytes(f.max_context, f.bytes_per_token)
    last = round_up(f.max_context, f.bucket) - f.bucket
    return kv_growth_peak(last, f.max_context, f.bytes_per_token)


def _int(n: object, what: str, zero_ok: bool = True) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be a {'non-negative' if zero_ok else 'positive'} int, got {n!r}")
    return n


def _name(n: object, what: str) -> str:
    if type(n) is not str or not n:
        raise InvalidArgument(f"{what} must be a non-empty str, got {n!r}")
    return n


def _reclaim(s: SessionState, need: int) -> int:
    """Cache bytes the weight holder must yield so that `need` more bytes fit under the limit with headroom."""
    return min(s.cache, max(0, s.used + need + s.topology.headroom - s.limit))


def _req(s: SessionState, rid: object) -> Request:
    r = s.requests.get(rid) if type(rid) is int else None
    if r is None:
        raise UnknownAllocation(f"request {rid!r} is not open")
    return r


def step_sessions(s: SessionState, a: Any, guards: GuardSet = ALL_ON) -> tuple[SessionState, Any]:
    nxt, result = _step(s, a, guards)
    return _with_ledger(nxt), result


def _step(s: SessionState, a: Any, guards: GuardSet) -> tuple[SessionState, Any]:
    t = s.topology
    if isinstance(a, LoadModel):
        _name(a.name, "name")
        if a.name in s.models:
            raise InvalidTransition(f"model {a.name!r} is already loaded")
        if not isinstance(a.facts, ModelFacts):
            raise InvalidArgument(f"facts must be ModelFacts, got {a.facts!r}")
        # Verify the declaration is a set of state names and host_mapped a flag (issue #14).
        if a.declared is not None and (type(a.declared) is not frozenset
                                       or not all(type(x) is str for x in a.declared)):
            raise InvalidArgument(f"declared must be None or a frozenset of state names, got {a.declared!r:.80}")
        if type(a.host_mapped) is not bool:
            raise InvalidArgument(f"host_mapped must be a bool, got {a.host_mapped!r:.80}")
        f = a.facts
        # Verify the host-mapped reads fit what the topology reports (unreported = 0).
        if a.host_mapped and f.referenced > t.host_mapped_capacity and guards.on("host_mapped_capacity"):  # C7
            raise HostMappedCapacityExceeded(f"{a.name}: {f.referenced} B host-mapped, {t.host_mapped_capacity} "
                                             f"B reported")
        inferred = f.referenced + f.transient_peak
        if a.declared is None or Role.WEIGHTS in s.declined:
            mode = Mode.COMPAT if a.declared is None else Mode.DECLINED
            label = f"model:{a.name}" if mode is Mode.COMPAT else Role.WEIGHTS.value
            m = LoadedModel(f, mode, 0, inferred, mode is not Mode.COMPAT, a.declared, a.host_mapped)
            ne = s.not_enforced | {label} if guards.on("honest_decline") else s.not_enforced  # I3
            return attrs.evolve(s, models=s.models.set(a.name, m), not_enforced=ne), 0
        # Verify managed mode declares every loop-carried state.
        if not f.loop_carried <= a.declared and guards.on("declare_loop_carried"):  # C9
            raise UndeclaredState(f"{a.name}: loop-carried {sorted(f.loop_carried - a.declared)} not declared")
        counted = f.referenced if guards.on("referenced_extents") else f.file_bytes  # I8
        admitted = admitted_bytes(counted, t.granule, f.transient_peak)
        # Verify the peak fits the env arena's remaining room: it is lent within the one arena lease.
        if t.arena and s.lent + f.transient_peak > t.arena and guards.on("arena_room"):  # I8
            raise AllowanceExceeded(f"{a.name}: transient peak {f.transient_peak} B, the env arena has "
                                    f"{t.arena - s.lent} B of {t.arena} B left")
        charge = admitted - f.transient_peak if t.arena else admitted  # what the pool newly charges
        if s.pinned + charge + t.headroom > s.limit:
            raise CapacityDenied(f"{a.name}: {charge} B asked, {max(0, s.limit - s.pinned - t.headroom)} B "
                                 f"possible after reclaiming the cache")
        released = _reclaim(s, charge)
        m = LoadedModel(f, Mode.MANAGED, admitted, 0, True, a.declared, a.host_mapped)
        return attrs.evolve(s, models=s.models.set(a.name, m), cache=s.cache - released), released
    if isinstance(a, Open):
        _name(a.model, "model")
        m = s.models.get(a.model)
        if m is None or m.mode is not Mode.MANAGED or not m.facts.bytes_per_token:
            raise InvalidTransition(f"{a.model!r} is not a loaded, managed model with KV")
        # Verify a guaranteed path to max context for every open request (I8c): pinned weights
        # + each request's last-growth peak + headroom fit, the cache being reclaimable.
        paths = sum(path_peak(s.models[r.model].facts) for r in s.requests.values()) + path_peak(m.facts)
        weights = s.pinned - sum(s.kv_charge(r) for r in s.requests.values())
        if weights + paths + t.headroom > s.limit:
            raise CapacityDenied(f"{a.model}: no guaranteed path to max context ({weights} + {paths} + "
                                 f"{t.headroom} > {s.limit})")
        floor = kv_bytes(floor_tokens(m.facts), m.facts.bytes_per_token)
        released = _reclaim(s, floor)
        rid = s.next_request
        return attrs.evolve(s, requests=s.requests.set(rid, Request(a.model, 0, floor_tokens(m.facts))),
                            cache=s.cache - released, next_request=rid + 1), rid
    if isinstance(a, (Decode, RunFails)):
        r = _req(s, a.rid)
        f = s.models[r.model].facts
        if r.tokens >= f.max_context:
            raise ContextExhausted(f"request {a.rid} holds {r.tokens} = max context")
        if r.tokens < r.kv_tokens:
            if isinstance(a, RunFails):  # the Run failed in the bucket the request holds: nothing changes
                return s, 0
            return attrs.evolve(s, requests=s.requests.set(a.rid, attrs.evolve(r, tokens=r.tokens + 1))), 0
        new = min(r.kv_tokens + f.bucket, f.max_context)
        # The old bucket stays live while copying: peak = old + new (section 6).
        extra = kv_growth_peak(r.kv_tokens, new, f.bytes_per_token) - kv_bytes(r.kv_tokens, f.bytes_per_token)
        if s.pinned + extra + t.headroom > s.limit:
            raise CapacityDenied(f"request {a.rid}: growth needs {extra} B")
        released = _reclaim(s, extra)
        if isinstance(a, RunFails):
            # The growth's Run failed: the grown bucket's lease goes back and the request keeps its old
            # bucket and tokens (it stays decodable); the cache the weight holder yielded for the growth
            # stays yielded (an answer to a pressure ticket is final, C5).
            return attrs.evolve(s, cache=s.cache - released), released
        nr = Request(r.model, r.tokens + 1, new)
        return attrs.evolve(s, requests=s.requests.set(a.rid, nr), cache=s.cache - released), released
    if isinstance(a, Close):
        _req(s, a.rid)
        return attrs.evolve(s, requests=s.requests.delete(a.rid)), None
    if isinstance(a, Prefetch):
        cache = max(s.cache, s.limit - s.pinned - t.headroom)
        return attrs.evolve(s, cache=cache), cache - s.cache
    if isinstance(a, Pressure):
        _int(a.target, "target", zero_ok=False)
        released = min(a.target, s.cache)
        return attrs.evolve(s, cache=s.cache - released), released
    if isinstance(a, Decline):
        if not isinstance(a.role, Role):
            raise InvalidArgument(f"role must be a Role, got {a.role!r}")
        ne = s.not_enforced | {a.role.value} if guards.on("honest_decline") else s.not_enforced  # I3
        return attrs.evolve(s, declined=s.declined | {a.role}, not_enforced=ne), None
    if isinstance(a, LowerLimit):
        new = _int(a.new, "limit")
        if new > t.capacity:
            raise InvalidBytes(f"limit {new} exceeds the pool's capacity {t.capacity}")
        if new < t.headroom:
            raise BudgetBelowFloor(f"limit {new} is below the headroom {t.headroom}")
        # Prepare the overage, reclaim it from the weight cache, then commit or keep the old limit.
        released = min(s.cache, max(0, s.used + t.headroom - new))
        done = (("reclaim weight cache", released),) if released else ()
        after = attrs.evolve(s, cache=s.cache - released)
        ok = after.used + t.headroom <= new
        if ok or not guards.on("lower_limit_atomic"):  # C8
            return attrs.evolve(after, limit=new), LoweringReport(ok, s.limit, new, done)
        return after, LoweringReport(False, s.limit, new, done)
    if isinstance(a, ObserveResidency):
        _name(a.model, "model")
        m = s.models.get(a.model)
        if m is None:
            raise InvalidTransition(f"model {a.model!r} is not loaded")
        _int(a.nbytes, "nbytes")
        _name(a.source, "source")
        models = s.models
        if not guards.on("residency_not_charge") and m.mode is Mode.MANAGED:  # I8b (off: demotion moves charge)
            models = models.set(a.model, attrs.evolve(m, admitted=a.nbytes))
        return attrs.evolve(s, models=models, residency=s.residency.set(a.model, Residency(a.nbytes, a.source))), None
    raise InvalidArgument(f"not a session action: {a!r}")


def report(s: SessionState) -> GovernanceReport:
    """C8's figures as charge, I8b's residency with sources, I3's not-enforced labels."""
    kv = sum(s.kv_charge(r) for r in s.requests.values())
    weights = sum(m.admitted for m in s.models.values())
    return GovernanceReport(
        unit="charge (bytes)", limit=s.limit, used=s.used, available=available(s.limit, s.used, 0),
        oversubscribed=oversubscribed(s.used, s.limit), reclaimable=s.cache,
        unattributed=sum(m.unattributed for m in s.models.values()),
        by_role=((Role.WEIGHTS.value, weights), (Role.KV.value, kv), ("weight cache", s.cache)),
        not_enforced=s.not_enforced,
        residency=tuple((k, v.nbytes, v.source) for k, v in sorted(s.residency.items())),
    )
