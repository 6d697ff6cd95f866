"""Traces of the focused transaction front end (#10 item 6; the single-pool protocol went with issue #21).

Its events (`ortmem-tx/1`, `invariants.focused_trace`) are replayed against its own spec
(`spec.transactions`) by `invariants.focused_replay`, never against refimpl's code;
a trace with one event removed, duplicated or reordered is rejected at the smallest bad prefix, and a
governor with a guard switched off emits a trace the replay rejects where the harm happens.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from invariants.contracts import contracts
from invariants.focused_trace import TX_KINDS
from invariants.manager_replay import replay_manager_lines
from invariants.trace_schema import json_schema
from refimpl.cli import main
from refimpl.focused_workload import run_tx_workload
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from spec.errors import CapacityDenied, PinnedVictim, ReservationOrder, TraceSinkFailed
from spec.guards import ALL_ON, GuardSet
from spec.tickets import PressureState
from spec.transactions_lifecycle import ViewKind
from spec.types import Role, Tier
from trace_harness import renumbered as _renumbered
from tx_harness import reserve_every

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "trace-schema.json"
WORKLOADS: dict[str, Callable[..., Any]] = {"tx": run_tx_workload}


def _lines(buf: io.StringIO) -> list[bytes]:
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


def _trace(name: str, seed: int = 0) -> list[bytes]:
    buf = io.StringIO()
    WORKLOADS[name](ProcessMemoryManager(trace=JsonlSink(buf)), seed=seed)
    return _lines(buf)


@pytest.fixture(scope="module", params=["tx"])
def focused(request: pytest.FixtureRequest) -> tuple[str, list[bytes]]:
    return request.param, _trace(request.param)


def _kinds(lines: list[bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in lines:
        k = json.loads(raw)["kind"]
        out[k] = out.get(k, 0) + 1
    return out


def _first(lines: list[bytes], kind: str, outcome: str = "accepted") -> int:
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == kind and ev["payload"]["outcome"] == outcome:
            return i
    raise AssertionError(f"no {outcome} {kind}")


@pytest.mark.parametrize("name", ["tx"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_focused_workload_replays_clean(name: str, seed: int) -> None:
    lines = _trace(name, seed)
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    assert r.events == len(lines) > 100


def test_focused_workload_records_every_kind_of_its_front_end(focused: tuple[str, list[bytes]]) -> None:
    name, lines = focused
    kinds = _kinds(lines)
    want = TX_KINDS
    assert set(want) - set(kinds) == set(), f"the {name} workload never recorded {sorted(set(want) - set(kinds))}"
    revisions = {json.loads(raw)["contract_revision"] for raw in lines}
    assert f"ortmem-{name}/1" in revisions


def test_focused_events_match_the_schema(focused: tuple[str, list[bytes]]) -> None:
    _, lines = focused
    schema = json_schema()
    assert json.loads(SCHEMA.read_text()) == schema, "run `ortmem trace --write-schema`"
    validator = jsonschema.Draft202012Validator(schema)
    for raw in lines:
        validator.validate(json.loads(raw))


@pytest.mark.parametrize("name,kind", [("tx", "tx_plan"), ("tx", "publish_view")])
def test_removed_focused_event_is_rejected_at_the_next_line(name: str, kind: str) -> None:
    lines = _trace(name)
    i = _first(lines, kind)
    r = replay_manager_lines(lines[:i] + lines[i + 1:])
    assert not r.ok and r.failure == "sequence-gap" and r.line == i + 1, r.describe()


@pytest.mark.parametrize("name,kind", [("tx", "tx_plan"), ("tx", "open_bundle")])
def test_removed_focused_event_renumbered_is_caught_by_the_spec(name: str, kind: str) -> None:
    """An emitter that drops an event and renumbers: the focused spec notices what is missing."""
    lines = _trace(name)
    i = _first(lines, kind)
    r = replay_manager_lines(_renumbered(lines[:i] + lines[i + 1:]))
    assert not r.ok and r.failure in ("unknown-id", "refinement", "violation"), r.describe()
    assert r.line is not None and r.line >= i + 1


@pytest.mark.parametrize("name,kind", [("tx", "tx_reserve"), ("tx", "tx_commit")])
def test_duplicated_focused_event_is_rejected_where_it_repeats(name: str, kind: str) -> None:
    lines = _trace(name)
    i = _first(lines, kind)
    r = replay_manager_lines(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    assert not r.ok and r.failure == "duplicate-sequence" and r.line == i + 2, r.describe()


@pytest.mark.parametrize("name,kind", [("tx", "execute_view")])
def test_reordered_focused_events_are_rejected_at_the_first_out_of_order_line(name: str, kind: str) -> None:
    lines = _trace(name)
    i = _first(lines, kind)
    r = replay_manager_lines(lines[:i - 1] + [lines[i], lines[i - 1]] + lines[i + 1:])
    assert not r.ok and r.failure == "sequence-gap" and r.line == i, r.describe()


def test_changed_tx_figure_is_refinement() -> None:
    lines = _trace("tx")
    i = _first(lines, "tx_reserve")
    ev = json.loads(lines[i])
    aid = next(iter(ev["payload"]["observed"]["used"]))
    ev["payload"]["observed"]["used"][aid] += 1
    r = replay_manager_lines(lines[:i] + [json.dumps(ev).encode() + b"\n"] + lines[i + 1:])
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()


def test_truncated_focused_trace_with_live_items_is_leftover() -> None:
    lines = _trace("tx")
    r = replay_manager_lines(lines[:_first(lines, "tx_plan") + 1])
    assert not r.ok and r.failure == "leftover", r.describe()


# --- a guard switched off: the governor's trace shows the harm, the focused spec refuses it -------------------


def _tx_out_of_order(guards: GuardSet) -> list[bytes]:
    buf = io.StringIO()
    p = ProcessMemoryManager(guards=guards, trace=JsonlSink(buf))
    h = p.register_holder("engine")
    a1, a2 = p.register_authority("hbm", Tier.DEVICE, 64), p.register_authority("host", Tier.HOST, 64)
    t = p.tx_plan(h, ((a1, 8), (a2, 8)), 0, ViewKind.CONTIGUOUS)
    try:
        p.tx_reserve(t, a2)  # line 5: before a1 (C4)
    except ReservationOrder:
        pass
    p.tx_abort(t)
    return _lines(buf)


def test_tx_trace_of_an_ordered_refusal_replays_clean() -> None:
    lines = _tx_out_of_order(ALL_ON)
    assert json.loads(lines[4])["payload"]["error"] == "ReservationOrder"
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


def test_governor_without_ordered_reservation_fails_replay_at_the_reservation() -> None:
    with contracts(on=False):
        lines = _tx_out_of_order(GuardSet.without("ordered_reservation"))
    r = replay_manager_lines(lines)
    assert not r.ok and r.failure == "violation" and r.line == 5, r.describe()
    assert "ReservationOrder" in r.message


# --- what no one spec describes ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tx"])
def test_cli_writes_and_replays_a_focused_trace(tmp_path: Path, name: str) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", str(out), "--focused", name, "--seed", "3"]) == 0
    assert main(["replay", str(out)]) == 0
    text = out.read_text().splitlines()
    (tmp_path / "lossy.jsonl").write_text("\n".join(text[:6] + text[7:]) + "\n")
    assert main(["replay", str(tmp_path / "lossy.jsonl")]) == 1


# --- composed events in a transaction trace (one verb per concept, issue #21) --------------------------------


def _tx_with_a_loss() -> list[bytes]:
    """Two ledgers, a transaction holding both, a loss of the second: the loss aborts it (`lose_device`)."""
    buf = io.StringIO()
    pmm = ProcessMemoryManager(trace=JsonlSink(buf))
    a, b = pmm.register_authority("g0", Tier.DEVICE, 64), pmm.register_authority("g1", Tier.DEVICE, 32)
    tx = pmm.tx_plan(pmm.register_holder("kv"), ((a, 8), (b, 4)), 0, ViewKind.CONTIGUOUS)
    reserve_every(pmm, tx)
    pmm.lose_device(b)
    pmm.confirm_termination(b)
    return _lines(buf)


def test_a_composed_loss_in_a_tx_trace_replays_clean_and_lists_both_ledgers() -> None:
    lines = _tx_with_a_loss()
    assert replay_manager_lines(lines).ok, replay_manager_lines(lines).describe()
    loss = json.loads(lines[_first(lines, "lose_device")])
    assert loss["payload"]["observed"]["used"] == {"1": 0, "2": 4}  # the abort credited g0; g1's 4 B stay (C3)


@pytest.mark.parametrize("change, failure", [
    ({"1": 8, "2": 4}, "refinement"),  # the abort's credit on g0 misreported
    ({"2": 4}, "refinement"),  # g0's used changed and the event does not say so
])
def test_a_composed_loss_with_wrong_figures_is_rejected_at_its_line(change: dict, failure: str) -> None:
    lines = _tx_with_a_loss()
    i = _first(lines, "lose_device")
    ev = json.loads(lines[i])
    ev["payload"]["observed"]["used"] = change
    r = replay_manager_lines([*lines[:i], json.dumps(ev).encode(), *lines[i + 1:]])
    assert not r.ok and r.failure == failure and r.line == i + 1, r.describe()


def test_a_composed_registration_with_a_wrong_result_is_rejected() -> None:
    lines = _tx_with_a_loss()
    i = _first(lines, "confirm_termination")
    ev = json.loads(lines[i])
    ev["payload"]["outcome"], ev["payload"]["error"] = "rejected", "InvalidTransition"
    r = replay_manager_lines([*lines[:i], json.dumps(ev).encode(), *lines[i + 1:]])
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
