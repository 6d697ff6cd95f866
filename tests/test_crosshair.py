"""CrossHair over the pure arithmetic: `spec/arith.py` confirmed, broken companions caught.

`broken_arith.py` keeps a golden file of the counterexamples CrossHair must
report (CrossHair-examples style), so the check is shown able to fail; a
module whose only precondition is unsatisfiable proves that "Unable to meet
precondition" fails the run even though CrossHair itself exits 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.verify.crosshair_check import crosshair_executable, run_crosshair

CASES = Path(__file__).parent / "crosshair_cases"
pytestmark = pytest.mark.skipif(crosshair_executable() is None, reason="crosshair-tool is not installed")


def test_arith_contracts_confirmed_over_all_paths() -> None:
    r = run_crosshair("spec/arith.py", timeout=120)
    assert r.ok, r.problems
    assert r.confirmed >= 14 and r.returncode == 0


def test_broken_arith_matches_golden_counterexamples() -> None:
    r = run_crosshair("tests/crosshair_cases/broken_arith.py", timeout=120)
    assert not r.ok and r.returncode == 1
    assert "\n".join(r.problems) + "\n" == (CASES / "broken_arith.expected").read_text()


def test_unable_to_meet_precondition_fails_despite_exit_zero() -> None:
    r = run_crosshair("tests/crosshair_cases/vacuous.py", timeout=120)
    assert r.returncode == 0
    assert not r.ok and any("Unable to meet precondition" in p for p in r.problems)


def test_missing_executable_is_skipped_with_reason(monkeypatch) -> None:
    import refimpl.verify.crosshair_check as cc

    monkeypatch.setattr(cc, "crosshair_executable", lambda: None)
    r = cc.run_crosshair()
    assert r.ok and r.skipped and "not installed" in r.skipped
