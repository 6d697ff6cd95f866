"""Hierarchy traces (C10, I11): the JSONL events of a coordinator run, and their replay against the spec.

One JSON object per line (schema: `docs/trace-schema-hierarchy.json`):

    {"contract_revision": "ortmem-hierarchy/2", "source": "coordinator", "source_sequence": 3,
     "kind": "request", "args": {"worker": 1, "epoch": 1, "seq": 1, "nbytes": 4, "priority": 0,
     "authentic": true, "fate": "delivered"}, "outcome": "accepted", "error": null, "result": ["granted", 4],
     "observed": {"free": 6, "quota": {"1": 4}, "epoch": {"1": 1}, "state": {"1": "active"}}}

The first event is `configure` (serving quota, machine, aging cap). Each
other event is one campaign step (`invariants.hierarchy_machine`; a `lose` or
`crash` carries its inner action as {"kind", "args"} and its fate): its action,
whether the governor accepted it (or the spec error class that refused it),
its result, and the coordinator's figures observed right after it. Replay
applies the spec's step, demands the same outcome, result and figures, and
evaluates every hierarchy predicate; sequence numbers must run 1, 2, 3... per
source. Shares vocabulary with refimpl (action classes, error names), never
transition code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.hierarchy import check_state, check_step
from invariants.hierarchy_machine import Crash, Lose, SpawnHeld, campaign_step
from invariants.replay import MAX_LINE_BYTES, ReplayResult
from spec import errors as E
from spec import hierarchy as H
from spec.errors import GovernorError
from invariants.trace_format import kind_of

__all__ = ["REVISION", "KINDS", "encode_event", "configure_event", "observed", "replay_hierarchy", "json_schema"]

REVISION = "ortmem-hierarchy/2"
_ACTIONS = (H.Spawn, SpawnHeld, H.Hello, H.Request, H.Return, H.Reserve, H.Commit, H.Free, H.Stop, H.Cont, H.Kill,
            H.MissHeartbeat, H.Restart, H.Outside, H.Reclaim, H.Answer, H.Arbitrate, Lose, Crash)
KINDS: dict[str, type] = {kind_of(c): c for c in _ACTIONS}
#: A fault's inner action: a worker's own call, or an arbitration round.
_INNER = {kind_of(c): c for c in (H.Hello, H.Request, H.Return, H.Free, H.Answer, H.Arbitrate)}
_KEYS = ("contract_revision", "source", "source_sequence", "kind", "args", "outcome", "error", "result", "observed")
_ERRORS = {name: getattr(E, name) for name in E.__all__}


def _plain(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    return x


def observed(s: H.HierarchyState) -> dict[str, Any]:
    """The coordinator figures a trace event carries (from the governor, not from the spec, when emitted)."""
    return {"free": s.free, "quota": {str(w): x.quota for w, x in s.workers.items()},
            "epoch": {str(w): x.epoch for w, x in s.workers.items()},
            "state": {str(w): x.state.value for w, x in s.workers.items()}}


def configure_event(source: str, config: tuple[int, int, int]) -> dict[str, Any]:
    q, m, cap = config
    return {"contract_revision": REVISION, "source": source, "source_sequence": 1, "kind": "configure",
            "args": {"serving_quota": q, "machine": m, "aging_cap": cap}, "outcome": "accepted", "error": None,
            "result": None, "observed": {"free": q, "quota": {}, "epoch": {}, "state": {}}}


def _args(act: Any) -> dict[str, Any]:
    if isinstance(act, (Lose, Crash)):  # a fault carries its inner action by kind
        return {"act": {"kind": kind_of(type(act.act)), "args": attrs.asdict(act.act)}, "fate": act.fate}
    return attrs.asdict(act)


def encode_event(source: str, seq: int, act: Any, error: GovernorError | None, result: Any,
                 seen: dict[str, Any]) -> dict[str, Any]:
    return {"contract_revision": REVISION, "source": source, "source_sequence": seq, "kind": kind_of(type(act)),
            "args": _args(act), "outcome": "rejected" if error else "accepted",
            "error": type(error).__name__ if error else None, "result": _plain(result), "observed": seen}


class _Bad(Exception):
    def __init__(self, failure: str, message: str, id: str | None = None) -> None:
        super().__init__(message)
        self.failure, self.id = failure, id


def _decode(ev: Any) -> tuple[str, Any]:
    if not isinstance(ev, dict) or tuple(sorted(ev)) != tuple(sorted(_KEYS)):
        raise _Bad("malformed", f"an event has exactly the keys {list(_KEYS)}")
    if ev["contract_revision"] != REVISION:
        raise _Bad("unknown-revision", f"unknown contract revision {str(ev['contract_revision'])[:64]!r}")
    kind, args = ev["kind"], ev["args"]
    if not isinstance(args, dict):
        raise _Bad("malformed", "args must be an object")
    if kind == "configure":
        return kind, args
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _Bad("malformed", f"unknown event kind {str(kind)[:64]!r}")
    names = [f.name for f in attrs.fields(cls)]
    if sorted(args) != sorted(names):
        raise _Bad("malformed", f"{kind} args must be exactly {names}")
    if ev["outcome"] not in ("accepted", "rejected") or (ev["outcome"] == "rejected") != (ev["error"] is not None):
        raise _Bad("malformed", "outcome is accepted (error null) or rejected (error named)")
    if ev["error"] is not None and ev["error"] not in _ERRORS:
        raise _Bad("malformed", f"unknown error class {str(ev['error'])[:64]!r}")
    if cls in (Lose, Crash):
        inner = args["act"]
        if not isinstance(inner, dict) or sorted(inner) != ["args", "kind"] or inner["kind"] not in _INNER \
                or not isinstance(inner["args"], dict):
            raise _Bad("malformed", f"{kind}'s act is {{kind, args}} of one of {sorted(_INNER)}")
        icls = _INNER[inner["kind"]]
        if sorted(inner["args"]) != sorted(f.name for f in attrs.fields(icls)):
            raise _Bad("malformed", f"{kind}'s {inner['kind']} args must be exactly {[f.name for f in attrs.fields(icls)]}")
        return kind, cls(icls(**inner["args"]), args["fate"])
    return kind, cls(**args)


def replay_hierarchy(lines: Iterable[bytes]) -> ReplayResult:
    """Replay a hierarchy trace against `spec.hierarchy`; the smallest bad prefix on failure."""
    state: H.HierarchyState | None = None
    last: dict[str, int] = {}
    events = line = 0
    try:
        for raw in lines:
            line += 1
            if len(raw) > MAX_LINE_BYTES + 1:
                raise _Bad("oversize", f"line longer than {MAX_LINE_BYTES} bytes")
            try:
                ev = json.loads(raw)
            except (ValueError, RecursionError) as e:  # RecursionError: arrays nested past the parser's depth
                raise _Bad("bad-json", str(e)[:200]) from None
            kind, act = _decode(ev)
            source, seq = ev["source"], ev["source_sequence"]
            if type(source) is not str or not source or type(seq) is not int:
                raise _Bad("malformed", "source is a non-empty string, source_sequence an integer")
            want = last.get(source, 0) + 1
            if seq != want:
                raise _Bad("sequence-gap" if seq > want else "duplicate-sequence",
                           f"source {source!r}: sequence {seq}, expected {want}")
            last[source] = seq
            if kind == "configure":
                if state is not None:
                    raise _Bad("malformed", "configure appears twice")
                state = H.new_hierarchy(act["serving_quota"], act["machine"], act["aging_cap"])
            else:
                if state is None:
                    raise _Bad("malformed", "the first event must be configure")
                state = _apply(state, act, ev)
            events += 1
    except _Bad as bad:
        return ReplayResult(False, events, line, bad.failure, bad.id, str(bad))
    return ReplayResult(True, events, None, None, None, "no violation")


def _apply(state: H.HierarchyState, act: Any, ev: dict[str, Any]) -> H.HierarchyState:
    try:
        nxt, result = campaign_step(state, act)
    except GovernorError as e:
        if ev["outcome"] == "accepted":
            raise _Bad("refinement", f"{act!r}: the spec refuses ({type(e).__name__}: {e}) what the governor "
                                     "accepted", "C10") from None
        if ev["error"] != type(e).__name__:
            raise _Bad("refinement", f"{act!r}: the spec refuses with {type(e).__name__}, the trace says "
                                     f"{ev['error']}") from None
        return state
    if ev["outcome"] == "rejected":
        raise _Bad("refinement", f"{act!r}: the spec accepts what the governor refused ({ev['error']})")
    if ev["result"] != _plain(result):
        raise _Bad("refinement", f"{act!r}: result {ev['result']!r}, the spec's {_plain(result)!r}")
    if ev["observed"] != observed(nxt):
        raise _Bad("refinement", f"{act!r}: observed {ev['observed']!r}, the spec's {observed(nxt)!r}")
    try:
        check_step(state, act, nxt)
        check_state(nxt)
    except InvariantViolation as e:
        raise _Bad("violation", str(e), e.id) from None
    return nxt


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one hierarchy trace event (docs/trace-schema-hierarchy.json)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://ortmem.invalid/trace-schema-hierarchy.json",
        "title": "ortmem hierarchy trace event (one JSON object per line)",
        "description": ("Generated from invariants.hierarchy_trace; regenerate with `ortmem trace --write-schema`. "
                        "The first event of a source is `configure`."),
        "type": "object", "required": list(_KEYS), "additionalProperties": False,
        "properties": {
            "contract_revision": {"const": REVISION},
            "source": {"type": "string", "minLength": 1},
            "source_sequence": {"type": "integer", "minimum": 1},
            "kind": {"enum": ["configure", *KINDS]},
            "args": {"type": "object"},
            "outcome": {"enum": ["accepted", "rejected"]},
            "error": {"oneOf": [{"type": "null"}, {"enum": sorted(_ERRORS)}]},
            "result": {},
            "observed": {"type": "object", "required": ["free", "quota", "epoch", "state"]},
        },
        "allOf": [{"if": {"properties": {"kind": {"const": k}}},
                   "then": {"properties": {"args": {"required": [f.name for f in attrs.fields(c)],
                                                    "additionalProperties": False}}}}
                  for k, c in KINDS.items()],
    }
