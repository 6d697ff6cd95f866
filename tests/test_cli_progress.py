"""Progress of the long commands (issue #25): live counts in a terminal, a plain line every ~10 s in a log.

The end-to-end test runs one checker's phases of `ortmem verify --quick` with stdout a pipe (what
`> log.txt` and CI give) and times every line as it arrives: no gap over the interval (plus
slack for a loaded machine), and the worker processes' live counts reach the log.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from refimpl.cli_progress import Reporter, counts_text

ROOT = Path(__file__).resolve().parent.parent


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=160, color_system=None), out


def test_counts_read_in_order() -> None:
    assert counts_text({"steps": 480, "examples": 12}) == "12 examples, 480 steps"
    assert counts_text({"states": 2048}) == "2,048 states"


def test_plain_mode_prints_a_status_line_every_interval_and_each_phase_end() -> None:
    console, out = _console(terminal=False)
    with Reporter(console, interval=0.2) as r:
        r.phase("campaigns", 0, 2)
        r.live("ledger campaign", {"examples": 3, "steps": 120})
        time.sleep(0.5)
        r.phase("campaigns", 1, 2)
        r.live("ledger campaign", {})
        r.phase("campaigns", 2, 2)
        time.sleep(0.25)
    lines = out.getvalue().splitlines()
    status = [x for x in lines if "running: ledger campaign: 3 examples, 120 steps" in x]
    assert len(status) >= 2, lines  # two intervals passed while the campaign ran
    assert sum("campaigns done (2/2)" in x for x in lines) == 1, lines  # the phase end, once
    assert not any("[" in x.split("]", 1)[1] for x in lines), lines  # no markup left in the text


def test_terminal_mode_draws_live_counts_not_literal_markup() -> None:
    console, out = _console(terminal=True)
    with Reporter(console) as r:
        r.phase("negative controls", 0, 4)
        r.live("control limit_check (spec)", {"examples": 40, "steps": 900})
        r.phase("negative controls", 1, 4)
    text = out.getvalue()
    assert "40 examples, 900 steps" in text and "1/4" in text
    assert "[/" not in text


def _timed_lines(cmd: list[str], timeout: float) -> tuple[int, list[tuple[float, str]]]:
    """Run `cmd` with stdout a pipe; every line with the time it arrived (the process start is t = 0)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                         env={**os.environ, "COLUMNS": "200"})
    got: list[tuple[float, str]] = []

    def read() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            got.append((time.monotonic() - t0, line.rstrip("\n")))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(timeout=5)
    got.append((time.monotonic() - t0, "<exit>"))
    return code, got


@pytest.mark.slow
def test_verify_into_a_log_writes_a_line_at_least_every_ten_seconds() -> None:
    code, lines = _timed_lines([sys.executable, "-m", "refimpl.cli", "verify", "--quick", "--checker", "admission",
                                "--jobs", "2"], timeout=900)
    assert code in (0, 1), lines[-20:]
    # From the header to the report: the import before the header and the report at the end are not progress.
    start = next(t for t, x in lines if x.startswith("ortmem verify:"))
    end = next(t for t, x in lines if "per-ID results" in x or "campaign:" in x and "examples" in x and "s]" not in x)
    times = [t for t, _ in lines if start <= t <= end]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert end - start > 20, "too short a run to show periodic lines"
    assert max(gaps) <= 12.5, f"a gap of {max(gaps):.1f} s in the log: {lines}"
    text = "\n".join(x for _, x in lines)
    # Counts from inside the worker processes reached the log, and the phases ended in order.
    assert re.search(r"running: .*\d+ examples, \d+ steps", text), text[-3000:]
    assert "campaigns done" in text and "negative controls done" in text
    assert "[/" not in text and "[yellow]" not in text and "[red]" not in text
