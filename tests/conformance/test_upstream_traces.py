"""The upstream implementation's minimal traces replay with the verdicts docs/conformance.md records.

The traces live in the shared folder beside the repository (`../shared/conformance/upstream/`), or where
ORTMEM_SHARED points. Each is replayed with `ortmem replay` and must give exactly the verdict, line,
failure and ID of docs/conformance.md's "Verdicts" table (every one is in a retired revision: refused at its first
line; its conversion is judged in `test_converted_traces.py`). Beside them: what conformance must still
reject whatever freedom the design leaves (an over-grant, a double credit, a missing observed figure,
a fused map past the allowance).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from trace_harness import ledger_event, replay_epoched, upstream

from refimpl.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"
#: The upstream traces converted to `ortmem-manager/2` (`tools/convert_retired_traces.py`): replay reads no other.
CONVERTED = Path(__file__).resolve().parent / "converted"


def verdicts(section: str) -> dict[str, tuple[str, int | None, str | None, str | None]]:
    """docs/conformance.md's table under `## {section}`: trace -> (verdict, line, failure, id)."""
    table = DOC.read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    out = {}
    for m in re.finditer(r"^\| `([^`]+\.jsonl)` \| (clean|rejected) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|", table, re.M):
        name, verdict, line, failure, cid = (g.strip() for g in m.groups())
        out[name] = (verdict, None if line == "-" else int(line), None if failure == "-" else failure,
                     None if cid == "-" else cid)
    return out


VERDICTS = verdicts("Verdicts")


def test_the_verdict_table_lists_every_upstream_trace() -> None:
    up = upstream()
    assert len(VERDICTS) >= 28
    assert sorted(p.name for p in up.glob("*.jsonl")) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_upstream_trace_replays_with_the_recorded_verdict(name: str, tmp_path: Path) -> None:
    assert_verdict(upstream() / name, VERDICTS[name], tmp_path)


def assert_verdict(trace: Path, expected: tuple[str, int | None, str | None, str | None], tmp_path: Path) -> None:
    """`ortmem replay trace` gives the table's verdict, line, failure and ID."""
    verdict, line, failure, cid = expected
    out = tmp_path / "verdict.json"
    code = main(["replay", str(trace), "--json", str(out)])
    got = json.loads(out.read_text())
    assert (code == 0) is (verdict == "clean") and got["ok"] is (verdict == "clean"), got
    assert (got["line"], got["failure"], got["id"]) == (line, failure, cid), got


# --- still rejected, whatever the design leaves free -------------------------------------


def _ev(seq: int, kind: str, ids: dict, payload: dict, used: dict, charges: dict) -> bytes:
    """An accepted ledger event; `ids.result` is the id it issued (the payload's `result`)."""
    return ledger_event(seq, kind, ids, used, charges, **payload)


def _lease(nbytes: int = 16, used: dict | None = None, charges: dict | None = None) -> list[bytes]:
    return [
        _ev(1, "register_authority", {"result": 3}, {"pool": "device:0", "tier": "device", "capacity": 64,
                                                     "device": "device:0"}, {}, {}),
        _ev(2, "register_holder", {"result": 9}, {"name": "kv"}, {}, {}),
        _ev(3, "reserve", {"holder": 9, "authority": 3, "result": 40}, {"tier": "device", "nbytes": nbytes, "role": "kv"},
            {"3": nbytes} if used is None else used, {"40": nbytes} if charges is None else charges),
        _ev(4, "commit", {"holder": 9, "allocation": 40}, {"nbytes": nbytes}, {"3": nbytes}, {"40": nbytes}),
        _ev(5, "release", {"holder": 9, "allocation": 40}, {}, {"3": 0}, {}),
    ]


def test_the_clean_lease_replays_clean() -> None:
    r = replay_epoched(_lease())
    assert r.ok, r.describe()


def test_an_over_grant_is_still_rejected() -> None:
    r = replay_epoched(_lease(nbytes=80))
    assert not r.ok and r.line == 3 and r.failure == "violation" and r.id == "I2", r.describe()


def test_a_double_credit_is_still_rejected() -> None:
    lines = _lease() + [_ev(6, "release", {"holder": 9, "allocation": 40}, {}, {"3": 0}, {})]
    r = replay_epoched(lines)
    assert not r.ok and r.line == 6 and r.failure == "violation", r.describe()


@pytest.mark.parametrize("used,charges", [({}, {"40": 16}), ({"3": 16}, {}), ({}, {})])
def test_a_trace_missing_an_observed_figure_is_rejected(used: dict, charges: dict) -> None:
    r = replay_epoched(_lease(used=used, charges=charges))
    assert not r.ok and r.line == 3 and r.failure == "refinement", r.describe()
    assert "does not say so" in r.message


