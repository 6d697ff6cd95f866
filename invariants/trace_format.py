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

Encoding is total, so recording can never fail or change a result: an
argument that is not exactly a JSON scalar that decodes back to the same
value and type (a numpy scalar, Decimal, bytes, NaN, inf, an int past 20
digits, a text past MAX_TEXT, a raw string where an enum belongs, an enum
where none belongs) is written as `{"opaque": "<type name>"}`, which the
replay decodes to an `Opaque` value every spec guard refuses as ill-typed,
exactly as the governor refused the original.

Only event types and their (de)coding live here: no transition logic, so
the replay checker shares vocabulary with refimpl, never transition code.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs

from spec import ledger_actions as A
from spec.types import MAX_NAME, Role, Tier

__all__ = [
    "CONTRACT_REVISION",
    "REVISIONS",
    "BOUNDARY",
    "KINDS",
    "ID_FIELDS",
    "CREATES",
    "OPTIONAL_FIELDS",
    "ENUMS",
    "MAX_LINE_BYTES",
    "MAX_EVENTS",
    "MAX_SOURCES",
    "MAX_TEXT",
    "kind_of",
    "Opaque",
    "encode_value",
    "decode_value",
    "encode_event",
    "value_schemas",
    "schema_case",
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
MAX_TEXT = MAX_NAME
#: Tuple-valued fields (`victims`, `needs`) hold at most this many elements.
MAX_TUPLE = 64
#: Integers of more digits are written opaque (and refused by the parser when bare).
MAX_DIGITS = 20


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
#: Payload fields an event may leave out when they are null (issue #21, D3: `register_authority`'s physical
#: device, added without changing what any earlier trace means).
OPTIONAL_FIELDS = frozenset({"device"})
#: Fields holding an enum, encoded by value.
ENUMS: dict[str, type] = {"tier": Tier, "role": Role}


class Opaque:
    """A caller value the trace could not carry exactly; every spec guard refuses it as ill-typed."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<opaque {self.type_name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash(("Opaque", self.type_name))


def _opaque(v: Any) -> dict[str, str]:
    return {"opaque": type(v).__qualname__[:MAX_TEXT] or "?"}


def encode_value(field: str, v: Any) -> Any:
    """The JSON form of one argument: exact when it round-trips, else `{"opaque": type name}` (total)."""
    if field in ENUMS:
        return v.value if type(v) is ENUMS[field] else _opaque(v)
    t = type(v)
    if v is None or t is bool:
        return v
    if t is int:
        return v if len(str(abs(v))) <= MAX_DIGITS else _opaque(v)
    if t is float:
        return v if math.isfinite(v) else _opaque(v)
    if t is str:
        return v if len(v) <= MAX_TEXT else _opaque(v)
    return _opaque(v)


def decode_value(field: str, v: Any) -> Any:
    """Inverse of `encode_value` on well-formed input; raises ValueError on anything else."""
    if type(v) is dict:
        if set(v) != {"opaque"} or type(v["opaque"]) is not str or not 0 < len(v["opaque"]) <= MAX_TEXT:
            raise ValueError(f"{field}: an object value must be exactly {{'opaque': type name}}")
        return Opaque(v["opaque"])
    if field in ENUMS:
        if type(v) is not str:
            raise ValueError(f"{field} {v!r:.80} is not a {ENUMS[field].__name__}")
        return ENUMS[field](v)  # ValueError for an unknown member
    if v is None or type(v) in (bool, int, float) or (type(v) is str and len(v) <= MAX_TEXT):
        return v
    raise ValueError(f"{field} must be a JSON scalar (strings up to {MAX_TEXT} characters) or an opaque marker")


def encode_event(source: str, sequence: int, action: Any, result: Any, error: BaseException | None,
                 observed: dict[str, dict[int, int]]) -> dict[str, Any]:
    """The event for one operation, as a JSON-ready dict."""
    kind = kind_of(type(action))
    fields = attrs.asdict(action, recurse=False)
    ids = {k: encode_value(k, v) for k, v in fields.items() if k in ID_FIELDS}
    if error is None and kind in CREATES:
        ids["result"] = result
    payload = {k: encode_value(k, v) for k, v in fields.items()
               if k not in ID_FIELDS and not (k in OPTIONAL_FIELDS and v is None)}
    payload["outcome"] = "accepted" if error is None else "rejected"
    payload["error"] = None if error is None else type(error).__name__
    payload["observed"] = {part: {str(k): v for k, v in sorted(m.items())} for part, m in observed.items()}
    return {"contract_revision": CONTRACT_REVISION, "source": source, "source_sequence": sequence, "kind": kind,
            "ids": ids, "payload": payload}


def value_schemas(opaque_note: str | None = None) -> dict[str, dict[str, Any]]:
    """The JSON Schema fragments every revision's fields share: `opaque` (with `opaque_note` as its description),
    `scalar` (a JSON scalar or opaque), `ints` and `pairs` (tuple fields), `figures` (id -> integer)."""
    opaque: dict[str, Any] = {"type": "object", "required": ["opaque"], "additionalProperties": False,
                              "properties": {"opaque": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}}}
    if opaque_note is not None:
        opaque["description"] = opaque_note
    ints = {"type": "array", "maxItems": MAX_TUPLE, "items": {"type": "integer"}}
    return {
        "opaque": opaque,
        "scalar": {"anyOf": [{"type": ["integer", "number", "string", "boolean", "null"], "maxLength": MAX_TEXT},
                             opaque]},
        "ints": ints,
        "pairs": {"type": "array", "maxItems": MAX_TUPLE, "items": {**ints, "minItems": 2, "maxItems": 2}},
        "figures": {"type": "object", "maxProperties": 4096, "additionalProperties": False,
                    "patternProperties": {"^[0-9]{1,20}$": {"type": "integer"}}},
    }


def schema_case(revision: str, kind: str, ids: dict[str, Any], payload: dict[str, Any],
                optional_ids: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The case of one (revision, kind): its events carry exactly these ids and payload fields, every payload
    field and every id but `optional_ids` required."""
    return {
        "if": {"properties": {"contract_revision": {"const": revision}, "kind": {"const": kind}}},
        "then": {"properties": {
            "ids": {"type": "object", "required": [f for f in ids if f not in optional_ids],
                    "additionalProperties": False, "properties": ids},
            "payload": {"type": "object", "required": [f for f in payload if f not in OPTIONAL_FIELDS],
                        "additionalProperties": False,
                        "properties": payload},
        }},
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one event (`docs/trace-schema.json`, generated from the event types)."""
    v = value_schemas("a caller value the trace cannot carry exactly (its type name); refused by the spec")
    opaque, scalar, figures = v["opaque"], v["scalar"], v["figures"]
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
        ids_props: dict[str, Any] = {f: scalar for f in names if f in ID_FIELDS}
        if kind in CREATES:
            ids_props["result"] = {"type": "integer", "description": "the id the accepted operation issued"}
        args = {f: ({"anyOf": [{"enum": [e.value for e in ENUMS[f]]}, opaque]} if f in ENUMS else scalar) for f in names
                if f not in ID_FIELDS}
        cases.append(schema_case(CONTRACT_REVISION, kind, ids_props, {**args, **outcome}, frozenset({"result"})))
    from invariants.manager_trace import CONFIGURE, MANAGER_KINDS, MANAGER_REVISION, manager_schema  # extends it
    cases += manager_schema()
    from invariants.focused_trace import FOCUSED, focused_schema  # the focused front ends' revisions

    cases += focused_schema()
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
            "contract_revision": {"enum": sorted(REVISIONS | {MANAGER_REVISION} | set(FOCUSED))},
            "source": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            "source_sequence": {"type": "integer", "minimum": 1},
            "kind": {"enum": [*MANAGER_KINDS, *(k for kinds in FOCUSED.values() for k in kinds), CONFIGURE,
                              BOUNDARY]},
            "ids": {"type": "object"},
            "payload": {"type": "object"},
        },
        "allOf": cases,
    }
