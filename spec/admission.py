"""Pure admission models: continuous-batching KV (I12), multi-model co-residency (I12), elastic KV split (I8c).

Three small abstract machines from DESIGN-FACTS section 5 (I12's two models,
I8c's reading) and section 6 ("KV growth", "Elastic reservation"). Each is a
frozen state plus `step_*(state, action, guards) -> (state, result)` that
validates in a fixed order (argument types, identity, lifecycle, then the
guarded policy check) and raises a typed `GovernorError` on a refusal, which
changes nothing. Pure: no I/O, no ORT, no clock. `refimpl.admission` is the
independent mutable implementation; `invariants.admission` checks
both. Arithmetic comes from `spec.arith`.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import immutables

from spec.arith import kv_bytes, kv_growth_peak, round_up
from spec.errors import (
    BudgetBelowFloor,
    CapacityDenied,
    ContextExhausted,
    InfeasibleRequest,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    UnknownAllocation,
)
from spec.guards import ALL_ON, GuardSet

__all__ = [
    "ReqState",
    "BatchRequest",
    "BatchState",
    "Submit",
    "Advance",
    "Finish",
    "new_batch",
    "step_batch",
    "ResidentModel",
    "CoState",
    "Want",
    "Load",
    "Evict",
    "Serve",
    "new_coresidency",
    "step_coresidency",
    "ElasticState",
    "Decode",
    "Deferred",
    "Prefetch",
    "Retire",
    "new_elastic",
    "step_elastic",
    "static_stranded",
    "elastic_stranded",
]


def _count(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be a {'non-negative' if zero_ok else 'positive'} int, got {n!r}")
    return n


# === continuous-batching KV admission (I12) ==================================


class ReqState(enum.Enum):
    WAITING = "waiting"  # holds nothing (I12: waiting work holds no scarce state)
    RESIDENT = "resident"
    FINISHED = "finished"  # terminal, holds nothing

    def __repr__(self) -> str:
        return f"ReqState.{self.name}"


@attrs.frozen
class BatchRequest:
    peak: int  # prompt + output - 1 entries
    held: int
    state: ReqState


@attrs.frozen
class BatchState:
    capacity: int
    requests: immutables.Map  # rid -> BatchRequest
    next_id: int = 1

    @property
    def held(self) -> int:
        return sum(r.held for r in self.requests.values())

    @property
    def free(self) -> int:
        return self.capacity - self.held


@attrs.frozen
class Submit:
    peak: int


@attrs.frozen
class Advance:
    rid: int
    n: int  # entries taken by one prefill chunk or decode step


@attrs.frozen
class Finish:
    rid: int


def new_batch(capacity: int) -> BatchState:
    return BatchState(_count(capacity, "capacity"), immutables.Map())


def _req(s: BatchState, rid: object) -> BatchRequest:
    r = s.requests.get(rid) if type(rid) is int else None
    if r is None:
        raise UnknownAllocation(f"request {rid!r} was never submitted")
    return r


def step_batch(s: BatchState, a: Any, guards: GuardSet = ALL_ON) -> tuple[BatchState, Any]:
    if isinstance(a, Submit):
        _count(a.peak, "peak")
        if a.peak > s.capacity:
            raise CapacityDenied(f"peak {a.peak} exceeds the pool ({s.capacity}); it could never finish")
        rid = s.next_id
        return attrs.evolve(s, requests=s.requests.set(rid, BatchRequest(a.peak, 0, ReqState.WAITING)),
                            next_id=rid + 1), rid
    if isinstance(a, Advance):
        _count(a.n, "n")
        r = _req(s, a.rid)
        if r.state is ReqState.FINISHED:
            raise InvalidTransition(f"request {a.rid} is finished")
        if r.held + a.n > r.peak:
            raise InvalidBytes(f"request {a.rid}: {r.held} + {a.n} entries exceeds its peak {r.peak}")
        if a.n > s.free:
            raise CapacityDenied(f"{a.n} entries asked, {s.free} free")
        # Verify the remaining need fits in free, so this request can always finish.
        if r.peak - r.held > s.free and guards.on("kv_admission_fits"):  # I12
            raise InfeasibleRequest(f"request {a.rid} needs {r.peak - r.held} more, only {s.free} free")
        nr = BatchRequest(r.peak, r.held + a.n, ReqState.RESIDENT)
        return attrs.evolve(s, requests=s.requests.set(a.rid, nr)), None
    if isinstance(a, Finish):
        r = _req(s, a.rid)
        if r.state is not ReqState.RESIDENT or r.held != r.peak:
            raise InvalidTransition(f"request {a.rid} is {r.state.value} with {r.held}/{r.peak}; cannot finish")
        return attrs.evolve(s, requests=s.requests.set(a.rid, BatchRequest(r.peak, 0, ReqState.FINISHED))), None
    raise InvalidArgument(f"not a batching action: {a!r}")


# === multi-model co-residency (I12) ==========================================


@attrs.frozen
class ResidentModel:
    size: int
    pinned: bool
    resident: bool
    served: bool  # served at least one request since it was last loaded
    work: int  # pending requests


@attrs.frozen
class CoState:
    capacity: int
    models: immutables.Map  # name -> ResidentModel

    @property
    def used(self) -> int:
        return sum(m.size for m in self.models.values() if m.resident)

    @property
    def free(self) -> int:
        return self.capacity - self.used


@attrs.frozen
class Want:
    model: str


@attrs.frozen
class Load:
    model: str


@attrs.frozen
class Evict:
    model: str


@attrs.frozen
class Serve:
    model: str


def new_coresidency(capacity: int, models: dict[str, tuple[int, bool]]) -> CoState:
    """Pinned models start resident; config must satisfy pinned + largest unpinned <= capacity."""
    _count(capacity, "capacity")
    pinned = sum(size for size, p in models.values() if p)
    largest = max((size for size, p in models.values() if not p), default=0)
    if pinned + largest > capacity:
        raise BudgetBelowFloor(f"pinned {pinned} + largest unpinned {largest} > capacity {capacity}")
    return CoState(capacity, immutables.Map({n: ResidentModel(_count(size, "size"), p, p, False, 0)
                                             for n, (size, p) in models.items()}))


def _model(s: CoState, name: object) -> ResidentModel:
    m = s.models.get(name) if type(name) is str else None
    if m is None:
        raise InvalidArgument(f"no model {name!r}")
    return m


def step_coresidency(s: CoState, a: Any, guards: GuardSet = ALL_ON) -> tuple[CoState, Any]:
    if not isinstance(a, (Want, Load, Evict, Serve)):
        raise InvalidArgument(f"not a co-residency action: {a!r}")
    m = _model(s, a.model)
    if isinstance(a, Want):
        return attrs.evolve(s, models=s.models.set(a.model, attrs.evolve(m, work=m.work + 1))), None
    if isinstance(a, Load):
        if m.resident or m.work == 0:
            raise InvalidTransition(f"{a.model}: load needs a non-resident model with work")
        if m.size > s.free:
            raise CapacityDenied(f"{a.model}: {m.size} B asked, {s.free} B free")
        return attrs.evolve(s, models=s.models.set(a.model, attrs.evolve(m, resident=True, served=False))), None
    if isinstance(a, Serve):
        if not m.resident or m.work == 0:
            raise InvalidTransition(f"{a.model}: serve needs a resident model with work")
        return attrs.evolve(s, models=s.models.set(a.model, attrs.evolve(m, work=m.work - 1, served=True))), None
    if not m.resident or m.pinned:
        raise InvalidTransition(f"{a.model}: only a resident, unpinned model can be evicted")
    if guards.on("retire_before_evict"):  # I12
        # Verify the model has served since loading and a pending model needs the room.
        if not m.served:
            raise InvalidTransition(f"{a.model} has not served since it was loaded (retire before evict)")
        if not any(not o.resident and o.work > 0 and o.size > s.free for o in s.models.values()):
            raise InvalidTransition(f"no pending model needs {a.model}'s room")
    return attrs.evolve(s, models=s.models.set(a.model, attrs.evolve(m, resident=False, served=False))), None


# === elastic KV reservation against weights (I8c) ============================


@attrs.frozen
class ElasticState:
    budget: int  # device budget
    headroom: int
    bytes_per_token: int
    max_context: int
    bucket: int  # tokens per KV growth step; the floor is one bucket
    pinned: int  # weight bytes that cannot be reclaimed
    cache: int  # borrowed weight bytes, reclaimable bucket by bucket
    tokens: int  # KV occupancy of the single request
    kv_tokens: int  # committed KV capacity in tokens (a whole number of buckets, <= max_context)

    @property
    def kv_charge(self) -> int:
        return kv_bytes(self.kv_tokens, self.bytes_per_token)

    @property
    def used(self) -> int:
        return self.pinned + self.cache + self.kv_charge


@attrs.frozen
class Decode:
    """One token: grows the KV bucket when full, reclaiming from the weight cache.

    `answer` is the environment's choice (C5): the weight holder gives back at most that many
    bytes when asked (None: all it is asked for). Any amount from 0 to the target is legal.
    """

    answer: int | None = None


@attrs.frozen
class Deferred:
    """A growth the holder's answer did not cover: the request waits; what was given back stays given."""

    released: int


