"""Predicates over `spec.sessions.SessionState`: I8, I3, I8b, I8c, C7, C8, C9.

State predicates `state_<ID>_sessions(s)`, step predicates
`step_<ID>_sessions(prev, action, next)`; each raises
`InvariantViolation(ID, ...)`. Registered in `invariants.drift`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invariants._violation import InvariantViolation
from spec import sessions as S
from spec.arith import admitted_bytes, available, oversubscribed

__all__ = [
    "state_I8_sessions", "state_I3_sessions", "state_I8b_sessions", "step_I8b_sessions", "state_I8c_sessions",
    "state_C7_sessions", "state_C8_sessions", "step_C8_sessions", "state_C9_sessions",
    "STATE_PREDICATES", "STEP_PREDICATES", "check_state", "check_transition",
]


def state_I8_sessions(s: S.SessionState) -> None:
    """Managed weights are charged roundup(referenced, granule) + transient peak, never the file size."""
    for name, m in s.models.items():
        if m.mode is S.Mode.MANAGED:
            want = admitted_bytes(m.facts.referenced, s.topology.granule, m.facts.transient_peak)
            if m.admitted != want:
                raise InvariantViolation("I8", f"{name}: admitted {m.admitted} B, referenced extents give {want} B "
                                               f"(file {m.facts.file_bytes} B)")


def state_I3_sessions(s: S.SessionState) -> None:
    """Declined classes and compatibility-mode models are reported as not enforced."""
    for role in s.declined:
        if role.value not in s.not_enforced:
            raise InvariantViolation("I3", f"{role.value} is declined but reported as enforced")
    for name, m in s.models.items():
        label = f"model:{name}" if m.mode is S.Mode.COMPAT else "weights"
        if m.mode is not S.Mode.MANAGED and label not in s.not_enforced:
            raise InvariantViolation("I3", f"{name} runs {m.mode.value} but is reported as enforced")
    if S.report(s).not_enforced != s.not_enforced:
        raise InvariantViolation("I3", "the report hides not-enforced labels")


def state_I8b_sessions(s: S.SessionState) -> None:
    """Every residency figure names its source; the report labels its figures as charge."""
    for name, r in s.residency.items():
        if not r.source:
            raise InvariantViolation("I8b", f"residency of {name} has no source")
    if not S.report(s).unit.startswith("charge"):
        raise InvariantViolation("I8b", "report figures are not labelled as charge")


def step_I8b_sessions(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    """Observing residency moves only the residency field: every charge is unchanged."""
    if isinstance(action, S.ObserveResidency):
        before = {k: m.admitted for k, m in prev.models.items()}
        after = {k: m.admitted for k, m in nxt.models.items()}
        if before != after or prev.used != nxt.used:
            raise InvariantViolation("I8b", f"observing residency of {action.model} changed charge "
                                            f"{prev.used} -> {nxt.used}")


def state_I8c_sessions(s: S.SessionState) -> None:
    """Weights + KV + cache + headroom stay within the limit: the elastic split never oversubscribes."""
    if s.used + s.topology.headroom > s.limit:
        raise InvariantViolation("I8c", f"used {s.used} + headroom {s.topology.headroom} > limit {s.limit}")
    for rid, r in s.requests.items():
        f = s.models[r.model].facts
        if not r.tokens <= r.kv_tokens <= f.max_context:
            raise InvariantViolation("I8c", f"request {rid}: KV capacity {r.kv_tokens} outside "
                                            f"[{r.tokens}, {f.max_context}]")


def state_C7_sessions(s: S.SessionState) -> None:
    """Limit within the topology's capacity; host-mapped reads within the reported capacity; granule rounding."""
    t = s.topology
    if s.limit > t.capacity:
        raise InvariantViolation("C7", f"limit {s.limit} > pool capacity {t.capacity}")
    for name, m in s.models.items():
        if m.host_mapped and m.facts.referenced > t.host_mapped_capacity:
            raise InvariantViolation("C7", f"{name} reads {m.facts.referenced} B host-mapped; "
                                           f"{t.host_mapped_capacity} B reported")
        if m.mode is S.Mode.MANAGED and (m.admitted - m.facts.transient_peak) % t.granule:
            raise InvariantViolation("C7", f"{name}: weight charge not rounded to the {t.granule} B granule")


def state_C8_sessions(s: S.SessionState) -> None:
    """Reported used/available/oversubscribed/reclaimable/unattributed follow C8's reading."""
    r = S.report(s)
    if (r.available != available(s.limit, s.used, 0) or r.oversubscribed != oversubscribed(s.used, s.limit)
            or r.reclaimable != s.cache or r.used != sum(b for _, b in r.by_role)
            or r.unattributed != sum(m.unattributed for m in s.models.values())):
        raise InvariantViolation("C8", f"report figures disagree with the ledger: {r!r}")


def step_C8_sessions(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    """Lowering: success ends with used + headroom <= new limit; failure keeps the old limit."""
    if isinstance(action, S.LowerLimit):
        ok = nxt.limit == action.new and nxt.used + nxt.topology.headroom <= action.new
        if not ok and nxt.limit != prev.limit:
            raise InvariantViolation("C8", f"limit {prev.limit} -> {nxt.limit} with used {nxt.used} "
                                           f"+ headroom {nxt.topology.headroom} above it")


def state_C9_sessions(s: S.SessionState) -> None:
    """Managed models declare all loop-carried state; compatibility mode is unattributed, no prefix reuse."""
    for name, m in s.models.items():
        if m.mode is S.Mode.MANAGED and not m.facts.loop_carried <= (m.declared or frozenset()):
            raise InvariantViolation("C9", f"{name} runs managed with undeclared state "
                                           f"{sorted(m.facts.loop_carried - (m.declared or frozenset()))}")
        if m.mode is S.Mode.COMPAT and (m.unattributed < m.facts.referenced or m.prefix_reuse):
            raise InvariantViolation("C9", f"{name}: compatibility mode must be unattributed with no prefix reuse")


STATE_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "I8": (state_I8_sessions,),
    "I3": (state_I3_sessions,),
    "I8b": (state_I8b_sessions,),
    "I8c": (state_I8c_sessions,),
    "C7": (state_C7_sessions,),
    "C8": (state_C8_sessions,),
    "C9": (state_C9_sessions,),
}
STEP_PREDICATES: dict[str, tuple[Callable[[Any, Any, Any], None], ...]] = {
    "I8b": (step_I8b_sessions,),
    "C8": (step_C8_sessions,),
}


def check_state(s: S.SessionState) -> None:
    for preds in STATE_PREDICATES.values():
        for p in preds:
            p(s)


def check_transition(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    for preds in STEP_PREDICATES.values():
        for p in preds:
            p(prev, action, nxt)
