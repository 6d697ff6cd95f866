"""The upstream pool traces, converted to the one composed revision, replay with docs/conformance.md's verdicts.

`ortmem-pool/1` is retired (issue #21): the upstream implementation's two traces in that revision
(`../shared/conformance/upstream/min-aging-*.jsonl`) are converted to `ortmem-manager/2` by
`tools/convert_pool_traces.py` (outside the package) and committed under `tests/conformance/converted/`. Here: the
conversion re-run gives the committed files byte for byte; each converted trace replays with the verdict of the
"Converted traces" table; the D10 verdict rests on the rule it names (a spec whose pending cancel is an
arbitration round rejects the upstream release's first grant); the converter refuses what it does not know,
and grants the pool trace does not pin down.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from test_upstream_traces import DOC, ROOT
from trace_harness import upstream

from invariants.manager_replay import replay_manager_lines
from invariants.mutation import Mutant, applied
from refimpl.cli import main
from spec.guards import Layer

CONVERTED = Path(__file__).resolve().parent / "converted"


def _converter():  # tools/ is no package: load the script by path
    spec = importlib.util.spec_from_file_location("_convert_pool_traces", ROOT / "tools" / "convert_pool_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _verdicts() -> dict[str, tuple[str, int | None, str | None]]:
    table = DOC.read_text().split("## Converted traces", 1)[1].split("\n## ", 1)[0]
    out = {}
    for m in re.finditer(r"^\| `([^`]+\.jsonl)` \| (clean|rejected) \| ([^|]+) \| ([^|]+) \|", table, re.M):
        name, verdict, line, failure = (g.strip() for g in m.groups())
        out[name] = (verdict, None if line == "-" else int(line), None if failure == "-" else failure)
    return out


VERDICTS = _verdicts()


def test_every_converted_trace_has_a_verdict_and_a_source() -> None:
    assert sorted(p.name for p in CONVERTED.glob("*.jsonl")) == sorted(VERDICTS) == [
        "min-aging-cancel-pending.jsonl", "min-aging-control.jsonl"]


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_conversion_rerun_gives_the_committed_trace(name: str) -> None:
    src = (upstream() / name).read_text().splitlines()
    assert any('"ortmem-pool/1"' in line for line in src)  # it is a pool trace
    got = "".join(line + "\n" for line in _converter().convert_lines(src))
    assert got == (CONVERTED / name).read_text()
    assert '"ortmem-pool/1"' not in got


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_converted_trace_replays_with_the_recorded_verdict(name: str, tmp_path: Path) -> None:
    verdict, line, failure = VERDICTS[name]
    out = tmp_path / "verdict.json"
    code = main(["replay", str(CONVERTED / name), "--json", str(out)])
    got = json.loads(out.read_text())
    assert (code == 0) is (verdict == "clean") and got["ok"] is (verdict == "clean"), got
    assert (got["line"], got["failure"]) == (line, failure), got


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


def test_the_converter_refuses_a_pool_kind_it_does_not_know() -> None:
    lines = (upstream() / "min-aging-control.jsonl").read_text().splitlines()[:5]
    press = {"contract_revision": "ortmem-pool/1", "source": "s", "source_sequence": 6, "kind": "pool_press",
             "ids": {"holder": 1, "pressure": 1, "authority": 1},
             "payload": {"observed": {"free": 10}, "outcome": "accepted", "error": None, "result": 1}}
    with pytest.raises(ValueError, match="line 6: no conversion for pool_press"):
        _converter().convert_lines([*lines, json.dumps(press)])


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
