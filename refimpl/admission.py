"""Mutable admission schedulers: KV batcher (I12), co-residency scheduler (I12), elastic KV split (I8c).

The implementations `spec.admission` specifies, written independently: mutable
records, their own guard checks, and an `abstract()` refinement mapping back
to the spec's frozen states. They share only vocabulary (errors, actions,
arithmetic) with the spec, never its transition code. No ORT here; the
real-session elastic path lives in `refimpl.ort.governed`.

`ReclaimableHolder` is the requester-side reclaim interface the elastic
split drives: `reclaim(target) -> credited`, zero legal. It is served by the
one `ProcessMemoryManager` (issue #10): the weight cache's buckets are leases
of a holder on an authority of the split's budget, and the growth path opens
a pressure ticket on that holder (`press`), whose callback picks its own
buckets, newest first, and answers with their allocation ids (C5, I6); the
requester is credited exactly what the answer released.
"""

from __future__ import annotations

from typing import Any, Protocol

import immutables

from refimpl.governor import ProcessMemoryManager
from spec import admission as S
from spec.arith import kv_bytes, kv_growth_peak
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
from spec.types import Role, Tier

__all__ = ["ReclaimableHolder", "KvBatcher", "CoResidencyScheduler", "ElasticSplit", "WeightCache"]


class ReclaimableHolder(Protocol):
    def reclaim(self, target: int) -> int:
        """Release up to `target` bytes of own unpinned idle bytes; return what was released (>= 0)."""


def _positive(n: object, what: str, zero_ok: bool = False) -> int:
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok):
        raise InvalidBytes(f"{what} must be a {'non-negative' if zero_ok else 'positive'} int, got {n!r}")
    return n


class KvBatcher:
    """Continuous batching over one KV pool: advance only if the remaining need fits (I12)."""

    def __init__(self, capacity: int, guards: GuardSet = ALL_ON) -> None:
        self.capacity, self.guards = _positive(capacity, "capacity"), guards
        self._peak: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._state: dict[int, S.ReqState] = {}
        self._total = 0
        self._next = 1

    def execute(self, a: Any) -> Any:
        if isinstance(a, S.Submit):
            return self.submit(a.peak)
        if isinstance(a, S.Advance):
            return self.advance(a.rid, a.n)
        if isinstance(a, S.Finish):
            return self.finish(a.rid)
        raise InvalidArgument(f"not a batching action: {a!r}")

    def submit(self, peak: int) -> int:
        if type(peak) is not int or peak <= 0:
            raise InvalidBytes(f"peak must be a positive int, got {peak!r}")
        if peak > self.capacity:
            raise CapacityDenied(f"peak {peak} > pool {self.capacity}")
        rid, self._next = self._next, self._next + 1
        self._peak[rid], self._held[rid], self._state[rid] = peak, 0, S.ReqState.WAITING
        return rid

    def _known(self, rid: object) -> int:
        if type(rid) is not int or rid not in self._peak:
            raise UnknownAllocation(f"request {rid!r} was never submitted")
        return rid

    def advance(self, rid: int, n: int) -> None:
        if type(n) is not int or n <= 0:
            raise InvalidBytes(f"n must be a positive int, got {n!r}")
        rid = self._known(rid)
        if self._state[rid] is S.ReqState.FINISHED:
            raise InvalidTransition(f"request {rid} is finished")
        need = self._peak[rid] - self._held[rid]
        if n > need:
            raise InvalidBytes(f"request {rid}: {n} entries exceeds its remaining {need}")
        free = self.capacity - self._total
        if n > free:
            raise CapacityDenied(f"{n} entries asked, {free} free")
        if need > free and self.guards.on("kv_admission_fits"):  # I12
            raise InfeasibleRequest(f"request {rid} needs {need} more, only {free} free")
        self._held[rid] += n
        self._total += n
        self._state[rid] = S.ReqState.RESIDENT

    def finish(self, rid: int) -> None:
        rid = self._known(rid)
        if self._state[rid] is not S.ReqState.RESIDENT or self._held[rid] != self._peak[rid]:
            raise InvalidTransition(f"request {rid} cannot finish yet")
        self._total -= self._held[rid]
        self._held[rid], self._state[rid] = 0, S.ReqState.FINISHED

    def abstract(self) -> S.BatchState:
        reqs = {r: S.BatchRequest(self._peak[r], self._held[r], self._state[r]) for r in self._peak}
        return S.BatchState(self.capacity, immutables.Map(reqs), self._next)


