"""The CLI's conventions (issue #25 item 5, issue #23's single-process leftovers): `--version`, `--json` on every
reporting command, errors on stderr in one line, the README's exit codes, Ctrl-C at any time.

Exit codes: 0 success, 1 a check failed, 2 usage error or unusable input (a trace beyond a replay
resource bound included: it was not judged), 130 interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parent.parent
#: The console script as pip installs it: the launcher that guards the CLI's imports against Ctrl-C.
SCRIPT = [sys.executable, "-c", "from refimpl.cli_main import run; run()"]


def _ortmem(*argv: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCRIPT, *argv], capture_output=True, text=True, cwd=ROOT, timeout=300, **kw)


def test_version() -> None:
    from importlib.metadata import version

    p = _ortmem("--version")
    assert p.returncode == EXIT_OK and p.stdout.strip() == f"ortmem {version('ortmem')}"


def test_huge_aging_bound_is_a_one_line_usage_error(tmp_path: Path) -> None:
    p = _ortmem("trace", str(tmp_path / "t.jsonl"), "--aging-bound", str(2**70))
    assert p.returncode == EXIT_USAGE and "Traceback" not in p.stderr
    assert "outside 1..9223372036854775807" in p.stderr
    assert not (tmp_path / "t.jsonl").exists()


def test_closed_stdout_is_one_line_on_stderr() -> None:
    p = subprocess.run(f"{' '.join(SCRIPT[:2])} '{SCRIPT[2]}' spec >&-", shell=True, capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert p.stderr.strip() == "ortmem: cannot write output: standard output is closed"


def test_closed_stderr_alone_does_not_fail_a_command() -> None:
    p = subprocess.run(f"{' '.join(SCRIPT[:2])} '{SCRIPT[2]}' spec C1 2>&-", shell=True, capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == EXIT_OK and "C1 Resource authority" in p.stdout


def test_unknown_spec_id_is_an_error_on_stderr(capsys) -> None:
    assert main(["spec", "I99"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ortmem spec: no catalog entry 'I99'") and err.count("\n") == 1


def test_explore_with_a_used_guard_off_finds_it_and_writes_json(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.json"
    assert main(["explore", "--guard", "commit_within_reservation", "--json", str(out)]) == EXIT_FAILED
    got = json.loads(out.read_text())
    meta = got["#meta"]
    assert meta["found"] and meta["guards_off"] == ["commit_within_reservation"] and meta["steps"] >= 1
    # An ITF trace: the initial state and one state per step, each with every variable and its index.
    assert len(got["states"]) == meta["steps"] + 1 and got["vars"][0] == "action"
    assert [s["#meta"]["index"] for s in got["states"]] == list(range(meta["steps"] + 1))
    assert all(set(got["vars"]) <= set(s) for s in got["states"]) and got["states"][0]["action"] == "init"


def test_explore_a_named_scope_to_its_fixpoint_reports_complete(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.json"
    assert main(["explore", "--scope", "elastic", "--depth", "1000000", "--json", str(out)]) == EXIT_OK
    meta = json.loads(out.read_text())["#meta"]
    assert (meta["scope"], meta["complete"], meta["states"], meta["diameter"]) == ("elastic", True, 44, 12)
    assert "complete, diameter 12" in capsys.readouterr().out


def test_explore_a_manager_scope_with_its_guard_off_finds_it(capsys) -> None:
    assert main(["explore", "--scope", "manager_parts", "--depth", "4", "--guard", "grant_charges_ledger"]) == \
        EXIT_FAILED
    assert "I1" in capsys.readouterr().out


def _trace(tmp_path: Path, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    assert main(["trace", str(path), "--operations", "40"]) == EXIT_OK
    return path


def test_empty_trace_is_rejected_not_ok(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty), "--json", str(tmp_path / "r.json")]) == EXIT_FAILED
    assert "no events" in capsys.readouterr().out
    got = json.loads((tmp_path / "r.json").read_text())
    assert got["ok"] is False and got["events"] == 0 and got["failure"] == "no-events"


def test_trace_beyond_a_resource_bound_is_not_judged_exit_2(tmp_path: Path, capsys) -> None:
    from invariants.trace_format import MAX_LINE_BYTES

    big = tmp_path / "big.jsonl"
    good = _trace(tmp_path).read_text().splitlines()
    big.write_text(good[0] + "\n" + '{"pad": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    capsys.readouterr()
    assert main(["replay", str(big), "--json", "-"]) == EXIT_USAGE
    got = json.loads(capsys.readouterr().out)  # --json -: the JSON alone on stdout
    assert got["failure"] == "oversize" and got["judged"] is False


def test_violating_trace_is_exit_1_and_valid_one_exit_0(tmp_path: Path, capsys) -> None:
    path = _trace(tmp_path)
    assert main(["replay", str(path), "--json", str(tmp_path / "ok.json")]) == EXIT_OK
    assert json.loads((tmp_path / "ok.json").read_text())["ok"] is True
    lines = path.read_text().splitlines()
    (tmp_path / "gap.jsonl").write_text("\n".join(lines[:3] + lines[4:]) + "\n")  # a lost event
    assert main(["replay", str(tmp_path / "gap.jsonl")]) == EXIT_FAILED


def test_bad_trace_in_view_is_plain_text_on_stderr(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main(["view", str(bad), "-o", str(tmp_path / "t.html")]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out == "" and "[red]" not in err and "[/]" not in err and err.startswith("ortmem view: ")


@pytest.mark.parametrize("argv, key", [
    (["spec"], "catalog"), (["spec", "I6"], "guards"),
    (["simulate", "--scenario", "batching"], "scenarios"),
])
def test_reporting_commands_write_json(tmp_path: Path, capsys, argv, key) -> None:
    out = tmp_path / "r.json"
    assert main([*argv, "--json", str(out)]) == EXIT_OK
    assert key in json.loads(out.read_text())


def test_trace_summary_json_counts_what_was_written(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    assert main(["trace", str(path), "--operations", "30", "--json", str(tmp_path / "s.json")]) == EXIT_OK
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["events"] == len(path.read_text().splitlines()) == sum(s["kinds"].values())
    assert set(s["revisions"]) == {"ortmem-manager/2"}  # one revision for every manager event


@pytest.mark.parametrize("after", [0.3, 1.0])
def test_ctrl_c_while_loading_is_one_line_and_130(after: float) -> None:
    p = subprocess.Popen([*SCRIPT, "spec"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         start_new_session=True)
    time.sleep(after)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    if p.returncode == EXIT_OK:
        pytest.skip(f"`ortmem spec` finished within {after} s here: nothing to interrupt")
    assert p.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err and err.strip() in ("ortmem: interrupted", "ortmem spec: interrupted"), err
