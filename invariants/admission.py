"""Predicates for the pure admission models of `spec.admission` (I12, I8c).

State predicates `state_<ID>_<model>(s)` and step predicates
`step_<ID>_<model>(prev, action, next)` raise `InvariantViolation(ID, ...)`.
Each applies to its own model's state type and ignores the others, so one
registry serves all three models. Observation predicates
`observed_<ID>_<model>(observed)` read what the checker saw outside the
abstract state: the manager ledger's charge for a model's holders beside the
model's abstraction (`LedgerBooks`). Registered in `invariants.drift`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from invariants.clauses import clause, conjunction
from spec import admission as S

__all__ = [
    "state_I12_batch",
    "state_I12_coresidency",
    "step_I12_coresidency",
    "state_I8c_elastic",
    "step_I8c_elastic",
    "step_C5_elastic",
    "LedgerBooks",
    "observed_I12_admission",
    "observed_I8c_elastic",
    "STATE_PREDICATES",
    "STEP_PREDICATES",
    "OBSERVATION_PREDICATES",
    "check_state",
    "check_transition",
    "check_observations",
]


_B_CAP = clause("I12", "state_I12_batch", "kv_within_capacity",
                "the KV pool never holds more than its capacity")
_B_IDLE = clause("I12", "state_I12_batch", "only_residents_hold",
                 "no waiting or finished request holds KV, and none holds more than its peak")
_B_LIVE = clause("I12", "state_I12_batch", "some_resident_can_finish",
                 "admission never strands every resident request: at least one can always reach its peak")


def state_I12_batch(s: Any) -> None:
    """Capacity respected, waiting/finished hold nothing, nobody above its peak, and some resident can finish."""
    if not isinstance(s, S.BatchState):
        return
    held = sum(r.held for r in s.requests.values())  # from the records, not the state's own property
    if held > s.capacity:
        _B_CAP.fail(f"KV pool holds {held} > capacity {s.capacity}")
    _B_CAP.case(held > 0)
    unfinished = []
    for rid, r in s.requests.items():
        if r.state is not S.ReqState.RESIDENT and r.held:
            _B_IDLE.fail(f"request {rid} is {r.state.value} but holds {r.held}")
        if r.held > r.peak:
            _B_IDLE.fail(f"request {rid} holds {r.held} > its peak {r.peak}")
        if r.state is S.ReqState.RESIDENT:
            unfinished.append(r)
    _B_IDLE.case(bool(s.requests))
    if _B_LIVE.case(bool(unfinished)) and not any(r.peak - r.held <= s.capacity - held for r in unfinished):
        _B_LIVE.fail(f"no resident request can finish: needs {sorted(r.peak - r.held for r in unfinished)}, "
                     f"free {s.capacity - held}")


_CO_CAP = clause("I12", "state_I12_coresidency", "resident_within_capacity",
                 "resident models never use more than the pool's capacity")
_CO_PIN = clause("I12", "state_I12_coresidency", "pinned_resident",
                 "a pinned model is never made non-resident")
_CO_WASTE = clause("I12", "step_I12_coresidency", "no_wasted_load",
                   "no model is evicted before it served a request since it was loaded")
_CO_NEED = clause("I12", "step_I12_coresidency", "evict_only_for_need",
                  "no model is evicted unless a pending model does not fit in the free room")
_CO_SERVE = clause("I12", "step_I12_coresidency", "serve_resident",
                   "no request is served by a model that is not resident")


def state_I12_coresidency(s: Any) -> None:
    """Capacity respected; pinned models stay resident; every pending model can become resident."""
    if not isinstance(s, S.CoState):
        return
    used = sum(m.size for m in s.models.values() if m.resident)
    if used > s.capacity:
        _CO_CAP.fail(f"resident models use {used} > capacity {s.capacity}")
    _CO_CAP.case(any(m.resident and not m.pinned for m in s.models.values()))
    # "Every pending model can load once the unpinned ones are evicted" is not a clause: pinned sizes never
    # change, so it holds iff the configuration check does (pinned + largest unpinned <= capacity), which
    # tests/test_admission.py pins for both layers; a clause that no behaviour can break proves nothing.
    pinned = sum(m.size for m in s.models.values() if m.pinned)
    for name, m in s.models.items():
        if m.pinned and not m.resident:
            _CO_PIN.fail(f"pinned model {name} is not resident")
    _CO_PIN.case(pinned > 0)


def step_I12_coresidency(prev: Any, action: Any, nxt: Any) -> None:
    """No wasted residency: evict only a model that served, and only for a pending model that does not fit."""
    if not isinstance(prev, S.CoState):
        return
    if _CO_WASTE.case(isinstance(action, S.Evict)):
        m = prev.models[action.model]
        if not m.served:
            _CO_WASTE.fail(f"{action.model} evicted before serving any request since loading")
    if _CO_NEED.case(isinstance(action, S.Evict)):
        free = prev.capacity - sum(m.size for m in prev.models.values() if m.resident)
        if not any(o.work > 0 and not o.resident and o.size > free for o in prev.models.values()):
            _CO_NEED.fail(f"{action.model} evicted while every pending model fits in the {free} B free")
    if _CO_SERVE.case(isinstance(action, S.Serve)) and not prev.models[action.model].resident:
        _CO_SERVE.fail(f"{action.model} served while not resident")


_EL_BUDGET = clause("I8c", "state_I8c_elastic", "within_budget",
                    "weights + KV + cache + headroom never exceed the device budget")
_EL_KV = clause("I8c", "state_I8c_elastic", "kv_covers_tokens",
                "no request holds more tokens than its KV capacity, nor KV beyond max context")
_EL_PEAK = clause("I8c", "step_I8c_elastic", "growth_peak_within_budget",
                  "a KV growth's copy peak (old and new buffers live) never oversubscribes the budget")


def state_I8c_elastic(s: Any) -> None:
    """Weights + KV + headroom <= budget; KV within max context; a guaranteed path to max context exists."""
    if not isinstance(s, S.ElasticState):
        return
    kv = s.kv_tokens * s.bytes_per_token
    if s.pinned + s.cache + kv + s.headroom > s.budget:
        _EL_BUDGET.fail(f"oversubscribed: pinned {s.pinned} + cache {s.cache} + KV {kv} + headroom "
                        f"{s.headroom} > budget {s.budget}")
    _EL_BUDGET.case(s.cache > 0 or s.kv_tokens > 0)
    if not s.tokens <= s.kv_tokens <= s.max_context:
        _EL_KV.fail(f"KV capacity {s.kv_tokens} outside [{s.tokens}, {s.max_context}]")
    _EL_KV.case(s.tokens > 0)
    # The guaranteed path to max context is not a state clause: growth peaks rise with KV, the pinned
    # weights never change, so the path exists iff the floor check at construction passed (pinned +
    # last growth peak + headroom <= budget), which test_elastic_floor_checks_agree_between_layers pins.


_EL_ANSWER = clause("C5", "step_C5_elastic", "answer_respected",
                    "no holder gives back more than it chose to answer, and a short answer grows nothing")


def step_C5_elastic(prev: Any, action: Any, nxt: Any) -> None:
    """The weight holder's answer is its own: never more is taken, and a short one makes the request wait."""
    if not isinstance(prev, S.ElasticState):
        return
    if _EL_ANSWER.case(isinstance(action, S.Decode) and action.answer is not None and nxt.cache < prev.cache):
        taken = prev.cache - nxt.cache
        if taken > action.answer:
            _EL_ANSWER.fail(f"{action!r}: {taken} B taken from the weight cache, {action.answer} B answered")
        if nxt.kv_tokens > prev.kv_tokens and nxt.pinned + nxt.cache + (prev.kv_tokens + nxt.kv_tokens) * \
                nxt.bytes_per_token + nxt.headroom > nxt.budget:
            _EL_ANSWER.fail(f"{action!r}: KV grew {prev.kv_tokens}->{nxt.kv_tokens} on a short answer")


