"""`ortmem view --perfetto`: the Chrome trace-event export of a composed trace, checked against the format's rules.

The export must meet the Trace Event Format's structural rules
(`refimpl.view_perfetto.check_chrome_trace`, each rule shown able to fail
below) and carry one counter track per authority and holder / role, the
ledger's used and limit, and instant events for grants, pressure, device
loss and limit changes. Expected tracks are read from the trace here.
Perfetto's own trace processor is not run: the `perfetto` wheel downloads
its `trace_processor_shell` binary at first use, and these machines have no
network (docs/timeline.md says how to load the file by hand).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from refimpl.cli import main
from refimpl.view_perfetto import check_chrome_trace


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    d = tmp_path_factory.mktemp("perfetto")
    trace, out = d / "t.jsonl", d / "t.json"
    assert main(["trace", str(trace), "--seed", "1"]) == 0
    assert main(["view", str(trace), "--perfetto", str(out)]) == 0
    assert not (d / "timeline.html").exists() and not Path("timeline.html").exists()  # only what was asked for
    return trace, json.loads(out.read_text())


def test_export_meets_the_format(exported) -> None:
    _, doc = exported
    assert check_chrome_trace(doc) == []
    assert {e["ph"] for e in doc["traceEvents"]} == {"M", "C", "i"}


def test_export_has_a_counter_per_authority_and_holder(exported) -> None:
    trace, doc = exported
    names, auths, last_used = {}, {}, {}
    for line in trace.read_text().splitlines():
        e = json.loads(line)
        p = e["payload"]
        if p.get("outcome") == "accepted" and e["kind"] == "register_holder":
            names[p["result"]] = p["name"]
        if p.get("outcome") == "accepted" and e["kind"] == "register_authority":
            auths[p["result"]] = p["pool"]
        for a, u in p.get("used", {}).items():
            last_used[int(a)] = u
    ev = doc["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(processes) == {0, *auths} and processes[0] == "process-wide events"
    assert all(processes[a].startswith(f"authority {a}: {pool} (") for a, pool in auths.items())
    counters: dict[int, set[str]] = {}
    for e in ev:
        if e["ph"] == "C":
            counters.setdefault(e["pid"], set()).add(e["name"])
    assert set(counters) == set(auths)
    for pid, tracks in counters.items():
        assert {"used (ledger)", "limit"} <= tracks
        holders = {t.split(" / ")[0] for t in tracks - {"used (ledger)", "limit", "unattributed"}}
        assert holders <= set(names.values())
    assert len({t.split(" / ")[0] for ts in counters.values() for t in ts if " / " in t}) >= 2
    cats = {e["cat"] for e in ev if e["ph"] == "i"}
    assert {"grant", "pressure", "device loss", "limit"} <= cats, cats
    for pid in counters:  # the used track ends on the ledger's own last figure
        used = [e for e in ev if e["ph"] == "C" and e["pid"] == pid and e["name"] == "used (ledger)"]
        assert used and used[-1]["args"]["bytes"] == last_used[pid]


def _first(doc: dict[str, Any], ph: str, name: str | None = None) -> dict[str, Any]:
    return next(e for e in doc["traceEvents"] if e["ph"] == ph and (name is None or e["name"] == name))


@pytest.mark.parametrize("break_it, problem", [
    (lambda d: _first(d, "C").pop("ts"), "ts is not a non-negative number"),
    (lambda d: _first(d, "i").update(ts="3"), "ts is not a non-negative number"),
    (lambda d: _first(d, "C").update(args={"bytes": "12"}), "counter args must be a non-empty object of numbers"),
    (lambda d: _first(d, "C").update(args={"bytes": True}), "counter args must be a non-empty object of numbers"),
    (lambda d: _first(d, "C").update(args={}), "counter args must be a non-empty object of numbers"),
    (lambda d: _first(d, "i").pop("pid"), "pid is not an integer"),
    (lambda d: _first(d, "i").update(s="x"), "instant scope 'x'"),
    (lambda d: _first(d, "M", "process_name").update(args={}), "process_name without a string args.name"),
    (lambda d: _first(d, "M").update(name="bogus"), "unknown metadata 'bogus'"),
    (lambda d: _first(d, "i").update(ph="B"), "phase 'B'"),
    (lambda d: _first(d, "C").update(name=""), "no name"),
])
def test_invalid_export_is_caught(exported, break_it, problem: str) -> None:
    """Each structural rule fails on an export broken in that one way."""
    doc = copy.deepcopy(exported[1])
    break_it(doc)
    problems = check_chrome_trace(doc)
    assert len(problems) == 1 and problem in problems[0], problems


def test_bad_trace_writes_no_export(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    assert main(["view", str(tmp_path / "bad.jsonl"), "--perfetto", str(tmp_path / "o.json")]) == 1
    assert not (tmp_path / "o.json").exists()