class CoResidencyScheduler:
    """Models sharing one device: retire before evict, pinned stay resident (I12)."""

    def __init__(self, capacity: int, models: dict[str, tuple[int, bool]], guards: GuardSet = ALL_ON) -> None:
        # Verify the configuration: pinned models plus the largest unpinned one fit (I12).
        _positive(capacity, "capacity")
        for size, _ in models.values():
            _positive(size, "size")
        pinned = sum(size for size, p in models.values() if p)
        largest = max((size for size, p in models.values() if not p), default=0)
        if pinned + largest > capacity:
            raise BudgetBelowFloor(f"pinned {pinned} + largest unpinned {largest} > capacity {capacity}")
        self.capacity, self.guards = capacity, guards
        self._rows = {n: [size, pinned, pinned, False, 0] for n, (size, pinned) in models.items()}
        self._used = sum(size for size, p in models.values() if p)

    def execute(self, a: Any) -> Any:
        if not isinstance(a, (S.Want, S.Load, S.Evict, S.Serve)):
            raise InvalidArgument(f"not a co-residency action: {a!r}")
        if type(a.model) is not str or a.model not in self._rows:
            raise InvalidArgument(f"no model {a.model!r}")
        row = self._rows[a.model]
        size, pinned, resident, served, work = row
        if isinstance(a, S.Want):
            row[4] += 1
        elif isinstance(a, S.Load):
            if resident or not work:
                raise InvalidTransition(f"{a.model}: load needs a non-resident model with work")
            if size > self.capacity - self._used:
                raise CapacityDenied(f"{a.model}: {size} B asked, {self.capacity - self._used} B free")
            row[2], row[3] = True, False
            self._used += size
        elif isinstance(a, S.Serve):
            if not resident or not work:
                raise InvalidTransition(f"{a.model}: serve needs a resident model with work")
            row[4] -= 1
            row[3] = True
        else:
            if not resident or pinned:
                raise InvalidTransition(f"{a.model}: only a resident, unpinned model can be evicted")
            if self.guards.on("retire_before_evict"):  # I12
                free = self.capacity - self._used
                if not served:
                    raise InvalidTransition(f"{a.model} has not served since it was loaded")
                if not any(not r[2] and r[4] and r[0] > free for r in self._rows.values()):
                    raise InvalidTransition(f"no pending model needs {a.model}'s room")
            row[2], row[3] = False, False
            self._used -= size
        return None

    def abstract(self) -> S.CoState:
        return S.CoState(self.capacity, immutables.Map(
            {n: S.ResidentModel(r[0], r[1], r[2], r[3], r[4]) for n, r in self._rows.items()}))


class WeightCache:
    """Borrowed weight bytes in buckets, answering pressure tickets with its own victims (newest first).

    Each bucket is a lease of this holder in the manager's ledger (`pmm`, authority `auth`); `bytes` is
    what the ledger charges on that authority (the cache is the only holder there).
    """

    def __init__(self, bucket: int, capacity: int, pmm: ProcessMemoryManager | None = None,
                 auth: int | None = None) -> None:
        self.bucket = bucket
        #: The environment's choice for the next answer (C5): give back at most this much (None: all asked).
        self.answer_cap: int | None = None
        self.pmm = pmm if pmm is not None else ProcessMemoryManager()
        self.auth = auth if auth is not None else self.pmm.register_authority("elastic", Tier.HOST, max(1, capacity))
        self.id = self.pmm.register_holder("weight-cache")
        self.buckets: list[tuple[int, int]] = []  # (bytes, allocation id), newest last
        self._released: dict[int, int] = {}  # pressure id -> bytes its answer released
        self.pmm.register_callback(self.id, self._on_pressure)

    @property
    def bytes(self) -> int:
        return self.pmm.snapshot(self.auth).used

    def _lease(self, nbytes: int) -> int:
        aid = self.pmm.reserve(self.id, self.auth, Tier.HOST, nbytes, Role.WEIGHTS)
        self.pmm.commit(self.id, aid, nbytes)
        return aid

    def fill(self, nbytes: int) -> None:
        while nbytes > 0:
            b = min(self.bucket, nbytes)
            self.buckets.append((b, self._lease(b)))
            nbytes -= b

    def reclaim(self, target: int) -> int:
        """Through a pressure ticket on this cache; returns the credited bytes (zero if unanswered)."""
        if target <= 0:
            return 0
        pid = self.pmm.press(self.id, self.auth, target)
        if pid not in self._released:  # not answered: credit nothing, force nothing
            self.pmm.cancel_pressure(pid)
            return 0
        return self._released.pop(pid)

    def _on_pressure(self, pmm: ProcessMemoryManager, pid: int, target: int) -> None:
        victims = self._pick(target)
        self._released[pid] = pmm.answer(self.id, pid, victims)  # zero victims is a legal answer
        self._freed(victims)

    def _pick(self, target: int) -> tuple[int, ...]:
        if self.answer_cap is not None:
            target, self.answer_cap = min(target, self.answer_cap), None
        if target == 0:
            return ()
        picked, got = [], 0
        while got < target and len(picked) < len(self.buckets):
            b, tid = self.buckets[-1 - len(picked)]
            picked.append(tid)
            got += b
        if got > target:  # a partial bucket is split, not over-released
            i = len(self.buckets) - len(picked)
            b, tid = self.buckets[i]
            cut = b - (got - target)
            self.pmm.release(self.id, tid)
            self.buckets[i:i + 1] = [(b - cut, self._lease(b - cut)), (cut, self._lease(cut))]
            picked[-1] = self.buckets[i + 1][1]
        return tuple(picked)

    def _freed(self, victims: tuple[int, ...]) -> None:
        gone = set(victims)
        self.buckets = [(b, t) for b, t in self.buckets if t not in gone]


