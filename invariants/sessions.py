"""Predicates over `spec.sessions.SessionState`: C1, I8, I3, I8b, I8c, C7, C8, C9.

State predicates `state_<ID>_sessions(s)`, step predicates
`step_<ID>_sessions(prev, action, next)`; each raises
`InvariantViolation(ID, ...)`. Registered in `invariants.drift`. The
observation predicate `observed_I8c_kv_leased` reads what the ORT checker saw
at every ledger transition inside one step (from the governor's own trace and
its own count of decoded tokens): a step's transient middle, such as a KV
growth's copy, is no state of the spec, so no state predicate can see it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from invariants.clauses import clause, conjunction
from spec import sessions as S
from spec.arith import admitted_bytes

__all__ = [
    "state_C1_sessions", "state_I8_sessions", "state_I3_sessions", "state_I8b_sessions", "step_I8b_sessions", "state_I8c_sessions",
    "state_C7_sessions", "state_C8_sessions", "step_C8_sessions", "state_C9_sessions",
    "observed_I8c_kv_leased", "KvCover", "observed_I8_padding", "PaddedTwin",
    "STATE_PREDICATES", "STEP_PREDICATES", "OBSERVATION_PREDICATES", "check_state", "check_transition",
    "check_observations",
]


_I8_EXACT = clause("I8", "state_I8_sessions", "charged_referenced_extents",
                  "no managed model is charged other than its referenced extents rounded to the granule plus "
                  "its transient peak (never the file size)")


_I8_ARENA = clause("I8", "state_I8_sessions", "arena_charged_once",
                   "the env arena's bytes are never booked twice nor promised past its one lease: the pool's "
                   "ARENA charge is exactly the arena's grant, and the managed models' transient peaks lent "
                   "within it sum to at most that grant")


def _peaks(s: S.SessionState) -> int:
    return sum(m.facts.transient_peak for m in s.models.values() if m.mode is S.Mode.MANAGED)


def state_I8_sessions(s: S.SessionState) -> None:
    """Managed weights are charged roundup(referenced, granule) + transient peak, never the file size; with
    an env arena the peaks lie within its one lease, charged once."""
    managed = False
    for name, m in s.models.items():
        if m.mode is S.Mode.MANAGED:
            managed = True
            want = admitted_bytes(m.facts.referenced, s.topology.granule, m.facts.transient_peak)
            if m.admitted != want:
                _I8_EXACT.fail(f"{name}: admitted {m.admitted} B, referenced extents give {want} B "
                               f"(file {m.facts.file_bytes} B)")
    _I8_EXACT.case(managed)
    grant = s.topology.arena
    if _I8_ARENA.case(bool(grant)):
        charged, peaks = s.ledger.get("arena", 0), _peaks(s)
        if charged != grant or peaks > grant:
            _I8_ARENA.fail(f"the pool charges {charged} B to the arena role for an env arena of {grant} B, and "
                           f"lends {peaks} B of managed peaks within it")


_C1_ONE = clause("C1", "state_C1_sessions", "one_authority_per_tier",
                 "no second ledger of the host tier can grant in the runtime's manager: the pool's bytes (the "
                 "env arena's lease among them) are booked on its one authority, never also on another")


def state_C1_sessions(s: S.SessionState) -> None:
    """One authority of the host tier: nothing (the env arena included) is booked on a second ledger."""
    if s.host_authorities != 1:
        _C1_ONE.fail(f"the runtime's manager has {s.host_authorities} ledgers of the host tier, not one")
    _C1_ONE.case(bool(s.topology.arena))


# I3 reads what a user sees, the report, against the charge records: not the state's own `not_enforced`, which
# is written exactly when the guard is on (a report that drops a label would pass a clause reading the state).
_I3_DECLINED = clause("I3", "state_I3_sessions", "report_binds_no_declined_bytes",
                      "no report presents the limit as binding for a class of bytes the runtime declined to manage: "
                      "every declined class is labelled not enforced in what the user reads")
_I3_COMPAT = clause("I3", "state_I3_sessions", "report_binds_no_uncharged_model",
                    "no report presents the limit as binding for a model whose bytes are not charged against it "
                    "(its charge is below its referenced bytes): its bytes are labelled not enforced")


def state_I3_sessions(s: S.SessionState) -> None:
    """The report labels as not enforced every declined class and every model whose bytes go uncharged."""
    shown = S.report(s).not_enforced
    for role in s.declined:
        if role.value not in shown:
            _I3_DECLINED.fail(f"{role.value} is declined but the report presents the limit as binding on it")
    _I3_DECLINED.case(bool(s.declined))
    uncharged = False
    for name, m in s.models.items():
        if m.admitted < m.facts.referenced:
            uncharged = True
            label = "weights" if S.Role.WEIGHTS in s.declined else f"model:{name}"
            if label not in shown:
                _I3_COMPAT.fail(f"{name}: {m.facts.referenced} B referenced, {m.admitted} B charged, but the "
                                f"report presents the limit as binding on it")
    _I3_COMPAT.case(uncharged)


_I8B_SOURCE = clause("I8b", "state_I8b_sessions", "residency_has_source",
                     "no residency figure is reported without the source it was read from")
_I8B_APART = clause("I8b", "step_I8b_sessions", "residency_moves_no_charge",
                    "observing residency never changes what any holder is charged")


def state_I8b_sessions(s: S.SessionState) -> None:
    """Every residency figure names its source."""
    for name, r in s.residency.items():
        if not r.source:
            _I8B_SOURCE.fail(f"residency of {name} has no source")
    _I8B_SOURCE.case(bool(s.residency))


def step_I8b_sessions(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    """Observing residency moves only the residency field: every charge is unchanged."""
    if _I8B_APART.case(isinstance(action, S.ObserveResidency)):
        before = {k: m.admitted for k, m in prev.models.items()}
        after = {k: m.admitted for k, m in nxt.models.items()}
        if before != after or prev.used != nxt.used:
            _I8B_APART.fail(f"observing residency of {action.model} changed charge {prev.used} -> {nxt.used}")


_I8C_LIMIT = clause("I8c", "state_I8c_sessions", "within_limit",
                    "weights + KV + cache + headroom never exceed the governed limit")
_I8C_KV = clause("I8c", "state_I8c_sessions", "kv_covers_tokens",
                 "no request holds more tokens than its KV capacity, nor KV beyond max context")


def _used(s: S.SessionState) -> int:
    """Charge from the records themselves (not the state's own `used` property): with an env arena, its
    grant once, the peaks lent within it not again."""
    kv = sum(r.kv_tokens * s.models[r.model].facts.bytes_per_token for r in s.requests.values())
    arena = s.topology.arena - _peaks(s) if s.topology.arena else 0
    return sum(m.admitted for m in s.models.values()) + arena + kv + s.cache


def state_I8c_sessions(s: S.SessionState) -> None:
    """Weights + KV + cache + headroom stay within the limit: the elastic split never oversubscribes."""
    used = _used(s)
    if used + s.topology.headroom > s.limit:
        _I8C_LIMIT.fail(f"used {used} + headroom {s.topology.headroom} > limit {s.limit}")
    _I8C_LIMIT.case(used > 0)
    for rid, r in s.requests.items():
        f = s.models[r.model].facts
        if not r.tokens <= r.kv_tokens <= f.max_context:
            _I8C_KV.fail(f"request {rid}: KV capacity {r.kv_tokens} outside [{r.tokens}, {f.max_context}]")
    _I8C_KV.case(any(r.tokens for r in s.requests.values()))


_C7_CAP = clause("C7", "state_C7_sessions", "limit_within_capacity",
                 "the governed limit never exceeds the pool capacity the topology reports")
_C7_MAPPED = clause("C7", "state_C7_sessions", "host_mapped_within_reported",
                    "no model reads more host-mapped bytes than the topology reports as host-mapped capacity")
_C7_GRANULE = clause("C7", "state_C7_sessions", "granule_rounding",
                     "no managed weight charge is smaller than a whole number of the device's granules")


def state_C7_sessions(s: S.SessionState) -> None:
    """Limit within the topology's capacity; host-mapped reads within the reported capacity; granule rounding."""
    t = s.topology
    if s.limit > t.capacity:
        _C7_CAP.fail(f"limit {s.limit} > pool capacity {t.capacity}")
    _C7_CAP.case(True)
    mapped = managed = False
    for name, m in s.models.items():
        if m.host_mapped:
            mapped = True
            if m.facts.referenced > t.host_mapped_capacity:
                _C7_MAPPED.fail(f"{name} reads {m.facts.referenced} B host-mapped; {t.host_mapped_capacity} B reported")
        if m.mode is S.Mode.MANAGED:
            managed = True
            if (m.admitted - m.facts.transient_peak) % t.granule:
                _C7_GRANULE.fail(f"{name}: weight charge not rounded to the {t.granule} B granule")
    _C7_MAPPED.case(mapped)
    _C7_GRANULE.case(managed)


_C8_FIGURES = clause("C8", "state_C8_sessions", "report_matches_records",
                     "the report never shows used, available, oversubscribed, reclaimable or per-role figures other "
                     "than those the charge records give")
_C8_LOWER = clause("C8", "step_C8_sessions", "lowering_exact",
                   "a limit is never lowered below used + headroom; a failed lowering keeps the old limit")


_C8_LEDGER = clause("C8", "state_C8_sessions", "ledger_matches_records",
                    "the ledger never charges a role (weights, arena, KV) more or less than the runtime's own "
                    "records of that role account for: no lease outlives the record that accounts for it")


def state_C8_sessions(s: S.SessionState) -> None:
    """Reported figures equal an independent reading of the charge records; the ledger, per role, too."""
    managed = [m for m in s.models.values() if m.mode is S.Mode.MANAGED]
    peaks = sum(m.facts.transient_peak for m in managed)
    records = {"weights": sum(m.admitted for m in managed) - peaks + s.cache, "arena": s.topology.arena or peaks,
               "kv": sum(q.kv_tokens * s.models[q.model].facts.bytes_per_token for q in s.requests.values())}
    ledger = {k: s.ledger.get(k, 0) for k in set(s.ledger) | set(records)}
    if ledger != {k: records.get(k, 0) for k in ledger}:
        _C8_LEDGER.fail(f"the ledger charges {dict(sorted(ledger.items()))} but the records account for "
                        f"{dict(sorted(records.items()))}")
    _C8_LEDGER.case(any(records.values()))
    r = S.report(s)
    used = _used(s)
    kv = sum(q.kv_tokens * s.models[q.model].facts.bytes_per_token for q in s.requests.values())
    want = {"used": used, "available": s.limit - used if used < s.limit else 0,
            "oversubscribed": used - s.limit if used > s.limit else 0, "reclaimable": s.cache,
            "by_role": dict(weights=sum(m.admitted for m in s.models.values()), kv=kv, cache=s.cache)}
    got = {"used": r.used, "available": r.available, "oversubscribed": r.oversubscribed,
           "reclaimable": r.reclaimable, "by_role": dict(zip(("weights", "kv", "cache"), (b for _, b in r.by_role)))}
    if got != want:
        _C8_FIGURES.fail(f"report {got} but the records give {want}")
    _C8_FIGURES.case(used > 0)


_C8_RUN_FAILED = clause("C8", "step_C8_sessions", "failed_run_keeps_no_charge",
                        "a decode whose Run failed leaves no charge for the step it did not take: the request's "
                        "tokens and KV capacity, and the KV and arena charged on the ledger, are as before, and "
                        "the weights charge drops by exactly the cache yielded for the growth")


def step_C8_sessions(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    """Lowering: success ends with used + headroom <= new limit; failure keeps the old limit. A failed Run
    charges nothing for the step it did not take."""
    if _C8_RUN_FAILED.case(isinstance(action, S.RunFails)):
        yielded = prev.cache - nxt.cache
        kept = {k: nxt.ledger.get(k, 0) - prev.ledger.get(k, 0) for k in ("kv", "arena", "weights")}
        if nxt.requests != prev.requests or yielded < 0 or kept != {"kv": 0, "arena": 0, "weights": -yielded}:
            _C8_RUN_FAILED.fail(f"request {action.rid}'s Run failed, yet the ledger moved {kept} (cache yielded "
                                f"{yielded} B) and its request went {prev.requests.get(action.rid)} -> "
                                f"{nxt.requests.get(action.rid)}")
    if _C8_LOWER.case(isinstance(action, S.LowerLimit)):
        if nxt.limit != prev.limit and (nxt.limit != action.new or _used(nxt) + nxt.topology.headroom > nxt.limit):
            _C8_LOWER.fail(f"limit {prev.limit} -> {nxt.limit} with used {_used(nxt)} "
                           f"+ headroom {nxt.topology.headroom} above it")


_C9_DECLARED = clause("C9", "state_C9_sessions", "managed_state_declared",
                      "no model runs managed with loop-carried state it did not declare")
_C9_COMPAT = clause("C9", "state_C9_sessions", "compat_unattributed",
                    "a compatibility-mode model never has its bytes attributed or its prefix reused")


def state_C9_sessions(s: S.SessionState) -> None:
    """Managed models declare all loop-carried state; compatibility mode is unattributed, no prefix reuse."""
    managed = compat = False
    for name, m in s.models.items():
        if m.mode is S.Mode.MANAGED and m.facts.loop_carried:
            managed = True
            if not m.facts.loop_carried <= (m.declared or frozenset()):
                _C9_DECLARED.fail(f"{name} runs managed with undeclared state "
                                  f"{sorted(m.facts.loop_carried - (m.declared or frozenset()))}")
        if m.mode is S.Mode.COMPAT:
            compat = True
            if m.unattributed < m.facts.referenced or m.prefix_reuse:
                _C9_COMPAT.fail(f"{name}: compatibility mode must be unattributed with no prefix reuse")
    _C9_DECLARED.case(managed)
    _C9_COMPAT.case(compat)


@attrs.frozen
class KvCover:
    """After one accepted ledger operation (an event of the governor's trace), as the ORT checker saw it."""

    event: str  # the operation's kind and ids, for the message
    leased: int  # bytes charged to the KV holder's live leases, folded from the trace so far
    held: int  # bytes the open requests' decoded tokens occupy, from the checker's own count of decodes


_I8C_LEASED = clause("I8c", "observed_I8c_kv_leased", "kv_in_use_leased",
                     "at every ledger transition, even inside a KV growth, the bytes the open requests' tokens "
                     "occupy are charged to KV leases: no KV byte in use (the old bucket being copied included) "
                     "is left uncharged, where another grant could take it")


def observed_I8c_kv_leased(observed: Any) -> None:
    """`observed`: one `KvCover` per ledger operation of the step just run."""
    covers = [c for c in observed if isinstance(c, KvCover)]
    _I8C_LEASED.case(any(c.held for c in covers))
    for c in covers:
        if c.held > c.leased:
            _I8C_LEASED.fail(f"after {c.event}: requests hold {c.held} B of KV but KV leases charge "
                             f"only {c.leased} B")


@attrs.frozen
class PaddedTwin:
    """The runtime's own reading of a loaded model's weight files and of its padded twin's (I8)."""

    source: str
    charged: int  # bytes admission charges the model's weights for (before the granule)
    file_bytes: int
    twin_charged: int  # the same, for the same graph saved with more dead space in its external-data file
    twin_file_bytes: int


# Metamorphic, so a wrong extents reader cannot pass by feeding the same wrong figure to the charge and to the
# check (`charged_referenced_extents` recomputes the charge from the facts that reader produced).
_I8_PADDING = clause("I8", "observed_I8_padding", "dead_space_not_charged",
                     "no model is charged for the dead space of its external-data files: the same graph saved with "
                     "more dead bytes around its weights (a larger file, the same referenced extents) is charged "
                     "the same")


def observed_I8_padding(observed: Any) -> None:
    """`observed`: one `PaddedTwin` per managed load of a model that has a padded twin."""
    twins = [t for t in observed if isinstance(t, PaddedTwin)]
    _I8_PADDING.case(any(t.twin_file_bytes > t.file_bytes for t in twins))
    for t in twins:
        if t.twin_charged != t.charged:
            _I8_PADDING.fail(f"{t.source}: charged {t.charged} B for a {t.file_bytes} B file but {t.twin_charged} B "
                             f"for the same graph in a {t.twin_file_bytes} B file")


OBSERVATION_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "I8": (observed_I8_padding,),
    "I8c": (observed_I8c_kv_leased,),
}


STATE_PREDICATES: dict[str, tuple[Callable[[Any], None], ...]] = {
    "C1": (state_C1_sessions,),
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
    conjunction(STATE_PREDICATES, s)


def check_transition(prev: S.SessionState, action: Any, nxt: S.SessionState) -> None:
    conjunction(STEP_PREDICATES, prev, action, nxt)


def check_observations(observed: Any) -> None:
    conjunction(OBSERVATION_PREDICATES, observed)
