"""Progress of the long commands (issue #25): live counts in a terminal, a plain line every ~10 s in a log.

The end-to-end check rides on the whole `ortmem verify --quick` run of `tests/test_verify.py`, with
stdout a pipe (what `> log.txt` and CI give): every line is timed as it arrives, no gap over the
interval (plus slack for a loaded machine), and the worker processes' live counts reach the log. (One
checker alone finished in 14 s on CI, too short to show periodic lines.)
"""

from __future__ import annotations

import io
import time

from rich.console import Console

from refimpl.cli_progress import Reporter, counts_text


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