@attrs.frozen
class Prefetch:
    """The weight holder borrows all the budget that KV and headroom leave."""


@attrs.frozen
class Retire:
    """The request finishes; KV returns to its floor."""


def _grown(s: ElasticState) -> int:
    return min(s.kv_tokens + s.bucket, s.max_context)


def new_elastic(budget: int, headroom: int, bytes_per_token: int, max_context: int, bucket: int,
                pinned: int) -> ElasticState:
    for v, w in ((budget, "budget"), (bytes_per_token, "bytes_per_token"), (max_context, "max_context"),
                 (bucket, "bucket")):
        _count(v, w)
    _count(headroom, "headroom", zero_ok=True)
    _count(pinned, "pinned", zero_ok=True)
    floor = min(bucket, max_context)
    # Verify a guaranteed path exists: pinned weights + the last growth's peak + headroom fit.
    last = round_up(max_context, bucket) - bucket if max_context > bucket else 0
    need = pinned + kv_growth_peak(min(last, max_context), max_context, bytes_per_token) + headroom
    if need > budget:
        raise BudgetBelowFloor(f"budget {budget} below the floor {need} (pinned + last growth peak + headroom)")
    return ElasticState(budget, headroom, bytes_per_token, max_context, bucket, pinned, 0, 0, floor)


