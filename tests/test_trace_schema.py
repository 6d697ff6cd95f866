"""docs/trace-schema.json: generated from the event types, readable, and never stricter than replay (issue #21 item 4).

- the committed file is exactly what `ortmem trace --write-schema` writes now, a valid 2020-12 schema, a
  small fraction of the 401 KB the per-case generator wrote (shared shapes once, in `$defs`);
- its enums are the code's: tiers, roles, every spec error class replay accepts, every kind of each revision;
- every upstream conformance trace and the example of docs/trace-format.md validate (the governor's own
  traces are validated where they are written: tests/test_replay.py, test_manager_trace.py,
  test_trace_coverage.py);
- negative controls: an event naming an unknown error, tier, role or kind, a kind of another revision, an
  accepted event with an error, a rejected one with a result fails the schema, and replay refuses each too.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema
import pytest

from invariants.manager_replay import replay_manager_lines
from invariants.manager_trace import CONFIGURE, MANAGER_KINDS
from invariants.manager_replay import _ERRORS
from invariants.trace_format import BOUNDARY
from invariants.trace_schema import REVISION_KINDS, json_schema, schema_text
from spec import errors as E
from spec.types import Role, Tier

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "docs" / "trace-schema.json"
EXAMPLE = ROOT / "docs" / "trace-format.md"


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_schema_is_generated_from_the_event_types() -> None:
    assert SCHEMA.read_text() == schema_text(), "run `ortmem trace --write-schema`"
    assert json.loads(SCHEMA.read_text()) == json_schema()


def test_the_schema_is_small_and_names_its_shapes_once() -> None:
    text = SCHEMA.read_text()
    assert len(text.encode()) < 100_000, len(text)  # the per-case generator wrote 402,984 bytes
    defs = json_schema()["$defs"]
    for shared in ("id", "value", "opaque", "figures", "verdict", "error", "tier", "role"):
        assert shared in defs
    # Shapes are referenced, not repeated: the opaque marker's body appears once.
    assert text.count('"required": ["opaque"]') == 1


def test_the_enums_are_the_codes() -> None:
    defs = json_schema()["$defs"]
    assert defs["tier"]["enum"] == [t.value for t in Tier]
    assert defs["role"]["enum"] == [r.value for r in Role]
    assert set(defs["error"]["enum"]) == set(_ERRORS) == set(E.__all__) - set(E.CATEGORIES)  # the names replay reads
    assert all(getattr(E, c).__subclasses__() for c in E.CATEGORIES)  # a category is a base, never a refusal
    assert all(issubclass(getattr(E, n), E.GovernorError) for n in defs["error"]["enum"])
    assert set(defs["manager.kind"]["enum"]) == {*MANAGER_KINDS, CONFIGURE, BOUNDARY}
    assert list(REVISION_KINDS) == json_schema()["properties"]["contract_revision"]["enum"]


def test_every_upstream_conformance_trace_validates() -> None:
    v, n = _validator(), 0
    # As converted to the one revision (tests/conformance/converted/).
    for path in sorted((Path(__file__).resolve().parent / "conformance" / "converted").glob("*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            errors = list(v.iter_errors(json.loads(line)))
            assert not errors, f"{path.name} line {i}: {errors[0].message}"
            n += 1
    assert n >= 28 * 3


# --- negative controls: what the schema refuses, replay refuses too ------------------------------------


def _example() -> list[str]:
    text = EXAMPLE.read_text()
    return text.split("```jsonl\n", 1)[1].split("```", 1)[0].splitlines()


def _edit(i: int, fn) -> list[bytes]:
    lines = _example()
    ev = json.loads(lines[i])
    fn(ev)
    lines[i] = json.dumps(ev)
    return [x.encode() + b"\n" for x in lines]


def _set(path: str, value):
    def fn(ev):
        *outer, last = path.split(".")
        d = ev
        for k in outer:
            d = d[k]
        d[last] = value
    return fn


def _rejected(ev):
    ev["payload"].update(outcome="rejected", result=None)


#: (line of the example, the edit, what the schema names): each makes an event the schema and replay refuse.
BAD = {
    "unknown error": (6, _set("payload.error", "BadAlignment"), "BadAlignment"),
    "unknown tier": (3, _set("payload.tier", "gpu"), "gpu"),
    "unknown role": (3, _set("payload.role", "cache"), "cache"),
    "unknown kind": (4, _set("kind", "no_such_kind"), "no_such_kind"),
    "a pool kind in the manager revision": (4, _set("kind", "pool_claim"), "pool_claim"),
    "the retired ledger revision": (5, _set("contract_revision", "ortmem-ledger/1"), "ortmem-ledger/1"),
    "unknown revision": (4, _set("contract_revision", "ortmem-manager/3"), "ortmem-manager/3"),
    "the retired transaction revision": (4, _set("contract_revision", "ortmem-tx/1"), "ortmem-tx/1"),
    "accepted with an error": (4, _set("payload.error", "InvalidBytes"), "InvalidBytes"),
    "rejected naming no error": (4, _rejected, "None"),
    "rejected with a result": (6, lambda ev: ev["payload"].update(outcome="rejected", error="UnknownAllocation",
                                                                   result=3), "3"),
    "an id field the kind lacks": (4, _set("ids.ticket", 9), "ticket"),
    "a payload field the kind lacks": (4, _set("payload.priority", 0), "priority"),
    "a missing argument": (3, lambda ev: ev["payload"].pop("nbytes"), "nbytes"),
    "a missing figure object": (3, lambda ev: ev["payload"].pop("used"), "used"),
    "a figure keyed by a name": (3, _set("payload.used", {"hbm0": 16}), "hbm0"),
    "an envelope key the revision lacks": (3, _set("trace_id", 2), "trace_id"),
    "no topology epoch": (3, lambda ev: ev.pop("topology_epoch"), "topology_epoch"),
    "a negative topology epoch": (3, _set("topology_epoch", -1), "-1"),
    "a topology epoch that is no integer": (3, _set("topology_epoch", "1"), "'1'"),
    "a ledger operation without its charges": (3, lambda ev: ev["payload"].pop("charges"), "charges"),
    "a registration without its device": (1, lambda ev: ev["payload"].pop("device"), "device"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_event_fails_the_schema_and_the_replay(name: str) -> None:
    i, fn, named = BAD[name]
    lines, v = _edit(i, fn), _validator()
    errors = list(v.iter_errors(json.loads(lines[i])))
    assert errors, f"{name}: the schema accepts {lines[i]!r}"
    assert any(named in str(e.message) or named in json.dumps(list(e.absolute_path)) or
               any(named in str(c.message) for c in (e.context or [])) for e in errors), [e.message for e in errors]
    r = replay_manager_lines(lines)
    assert not r.ok and r.line == i + 1, f"{name}: replay {r.describe()}"


def test_the_unedited_example_passes_both() -> None:
    lines, v = [x.encode() + b"\n" for x in _example()], _validator()
    for raw in lines:
        v.validate(json.loads(raw))
    assert replay_manager_lines(lines).ok