class ElasticSplit:
    """One request's KV grows bucket by bucket from a floor; weights borrow the rest and yield it (I8c)."""

    def __init__(self, budget: int, headroom: int, bytes_per_token: int, max_context: int, bucket: int,
                 pinned: int, guards: GuardSet = ALL_ON) -> None:
        for v, what in ((budget, "budget"), (bytes_per_token, "bytes_per_token"), (max_context, "max_context"),
                        (bucket, "bucket")):
            _positive(v, what)
        _positive(headroom, "headroom", zero_ok=True)
        _positive(pinned, "pinned", zero_ok=True)
        # Verify the floor: pinned weights + the last growth's copy peak + headroom fit the budget (I8c).
        last = max(0, (max_context - 1) // bucket * bucket)
        floor = pinned + kv_growth_peak(last, max_context, bytes_per_token) + headroom
        if floor > budget:
            raise BudgetBelowFloor(f"budget {budget} below the floor {floor} (pinned + last growth peak + headroom)")
        self.budget, self.headroom, self.bpt = budget, headroom, bytes_per_token
        self.max_context, self.bucket, self.pinned, self.guards = max_context, bucket, pinned, guards
        self.cache = WeightCache(bucket * bytes_per_token, budget)
        self.weights: ReclaimableHolder = self.cache  # reclaim = a pressure ticket on the cache
        self.tokens = 0
        self.kv_tokens = min(bucket, max_context)

    def execute(self, a: Any) -> Any:
        if isinstance(a, S.Prefetch):
            before = self.cache.bytes
            room = self.budget - self.pinned - kv_bytes(self.kv_tokens, self.bpt) - self.headroom - before
            if room > 0:
                self.cache.fill(room)
            return self.cache.bytes - before
        if isinstance(a, S.Retire):
            self.tokens, self.kv_tokens = 0, min(self.bucket, self.max_context)
            return None
        if isinstance(a, S.Decode):
            return self.decode(a.answer)
        raise InvalidArgument(f"not an elastic action: {a!r}")

    def decode(self, answer: int | None = None) -> int | S.Deferred:
        """One token; `answer` caps what the weight holder gives back if a growth asks it (None: all)."""
        if answer is not None and (type(answer) is not int or answer < 0):
            raise InvalidBytes(f"answer must be a non-negative int, got {answer!r}")
        if self.tokens >= self.max_context:
            raise ContextExhausted(f"request holds {self.tokens} = max context")
        if self.tokens < self.kv_tokens:
            self.tokens += 1
            return 0
        new = min(self.kv_tokens + self.bucket, self.max_context)
        peak = kv_growth_peak(self.kv_tokens, new, self.bpt)
        released = 0
        if self.guards.on("elastic_guaranteed_path"):  # I8c
            if self.pinned + peak + self.headroom > self.budget:
                raise CapacityDenied(f"growth peak {peak} does not fit even with the cache reclaimed")
            over = self.pinned + self.cache.bytes + peak + self.headroom - self.budget
            if over > 0:
                self.cache.answer_cap = answer
                released = self.weights.reclaim(over)  # production reclaim path: a pressure ticket on the weights
                if released < over:  # a short answer is legal (C5): the request defers, KV does not grow
                    if not released:
                        raise CapacityDenied(f"the weight holder gave back nothing of the {over} B asked")
                    return S.Deferred(released)
        self.tokens += 1
        self.kv_tokens = new
        return released

    def abstract(self) -> S.ElasticState:
        return S.ElasticState(self.budget, self.headroom, self.bpt, self.max_context, self.bucket, self.pinned,
                              self.cache.bytes, self.tokens, self.kv_tokens)
