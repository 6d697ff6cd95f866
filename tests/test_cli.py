"""Issue #14 finding 6: the CLI fails fast (bounds, output paths before any work) and stops fast (Ctrl-C).

Exit codes: 0 success, 1 a check failed, 2 usage error or unusable path, 130 interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import refimpl.cli as cli
from refimpl.cli import EXIT_INTERRUPTED, EXIT_USAGE, main

ORTMEM = [sys.executable, "-m", "refimpl.cli"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [
    ["verify", "--jobs", "0"], ["verify", "--jobs", "-3"], ["verify", "--jobs", "65"], ["verify", "--jobs", "x"],
    ["explore", "--depth", "-1"], ["explore", "--depth", "0"], ["explore", "--max-states", "0"],
    ["trace", "out.jsonl", "--operations", "-5"], ["trace", "out.jsonl", "--operations", "0"],
    ["trace", "out.jsonl", "--aging-bound", "0"], ["trace", "out.jsonl", "--aging-bound", "x"],
    ["demo", "--steps", "0"], ["demo", "--steps", "65"],
], ids=" ".join)
def test_out_of_bounds_arguments_are_usage_errors(argv, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "outside" in err or "not an integer" in err


def _no_work(*args, **kwargs):
    raise AssertionError("work started before the output path was checked")


@pytest.mark.parametrize("flag, where", [
    ("--json", "missing-dir/r.json"), ("--json", "a-dir"), ("--json", "a-file/r.json"),
    ("--report", "a-file"), ("--report", "a-file/sub"),
], ids=lambda v: str(v))
def test_verify_checks_output_paths_before_any_work(tmp_path, monkeypatch, capsys, flag, where) -> None:
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setattr(cli, "verify", _no_work)
    assert main(["verify", "--quick", flag, str(tmp_path / where)]) == EXIT_USAGE  # `_no_work`: no work started
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "ortmem verify:" in err


@pytest.mark.parametrize("argv, said", [
    (["explore", "--depth", "2", "--guard", "grant_charges_ledger"], "belongs to the manager model"),
    (["explore", "--depth", "2", "--guard", "no_such_guard"], "no guard 'no_such_guard'"),
    # Depth 1 registers nothing a commit could exceed: switching C2's guard off there changes nothing.
    (["explore", "--depth", "1", "--guard", "commit_within_reservation"],
     "never consulted guard(s) commit_within_reservation"),
    (["explore", "--scope", "no_such_scope"], "no scope 'no_such_scope'"),
    (["simulate", "--json", "missing/r.json"], "does not exist"),
    (["trace", "missing/t.jsonl"], "does not exist"),
    (["demo", "--plot", "."], "is a directory"),
], ids=lambda v: " ".join(v) if type(v) is list else "")
def test_usage_errors_are_one_line_on_stderr_before_any_work(tmp_path, monkeypatch, capsys, argv, said) -> None:
    import refimpl.demo as D
    import refimpl.manager_workload as W

    monkeypatch.setattr(W, "run_manager_workload", _no_work)
    monkeypatch.setattr(D, "run_demo", _no_work)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"ortmem {argv[0]}: ") and said in err and err.count("\n") == 1, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_spec_to_a_full_device_is_one_line_not_a_traceback() -> None:
    with open("/dev/full", "w") as full:
        p = subprocess.run([*ORTMEM, "spec"], stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0 and "cannot write" in p.stderr


def test_help_documents_the_exit_codes() -> None:
    for argv in (["--help"], ["verify", "--help"]):
        p = subprocess.run([*ORTMEM, *argv], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert p.returncode == 0
        text = " ".join(p.stdout.split())
        assert "1 a check failed" in text and "2 usage error" in text and "130 interrupted" in text


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_stops_verify_without_stray_processes() -> None:
    p = subprocess.Popen([*ORTMEM, "verify", "--quick", "--jobs", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    try:
        time.sleep(12)  # workers spawned and busy with campaigns
        assert p.poll() is None, p.communicate()
        os.killpg(p.pid, signal.SIGINT)  # what a terminal does: the whole foreground group
        # A bound on stopping at all, not a speed figure: the old code ran on for over a minute; a loaded machine
        # may take some seconds (the stop time of an idle one is well under 5 s).
        out, err = p.communicate(timeout=45)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == EXIT_INTERRUPTED, (out[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert err.strip().splitlines() == ["ortmem verify: interrupted"], err[-2000:]
    deadline = time.time() + 30  # the workers end on their own (a stray one would run its campaign for minutes)
    while _alive(p.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(p.pid), "worker processes outlived the interrupted verify"
