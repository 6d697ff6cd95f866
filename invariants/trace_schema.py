"""The JSON Schema of a trace event (`docs/trace-schema.json`), generated from the event definitions.

The schema of the one revision `ortmem replay` reads on a governor's trace, `ortmem-manager/2`
(the hierarchy keeps its own: `invariants.hierarchy_trace`). It is written
for a person: the shapes every event shares are named once in `$defs` (ids,
caller values, observed figures, results, the verdict) with the closed sets
as enums (tiers, roles, every spec error class, every event kind
of each revision), and each (revision, kind) is one `$defs` entry,
`<revision>.<kind>`, that the top level dispatches to. Nothing here is
written by hand per kind: the kinds and their fields come from the event
types (`invariants.trace_format`, `invariants.manager_trace`), so an event
added there is in the schema at the next `ortmem trace --write-schema`, and
`tests/test_trace_schema.py` fails until it is.

The schema checks shape only, never less than replay accepts: a trace the
schema refuses is refused by replay too (malformed), while replay also
checks everything that needs the spec (ids, enabledness, figures).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from invariants.manager_trace import (_TUPLES, CONFIGURE, MANAGER_ID_FIELDS, MANAGER_KINDS,
                                      MANAGER_REVISION, REQUIRED_FIELDS)
from invariants.trace_format import BOUNDARY, ENUMS, MAX_LINE_BYTES, MAX_TEXT, OPTIONAL_FIELDS
from spec import errors as E
from spec.types import MAX_BYTES

__all__ = ["json_schema", "schema_text", "REVISION_KINDS"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _short(revision: str) -> str:
    """`ortmem-manager/2` -> `manager`: the prefix of the revision's `$defs` entries."""
    return revision.removeprefix("ortmem-").split("/")[0]


#: Revision -> every event kind it may carry (boundary and configure included), in the code's order.
REVISION_KINDS: dict[str, list[str]] = {
    MANAGER_REVISION: [*MANAGER_KINDS, CONFIGURE, BOUNDARY],
}


def _shared_defs() -> dict[str, Any]:
    opaque = {"type": "object", "required": ["opaque"], "additionalProperties": False,
              "properties": {"opaque": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}},
              "description": "a caller value the trace cannot carry exactly (its type name); every spec guard "
                             "refuses it as ill-typed, as the governor refused the original"}
    ints = {"type": "array", "items": {"type": "integer"}}
    figures = {"type": "object", "additionalProperties": False,
               "patternProperties": {"^[0-9]{1,20}$": {"type": "integer"}},
               "description": "id (decimal string) -> bytes, as the governor's own books say after the operation"}
    return {
        "tier": {"enum": [e.value for e in ENUMS["tier"]], "description": "spec.types.Tier"},
        "role": {"enum": [e.value for e in ENUMS["role"]], "description": "spec.types.Role"},
        "error": {"enum": sorted(n for n in E.__all__ if n not in E.CATEGORIES),
                  "description": "the spec error class (spec.errors) a rejected operation names; replay accepts "
                                 "any one whose precondition holds (docs/trace-format.md)"},
        "opaque": opaque,
        "value": {"anyOf": [{"type": ["integer", "number", "string", "boolean", "null"], "maxLength": MAX_TEXT},
                            _ref("opaque")],
                  "description": "a caller argument as given: a JSON scalar, or opaque when it does not round-trip"},
        "id": {**_ref("value"),
               "description": "an id the governor issued, any fresh integer (replay maps it per kind to the "
                              "spec's), or whatever the caller passed"},
        "ints": ints,
        "pairs": {"type": "array", "items": {**ints, "minItems": 2, "maxItems": 2}},
        "figures": figures,
        "verdict": {
            "description": "accepted with no error, or rejected naming a spec error class (and no result)",
            "anyOf": [{"properties": {"outcome": {"const": "accepted"}, "error": {"type": "null"}}},
                      {"properties": {"outcome": {"const": "rejected"}, "error": _ref("error"),
                                      "result": {"type": "null"}}}]},
        "boundary": {"description": "a declared crash/snapshot boundary: work may be in flight when the trace "
                                    "ends here",
                     "properties": {"ids": {"maxProperties": 0}, "payload": {"maxProperties": 0}}},
    }


def _arg(field: str) -> dict[str, Any]:
    """The shape of one caller argument (an enum's value, a tuple, or any value), opaque always allowed."""
    if field in ENUMS:
        return {"anyOf": [_ref(field), _ref("opaque")]}
    if field in _TUPLES:
        return {"anyOf": [_ref("pairs" if _TUPLES[field] == 2 else "ints"), _ref("opaque")]}
    return _ref("value")


def _event(revision: str, ids: list[str], args: list[str]) -> dict[str, Any]:
    """One kind's entry: exactly these ids (all required) and these payload arguments on top of the
    revision's outcome fields (`<revision>.outcome`), every argument required but the optional ones; in a composed
    revision a registration's device too."""
    short, optional = _short(revision), OPTIONAL_FIELDS - REQUIRED_FIELDS
    props = {f: _arg(f) if f not in REQUIRED_FIELDS else
             {**_arg(f), "description": "the physical device the bytes are on: required in this revision, null "
                                        "only where the registration was refused (C1, D3)"} for f in args}
    return {
        "properties": {
            "ids": {"type": "object", "required": ids, "additionalProperties": False,
                    "properties": {f: _ref("id") for f in ids}},
            "payload": {**_ref(f"{short}.outcome"),
                        "required": [f for f in props if f not in optional],
                        "properties": props, "unevaluatedProperties": False},
        },
    }


