"""Predicates for the pure admission models of `spec.admission` (I12, I8c).

State predicates `state_<ID>_<model>(s)` and step predicates
`step_<ID>_<model>(prev, action, next)` raise `InvariantViolation(ID, ...)`.
Each applies to its own model's state type and ignores the others, so one
registry serves all three models. Registered in `invariants.drift`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invariants._violation import InvariantViolation
from spec import admission as S
from spec.arith import kv_bytes, kv_growth_peak

__all__ = [
    "state_I12_batch",
    "state_I12_coresidency",
    "step_I12_coresidency",
    "state_I8c_elastic",
    "step_I8c_elastic",
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "check_state",
    "check_transition",
]


def state_I12_batch(s: Any) -> None:
    """Capacity respected, waiting/finished hold nothing, nobody above its peak, and some resident can finish."""
    if not isinstance(s, S.BatchState):
        return
    if s.held > s.capacity:
        raise InvariantViolation("I12", f"KV pool holds {s.held} > capacity {s.capacity}")
    unfinished = []
    for rid, r in s.requests.items():
        if r.state is not S.ReqState.RESIDENT and r.held:
            raise InvariantViolation("I12", f"request {rid} is {r.state.value} but holds {r.held}")
        if r.held > r.peak:
            raise InvariantViolation("I12", f"request {rid} holds {r.held} > its peak {r.peak}")
        if r.state is S.ReqState.RESIDENT:
            unfinished.append(r)
    if unfinished and not any(r.peak - r.held <= s.free for r in unfinished):
        raise InvariantViolation("I12", f"no resident request can finish: needs "
                                        f"{sorted(r.peak - r.held for r in unfinished)}, free {s.free}")


def state_I12_coresidency(s: Any) -> None:
    """Capacity respected; pinned models stay resident; every pending model can become resident."""
    if not isinstance(s, S.CoState):
        return
    if s.used > s.capacity:
        raise InvariantViolation("I12", f"resident models use {s.used} > capacity {s.capacity}")
    pinned = sum(m.size for m in s.models.values() if m.pinned)
    for name, m in s.models.items():
        if m.pinned and not m.resident:
            raise InvariantViolation("I12", f"pinned model {name} is not resident")
        if m.work and not m.resident and m.size > s.free and pinned + m.size > s.capacity:
            raise InvariantViolation("I12", f"pending model {name} cannot fit even after evicting all unpinned")


def step_I12_coresidency(prev: Any, action: Any, nxt: Any) -> None:
    """No wasted residency: a model is evicted only after it served since loading; service only when resident."""
    if not isinstance(prev, S.CoState):
        return
    if isinstance(action, S.Evict):
        m = prev.models[action.model]
        if not m.served:
            raise InvariantViolation("I12", f"{action.model} evicted before serving any request since loading")
    if isinstance(action, S.Serve) and not prev.models[action.model].resident:
        raise InvariantViolation("I12", f"{action.model} served while not resident")


def state_I8c_elastic(s: Any) -> None:
    """Weights + KV + headroom <= budget; KV within max context; a guaranteed path to max context exists."""
    if not isinstance(s, S.ElasticState):
        return
    if s.used + s.headroom > s.budget:
        raise InvariantViolation("I8c", f"oversubscribed: pinned {s.pinned} + cache {s.cache} + KV "
                                        f"{s.kv_charge} + headroom {s.headroom} > budget {s.budget}")
    if not s.tokens <= s.kv_tokens <= s.max_context:
        raise InvariantViolation("I8c", f"KV capacity {s.kv_tokens} outside [{s.tokens}, {s.max_context}]")
    if s.kv_charge > kv_bytes(s.max_context, s.bytes_per_token):
        raise InvariantViolation("I8c", "KV reservation exceeds the static (max context) reservation")
    # The path: from here, each growth to max context fits once the (reclaimable) cache is gone.
    t = s.kv_tokens
    while t < s.max_context:
        new = min(t + s.bucket, s.max_context)
        if s.pinned + kv_growth_peak(t, new, s.bytes_per_token) + s.headroom > s.budget:
            raise InvariantViolation("I8c", f"no guaranteed path: growth {t}->{new} cannot fit")
        t = new


def step_I8c_elastic(prev: Any, action: Any, nxt: Any) -> None:
    """A KV growth's copy peak (old + new bucket live) never oversubscribes the budget."""
    if not isinstance(prev, S.ElasticState) or nxt.kv_tokens == prev.kv_tokens:
        return
    if nxt.kv_tokens > prev.kv_tokens:
        peak = kv_growth_peak(prev.kv_tokens, nxt.kv_tokens, prev.bytes_per_token)
        if nxt.pinned + nxt.cache + peak + nxt.headroom > nxt.budget:
            raise InvariantViolation("I8c", f"growth {prev.kv_tokens}->{nxt.kv_tokens}: copy peak {peak} "
                                            f"oversubscribes (cache {nxt.cache} not reclaimed)")


STATE_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "I12": (state_I12_batch, state_I12_coresidency),
    "I8c": (state_I8c_elastic,),
}
STEP_PREDICATES: dict[str, tuple[Callable[[Any, Any, Any], None], ...]] = {
    "I12": (step_I12_coresidency,),
    "I8c": (step_I8c_elastic,),
}


def check_state(s: Any) -> None:
    for preds in STATE_PREDICATES.values():
        for p in preds:
            p(s)


def check_transition(prev: Any, action: Any, nxt: Any) -> None:
    for preds in STEP_PREDICATES.values():
        for p in preds:
            p(prev, action, nxt)
