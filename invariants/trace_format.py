"""The JSONL trace format: event types shared by the emitter (refimpl) and the replay checker.

One JSON object per line (schema: `docs/trace-schema.json`):

    {"contract_revision": "ortmem-ledger/1", "source": "pmm-1", "source_sequence": 7,
     "kind": "reserve", "ids": {"holder": 1, "authority": 1, "result": 3},
     "payload": {"tier": "device", "nbytes": 16, "role": "weights", "outcome": "accepted",
                 "error": null, "observed": {"used": {"1": 16}, "charges": {"3": 16}}}}

Envelope: the contract revision (bumped when old traces would change meaning),
the source (one governor), a sequence number monotone per source starting at
1 (never a clock), the kind (one per spec action, plus `boundary`), and the
stable ids the event names (`result` is the id the operation issued). The
payload holds the action's other arguments, the outcome (accepted or the
spec error class that rejected it), and what the governor observed after the
operation: `used` of each ledger it touched, the charge of each allocation
it touched that is still held.

Only event types and their (de)coding live here: no transition logic, so
the replay checker shares vocabulary with refimpl, never transition code.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from spec import actions as A
from spec.types import Role, Tier

__all__ = [
    "CONTRACT_REVISION",
    "REVISIONS",
    "BOUNDARY",
    "KINDS",
    "ID_FIELDS",
    "CREATES",
    "ENUMS",
    "MAX_LINE_BYTES",
    "MAX_EVENTS",
    "MAX_SOURCES",
    "MAX_TEXT",
    "kind_of",
    "encode_event",
    "json_schema",
]

CONTRACT_REVISION = "ortmem-ledger/1"
#: Revisions this checker understands.
REVISIONS = frozenset({CONTRACT_REVISION})
#: A declared crash/snapshot boundary: work may legitimately be in flight when the trace ends there.
BOUNDARY = "boundary"

#: Bounds on untrusted input.
MAX_LINE_BYTES = 64 * 1024
MAX_EVENTS = 1_000_000
MAX_SOURCES = 64
MAX_TEXT = 256


def kind_of(cls: type) -> str:
    """`ReserveGrowth` -> `reserve_growth` (the event kind is the refimpl method name)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


_ACTIONS = (
    A.RegisterAuthority, A.RegisterAlias, A.RegisterHolder, A.Reserve, A.Commit, A.Cancel, A.Release,
    A.Quarantine, A.RecordCommitted, A.LoseDevice, A.ConfirmTermination, A.OpenAllowance, A.ReserveGrowth,
    A.MapAllowance, A.UnmapAllowance, A.TransferAllowance, A.CloseAllowance,
)
#: Event kind -> the spec action class it records.
KINDS: dict[str, type] = {kind_of(c): c for c in _ACTIONS}
#: Action fields that are stable ids (they go to the envelope's `ids`).
ID_FIELDS = frozenset({"holder", "authority", "allocation", "allowance", "source", "target", "of"})
#: Kinds whose accepted operation issues an id (carried as `ids.result`).
CREATES = frozenset({"register_authority", "register_alias", "register_holder", "reserve", "record_committed",
                     "open_allowance"})
#: Fields holding an enum, encoded by value.
ENUMS: dict[str, type] = {"tier": Tier, "role": Role}


def _plain(v: Any) -> Any:
    return v.value if isinstance(v, (Tier, Role)) else v


def encode_event(source: str, sequence: int, action: Any, result: Any, error: BaseException | None,
                 observed: dict[str, dict[int, int]]) -> dict[str, Any]:
    """The event for one operation, as a JSON-ready dict."""
    kind = kind_of(type(action))
    fields = attrs.asdict(action, recurse=False)
    ids = {k: _plain(v) for k, v in fields.items() if k in ID_FIELDS}
    if error is None and kind in CREATES:
        ids["result"] = result
    payload = {k: _plain(v) for k, v in fields.items() if k not in ID_FIELDS}
    payload["outcome"] = "accepted" if error is None else "rejected"
    payload["error"] = None if error is None else type(error).__name__
    payload["observed"] = {part: {str(k): v for k, v in sorted(m.items())} for part, m in observed.items()}
    return {"contract_revision": CONTRACT_REVISION, "source": source, "source_sequence": sequence, "kind": kind,
            "ids": ids, "payload": payload}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one event (`docs/trace-schema.json`, generated from the event types)."""
    scalar = {"type": ["integer", "number", "string", "boolean", "null"], "maxLength": MAX_TEXT}
    figures = {"type": "object", "maxProperties": 4096, "additionalProperties": False,
               "patternProperties": {"^[0-9]{1,20}$": {"type": "integer"}}}
    outcome = {
        "outcome": {"enum": ["accepted", "rejected"]},
        "error": {"type": ["string", "null"], "maxLength": MAX_TEXT,
                  "description": "the spec error class (spec.errors) that rejected the operation"},
        "observed": {"type": "object", "required": ["used", "charges"], "additionalProperties": False,
                     "properties": {"used": figures, "charges": figures},
                     "description": "after the operation: used of each touched ledger, charge of each touched "
                                    "allocation still held"},
    }
    cases: list[dict[str, Any]] = []
    for kind, cls in KINDS.items():
        names = [f.name for f in attrs.fields(cls)]
        id_names = [f for f in names if f in ID_FIELDS]
        ids_props: dict[str, Any] = {f: scalar for f in id_names}
        if kind in CREATES:
            ids_props["result"] = {"type": "integer", "description": "the id the accepted operation issued"}
        args = {f: ({"enum": [e.value for e in ENUMS[f]]} if f in ENUMS else scalar) for f in names
                if f not in ID_FIELDS}
        cases.append({
            "if": {"properties": {"kind": {"const": kind}}},
            "then": {"properties": {
                "ids": {"type": "object", "required": id_names, "additionalProperties": False,
                        "properties": ids_props},
                "payload": {"type": "object", "required": [*args, *outcome], "additionalProperties": False,
                            "properties": {**args, **outcome}},
            }},
        })
    cases.append({"if": {"properties": {"kind": {"const": BOUNDARY}}},
                  "then": {"properties": {"ids": {"maxProperties": 0}, "payload": {"maxProperties": 0}}}})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://ortmem.invalid/trace-schema.json",
        "title": "ortmem trace event (one JSON object per line)",
        "description": ("Generated from invariants.trace_format; regenerate with `ortmem trace --write-schema`. "
                        f"Lines are at most {MAX_LINE_BYTES} bytes; sequence numbers start at 1 per source."),
        "type": "object",
        "required": ["contract_revision", "source", "source_sequence", "kind", "ids", "payload"],
        "additionalProperties": False,
        "properties": {
            "contract_revision": {"enum": sorted(REVISIONS)},
            "source": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            "source_sequence": {"type": "integer", "minimum": 1},
            "kind": {"enum": [*KINDS, BOUNDARY]},
            "ids": {"type": "object"},
            "payload": {"type": "object"},
        },
        "allOf": cases,
    }
