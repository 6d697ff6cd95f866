"""The pure arithmetic of admission, elastic reservation, observability and arbitration.

Plain ints only, with PEP 316 contracts (`pre:` / `post:`) that CrossHair
checks symbolically (`crosshair check --analysis_kind PEP316 spec/arith.py`).
Every layer that needs one of these numbers calls the function here, so the
formula is written, and checked, once.
"""

from __future__ import annotations

__all__ = [
    "round_up",
    "admitted_bytes",
    "kv_bytes",
    "kv_growth_peak",
    "static_weight_budget",
    "available",
    "oversubscribed",
    "arbitration_key",
    "streaming_floor",
    "max_batch",
]


def round_up(n: int, granule: int) -> int:
    """n rounded up to a whole number of granules (I8, C7).

    pre: n >= 0
    pre: granule >= 1
    post: __return__ >= n
    post: __return__ % granule == 0
    post: __return__ - n < granule
    """
    return -(-n // granule) * granule


def admitted_bytes(referenced: int, granule: int, transient_peak: int) -> int:
    """Bytes admission charges: referenced extents rounded to the granule, plus the transient peak (I8).

    pre: referenced >= 0
    pre: granule >= 1
    pre: transient_peak >= 0
    post: __return__ >= referenced + transient_peak
    post: __return__ < referenced + transient_peak + granule
    """
    return round_up(referenced, granule) + transient_peak


def kv_bytes(tokens: int, bytes_per_token: int) -> int:
    """KV bytes held by `tokens` entries.

    pre: tokens >= 0
    pre: bytes_per_token >= 0
    post: __return__ >= 0
    """
    return tokens * bytes_per_token


def kv_growth_peak(old_tokens: int, new_tokens: int, bytes_per_token: int) -> int:
    """Peak while growing a KV bucket: the old bucket stays live during the copy (section 6).

    pre: 0 <= old_tokens <= new_tokens
    pre: bytes_per_token >= 0
    post: __return__ == kv_bytes(old_tokens, bytes_per_token) + kv_bytes(new_tokens, bytes_per_token)
    """
    return (old_tokens + new_tokens) * bytes_per_token


def static_weight_budget(device_budget: int, bytes_per_token: int, max_context: int) -> int:
    """The static split of #857: weights get what the full-context KV reservation leaves.

    pre: device_budget >= 0
    pre: bytes_per_token >= 0
    pre: max_context >= 0
    post: 0 <= __return__ <= device_budget
    """
    return max(0, device_budget - bytes_per_token * max_context)


def available(limit: int, used: int, growth_reserved: int) -> int:
    """C8: available = max(0, limit - used - growth reserved).

    pre: limit >= 0
    pre: used >= 0
    pre: growth_reserved >= 0
    post: 0 <= __return__ <= limit
    """
    return max(0, limit - used - growth_reserved)


def oversubscribed(used: int, limit: int) -> int:
    """C8, I2: oversubscribed = max(0, used - limit).

    pre: used >= 0
    pre: limit >= 0
    post: __return__ >= 0
    post: (__return__ > 0) == (used > limit)
    """
    return max(0, used - limit)


def arbitration_key(matured: bool, priority: int, submit_seq: int) -> tuple[int, int, int]:
    """Grant order (section 6): matured requests first, FIFO; then priority descending, then FIFO.

    pre: submit_seq >= 0
    post: (__return__[0] == 0) == matured
    """
    return (0, 0, submit_seq) if matured else (1, -priority, submit_seq)


def streaming_floor(weight_bytes: int, resident_budget: int) -> int:
    """Section 8: weight bytes that must cross the link each step when at most `resident_budget` stay resident.

    pre: weight_bytes >= 0
    pre: resident_budget >= 0
    post: 0 <= __return__ <= weight_bytes
    post: __return__ == 0 or __return__ + resident_budget == weight_bytes
    """
    return max(0, weight_bytes - resident_budget)


def max_batch(budget: int, context: int, bytes_per_token: int) -> int:
    """Section 8: N_max = budget // (context x KV bytes/token), the sequences whose full KV fits.

    pre: budget >= 0
    pre: context >= 1
    pre: bytes_per_token >= 1
    post: __return__ * kv_bytes(context, bytes_per_token) <= budget
    post: (__return__ + 1) * kv_bytes(context, bytes_per_token) > budget
    """
    return budget // kv_bytes(context, bytes_per_token)
