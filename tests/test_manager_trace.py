"""Composed traces (#10 item 6): every part's events, replayed against `spec.manager`; lossy variants fail.

The workload (`refimpl.manager_workload`) drives the one `ProcessMemoryManager`
with a trace sink (ledger operations in the ledger's format, every other
part's in `ortmem-manager/1`); the replay (`invariants.manager_replay`) never
runs refimpl's code. A trace with one event removed, duplicated or reordered, or
with a figure changed, is rejected at the smallest bad prefix.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from invariants.manager_replay import replay_manager_lines
from invariants.manager_trace import MANAGER_KINDS
from invariants.trace_format import json_schema
from refimpl.cli import main
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import JsonlSink

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "trace-schema.json"


def _trace(seed: int = 0, operations: int = 300) -> list[bytes]:
    buf = io.StringIO()
    run_manager_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=seed, operations=operations)
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


@pytest.fixture(scope="module")
def lines() -> list[bytes]:
    return _trace()


def _kinds(lines: list[bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in lines:
        k = json.loads(raw)["kind"]
        out[k] = out.get(k, 0) + 1
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_composed_workload_replays_clean(seed: int) -> None:
    lines = _trace(seed)
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    assert r.events == len(lines)


def test_composed_trace_names_every_part(lines: list[bytes]) -> None:
    kinds = _kinds(lines)
    for kind in ("submit", "claim", "cancel_ticket", "press", "answer", "plan_tx", "reserve_tx", "commit_tx",
                 "abort_tx", "prepare_limit", "commit_limit", "lose_device", "confirm_termination", "reserve",
                 "commit", "release"):
        assert kinds.get(kind, 0) > 0, f"the workload never recorded {kind}: {kinds}"
    assert set(kinds) <= set(MANAGER_KINDS)


def test_composed_events_match_the_schema(lines: list[bytes]) -> None:
    schema = json_schema()
    assert json.loads(SCHEMA.read_text()) == schema, "run `ortmem trace --write-schema`"
    validator = jsonschema.Draft202012Validator(schema)
    for raw in lines:
        validator.validate(json.loads(raw))


def _accepted(lines: list[bytes], kind: str) -> int:
    """The index of the first accepted event of `kind` that some later event depends on."""
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == kind and ev["payload"]["outcome"] == "accepted":
            return i
    raise AssertionError(f"no accepted {kind}")


@pytest.mark.parametrize("kind", ["submit", "reserve_tx", "prepare_limit", "press", "register_authority"])
def test_removed_event_is_rejected_at_the_next_line(lines: list[bytes], kind: str) -> None:
    i = _accepted(lines, kind)
    r = replay_manager_lines(lines[:i] + lines[i + 1:])
    assert not r.ok
    assert r.failure == "sequence-gap" and r.line == i + 1, r.describe()


def test_duplicated_event_is_rejected_where_it_repeats(lines: list[bytes]) -> None:
    i = _accepted(lines, "claim")
    r = replay_manager_lines(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    assert not r.ok and r.failure == "duplicate-sequence" and r.line == i + 2, r.describe()


def test_reordered_events_are_rejected_at_the_first_out_of_order_line(lines: list[bytes]) -> None:
    i = _accepted(lines, "answer")
    swapped = lines[:i - 1] + [lines[i], lines[i - 1]] + lines[i + 1:]
    r = replay_manager_lines(swapped)
    assert not r.ok and r.line == i, r.describe()


def _renumbered(lines: list[bytes]) -> list[bytes]:
    out = []
    for n, raw in enumerate(lines, 1):
        ev = json.loads(raw)
        ev["source_sequence"] = n
        out.append(json.dumps(ev).encode() + b"\n")
    return out


def test_removed_event_renumbered_is_still_caught_by_the_spec(lines: list[bytes]) -> None:
    """An emitter that drops an event and renumbers: the spec itself notices what is missing."""
    i = _accepted(lines, "submit")
    r = replay_manager_lines(_renumbered(lines[:i] + lines[i + 1:]))
    assert not r.ok and r.failure in ("unknown-id", "refinement", "violation"), r.describe()
    assert r.line is not None and r.line > i


def test_changed_figure_is_refinement(lines: list[bytes]) -> None:
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["contract_revision"] == "ortmem-manager/1" and ev["payload"]["outcome"] == "accepted" \
                and ev["payload"]["used"]:
            aid = next(iter(ev["payload"]["used"]))
            ev["payload"]["used"][aid] += 1
            r = replay_manager_lines(lines[:i] + [json.dumps(ev).encode() + b"\n"] + lines[i + 1:])
            assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
            return
    raise AssertionError("no accepted event with a figure")


def test_changed_result_is_refinement(lines: list[bytes]) -> None:
    i = _accepted(lines, "cancel_ticket")
    ev = json.loads(lines[i])
    ev["payload"]["result"] = (ev["payload"]["result"] or 0) + 1
    r = replay_manager_lines(lines[:i] + [json.dumps(ev).encode() + b"\n"] + lines[i + 1:])
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()


def test_truncated_trace_with_live_items_is_leftover(lines: list[bytes]) -> None:
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == "reserve_tx" and ev["payload"]["outcome"] == "accepted":
            r = replay_manager_lines(lines[:i + 1])
            assert not r.ok and r.failure == "leftover", r.describe()
            return
    raise AssertionError("no accepted reserve_tx")


def test_cli_writes_and_replays_a_composed_trace(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", str(out), "--seed", "5"]) == 0
    revisions = {json.loads(line)["contract_revision"] for line in out.read_text().splitlines()}
    assert revisions == {"ortmem-ledger/1", "ortmem-manager/1"}  # ledger operations keep the ledger's format
    assert main(["replay", str(out)]) == 0
    text = out.read_text().splitlines()
    (tmp_path / "lossy.jsonl").write_text("\n".join(text[:3] + text[4:]) + "\n")
    assert main(["replay", str(tmp_path / "lossy.jsonl")]) == 1


def test_changed_ledger_figure_is_refinement(lines: list[bytes]) -> None:
    """Ledger operations keep the ledger's format inside a composed trace; their figures are checked too."""
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == "commit" and ev["payload"]["outcome"] == "accepted" and ev["payload"]["observed"]["used"]:
            aid = next(iter(ev["payload"]["observed"]["used"]))
            ev["payload"]["observed"]["used"][aid] -= 1
            r = replay_manager_lines(lines[:i] + [json.dumps(ev).encode() + b"\n"] + lines[i + 1:])
            assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
            return
    raise AssertionError("no accepted commit with a figure")
