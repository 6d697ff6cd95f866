"""Observed figures required for every authority an event touches (issue #21 item 4).

In `ortmem-manager/2` an event lists the figures it touches (`invariants.manager_trace.touched`): `used` of every
authority it names or changes, the charge of the allocation a ledger operation names, the bundle it names, accepted
or refused. Leaving one out is rejected at that line, naming it in the trace's own ids; the same trace with it present
replays clean. The older revisions keep the rule of figures that move (the upstream recordings: their verdicts,
tests/conformance/test_upstream_traces.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from trace_harness import upstream

from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import JsonlSink

E = '{"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": %d, "kind": "%s", "ids": %s, '


def _ev(seq: int, kind: str, ids: str, payload: str) -> bytes:
    return (E % (seq, kind, ids) + '"payload": ' + payload + "}\n").encode()


# A 64 B pool, a 16 B lease, a pending 64 B submit and a refused 80 B reserve, then the release and the grant.
HAND = [
    _ev(1, "configure", "{}", '{"aging_bound": 4}'),
    _ev(2, "register_authority", "{}", '{"pool": "p", "tier": "device", "capacity": 64, "device": "d", '
        '"outcome": "accepted", "error": null, "result": 7, "used": {}, "charges": {}, "bundles": {}}'),
    _ev(3, "register_holder", "{}", '{"name": "kv", "outcome": "accepted", "error": null, "result": 30, '
        '"used": {}, "charges": {}, "bundles": {}}'),
    _ev(4, "reserve", '{"holder": 30, "authority": 7}', '{"tier": "device", "nbytes": 16, "role": "kv", '
        '"outcome": "accepted", "error": null, "result": 500, "used": {"7": 16}, "charges": {"500": 16}, '
        '"bundles": {}}'),
    _ev(5, "commit", '{"holder": 30, "allocation": 500}', '{"nbytes": 16, "outcome": "accepted", "error": null, '
        '"result": null, "used": {"7": 16}, "charges": {"500": 16}, "bundles": {}}'),
    _ev(6, "submit", '{"holder": 30, "authority": 7}', '{"nbytes": 64, "priority": 0, "role": "kv", '
        '"outcome": "accepted", "error": null, "result": 9, "used": {"7": 16}, "bundles": {}}'),
    _ev(7, "reserve", '{"holder": 30, "authority": 7}', '{"tier": "device", "nbytes": 80, "role": "kv", '
        '"outcome": "rejected", "error": "CapacityDenied", "result": null, "used": {"7": 16}, "charges": {}, '
        '"bundles": {}}'),
    _ev(8, "set_use", '{"holder": 30, "allocation": 500}', '{"pinned": false, "in_flight": false, '
        '"outcome": "accepted", "error": null, "result": null, "used": {"7": 16}, "bundles": {}}'),
    _ev(9, "release", '{"holder": 30, "allocation": 500}', '{"outcome": "accepted", "error": null, '
        '"result": null, "used": {"7": 0}, "charges": {}, "bundles": {}}'),
    _ev(10, "grant", '{"ticket": 9}', '{"outcome": "accepted", "error": null, "result": 501, "used": {"7": 64}, '
        '"bundles": {}}'),
    _ev(11, "claim", '{"holder": 30, "ticket": 9}', '{"outcome": "accepted", "error": null, "result": 501, '
        '"used": {"7": 64}, "bundles": {}}'),
    _ev(12, "release", '{"holder": 30, "allocation": 501}', '{"outcome": "accepted", "error": null, '
        '"result": null, "used": {"7": 0}, "charges": {}, "bundles": {}}'),
]


def _drop(lines: list[bytes], i: int, figure: str, key: str) -> list[bytes]:
    ev = json.loads(lines[i])
    del ev["payload"][figure][key]
    return lines[:i] + [json.dumps(ev).encode() + b"\n"] + lines[i + 1:]


def test_the_hand_trace_with_every_figure_replays_clean() -> None:
    r = replay_manager_lines(HAND)
    assert r.ok and r.events == len(HAND), r.describe()


@pytest.mark.parametrize(("i", "what"), [
    (5, "pending submit"),   # names authority 7, moves nothing
    (6, "refused reserve"),  # names authority 7; refused: observes no change (G4)
    (7, "set_use"),          # names allocation 500, whose authority is 7
    (10, "claim"),           # names ticket 9, whose authority is 7; the grant moved the bytes
])
def test_a_named_unmoved_authority_left_out_is_rejected_at_that_line(i: int, what: str) -> None:
    r = replay_manager_lines(_drop(HAND, i, "used", "7"))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", (what, r.describe())
    assert "names authority 7 but the event does not observe its used" in r.message, r.message


def test_a_named_allocations_charge_left_out_is_rejected() -> None:
    r = replay_manager_lines(_drop(HAND, 4, "charges", "500"))  # the commit names allocation 500: charge unmoved
    assert not r.ok and r.line == 5 and r.failure == "refinement", r.describe()
    assert "names allocation 500 but the event does not observe its charge" in r.message, r.message


def test_a_moved_figure_keeps_its_own_message() -> None:
    r = replay_manager_lines(_drop(HAND, 8, "used", "7"))  # the release moves 16 -> 0
    assert not r.ok and r.line == 9, r.describe()
    assert "changed used of authority 7 but the event does not say so" in r.message, r.message


def test_an_alias_registration_names_the_authority_it_aliases() -> None:
    alias = _ev(4, "register_alias", '{"of": 7}', '{"view": "uma", "outcome": "accepted", "error": null, '
                '"result": 8, "used": {"7": 0}, "charges": {}, "bundles": {}}')
    assert replay_manager_lines([*HAND[:3], alias]).ok
    r = replay_manager_lines(_drop([*HAND[:3], alias], 3, "used", "7"))
    assert not r.ok and r.line == 4 and "names authority 7 but the event does not observe its used" in r.message, \
        r.describe()


def test_the_older_revisions_require_moved_figures_only() -> None:
    """The upstream recording min-alias.jsonl (`ortmem-ledger/1`) lists no `used` on its register_alias, which names
    authority 1: it keeps its recorded verdict (clean), as docs/trace-format.md says."""
    lines = (upstream() / "min-alias.jsonl").read_bytes().splitlines(keepends=True)
    ev = json.loads(lines[1])
    assert ev["kind"] == "register_alias" and ev["ids"]["of"] == 1 and ev["payload"]["observed"]["used"] == {}
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


# --- refimpl's own trace of a short composed run ------------------------------------------


@pytest.fixture(scope="module")
def own() -> list[bytes]:
    buf = io.StringIO()
    run_manager_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=1, operations=600)
    lines = [x.encode() + b"\n" for x in buf.getvalue().splitlines()]
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    return lines


def _authority(ev: dict[str, Any]) -> tuple[str, str] | None:
    a = ev["ids"].get("authority")  # an alias (ids 4 and up in this run) owns no ledger: it names authority 1
    return ("used", str(a)) if a in (1, 2, 3) and str(a) in ev["payload"]["used"] else None


def _allocation(ev: dict[str, Any]) -> tuple[str, str] | None:
    a = ev["ids"].get("allocation")
    return ("charges", str(a)) if str(a) in ev["payload"].get("charges", {}) else None


def _bundle(ev: dict[str, Any]) -> tuple[str, str] | None:
    b = ev["ids"].get("bundle")
    return ("bundles", str(b)) if str(b) in ev["payload"]["bundles"] else None


# (kind, outcome, the figure it names: which one to drop)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], tuple[str, str] | None]]] = [
    ("submit", "accepted", _authority),
    ("reserve", "accepted", _authority),
    ("reserve", "rejected", _authority),
    ("try_reserve", "rejected", _authority),
    ("press", "accepted", _authority),
    ("prepare_limit", "accepted", _authority),
    ("reconfigure", "accepted", _authority),
    ("open_allowance", "accepted", _authority),
    ("commit", "accepted", _allocation),
    ("quarantine", "accepted", _allocation),
    ("join_bundle", "accepted", _bundle),
    ("report_mismatch", "accepted", _bundle),
]


@pytest.mark.parametrize(("kind", "outcome", "pick"), CASES, ids=[f"{k}-{o}" for k, o, _ in CASES])
def test_own_trace_with_a_named_figure_dropped_is_rejected_at_that_line(
        own: list[bytes], kind: str, outcome: str, pick: Callable[[dict[str, Any]], tuple[str, str] | None]) -> None:
    found = next(((i, f) for i, x in enumerate(own) if (ev := json.loads(x))["kind"] == kind
                  and ev["payload"].get("outcome") == outcome and (f := pick(ev)) is not None), None)
    assert found is not None, f"the run has no {outcome} {kind} listing the figure it names"
    i, (figure, key) = found
    r = replay_manager_lines(_drop(own, i, figure, key))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    noun = {"used": "authority", "charges": "allocation", "bundles": "bundle"}[figure]
    assert f"{noun} {key} but the event does not" in r.message, r.message
