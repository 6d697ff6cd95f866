"""Progress of the long `ortmem` commands (verify, simulate, demo): live in a terminal, plain lines in a log.

In a terminal a rich display shows one bar per phase with its jobs done, and
beside it the live counts of what runs now (a campaign's examples and steps,
an exploration's states). When stdout is not a terminal (CI logs, `> log.txt`)
nothing is redrawn: one plain line is printed when a phase ends, and a status
line once four fifths of `interval` seconds (10 by default) pass without any
line, so a log never goes quiet for longer than the interval while work goes
on, even when a loaded machine wakes the ticker late. Markup is always rendered by rich,
never printed literally.

Calls may come from any thread (the verify job forwards workers' counts from
a reader thread); one lock guards the state, and rich's console has its own.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["Reporter", "counts_text"]

#: Counter names in display order, and how a count reads.
_ORDER = ("examples", "steps", "states")


def counts_text(counts: dict[str, int]) -> str:
    """`{"examples": 12, "steps": 480}` -> "12 examples, 480 steps"."""
    keys = [k for k in _ORDER if k in counts] + sorted(k for k in counts if k not in _ORDER)
    return ", ".join(f"{counts[k]:,} {k}" for k in keys)


class Reporter:
    """`phase(name, done, total)` and `live(job, counts)` callbacks; a context manager around the work."""

    def __init__(self, console: Console, interval: float = 10.0, terminal: bool | None = None) -> None:
        self.console, self.interval = console, interval
        self.terminal = console.is_terminal if terminal is None else terminal
        self.lock = threading.Lock()
        self.phases: dict[str, tuple[int, int]] = {}
        self.order: list[str] = []
        self.running: dict[str, dict[str, int]] = {}
        self.t0 = self.last = time.monotonic()  # `last`: when the latest line was printed
        self.stopped = threading.Event()
        self.bar: Progress | None = None
        self.tasks: dict[str, Any] = {}
        self.ticker: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Reporter:
        self.t0 = self.last = time.monotonic()
        if self.terminal:
            self.bar = Progress(TextColumn("{task.description:<18}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("{task.fields[detail]}"), console=self.console,
                                transient=False)
            self.bar.start()
        else:
            self.ticker = threading.Thread(target=self._tick, daemon=True, name="ortmem-progress")
            self.ticker.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stopped.set()
        if self.bar is not None:
            self.bar.stop()
        if self.ticker is not None:
            self.ticker.join(timeout=2)

    # --- callbacks -------------------------------------------------------------------

    def phase(self, name: str, done: int, total: int) -> None:
        with self.lock:
            before = self.phases.get(name)
            self.phases[name] = (done, total)
            if before is None:
                self.order.append(name)
            ended = 0 < total <= done and (before is None or before[0] < total)
        if self.bar is not None:
            if name not in self.tasks:
                self.tasks[name] = self.bar.add_task(name, total=total, detail="")
            self.bar.update(self.tasks[name], completed=done, total=total)
            self._redraw_details()
        elif ended:
            self._line(f"{name} done ({done}/{total})")

    def live(self, job: str, counts: dict[str, int]) -> None:
        with self.lock:
            if counts:
                self.running[job] = dict(counts)
            else:
                self.running.pop(job, None)
        if self.bar is not None:
            self._redraw_details()

    # --- rendering ---------------------------------------------------------------------

    def _running_text(self, limit: int = 3) -> str:
        with self.lock:
            items = list(self.running.items())
        text = "; ".join(f"{job}: {counts_text(c)}" for job, c in items[:limit])
        return text + (f"; +{len(items) - limit} more" if len(items) > limit else "")

    def _redraw_details(self) -> None:
        assert self.bar is not None
        with self.lock:
            current = next((p for p in self.order if self.phases[p][0] < self.phases[p][1]), None)
        for name, task in self.tasks.items():
            self.bar.update(task, detail=self._running_text() if name == current else "")

    def status(self) -> str:
        """One plain status line: the phases so far and what runs now."""
        with self.lock:
            phases = ", ".join(f"{p} {d}/{t}" for p, (d, t) in ((p, self.phases[p]) for p in self.order))
        running = self._running_text(limit=4)
        return (phases or "starting") + (f"; running: {running}" if running else "")

    def _line(self, text: str) -> None:
        self.last = now = time.monotonic()
        self.console.print(f"[{now - self.t0:5.0f} s] {text}", markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        # Polled, with a fifth of the interval as slack: a ticker that slept the whole interval printed its line
        # 12.6 s after the previous one on a loaded CI machine (the GIL and the cores shared with the workers).
        while not self.stopped.wait(min(1.0, self.interval / 8)):
            if time.monotonic() - self.last >= 0.8 * self.interval:
                self._line(self.status())
