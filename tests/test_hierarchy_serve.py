"""`ortmem serve --workers N`: per-worker quota, budget and events; Ctrl-C shuts down with no process left."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path


def _session_members(sid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
                out.append(int(d.name))
    return out


def test_serve_prints_workers_and_stops_cleanly_on_ctrl_c() -> None:
    p = subprocess.Popen([sys.executable, "-m", "refimpl.cli", "serve", "--workers", "2", "--quota", "16",
                          "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env={**os.environ, "COLUMNS": "200"})
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    seen, deadline = b"", time.monotonic() + 30
    try:
        while seen.count(b"worker 2 (pid") < 2 and time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
        assert seen.count(b"worker 2 (pid") >= 2, seen.decode(errors="replace")
        assert b"quota" in seen and b"budget" in seen and b"events:" in seen
        os.killpg(p.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        rest, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    out = (seen + rest).decode(errors="replace")
    assert p.returncode == 0, out
    assert "shutdown clean: no process left" in out
    assert _session_members(p.pid) == []
