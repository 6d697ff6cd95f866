"""Any fresh identifier conforms (issue #21): replay maps observed ids to the spec's, per kind.

A clean trace with every id renumbered (each kind by its own offset, or permuted) still replays
clean; a trace that aliases two live objects onto one id, names an id nothing issued, or gives one
object two ids is rejected at that event, naming the id.
"""

from __future__ import annotations

import io
import json

import pytest
from trace_harness import ledger_payload, replay_epoched

from conformance_ids import offset, renamed
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import JsonlSink

_OFFSETS = {"authority": 1000, "holder": 2000, "allocation": 3000, "allowance": 4000, "ticket": 5000,
            "pressure": 6000, "tx": 7000, "bundle": 8000, "view": 9000}


def _composed_trace(seed: int) -> list[bytes]:
    buf = io.StringIO()
    run_manager_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=seed, operations=300)
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_composed_trace_renumbered_per_kind_replays_clean(seed: int) -> None:
    """Every kind, allocations too (a ticket's grant is its own event, which binds the allocation it issues)."""
    lines = _composed_trace(seed)
    moved = renamed(lines, offset(_OFFSETS))
    assert moved != lines
    r = replay_epoched(moved)
    assert r.ok and r.events == len(lines), r.describe()


@pytest.mark.parametrize("seed", [0, 1])
def test_composed_trace_with_permuted_ids_replays_clean(seed: int) -> None:
    """Ids issued in no order at all: each kind's ids reversed within a wide range."""
    lines = _composed_trace(seed)
    r = replay_epoched(renamed(lines, lambda kind, i: 10 ** 6 - 7 * i))
    assert r.ok and r.events == len(lines), r.describe()


def _views_moved(lines: list[bytes], rename) -> tuple[int, list[bytes]]:
    """The trace with only its view ids renamed, and how many view events it has (the workload runs views)."""
    moved = renamed(lines, lambda kind, i: rename(i) if kind == "view" else i)
    return sum(b'_view"' in raw for raw in lines), moved


@pytest.mark.parametrize("seed", [0, 1])
def test_composed_trace_with_renumbered_view_ids_replays_clean(seed: int) -> None:
    """View ids are mapped like every other kind: a governor numbering its views from 9001, or in reverse, conforms."""
    lines = _composed_trace(seed)
    for rename in (lambda i: i + 9000, lambda i: 10 ** 6 - 7 * i):
        views, moved = _views_moved(lines, rename)
        assert views > 10 and moved != lines
        r = replay_epoched(moved)
        assert r.ok and r.events == len(lines), r.describe()


def test_an_execution_naming_a_view_never_published_is_rejected_naming_it() -> None:
    lines = _composed_trace(0)
    at = next(i for i, raw in enumerate(lines) if json.loads(raw)["kind"] == "execute_view"
              and json.loads(raw)["payload"]["outcome"] == "accepted")
    ev = json.loads(lines[at])
    ev["payload"]["view"] = 4242
    r = replay_epoched(lines[:at] + [json.dumps(ev).encode() + b"\n"] + lines[at + 1:])
    assert not r.ok and r.line == at + 1 and r.failure == "unknown-id", r.describe()
    assert "view 4242" in r.message


def _event(kind: str, seq: int, ids: dict, payload: dict) -> bytes:
    if payload:
        ids, payload = ledger_payload(ids, kind=kind, **payload)
    ev = {"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": seq, "kind": kind, "ids": ids,
          "payload": payload}
    return json.dumps(ev).encode() + b"\n"


def _obs(used: dict, charges: dict) -> dict:
    return {"used": {str(k): v for k, v in used.items()}, "charges": {str(k): v for k, v in charges.items()}}


def _two_reservations(second_id: int, holder2: int = 21) -> list[bytes]:
    return [
        _event("register_authority", 1, {"result": 7}, {"pool": "device:0", "tier": "device", "capacity": 64, **_obs({}, {})}),
        _event("register_holder", 2, {"result": 20}, {"name": "kv", **_obs({}, {})}),
        _event("register_holder", 3, {"result": holder2}, {"name": "w", **_obs({}, {})}),
        _event("reserve", 4, {"holder": 20, "authority": 7, "result": 500},
               {"tier": "device", "nbytes": 16, "role": "kv", **_obs({7: 16}, {500: 16})}),
        _event("reserve", 5, {"holder": 20, "authority": 7, "result": second_id},
               {"tier": "device", "nbytes": 8, "role": "kv", **_obs({7: 24}, {second_id: 8})}),
        _event("boundary", 6, {}, {}),
    ]


def test_fresh_ids_of_every_kind_replay_clean() -> None:
    r = replay_epoched(_two_reservations(900))
    assert r.ok, r.describe()


def test_two_live_allocations_aliased_onto_one_id_are_rejected_at_that_event() -> None:
    r = replay_epoched(_two_reservations(500)[:-1])
    assert not r.ok and r.line == 5 and r.failure == "violation" and r.id == "I4a", r.describe()
    assert "allocation id 500" in r.message and "two objects aliased onto one id" in r.message


def test_two_live_holders_aliased_onto_one_id_are_rejected_at_that_event() -> None:
    r = replay_epoched(_two_reservations(900, holder2=20))
    assert not r.ok and r.line == 3 and r.failure == "refinement", r.describe()
    assert "holder id 20" in r.message and "still live" in r.message


def test_an_accepted_event_naming_an_id_never_issued_is_rejected_naming_it() -> None:
    lines = _two_reservations(900)
    ev = json.loads(lines[4])
    ev["ids"]["holder"] = 77
    lines[4] = json.dumps(ev).encode() + b"\n"
    r = replay_epoched(lines)
    assert not r.ok and r.line == 5 and r.failure == "unknown-id", r.describe()
    assert "holder 77" in r.message


def test_a_rejected_event_naming_an_unknown_id_is_refused_as_unknown_by_the_spec() -> None:
    lines = _two_reservations(900)[:4]
    ev = json.loads(lines[3])
    ev["ids"] = {"holder": 77, "authority": 7}
    ev["payload"].update(outcome="rejected", error="UnknownHolder", result=None, used={"7": 0}, charges={})
    r = replay_epoched(lines[:3] + [json.dumps(ev).encode() + b"\n"])
    assert r.ok, r.describe()


def test_one_authority_under_two_ids_is_two_ledgers_over_one_pool() -> None:
    """The spec returns the existing authority for the pool; a governor that issues a new id keeps two books (C1)."""
    lines = _two_reservations(900)[:1]
    ev = json.loads(lines[0])
    ev["payload"]["result"], ev["source_sequence"] = 8, 2
    r = replay_epoched(lines + [json.dumps(ev).encode() + b"\n"])
    assert not r.ok and r.line == 2 and r.failure == "violation" and r.id == "C1", r.describe()