_EL_STATIC = clause("I8c", "step_I8c_elastic", "weights_at_least_static",
                    "the elastic split never leaves the weights less room than the static split (KV reserved for "
                    "max context at load) would")


_EL_WASTE = clause("I8c", "step_I8c_elastic", "reclaim_not_wasted",
                   "weights given back for a KV growth are not given for nothing: a request whose weight holder "
                   "answered all the growth needed grows, it is not deferred")


def step_I8c_elastic(prev: Any, action: Any, nxt: Any) -> None:
    """A KV growth's copy peak (old + new bucket live) never oversubscribes the budget; a prefetch fills at least
    what the static split would have left the weights; a full answer to a growth's reclaim is not wasted."""
    if not isinstance(prev, S.ElasticState):
        return
    if _EL_WASTE.case(isinstance(action, S.Decode) and nxt.cache < prev.cache) and nxt.kv_tokens == prev.kv_tokens:
        new = min(prev.kv_tokens + prev.bucket, prev.max_context)
        over = prev.pinned + prev.cache + (prev.kv_tokens + new) * prev.bytes_per_token + prev.headroom - prev.budget
        if action.answer is None or action.answer >= over:
            _EL_WASTE.fail(f"{action!r}: the weights gave back {prev.cache - nxt.cache} B of the {over} B the growth "
                           f"{prev.kv_tokens}->{new} needed, and KV did not grow")
    if _EL_STATIC.case(isinstance(action, S.Prefetch)):
        static = nxt.budget - nxt.headroom - nxt.pinned - nxt.max_context * nxt.bytes_per_token
        if nxt.cache < static:
            _EL_STATIC.fail(f"prefetch left the weight cache {nxt.cache} B; the static split allows {static} B")
    if _EL_PEAK.case(nxt.kv_tokens > prev.kv_tokens):
        peak = (prev.kv_tokens + nxt.kv_tokens) * prev.bytes_per_token
        if nxt.pinned + nxt.cache + peak + nxt.headroom > nxt.budget:
            _EL_PEAK.fail(f"growth {prev.kv_tokens}->{nxt.kv_tokens}: copy peak {peak} "
                          f"oversubscribes (cache {nxt.cache} not reclaimed)")


