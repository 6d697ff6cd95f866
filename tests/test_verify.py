"""`ortmem verify` end to end, and the verdict it exits with (issue #2, item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from invariants.campaign import ControlResult
from invariants.explore import ExploreResult
from refimpl.cli import main
from refimpl.verify import verdict
from spec.catalog import IDS
from spec.guards import Layer


def test_verify_quick_writes_the_per_id_report(tmp_path: Path) -> None:
    out, folder = tmp_path / "r.json", tmp_path / "report"
    assert main(["verify", "--quick", "--json", str(out), "--report", str(folder), "--jobs", "2"]) == 0
    r = json.loads(out.read_text())
    assert r["ok"] is True
    assert [i["id"] for i in r["ids"]] == list(IDS)
    for i in r["ids"]:
        assert {"id", "title", "status", "predicates", "tests", "examples", "negative_controls"} <= set(i)
        assert i["status"] in ("verified", "not yet implemented"), i["id"]
        for c in i["negative_controls"]:
            assert {"name", "found", "steps", "seconds"} <= set(c) and c["found"] is True
        if i["status"] == "verified":
            assert i["examples"] > 0 and i["negative_controls"], i["id"]
    md = (folder / "report.md").read_text()
    assert md.startswith("# ortmem verify: OK") and "| I8c |" in md
    assert json.loads((folder / "report.json").read_text())["ok"] is True


def _control(found: bool, violated: str | None = "I2") -> ControlResult:
    return ControlResult("limit_check", Layer.SPEC, ("I2",), found, violated if found else None,
                         3 if found else None, 0.1, ("Reserve(...)",) if found else (), "msg")


def _explored(violated: str | None) -> ExploreResult:
    return ExploreResult("ledger", 10, 20, 5, 3, True, 0.1, violated, "msg", ())


GOOD = dict(drift=(), errors={}, controls=[_control(True)], ids=(), explorations={"ledger": _explored(None)},
            explorer_controls={"limit_check": _explored("I2")}, crosshair_ok=True)


def test_verdict_ok_when_everything_holds() -> None:
    assert verdict(**GOOD) is True


@pytest.mark.parametrize("change", [
    pytest.param({"drift": ("docs/spec.md is stale",)}, id="drift"),
    pytest.param({"errors": {"ledger": "I1: ..."}}, id="campaign-violation"),
    pytest.param({"controls": [_control(True), _control(False)]}, id="control-found-nothing"),
    pytest.param({"explorations": {"ledger": _explored("C1")}}, id="explorer-violation"),
    pytest.param({"explorer_controls": {"limit_check": _explored(None)}}, id="explorer-control-found-nothing"),
    pytest.param({"explorer_controls": {"limit_check": _explored("C1")}}, id="explorer-control-wrong-id"),
    pytest.param({"crosshair_ok": False}, id="crosshair"),
])
def test_verdict_rejects_any_failure(change: dict) -> None:
    assert verdict(**{**GOOD, **change}) is False
