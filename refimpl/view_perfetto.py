"""`ortmem view --perfetto OUT.json TRACE`: the timeline model in the Chrome trace-event format.

The JSON Object Format of the Trace Event Format (the one chrome://tracing
and ui.perfetto.dev open): one process per authority (pid = its id, named
"authority N: pool (tier)"), pid 0 for process-wide events. Per authority,
one counter track ("ph": "C") per holder / role with its charge in bytes,
plus the ledger's `used` and its limit; every marker of the model (grants,
tickets, pressure, transactions, device loss, limit changes, rejected
operations) is an instant event ("ph": "i", thread scope) with its category
as `cat` and the holder and details in `args`. A trace has no clock (events
carry sequence numbers, never times), so `ts` is the event's index in the
trace, read as microseconds: the axis is trace order, as on the page.

`check_chrome_trace` states the format's structural rules the output must
meet (required keys per phase, numeric `ts`, numeric counter values).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from refimpl.view_model import build_model

__all__ = ["chrome_trace", "check_chrome_trace", "write_perfetto"]

_TID = 1


def _meta(pid: int, what: str, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": what, "pid": pid, "tid": _TID, "args": {"name": name}}


def _counter(pid: int, name: str, steps: list[list[int]], start: int) -> list[dict[str, Any]]:
    """A counter track from the authority's registration (`start`, at 0 bytes until its first step)."""
    if not steps or steps[0][0] > start:
        steps = [[start, 0], *steps]
    return [{"ph": "C", "name": name, "cat": "charge", "pid": pid, "tid": _TID, "ts": i, "args": {"bytes": v}}
            for i, v in steps]


def chrome_trace(model: dict[str, Any], title: str) -> dict[str, Any]:
    """The trace-event JSON object of a timeline model (`refimpl.view_model.build_model`)."""
    events: list[dict[str, Any]] = [_meta(0, "process_name", "process-wide events"),
                                    _meta(0, "thread_name", "events")]
    known = set()
    for a in model["authorities"]:
        pid = a["id"]
        known.add(pid)
        events += [_meta(pid, "process_name", f"authority {pid}: {a['pool']} ({a['tier']})"),
                   _meta(pid, "thread_name", "events"),
                   {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": _TID, "args": {"sort_index": pid}}]
        start = a["limit"][0][0]  # the event that registered it
        for key in sorted(a["series"]):
            events += _counter(pid, key, a["series"][key], start)
        events += _counter(pid, "used (ledger)", a["used"], start) + _counter(pid, "limit", a["limit"], start)
    for m in model["markers"]:
        pid = m["authority"] if m["authority"] in known else 0
        events.append({"ph": "i", "s": "t", "name": m["kind"], "cat": m["category"], "pid": pid, "tid": _TID,
                       "ts": m["i"], "args": {"holder": m["holder"], "detail": m["detail"]}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"title": title, "events": model["events"],
                          "ts": "the event's index in the trace (a trace has no clock)"}}


def check_chrome_trace(doc: Any) -> list[str]:
    """The structural problems of a trace-event JSON object (empty when it meets the format's rules)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    problems = []
    for n, e in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{n}]"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in ("M", "C", "i"):
            problems.append(f"{where}: phase {ph!r} is not one this export writes (M, C, i)")
            continue
        if not isinstance(e.get("name"), str) or not e["name"]:
            problems.append(f"{where}: no name")
        for k in ("pid", "tid"):
            if type(e.get(k)) is not int:
                problems.append(f"{where}: {k} is not an integer")
        args = e.get("args")
        if ph != "M" and (type(e.get("ts")) not in (int, float) or e["ts"] < 0):
            problems.append(f"{where}: ts is not a non-negative number")
        if ph == "M":
            if e.get("name") in ("process_name", "thread_name"):
                if not isinstance(args, dict) or not isinstance(args.get("name"), str):
                    problems.append(f"{where}: {e.get('name')} without a string args.name")
            elif e.get("name") != "process_sort_index" or not isinstance(args, dict) \
                    or type(args.get("sort_index")) is not int:
                problems.append(f"{where}: unknown metadata {e.get('name')!r} or a bad sort_index")
        elif ph == "C":
            if not isinstance(args, dict) or not args or \
                    not all(type(v) in (int, float) and not isinstance(v, bool) for v in args.values()):
                problems.append(f"{where}: counter args must be a non-empty object of numbers")
        elif e.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"{where}: instant scope {e.get('s')!r} is not g, p or t")
    return problems


def write_perfetto(trace: str | Path, out: str | Path) -> int:
    """Write the trace-event JSON of `trace` to `out` (TraceError on a bad trace, as the page); the event count."""
    from refimpl.view import read_events

    with open(trace, "rb") as f:
        model = build_model(read_events(f))
    doc = chrome_trace(model, f"ortmem timeline: {Path(trace).name}")
    Path(out).write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n",
                         encoding="utf-8")
    return int(model["events"])