@attrs.frozen
class LedgerBooks:
    """After one step, as the admission checker read the manager: a model's abstraction and the ledger's charge.

    Both come from one reading of the `ProcessMemoryManager`'s ledger: `state` is the model's refinement
    mapping (its figures read from its leases), `charged` what the ledger charges the model's holders on its
    authority, every allocation of theirs counted, whether or not the model still knows it."""

    model: str
    state: Any
    charged: int


def _held(s: Any) -> int:
    """The bytes a model's abstraction says its admitted work holds on the authority."""
    if isinstance(s, S.BatchState):
        return sum(r.held for r in s.requests.values())
    if isinstance(s, S.CoState):
        return sum(m.size for m in s.models.values() if m.resident)
    return s.pinned + s.cache + s.kv_tokens * s.bytes_per_token


_B_BOOKS = clause("I12", "observed_I12_admission", "ledger_charges_what_is_held",
                  "the ledger charges the batcher and the co-residency scheduler exactly what their requests and "
                  "resident models hold: no finished request's KV, no evicted model's weights stay charged "
                  "(capacity stranded where no admission can use it), and nothing held is uncharged")
_EL_BOOKS = clause("I8c", "observed_I8c_elastic", "ledger_charges_what_is_held",
                   "the ledger charges the elastic split exactly its pinned weights, its KV buffer and the weight "
                   "cache: no old KV buffer stays charged after a growth or a retire, and nothing held is "
                   "uncharged")


def observed_I12_admission(observed: Any) -> None:
    """The ledger's charge for the batcher's and scheduler's holders is what their abstraction holds."""
    for b in observed:
        if isinstance(b, LedgerBooks) and isinstance(b.state, (S.BatchState, S.CoState)):
            held = _held(b.state)
            _B_BOOKS.case(b.charged > 0 or held > 0)
            if b.charged != held:
                _B_BOOKS.fail(f"{b.model}: the ledger charges {b.charged} B, its requests and models hold {held} B")


def observed_I8c_elastic(observed: Any) -> None:
    """The ledger's charge for the split's and the cache's holders is pinned + cache + KV buffer."""
    for b in observed:
        if isinstance(b, LedgerBooks) and isinstance(b.state, S.ElasticState):
            held = _held(b.state)
            _EL_BOOKS.case(b.charged > 0 or held > 0)
            if b.charged != held:
                _EL_BOOKS.fail(f"{b.model}: the ledger charges {b.charged} B; pinned {b.state.pinned} + cache "
                               f"{b.state.cache} + KV {b.state.kv_tokens * b.state.bytes_per_token} = {held} B")


STATE_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "I12": (state_I12_batch, state_I12_coresidency),
    "I8c": (state_I8c_elastic,),
}
STEP_PREDICATES: dict[str, tuple[Callable[[Any, Any, Any], None], ...]] = {
    "I12": (step_I12_coresidency,),
    "I8c": (step_I8c_elastic,),
    "C5": (step_C5_elastic,),
}


OBSERVATION_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "I12": (observed_I12_admission,),
    "I8c": (observed_I8c_elastic,),
}


def check_state(s: Any) -> None:
    conjunction(STATE_PREDICATES, s)


def check_transition(prev: Any, action: Any, nxt: Any) -> None:
    conjunction(STEP_PREDICATES, prev, action, nxt)


def check_observations(observed: Any) -> None:
    conjunction(OBSERVATION_PREDICATES, observed)
