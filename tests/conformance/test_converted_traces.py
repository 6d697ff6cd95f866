"""Upstream traces in a retired revision, converted to `ortmem-manager/2`, replay with docs/conformance.md's verdicts.

`ortmem-pool/1` and `ortmem-manager/1` are retired (issue #21): the upstream implementation's traces in them
(`../shared/conformance/upstream/min-aging-*.jsonl`, `min-limit-*.jsonl`) are converted by
`tools/convert_retired_traces.py` (outside the package) and committed under `tests/conformance/converted/`. Here:
the conversion re-run gives the committed files byte for byte; each converted trace replays with the verdict of
the "Converted traces" table; the D10 verdict rests on the rule it names (a spec whose pending cancel is an
arbitration round rejects the upstream release's first grant); the converter refuses what it does not know,
and grants the trace does not pin down.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from test_upstream_traces import ROOT, assert_verdict, verdicts
from trace_harness import upstream

from invariants.manager_replay import replay_manager_lines
from invariants.mutation import Mutant, applied
from spec.guards import Layer

CONVERTED = Path(__file__).resolve().parent / "converted"


def _converter():  # tools/ is no package: load the script by path
    spec = importlib.util.spec_from_file_location("_convert_retired", ROOT / "tools" / "convert_retired_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VERDICTS = verdicts("Converted traces")


def test_every_converted_trace_has_a_verdict_and_a_source() -> None:
    assert sorted(p.name for p in CONVERTED.glob("*.jsonl")) == sorted(VERDICTS)
    assert sorted(p.name for p in upstream().glob("*.jsonl")) == sorted(VERDICTS)  # every upstream trace
    retired = {n for n, (_, line, failure, _) in verdicts("Verdicts").items() if (line, failure) == (1, "unknown-revision")}
    assert retired == set(VERDICTS)  # every upstream trace is in a retired revision: refused at its first line


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_converter_rerun_gives_the_committed_trace(name: str) -> None:
    src = (upstream() / name).read_text().splitlines()
    assert '"ortmem-ledger/1"' in src[0]  # in a retired revision
    got = "".join(line + "\n" for line in _converter().convert_lines(src))
    assert got == (CONVERTED / name).read_text()
    assert all(json.loads(line)["contract_revision"] == "ortmem-manager/2" for line in got.splitlines())


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_converted_trace_replays_with_the_recorded_verdict(name: str, tmp_path: Path) -> None:
    assert_verdict(CONVERTED / name, VERDICTS[name], tmp_path)


# A spec in which retiring a pending ticket is a round (the rule D10 decided against): everyone ages.
_PENDING_CANCEL_IS_A_ROUND = Mutant(
    "pending_cancel_is_a_round", ("I13",), "manager", Layer.SPEC, "spec.manager",
    "        if rose or submitted or (retired and gone.state is not _T.PENDING):\n",
    "        if rose or submitted or retired:\n",
    "cancelling a pending ticket runs an arbitration round that ages every waiter")


def test_the_d10_verdict_rests_on_its_rule() -> None:
    cancel = (CONVERTED / "min-aging-cancel-pending.jsonl").read_bytes().splitlines(keepends=True)
    control = (CONVERTED / "min-aging-control.jsonl").read_bytes().splitlines(keepends=True)
    assert replay_manager_lines(cancel).ok and replay_manager_lines(control).ok
    with applied(_PENDING_CANCEL_IS_A_ROUND):
        r = replay_manager_lines(cancel)
        # The spec ages ticket 2 one round early: matured, it fits first, so granting ticket 3 is out of order.
        assert (r.ok, r.line, r.failure, r.id) == (False, 17, "violation", "I13"), r.describe()
        assert "GrantOutOfOrder: grant of ticket 3 out of arbitration order: ticket 2 fits" in r.describe()
        assert replay_manager_lines(control).ok  # no pending cancel there: the rule does not apply


_PRESS = {"contract_revision": "ortmem-pool/1", "kind": "pool_press",
          "ids": {"holder": 1, "pressure": 1, "authority": 1},
          "payload": {"observed": {"free": 10}, "outcome": "accepted", "error": None, "result": 1}}
_SUBMIT_1 = {"contract_revision": "ortmem-manager/1", "kind": "submit", "ids": {"holder": 1, "authority": 1},
             "payload": {"nbytes": 1, "priority": 0, "role": "kv", "outcome": "accepted", "error": None, "result": 1,
                         "used": {"1": 0}, "bundles": {}}}
_RESERVE_1 = {"contract_revision": "ortmem-ledger/1", "kind": "reserve",
              "ids": {"holder": 1, "authority": 1, "result": 9},
              "payload": {"tier": "host", "nbytes": 1, "role": "kv", "outcome": "accepted", "error": None,
                          "observed": {"used": {"1": 1}, "charges": {"9": 1}}}}


@pytest.mark.parametrize("after, event, message", [
    (5, _PRESS, "line 6: no conversion for pool_press"),
    (5, _SUBMIT_1, "line 6: no conversion for ortmem-manager/1 submit"),  # its grants would be in its figures
    # Ticket 2 waits (line 8): a ledger operation's figures then may hold grants no line names.
    (8, _RESERVE_1, "line 9: ortmem-ledger/1 reserve while a ticket waits: its figures may hold grants no line names"),
])
def test_the_converter_refuses_what_it_does_not_know(after: int, event: dict, message: str) -> None:
    lines = (upstream() / "min-aging-control.jsonl").read_text().splitlines()
    extra = json.dumps({**event, "source": "s", "source_sequence": 1})
    with pytest.raises(ValueError, match=re.escape(message)):
        _converter().convert_lines([*lines[:after], extra])


def test_the_converter_converts_a_ledger_operation_where_no_ticket_waits() -> None:
    """Control for the refusal above: the same reserve before any submit; the submit after it that fills the pool
    is granted its 9 B (its used rose from the reserve's 1 B, not from 0)."""
    lines = (upstream() / "min-aging-control.jsonl").read_text().splitlines()
    submit = _with(lines, 6, lambda ev: ev["payload"].update(nbytes=9))[5]
    reserve = json.dumps({**_RESERVE_1, "source": "upstream-hostgov-1", "source_sequence": 6})
    got = [json.loads(line) for line in _converter().convert_lines([*lines[:5], reserve, submit])]
    assert got[5] == {"contract_revision": "ortmem-manager/2", "topology_epoch": 1, "source": "upstream-hostgov-1",
                      "source_sequence": 6,
                      "kind": "reserve", "ids": {"holder": 1, "authority": 1},
                      "payload": {"tier": "host", "nbytes": 1, "role": "kv", "outcome": "accepted", "error": None,
                                  "result": 9, "used": {"1": 1}, "charges": {"9": 1}, "bundles": {}}}
    assert [(e["kind"], e["payload"]["used"]) for e in got[6:]] == [("submit", {"1": 1}), ("grant", {"1": 10})]


def _with(lines: list[str], n: int, edit) -> list[str]:
    ev = json.loads(lines[n - 1])
    edit(ev)
    return [*lines[:n - 1], json.dumps(ev), *lines[n:]]


@pytest.mark.parametrize("edit, message", [
    # The release grants 1 B: any one of the four 1 B tickets would make it.
    (lambda lines: _with(lines, 13, lambda ev: ev["payload"]["observed"].update(free=9)),
     "line 13: 1 B granted: 4 set(s) of pending tickets make it"),
    # Ticket 3 at priority 0: the four grants' order would be the ageing's, which the pool trace does not record.
    (lambda lines: _with(lines, 9, lambda ev: ev["payload"].update(priority=0)),
     "line 13: 4 B granted: 1 set(s) of pending tickets make it, of different priorities"),
])
def test_the_converter_refuses_grants_the_pool_trace_does_not_pin_down(edit, message: str) -> None:
    lines = (upstream() / "min-aging-control.jsonl").read_text().splitlines()
    assert len(_converter().convert_lines(lines)) == 19
    with pytest.raises(ValueError, match=re.escape(message)):
        _converter().convert_lines(edit(lines))


# --- `ortmem-ledger/1`: the figures it left out, filled in the open ------------------------------------------------


def _ledger(seq: int, kind: str, ids: dict, payload: dict, used: dict, outcome: str = "accepted",
            charges: dict | None = None) -> str:
    return json.dumps({"contract_revision": "ortmem-ledger/1", "source": "g", "source_sequence": seq, "kind": kind,
                       "ids": ids, "payload": {**payload, "outcome": outcome,
                                               "error": None if outcome == "accepted" else "CapacityDenied",
                                               "observed": {"used": used, "charges": charges or {}}}})


_TWO = [_ledger(1, "register_authority", {"result": 1}, {"pool": "gpu", "tier": "device", "capacity": 64}, {}),
        _ledger(2, "register_authority", {"result": 2}, {"pool": "cpu", "tier": "host", "capacity": 64,
                                                         "device": "cpu:0"}, {}),
        _ledger(3, "register_holder", {"result": 1}, {"name": "kv"}, {}),
        _ledger(4, "reserve", {"holder": 1, "authority": 1, "result": 1},
                {"tier": "device", "nbytes": 16, "role": "kv"}, {"1": 16}, charges={"1": 16}),
        # Refused, moving nothing: ledger/1 lists no figure; /2 requires authority 1's (16 B, observed at line 4).
        _ledger(5, "reserve", {"holder": 1, "authority": 1}, {"tier": "device", "nbytes": 60, "role": "kv"}, {},
                "rejected"),
        json.dumps({"contract_revision": "ortmem-ledger/1", "source": "g", "source_sequence": 6, "kind": "boundary",
                    "ids": {}, "payload": {}})]  # the reservation is still in flight


def test_the_converter_fills_the_last_observed_used_of_what_an_event_touches_and_did_not_list() -> None:
    got = [json.loads(line) for line in _converter().convert_lines(_TWO)]
    assert [e["payload"]["used"] for e in got[:5]] == [{}, {}, {}, {"1": 16}, {"1": 16}]  # authority 2: untouched
    assert [e["payload"].get("device") for e in got[:2]] == ["gpu", "cpu:0"]  # the pool's name; a stated one kept
    assert replay_manager_lines([(line + "\n").encode() for line in _converter().convert_lines(_TWO)]).ok
    # The filled figure is evidence replay checks: a wrong last observation fails where the figure is used.
    wrong = [*_TWO[:3], _TWO[3].replace('"used": {"1": 16}', '"used": {"1": 15}')]
    r = replay_manager_lines([(line + "\n").encode() for line in _converter().convert_lines([*wrong, *_TWO[4:]])])
    assert not r.ok and r.line == 4, r.describe()


def test_the_converter_fill_is_what_the_one_revision_requires() -> None:
    """What ledger/1 let through and /2 does not: the refused reserve with no figure (the fill is not a no-op)."""
    lines = [json.loads(line) for line in _converter().convert_lines(_TWO)]
    lines[4]["payload"]["used"] = {}
    r = replay_manager_lines([(json.dumps(e) + "\n").encode() for e in lines])
    assert (r.ok, r.line, r.failure) == (False, 5, "refinement") and "does not observe its used" in r.message, r


def test_the_converter_stops_at_a_figure_that_is_no_byte_count() -> None:
    bad = _TWO[3].replace('"used": {"1": 16}', '"used": {"1": "16"}')
    with pytest.raises(ValueError, match=re.escape("line 4: reserve: observed used {'1': '16'} is not a byte count")):
        _converter().convert_lines([*_TWO[:3], bad])


def test_the_converter_keeps_the_last_used_across_a_re_registration() -> None:
    """A registration answered with an existing id (the same pool again) issues nothing: the authority keeps the
    16 B it holds, and the figures filled after it say so (not 0, as for a new authority)."""
    again = _ledger(5, "register_authority", {"result": 1}, {"pool": "gpu", "tier": "device", "capacity": 64}, {})
    rest = [line.replace(f'"source_sequence": {n}', f'"source_sequence": {n + 1}') for n, line in
            ((5, _TWO[4]), (6, _TWO[5]))]
    got = [json.loads(line) for line in _converter().convert_lines([*_TWO[:4], again, *rest])]
    assert [e["payload"]["used"] for e in got[4:6]] == [{}, {"1": 16}]  # the refused reserve's: 16 B still
    assert replay_manager_lines([(json.dumps(e) + "\n").encode() for e in got]).ok