def step_elastic(s: ElasticState, a: Any, guards: GuardSet = ALL_ON) -> tuple[ElasticState, Any]:
    if isinstance(a, Prefetch):
        cache = max(0, s.budget - s.pinned - s.kv_charge - s.headroom)
        return attrs.evolve(s, cache=cache), cache - s.cache
    if isinstance(a, Retire):
        return attrs.evolve(s, tokens=0, kv_tokens=min(s.bucket, s.max_context)), None
    if not isinstance(a, Decode):
        raise InvalidArgument(f"not an elastic action: {a!r}")
    if a.answer is not None:
        _count(a.answer, "answer", zero_ok=True)
    if s.tokens >= s.max_context:
        raise ContextExhausted(f"request holds {s.tokens} = max context")
    if s.tokens < s.kv_tokens:
        return attrs.evolve(s, tokens=s.tokens + 1), 0
    new = _grown(s)
    peak = kv_growth_peak(s.kv_tokens, new, s.bytes_per_token)
    cache = s.cache
    if guards.on("elastic_guaranteed_path"):  # I8c
        # Verify the copy's peak fits: reclaim from the weight cache (the production reclaim path).
        over = s.pinned + cache + peak + s.headroom - s.budget
        if s.pinned + peak + s.headroom > s.budget:
            raise CapacityDenied(f"growth peak {peak} does not fit even with the cache reclaimed")
        give = min(cache, max(0, over))
        cache -= give if a.answer is None else min(give, a.answer)
        if s.pinned + cache + peak + s.headroom > s.budget:
            # Verify the holder's answer covered the growth; a short answer defers, nothing is forced (C5).
            if cache == s.cache:
                raise CapacityDenied(f"the weight holder gave back nothing of the {over} B asked")
            return attrs.evolve(s, cache=cache), Deferred(s.cache - cache)
    return attrs.evolve(s, cache=cache, tokens=s.tokens + 1, kv_tokens=new), s.cache - cache


def static_stranded(s: ElasticState) -> int:
    """KV bytes reserved but unused under the static split (max context reserved at load)."""
    return kv_bytes(s.max_context - s.tokens, s.bytes_per_token)


def elastic_stranded(s: ElasticState) -> int:
    """KV bytes reserved but unused under the elastic split (one partly filled bucket)."""
    return kv_bytes(s.kv_tokens - s.tokens, s.bytes_per_token)