def _allowance(map_bytes: int, limit: int = 8) -> list[bytes]:
    return [
        _ev(1, "register_authority", {"result": 1}, {"pool": "device:0", "tier": "device", "capacity": 64,
                                                     "device": "device:0"}, {}, {}),
        _ev(2, "register_holder", {"result": 1}, {"name": "kv"}, {}, {}),
        _ev(3, "open_allowance", {"holder": 1, "authority": 1, "result": 1}, {"limit": limit}, {"1": 0}, {}),
        _ev(4, "reserve_growth", {"holder": 1, "allowance": 1}, {"nbytes": 2}, {"1": 0}, {}),
        _ev(5, "map_allowance", {"holder": 1, "allowance": 1}, {"nbytes": map_bytes}, {"1": 0}, {}),
    ]


def test_a_fused_map_within_the_allowance_replays_clean() -> None:
    """D8: mapping 6 B with 2 B of growth reserved reserves the other 4 B and maps all in one locked step."""
    r = replay_epoched(_allowance(6))
    assert r.ok, r.describe()


def test_a_fused_map_past_the_allowance_is_still_rejected() -> None:
    r = replay_epoched(_allowance(9))
    assert not r.ok and r.line == 5 and r.failure == "violation" and r.id == "I4b", r.describe()


# --- D3: the physical device apart from the authority's identity ----------------------------


def _with_device(lines: list[bytes], devices: dict[str, str]) -> list[bytes]:
    """The trace with `payload.device` declared on each register_authority whose pool `devices` names."""
    out = []
    for raw in lines:
        ev = json.loads(raw)
        if ev["kind"] == "register_authority" and ev["payload"]["pool"] in devices:
            ev["payload"]["device"] = devices[ev["payload"]["pool"]]
        out.append(json.dumps(ev).encode() + b"\n")
    return out


def test_two_books_over_one_declared_device_are_caught_whatever_the_pools_are_called() -> None:
    lines = (CONVERTED / "min-two-books-renamed-pool.jsonl").read_bytes().splitlines(keepends=True)
    assert replay_epoched(lines).ok  # the gap: without the device field the over-grant replays clean
    r = replay_epoched(_with_device(lines, {"device:0": "cuda:0", "device:0/memory-authority-2": "cuda:0"}))
    assert not r.ok and r.line == 2 and r.failure == "violation" and r.id == "C1", r.describe()


def test_pools_on_different_declared_devices_are_two_authorities() -> None:
    lines = (CONVERTED / "min-two-books-renamed-pool.jsonl").read_bytes().splitlines(keepends=True)
    r = replay_epoched(_with_device(lines, {"device:0": "cuda:0", "device:0/memory-authority-2": "cuda:1"}))
    assert r.ok, r.describe()


def test_the_spec_keeps_one_authority_per_device_and_its_predicate_catches_two() -> None:
    from invariants._violation import InvariantViolation
    from invariants.ledger import state_C1
    from spec import errors as E
    from spec import ledger_actions as A
    from spec.guards import GuardSet
    from spec.ledger import step
    from spec.ledger_state import State
    from spec.types import Tier

    s, first = step(State(), A.RegisterAuthority("gpu-a", Tier.DEVICE, 64, "cuda:0"))
    assert step(s, A.RegisterAuthority("gpu-b", Tier.DEVICE, 64, "cuda:0")) == (s, first)
    assert step(s, A.RegisterAuthority("host", Tier.HOST, 64, "cuda:0"))[1] != first  # another tier, another pool
    with pytest.raises(E.IdentityMismatch, match="device cuda:0"):
        step(s, A.RegisterAuthority("gpu-a", Tier.DEVICE, 64, "cuda:1"))
    two = step(s, A.RegisterAuthority("gpu-b", Tier.DEVICE, 64, "cuda:0"),
               GuardSet.without("single_authority_per_pool"))[0]
    assert len(two.authorities) == 2
    with pytest.raises(InvariantViolation, match="device 'cuda:0'"):
        state_C1(two)


def test_a_composed_trace_missing_a_ledger_figure_is_rejected() -> None:
    """In a composed trace too, a ledger event must observe every `used` it moves (issue #21)."""

    configure = {"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": 3, "kind": "configure",
                 "ids": {}, "payload": {"aging_bound": 4}}
    lines = [json.dumps(ev).encode() + b"\n" for ev in (*map(json.loads, _lease()[:2]), configure)]
    reserve = json.loads(_lease()[2])
    reserve["source_sequence"] = 4
    assert replay_epoched(lines + [json.dumps(reserve).encode() + b"\n"]).line != 4
    reserve["payload"]["used"] = {}
    r = replay_epoched(lines + [json.dumps(reserve).encode() + b"\n"])
    assert not r.ok and r.line == 4 and r.failure == "refinement" and "does not say so" in r.message, r.describe()


