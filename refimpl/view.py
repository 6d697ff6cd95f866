"""`ortmem view TRACE.jsonl -o timeline.html`: a governed run as one self-contained memory timeline.

Reads the trace only (never the governor), like the replay checker: this
module reads and bounds the lines; `refimpl.view_model` turns the events of
any revision into the per-authority picture (charge by holder and role,
the ledger's own `used`, the limit, oversubscription, markers);
`refimpl.view_page` is the page, which builds the same model in the
browser from the embedded events or from a file picked in the page;
`refimpl.view_perfetto` exports the model in the Chrome trace-event format.

Traces are untrusted input: lines and events are bounded
(`invariants.trace_format`), every line is parsed as JSON (NaN and Infinity
refused, as JSON.parse refuses them) and nothing is evaluated; the page
embeds the events as JSON inside a `<script type="application/json">` with
`<` and `>` escaped, and the page's script inserts text, never markup. The
page needs no network (inline CSS and JS under a Content-Security-Policy
that allows nothing else).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from invariants.trace_format import MAX_LINE_BYTES
from refimpl.view_model import MAX_EVENTS, build_model
from refimpl.view_page import PAGE

__all__ = ["TraceError", "read_events", "timeline_data", "render_html", "write_timeline"]


class TraceError(ValueError):
    """The trace cannot be read as events (bad JSON, oversize line, too many events, bad fields)."""


_KIND = re.compile(r"^[a-z][a-z_]{0,63}$")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _events(lines: Any) -> list[dict[str, Any]]:
    out = []
    for n, raw in enumerate(lines, 1):
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(f"line {n}: longer than {MAX_LINE_BYTES} bytes")
        if not raw.strip():
            continue
        if len(out) >= MAX_EVENTS:
            raise TraceError(f"more than {MAX_EVENTS} events")
        try:
            e = json.loads(raw, parse_constant=_no_constant)  # NaN / Infinity are not JSON (nor in the page)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:  # RecursionError: nested past the depth
            raise TraceError(f"line {n}: not JSON ({err})") from None
        if not isinstance(e, dict) or not isinstance(e.get("kind"), str) or not _KIND.match(e["kind"]):
            raise TraceError(f"line {n}: not a trace event (no valid 'kind')")
        for field in ("ids", "payload"):
            if not isinstance(e.get(field, {}), dict):
                raise TraceError(f"line {n}: '{field}' is not an object")
        out.append(e)
    return out


def read_events(lines: Any) -> list[dict[str, Any]]:
    """The events of a trace (lines as bytes or text); TraceError naming the first bad line."""
    return _events(lines)


def timeline_data(lines: Any) -> dict[str, Any]:
    """The page's model (`refimpl.view_model.build_model`) of a trace's lines."""
    return build_model(_events(lines))


def render_html(events: list[dict[str, Any]], title: str) -> str:
    """The page with the trace's events embedded (its script builds the model from them, as from a picked file)."""
    payload = json.dumps(events, separators=(",", ":"), ensure_ascii=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e")
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    fill = {"__TITLE__": safe_title, "__DATA__": payload}  # one pass: a title naming __DATA__ stays a title
    return re.sub("__TITLE__|__DATA__", lambda m: fill[m.group(0)], PAGE)


def write_timeline(trace: str | Path, out: str | Path) -> int:
    """Write the page for `trace` to `out`; returns the number of events."""
    with open(trace, "rb") as f:
        events = _events(f)  # bytes lines: the size bound is on bytes, before decoding
    Path(out).write_text(render_html(events, f"ortmem timeline: {Path(trace).name}"), encoding="utf-8")
    return len(events)
