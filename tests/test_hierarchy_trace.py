"""Hierarchy traces (C10, I11): a real run's JSONL replays clean against the spec; tampered or buggy ones fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from invariants.hierarchy_machine import to_campaign
from invariants.hierarchy_scope import SCRIPT_CONFIG
from invariants.hierarchy_trace import json_schema, replay_hierarchy
from refimpl.cli import main
from refimpl.verify.hierarchy_adapter import HierarchyAdapter
from spec import hierarchy as H
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet

_RUN = to_campaign((H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Commit(1), H.Spawn(),
                    H.Hello(2), H.Request(2, 1, 1, 4), H.Request(1, 1, 2, 3), H.Request(2, 1, 1, 1),
                    H.Outside("db", 3), H.Reclaim("db", 1), H.Kill(2), H.Arbitrate(), H.MissHeartbeat(1),
                    H.Restart(), H.Kill(1)))


def _record(guards: GuardSet = ALL_ON) -> list[bytes]:
    events: list[dict[str, Any]] = []
    gov = HierarchyAdapter(SCRIPT_CONFIG, guards, trace=events.append)
    try:
        for act in _RUN:
            try:
                gov.execute(act)
            except GovernorError:
                pass
    finally:
        gov.close()
    return [json.dumps(e).encode() + b"\n" for e in events]


@pytest.fixture(scope="module")
def trace() -> list[bytes]:
    return _record()


def test_real_trace_replays_clean(trace: list[bytes], tmp_path: Path) -> None:
    r = replay_hierarchy(trace)
    assert r.ok, r.describe()
    assert r.events == len(_RUN) + 1
    kinds = [json.loads(x)["kind"] for x in trace]
    assert {"configure", "spawn", "request", "kill", "miss_heartbeat", "restart", "arbitrate"} <= set(kinds)
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(trace))
    assert main(["replay", str(path)]) == 0


def test_tampered_figure_is_rejected_at_its_line(trace: list[bytes]) -> None:
    bad = list(trace)
    ev = json.loads(bad[3])
    ev["observed"]["free"] += 1
    bad[3] = json.dumps(ev).encode()
    r = replay_hierarchy(bad)
    assert (r.ok, r.line, r.failure) == (False, 4, "refinement")


def test_lost_event_is_a_sequence_gap(trace: list[bytes]) -> None:
    r = replay_hierarchy(trace[:2] + trace[3:])
    assert (r.ok, r.line, r.failure) == (False, 3, "sequence-gap")


def test_trace_of_a_coordinator_that_returns_twice_is_rejected() -> None:
    r = replay_hierarchy(_record(GuardSet.without("return_once")))
    assert not r.ok and r.failure == "refinement" and "restart" in r.message.lower(), r.describe()


def test_schema_file_is_current() -> None:
    path = Path(__file__).resolve().parent.parent / "docs" / "trace-schema-hierarchy.json"
    assert json.loads(path.read_text()) == json_schema()