# --- D6: the process quota per tier, carried (issue #21 item 3) ------------------------------------------------


def _with_quota(quota: int | None, accepted: bool = False) -> list[bytes]:
    """`min-process-limit` with the quota its governor enforced declared before the reserve (a `configure` and a
    `set_process_quota` event); `accepted`: the reserve of 48 B granted instead of refused (and then cancelled)."""
    lines = (CONVERTED / "min-process-limit.jsonl").read_bytes().splitlines(keepends=True)
    src = json.loads(lines[0])["source"]

    def composed(seq: int, kind: str, payload: dict) -> bytes:
        return json.dumps({"contract_revision": "ortmem-manager/2", "source": src, "source_sequence": seq,
                           "kind": kind, "ids": {}, "payload": payload}).encode() + b"\n"

    reserve = json.loads(lines[2])
    reserve["source_sequence"] = 5
    tail = []
    if accepted:  # and then cancelled, so the trace ends with nothing in flight
        reserve["payload"].update(outcome="accepted", error=None, result=1, used={"1": 48}, charges={"1": 48})
        cancel = {**reserve, "source_sequence": 6, "kind": "cancel", "ids": {"holder": 1, "allocation": 1},
                  "payload": {"outcome": "accepted", "error": None, "result": None, "used": {"1": 0}, "charges": {},
                              "bundles": {}}}
        tail = [json.dumps(cancel).encode() + b"\n"]
    return lines[:2] + [
        composed(3, "configure", {"aging_bound": 4}),
        composed(4, "set_process_quota", {"tier": "device", "nbytes": quota, "outcome": "accepted", "error": None,
                                          "result": None, "used": {}, "charges": {}, "bundles": {}}),
        json.dumps(reserve).encode() + b"\n", *tail]


def test_the_process_limit_trace_with_its_quota_declared_replays_clean() -> None:
    """D6 carried: the governor's refusal is the design's process quota once the trace declares it."""

    r = replay_epoched(_with_quota(32))
    assert r.ok, r.describe()
    r = replay_epoched(_with_quota(None))  # no quota declared: the refusal is still not the spec's
    assert not r.ok and r.line == 5 and r.failure == "refinement", r.describe()


def test_a_grant_past_the_declared_quota_is_rejected_naming_i1() -> None:

    r = replay_epoched(_with_quota(32, accepted=True))
    assert not r.ok and r.line == 5 and r.failure == "violation" and r.id == "I1", r.describe()
    assert "48 B asked, 32 B left of its 32 B process quota" in r.message
    assert replay_epoched(_with_quota(48, accepted=True)).ok  # within the quota: clean


# --- D13: a stated alignment (section 6 Lifecycle validates it) ---------------------------


def _with_alignment(lines: list[bytes], alignment: object) -> list[bytes]:
    """The trace with `alignment` stated on its reserve events."""
    out = []
    for raw in lines:
        ev = json.loads(raw)
        if ev["kind"] == "reserve":
            ev["payload"]["alignment"] = alignment
        out.append(json.dumps(ev).encode() + b"\n")
    return out


def test_the_recorded_bad_alignment_replays_clean_once_the_trace_states_it() -> None:
    lines = CONVERTED.joinpath("min-bad-align.jsonl").read_bytes().splitlines(keepends=True)
    as_recorded = replay_epoched(lines)
    assert not as_recorded.ok and (as_recorded.line, as_recorded.failure) == (3, "refinement"), as_recorded.describe()
    stated = replay_epoched(_with_alignment(lines, 3))
    assert stated.ok, stated.describe()


@pytest.mark.parametrize("alignment", [None, 1, 64, 1 << 62])
def test_a_good_alignment_is_accepted_and_charges_only_the_bytes(alignment: object) -> None:
    r = replay_epoched(_with_alignment(_lease(), alignment))
    assert r.ok, r.describe()


@pytest.mark.parametrize("alignment", [3, 0, -8, 1 << 63])
def test_a_bad_alignment_accepted_by_the_governor_is_rejected(alignment: object) -> None:
    r = replay_epoched(_with_alignment(_lease(), alignment))
    assert not r.ok and (r.line, r.failure, r.id) == (3, "violation", "refinement"), r.describe()
    assert "InvalidArgument" in r.message and "alignment" in r.message, r.message
