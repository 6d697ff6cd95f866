"""Should the runtime manage these bytes at all? Section 8's decline rule and its bandwidth model.

Theory of operation. Copying a weight to the device pays only if the device
reads it again before it is evicted. A decode step reads each weight once,
so when the weights exceed what may stay resident, a runtime that copies
them adds the whole copy to the same link traffic the platform's demand
paging would cause, and the platform moves less (it keeps what it paged in
until the OS needs it). The rule (`choose_mover`) is the section-8 table;
`step_seconds` is the bandwidth model that shows why: a step costs the bytes
moved over the link at link bandwidth plus the bytes read from device memory
at resident bandwidth. Batching (`per_token_bytes`) divides a step's weight
traffic over the N sequences of one fused forward.

Exact arithmetic (`fractions.Fraction`); bandwidths are ints in bytes/s.
Pure: no I/O, no clock. The decline is an outcome, reported (I3), not a failure.
"""

from __future__ import annotations

import enum
from fractions import Fraction

from spec.errors import InvalidArgument, InvalidBytes

__all__ = ["Mover", "choose_mover", "step_seconds", "tokens_per_second", "per_token_bytes"]


class Mover(enum.Enum):
    RUNTIME = "runtime"  # the governor manages (copies, pins, evicts) these bytes
    PLATFORM = "platform"  # declined: the OS / driver pages them; reported as not enforced (I3)

    def __repr__(self) -> str:
        return f"Mover.{self.name}"


def choose_mover(reread_before_eviction: bool, working_set: int, capacity: int, placement_required: bool) -> Mover:
    """Section 8: who should move a class of bytes.

    placement required (fences, capture, IPC) -> runtime, always; re-read before eviction -> runtime;
    read once with the working set over capacity -> platform; capacity ample -> either, prefer runtime.
    """
    for v, what in ((working_set, "working_set"), (capacity, "capacity")):
        if type(v) is not int or v < 0:
            raise InvalidBytes(f"{what} must be a non-negative int, got {v!r}")
    if type(reread_before_eviction) is not bool or type(placement_required) is not bool:
        raise InvalidArgument("reread_before_eviction and placement_required must be bools")
    if placement_required or reread_before_eviction:
        return Mover.RUNTIME
    return Mover.PLATFORM if working_set > capacity else Mover.RUNTIME


def _rate(v: object, what: str) -> int:
    if type(v) is not int or v < 1:
        raise InvalidBytes(f"{what} must be a positive int (bytes/s), got {v!r}")
    return v


def step_seconds(moved: int, link_bandwidth: int, resident_read: int, resident_bandwidth: int) -> Fraction:
    """One step: `moved` bytes over the link plus `resident_read` bytes from device memory."""
    for v, what in ((moved, "moved"), (resident_read, "resident_read")):
        if type(v) is not int or v < 0:
            raise InvalidBytes(f"{what} must be a non-negative int, got {v!r}")
    return Fraction(moved, _rate(link_bandwidth, "link_bandwidth")) + Fraction(
        resident_read, _rate(resident_bandwidth, "resident_bandwidth"))


def tokens_per_second(seconds_per_step: Fraction, batch: int = 1) -> Fraction:
    """Tokens per second of a step that emits one token for each of `batch` sequences."""
    if seconds_per_step <= 0 or type(batch) is not int or batch < 1:
        raise InvalidArgument(f"need seconds > 0 and batch >= 1, got {seconds_per_step!r}, {batch!r}")
    return batch / Fraction(seconds_per_step)


def per_token_bytes(step_weight_bytes: int, batch: int, kv_moved_per_token: int = 0) -> Fraction:
    """Host-to-device bytes per token with N sequences fused: weights once per N tokens, plus KV moved per token."""
    if type(batch) is not int or batch < 1:
        raise InvalidArgument(f"batch must be a positive int, got {batch!r}")
    for v, what in ((step_weight_bytes, "step_weight_bytes"), (kv_moved_per_token, "kv_moved_per_token")):
        if type(v) is not int or v < 0:
            raise InvalidBytes(f"{what} must be a non-negative int, got {v!r}")
    return Fraction(step_weight_bytes, batch) + kv_moved_per_token
