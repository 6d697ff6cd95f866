"""ArenaHolder over a real env arena (ORT-NOTES 2.2-2.3), isolated in a subprocess.

The env arena is process-wide, and the Python binding cannot unregister it (registering again replaces it
only for sessions created afterwards: docs/ort-claims.md, py-no-unregister and env-arena-reregister), so one
subprocess (`arena_proc.py`) registers it, drives it and reports; these tests read that report. Each
assertion can fail: the script only records what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRANT = 4 << 20


@pytest.fixture(scope="module")
def report() -> dict:
    r = subprocess.run([sys.executable, os.path.join("tests", "ort", "arena_proc.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_arena_lease_equals_grant(report: dict) -> None:
    assert report["lease_charge"] == GRANT
    assert report["used"] == GRANT


def test_run_over_max_mem_fails_per_run_and_recovers(report: dict) -> None:
    assert report["small_ok"] is True
    assert report["big_error"] is not None and report["big_error"].startswith("Fail:")
    assert "Available memory of" in report["big_error"]
    assert report["after_ok"] is True  # same session, smaller input: fine
    assert report["used_after"] == GRANT  # a failed run changes no charge


def test_pressure_mid_generation_is_answered_only_at_the_next_run_boundary(report: dict) -> None:
    assert report["state_before_run"] == "open"
    assert report["pending_before_run"] == [1]
    assert report["state_after_run"] == "answered"
    assert report["released"] == 0  # the cap cannot shrink: zero is legal, nothing is forced
    assert report["shrinking_runs"] == 1 and report["runs"] == 4
    assert report["opened"] >= 1 and report["answered"] == 1
    [[pid, released, _, _, source]] = report["answers"]
    assert (pid, released) == (1, 0)
    assert "/proc/self/status" in source  # residency names its source (I8b)


def test_arena_lease_is_never_a_victim(report: dict) -> None:
    assert report["pinned_victim"] is not None and report["pinned_victim"].startswith("PinnedVictim")
    assert report["pid2_state"] == "open"  # the refused answer changed nothing


def test_second_env_arena_in_one_process_rejects(report: dict) -> None:
    assert report["second"] is not None and report["second"].startswith("InvalidTransition")
    assert "already has its env arena" in report["second"]
    assert report["used_final"] == GRANT  # the refused holder leased nothing


def test_holder_grant_must_be_the_cap_in_force(report: dict) -> None:
    """Issue #11 item 4: the ledger's arena grant is the cap ORT enforces, or the holder is refused, typed."""
    assert report["mismatch"] is not None and report["mismatch"].startswith("InvalidTransition")
    assert f"capped at {GRANT} B" in report["mismatch"] and f"granted {GRANT // 2} B" in report["mismatch"]
    assert report["used_mismatch"] == 0  # the refused holder leased nothing
    assert report["shared_charge"] == GRANT  # another manager in the process charges the same cap