def _outcomes() -> dict[str, Any]:
    """Each revision's outcome fields: what every event of that revision reports after the operation."""
    base = {"outcome": {"enum": ["accepted", "rejected"]}, "error": {"anyOf": [{"type": "null"}, _ref("error")]}}
    limit = {"type": "object", "required": ["committed", "limit", "completed"], "additionalProperties": False,
             "properties": {"committed": {"type": "boolean"}, "limit": {"type": "integer"},
                            "completed": _ref("pairs")},
             "description": "commit_limit's outcome: committed or not, the limit after it, (pressure, bytes) answers"}
    bundle = {"type": "object", "required": ["versions", "poisoned"], "additionalProperties": False,
              "properties": {"versions": _ref("ints"), "poisoned": {"type": "boolean"}}}

    def outcome(fields: dict[str, Any], description: str) -> dict[str, Any]:
        return {"type": "object", "description": description, "allOf": [_ref("verdict")],
                "required": [*base, *fields], "properties": {**base, **fields}}

    manager = {
        "result": {"anyOf": [{"type": ["integer", "null"]}, _ref("ints"), limit],
                   "description": "an issued id, bytes credited, a list of ids, or a limit outcome"},
        "used": {**_ref("figures"), "description": "used of every authority the operation named or changed "
                                                   "(one it changed and leaves out fails the replay)"},
        "charges": {**_ref("figures"), "description": "allocation -> charge of each allocation the operation named, "
                                                      "created or charged that is still held (one it left out fails "
                                                      "the replay)"},
        "bundles": {"type": "object", "additionalProperties": False,
                    "patternProperties": {"^[0-9]{1,20}$": bundle},
                    "description": "each state bundle the operation named, opened or advanced (I5, I10)"}}
    return {"manager.outcome": outcome(manager, "the composed revision's outcome: result, used, charges, bundles, "
                                                "after the operation")}


def _kind_defs() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    defs[f"manager.{CONFIGURE}"] = {"properties": {
        "ids": {"maxProperties": 0},
        "payload": {"type": "object", "required": ["aging_bound"], "additionalProperties": False,
                    "properties": {"aging_bound": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES,
                                                   "description": "rounds after which a pending ticket is "
                                                                  "matured (I13), as the manager was built"}}}}}
    for kind, cls in MANAGER_KINDS.items():
        names = [f.name for f in attrs.fields(cls)]
        defs[f"manager.{kind}"] = _event(MANAGER_REVISION, [f for f in names if f in MANAGER_ID_FIELDS],
                                         [f for f in names if f not in MANAGER_ID_FIELDS])
    return defs


def _dispatch(revision: str) -> dict[str, Any]:
    """Events of `revision`: a kind it carries, and that kind's entry."""
    short = _short(revision)
    cases = [{"if": {"properties": {"kind": {"const": k}}},
              "then": _ref("boundary" if k == BOUNDARY else f"{short}.{k}")} for k in REVISION_KINDS[revision]]
    return {"if": {"properties": {"contract_revision": {"const": revision}}},
            "then": {"properties": {"kind": _ref(f"{short}.kind")}, "allOf": cases}}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one event of a governor's trace (`docs/trace-schema.json`)."""
    kinds = {f"{_short(r)}.kind": {"enum": ks, "description": f"every event kind of {r}"}
             for r, ks in REVISION_KINDS.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://ortmem.invalid/trace-schema.json",
        "title": "ortmem trace event (one JSON object per line)",
        "description": ("Generated from invariants.trace_schema; regenerate with `ortmem trace --write-schema`. "
                        "Each event's meaning: docs/trace-format.md. "
                        f"Lines are at most {MAX_LINE_BYTES} bytes, which bounds every list and object in an event "
                        "(none has a count of its own); sequence numbers start at 1 per source."),
        "type": "object",
        "required": ["contract_revision", "topology_epoch", "source", "source_sequence", "kind", "ids", "payload"],
        "additionalProperties": False,
        "properties": {
            "contract_revision": {"enum": list(REVISION_KINDS)},
            "topology_epoch": {"type": "integer", "minimum": 0,
                               "description": "the governor's number of the topology it decided the event against: "
                                              "the same until an accepted event changes the topology, then greater "
                                              "than every earlier one (docs/trace-format.md)"},
            "source": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT,
                       "description": "one governor; events of one source are totally ordered"},
            "source_sequence": {"type": "integer", "minimum": 1,
                                "description": "1, 2, 3, ... per source (never a clock): a gap is a lost event"},
            "kind": {"type": "string"},
            "ids": {"type": "object"},
            "payload": {"type": "object"},
        },
        "allOf": [_dispatch(r) for r in REVISION_KINDS],
        "$defs": {**_shared_defs(), **kinds, **_outcomes(), **_kind_defs()},
    }


def _dump(v: Any, indent: int, used: int = 0, width: int = 120) -> str:
    """JSON with nesting shown by indentation, but any value that fits on its line written on one line
    (`used`: characters already on the line before the value)."""
    flat = json.dumps(v)
    if max(indent, used) + len(flat) <= width or not isinstance(v, (dict, list)) or not v:
        return flat
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(v, list):
        return "[\n" + ",\n".join(inner + _dump(x, indent + 2) for x in v) + "\n" + pad + "]"
    items = [f"{inner}{json.dumps(k)}: " + _dump(x, indent + 2, indent + 4 + len(json.dumps(k))) for k, x in v.items()]
    return "{\n" + ",\n".join(items) + "\n" + pad + "}"


def schema_text() -> str:
    """`docs/trace-schema.json`'s text: `json_schema()`, one line per short value."""
    return _dump(json_schema(), 0) + "\n"
