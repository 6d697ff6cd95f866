"""Weight streaming under a resident budget: one decode step's sweep through a weight cache.

Theory of operation. A decode step reads every weight once, in the same
order every step (layer 0 .. L-1, then the head). When the weights exceed
the budget the cache may keep, some bytes cross the link every step; the
least that can cross is `spec.arith.streaming_floor(W, budget)` (section 8).
Whether a policy reaches that floor depends on how it evicts under a
*cyclic* access pattern:

- `LRU` evicts the unit used longest ago, which on a cycle longer than the
  cache is exactly the unit needed next: every access misses and the whole
  model streams every step, whatever the budget (until everything fits).
  This is a plain LRU over equal-order units, the model of a runtime that
  copies single-touch weights. It is not upstream's measured policy (LRU
  with a large-tensor bypass, #837 / #886), which streamed far less than
  the whole model: modelling that needs each tensor's size and the bypass
  threshold, which the design does not give (`ortmem simulate` quotes its
  figures instead).
- `PINNED` keeps a fixed resident set (units in sweep order while they fit
  beside one staging slot as large as the largest streamed unit) and streams
  the rest through the slot: resident bytes hit every step, so it sits on the
  floor up to that slot and the unit rounding.

Pure: units are byte counts, the result is a frozen record of the steady
state (the second sweep; the first only fills the cache). No I/O, no clock.
"""

from __future__ import annotations

import enum
from collections import OrderedDict

import attrs

from spec.arith import streaming_floor
from spec.errors import InvalidArgument, InvalidBytes

__all__ = ["Policy", "SweepResult", "weight_units", "sweep"]


class Policy(enum.Enum):
    LRU = "lru"
    PINNED = "pinned"

    def __repr__(self) -> str:
        return f"Policy.{self.name}"


@attrs.frozen
class SweepResult:
    policy: Policy
    capacity: int  # bytes the cache may hold (the weight budget)
    weight_bytes: int  # W: every unit, read once per step
    streamed: int  # bytes paged in during one steady-state step
    page_ins: int  # units paged in during that step
    hits: int  # units found resident during that step
    evictions: int  # units evicted during that step

    @property
    def floor(self) -> int:
        return streaming_floor(self.weight_bytes, self.capacity)


def weight_units(layers: int, layer_bytes: int, head_bytes: int, granule: int) -> tuple[int, ...]:
    """The sweep's units: each layer's and the head's bytes cut into whole granules (the last one partial)."""
    for v, what in ((layers, "layers"), (granule, "granule")):
        if type(v) is not int or v < 1:
            raise InvalidBytes(f"{what} must be a positive int, got {v!r}")
    for v, what in ((layer_bytes, "layer_bytes"), (head_bytes, "head_bytes")):
        if type(v) is not int or v < 0:
            raise InvalidBytes(f"{what} must be a non-negative int, got {v!r}")

    def cut(n: int) -> list[int]:
        full, rest = divmod(n, granule)
        return [granule] * full + ([rest] if rest else [])

    return tuple(u for _ in range(layers) for u in cut(layer_bytes)) + tuple(cut(head_bytes))


def _pinned(units: tuple[int, ...], capacity: int) -> SweepResult:
    # Resident set in sweep order while it fits beside a staging slot of the largest unit; the rest
    # streams through the slot, each page-in evicting the previous one (one streamed unit would stay).
    slot = max(units)
    resident, pinned = 0, 0
    for u in units:
        if resident + u + slot > capacity:
            break
        resident += u
        pinned += 1
    rest = units[pinned:]
    if len(rest) <= 1 and resident + sum(rest) <= capacity:
        return SweepResult(Policy.PINNED, capacity, sum(units), 0, 0, len(units), 0)
    if slot > capacity:  # not even one unit fits: everything streams straight through
        return SweepResult(Policy.PINNED, capacity, sum(units), sum(units), len(units), 0, 0)
    return SweepResult(Policy.PINNED, capacity, sum(units), sum(rest), len(rest), pinned, len(rest))


def _lru(units: tuple[int, ...], capacity: int) -> SweepResult:
    cache: OrderedDict[int, int] = OrderedDict()
    held = 0
    stats = (0, 0, 0, 0)
    for _ in range(2):  # the first sweep fills the cache; the second is the steady state
        streamed = page_ins = hits = evictions = 0
        for i, u in enumerate(units):
            if i in cache:
                cache.move_to_end(i)
                hits += 1
                continue
            streamed += u
            page_ins += 1
            if u > capacity:
                continue  # streamed straight through, never cached
            while held + u > capacity:
                _, v = cache.popitem(last=False)
                held -= v
                evictions += 1
            cache[i] = u
            held += u
        stats = (streamed, page_ins, hits, evictions)
    return SweepResult(Policy.LRU, capacity, sum(units), *stats)


def sweep(units: tuple[int, ...], capacity: int, policy: Policy) -> SweepResult:
    """One steady-state decode step: bytes streamed, page-ins, hits, evictions under `policy`."""
    if type(capacity) is not int or capacity < 0:
        raise InvalidBytes(f"capacity must be a non-negative int, got {capacity!r}")
    if not units or any(type(u) is not int or u < 1 for u in units):
        raise InvalidBytes("units must be a non-empty sequence of positive ints")
    if not isinstance(policy, Policy):
        raise InvalidArgument(f"policy must be a Policy, got {policy!r}")
    return _lru(tuple(units), capacity) if policy is Policy.LRU else _pinned(tuple(units), capacity)
