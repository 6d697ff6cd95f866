"""CrossHair over the pure arithmetic: run `crosshair check` and judge its report strictly.

`spec/arith.py` carries PEP 316 contracts. CrossHair exits 0 even when it
could not meet a precondition (the condition was then never checked:
ORT-NOTES section 5), so the exit code alone is not trusted: every reported
line must read "Confirmed over all paths", and at least one must. A
counterexample, an error, "Unable to meet precondition" or "Not confirmed"
fails the run. A missing `crosshair` executable is reported as skipped, with
the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import attrs

from invariants.drift import ROOT  # the repository root, defined once (this module's own folder may move)

__all__ = ["CrosshairResult", "crosshair_executable", "run_crosshair", "ARITH", "COMMAND"]

ARITH = "spec/arith.py"
#: The flags the project checks with (CPU seconds per condition bound the run).
COMMAND = ("check", "--analysis_kind", "PEP316", "--report_all", "--per_condition_timeout", "3")
_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<level>\w+): (?P<text>.*)$")
_CONFIRMED = "Confirmed over all paths."


@attrs.frozen
class CrosshairResult:
    ok: bool
    skipped: str | None  # why it did not run, else None
    confirmed: int  # conditions confirmed over all paths
    problems: tuple[str, ...]  # every non-confirmed line, as `file:line: level: text`
    seconds: float
    returncode: int | None


def crosshair_executable() -> str | None:
    """The `crosshair` next to this interpreter, else on PATH, else None."""
    local = Path(sys.executable).parent / "crosshair"
    return str(local) if local.is_file() else shutil.which("crosshair")


def run_crosshair(target: str = ARITH, *, timeout: float = 120.0, root: Path = ROOT) -> CrosshairResult:
    """Check `target` (relative to `root`); lines report paths relative to `root`."""
    exe = crosshair_executable()
    if exe is None:
        return CrosshairResult(True, "the crosshair executable is not installed (pip install crosshair-tool)",
                               0, (), 0.0, None)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([exe, *COMMAND, target], cwd=root, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return CrosshairResult(False, None, 0, (f"crosshair did not finish within {timeout:.0f} s",),
                               time.perf_counter() - t0, None)
    confirmed, problems = 0, []
    for raw in (proc.stdout + proc.stderr).splitlines():
        if not raw.strip():
            continue
        m = _LINE.match(raw)
        if m is None:
            problems.append(raw.strip())
            continue
        if m["level"] == "info" and m["text"] == _CONFIRMED:
            confirmed += 1
            continue
        path = Path(m["path"])
        rel = path.relative_to(root) if path.is_absolute() and path.is_relative_to(root) else path
        problems.append(f"{rel.as_posix()}:{m['line']}: {m['level']}: {m['text']}")
    if proc.returncode not in (0, 1) and not problems:
        problems.append(f"crosshair exited with status {proc.returncode}")
    if confirmed == 0 and not problems:
        problems.append("crosshair confirmed no condition: the check was vacuous")
    return CrosshairResult(not problems and proc.returncode == 0, None, confirmed, tuple(problems),
                           time.perf_counter() - t0, proc.returncode)
