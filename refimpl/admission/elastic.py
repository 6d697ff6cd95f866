"""One request's elastic KV split (I8c): KV grows bucket by bucket from a floor; weights borrow the rest.

The budget is an authority of the `ProcessMemoryManager`. The split's holder
leases the pinned weights and the request's KV buffer; the weight cache
(`WeightCache`, its own holder) leases the borrowed weights. A growth leases
the new buffer while the old one is still charged (the copy's peak), then
releases the old one. Room is read from the authority's snapshot; when a
growth's peak does not fit, the split reclaims through `ReclaimableHolder`,
a pressure ticket on the cache, and a short answer defers the request (C5).
The split keeps its configuration, the token count and its lease ids; what
its leases weigh, and the cache's bytes, are read from the ledger.
"""

from __future__ import annotations

from typing import Any, Protocol

from refimpl.admission.seat import LedgerSeat, positive, resolve_authority
from refimpl.admission.weight_cache import WeightCache
from refimpl.manager import ProcessMemoryManager
from spec import admission as S
from spec.arith import kv_bytes, kv_growth_peak
from spec.errors import BudgetBelowFloor, CapacityDenied, ContextExhausted, InvalidArgument, InvalidBytes
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import Allocation
from spec.types import Role, Tier

__all__ = ["ReclaimableHolder", "ElasticSplit"]


class ReclaimableHolder(Protocol):
    def reclaim(self, target: int) -> int:
        """Release up to `target` bytes of own unpinned idle bytes; return what was released (>= 0)."""


class ElasticSplit:
    """One request's KV grows bucket by bucket from a floor; weights borrow the rest and yield it (I8c)."""

    def __init__(self, budget: int | None, headroom: int, bytes_per_token: int, max_context: int, bucket: int,
                 pinned: int, guards: GuardSet = ALL_ON, *, pmm: ProcessMemoryManager | None = None,
                 auth: int | None = None) -> None:
        if budget is not None:
            positive(budget, "budget")
        for v, what in ((bytes_per_token, "bytes_per_token"), (max_context, "max_context"), (bucket, "bucket")):
            positive(v, what)
        positive(headroom, "headroom", zero_ok=True)
        positive(pinned, "pinned", zero_ok=True)
        pmm, auth, limit = resolve_authority(pmm, auth, budget, "elastic", Tier.HOST)
        # Verify the floor: pinned weights + the last growth's copy peak + headroom fit the budget (I8c).
        last = max(0, (max_context - 1) // bucket * bucket)
        floor = pinned + kv_growth_peak(last, max_context, bytes_per_token) + headroom
        if floor > limit:
            raise BudgetBelowFloor(f"budget {limit} below the floor {floor} (pinned + last growth peak + headroom)")
        self.headroom, self.bpt = headroom, bytes_per_token
        self.max_context, self.bucket, self.guards = max_context, bucket, guards
        self.seat = LedgerSeat(pmm, auth, "elastic-split")
        self.cache = WeightCache(bucket * bytes_per_token, limit, pmm, auth)
        self.weights: ReclaimableHolder = self.cache  # reclaim = a pressure ticket on the cache
        self._pinned = self.seat.lease(pinned, Role.WEIGHTS) if pinned else None
        self.tokens = 0
        self.kv_tokens = min(bucket, max_context)  # the request's KV buffer, in tokens; its lease is `_kv`
        self._kv = self.seat.lease(kv_bytes(self.kv_tokens, bytes_per_token), Role.KV)

    @property
    def budget(self) -> int:
        return self.seat.limit()

    def execute(self, a: Any) -> Any:
        if isinstance(a, S.Prefetch):
            before = self.cache.bytes
            room = self.seat.free() - self.headroom
            if room > 0:
                self.cache.fill(room)
            return self.cache.bytes - before
        if isinstance(a, S.Retire):
            self.seat.release(self._kv)
            self.tokens, self.kv_tokens = 0, min(self.bucket, self.max_context)
            self._kv = self.seat.lease(kv_bytes(self.kv_tokens, self.bpt), Role.KV)
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
        grow = kv_bytes(new, self.bpt)  # charged beside the old buffer until the copy is done
        released = 0
        if self.guards.on("elastic_guaranteed_path"):  # I8c
            free, cache = self.seat.free(), self.cache.bytes
            if grow + self.headroom > free + cache:
                raise CapacityDenied(f"growth peak {kv_growth_peak(self.kv_tokens, new, self.bpt)} does not fit "
                                     f"even with the cache reclaimed")
            over = grow + self.headroom - free
            if over > 0:
                self.cache.answer_cap = answer
                released = self.weights.reclaim(over)  # production reclaim path: a pressure ticket on the weights
                if released < over:  # a short answer is legal (C5): the request defers, KV does not grow
                    if not released:
                        raise CapacityDenied(f"the weight holder gave back nothing of the {over} B asked")
                    return S.Deferred(released)
        try:
            kv = self.seat.lease(grow, Role.KV)
        except CapacityDenied:
            # The ledger refused the peak: with nothing reclaimed nothing changed; after a reclaim (another
            # holder of a shared authority took the room first) what the holder gave back stays given (C5)
            # and the request defers, as on a short answer.
            if released:
                return S.Deferred(released)
            raise
        self.seat.release(self._kv)
        self._kv, self.kv_tokens = kv, new
        self.tokens += 1
        return released

    def abstract(self) -> S.ElasticState:
        return self._abstract(self.seat.ledger())

    def _abstract(self, ledger: tuple[Allocation, ...]) -> S.ElasticState:
        kv = self.seat.charges(ledger, Role.KV).get(self._kv, 0)
        pinned = sum(self.seat.charges(ledger, Role.WEIGHTS).values())
        return S.ElasticState(self.seat.limit(), self.headroom, self.bpt,
                              self.max_context, self.bucket, pinned, self.cache.charged(), self.tokens,
                              kv // self.bpt)

    def reading(self) -> tuple[S.ElasticState, int]:
        """The abstraction and what the ledger charges the split's and the cache's holders (each its own reading;
        nothing runs between them: the model is driven from one thread)."""
        ledger = self.seat.ledger()
        return self._abstract(ledger), self.seat.charged(ledger) + self.cache.charged(None)
