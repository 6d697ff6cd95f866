"""`ortmem view TRACE.jsonl -o timeline.html`: a governed run as one self-contained memory timeline.

Reads the trace only (never the governor), like the replay checker, and
turns it into per-authority series: the charge of every allocation, summed by
(holder, role), at every event, against the authority's capacity (its limit),
plus the ledger's own `used` as observed, so a trace whose figures disagree
with its allocations shows the gap (marked as a "divergence" event). Events
that are not plain charge changes (device loss and termination, tickets,
pressure, transactions, boundaries, every rejected operation) become markers
with their details on hover.

Traces are untrusted input: lines and events are bounded
(`invariants.trace_format`), every line is parsed as JSON and nothing is
evaluated; the page embeds the data as JSON inside a `<script
type="application/json">` with `<` escaped, and the page's script inserts it
as text, never as markup. The page needs no network (inline CSS and JS).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from invariants.trace_format import MAX_EVENTS, MAX_LINE_BYTES
from refimpl.view_page import PAGE

__all__ = ["TraceError", "CATEGORIES", "timeline_data", "render_html", "write_timeline"]


class TraceError(ValueError):
    """The trace cannot be read as events (bad JSON, oversize line, too many events, bad fields)."""


#: Event kind -> marker category. Ledger kinds that only move charge get no marker unless rejected.
CATEGORIES = {
    "lose_device": "device loss", "confirm_termination": "device loss",
    "submit": "ticket", "grant": "ticket", "claim": "ticket", "cancel_pending": "ticket",
    "cancel_granted": "ticket", "timeout_pending": "ticket", "timeout_granted": "ticket",
    "pressure": "pressure", "answer": "pressure", "reclaim": "pressure", "reconfigure": "pressure",
    "plan": "transaction", "reserve_all": "transaction", "publish": "transaction", "execute": "transaction",
    "commit_transaction": "transaction", "abort": "transaction", "boundary": "boundary",
    # the composed manager's kinds (revision ortmem-manager/1)
    "cancel_ticket": "ticket", "timeout_ticket": "ticket", "press": "pressure", "cancel_pressure": "pressure",
    "plan_tx": "transaction", "reserve_tx": "transaction", "commit_tx": "transaction", "abort_tx": "transaction",
    "prepare_limit": "limit", "commit_limit": "limit",
}
_COMPOSED = "ortmem-manager/1"
_CHARGE_KINDS = frozenset({"reserve", "record_committed", "commit", "cancel", "release", "quarantine"})
_KIND = re.compile(r"^[a-z][a-z_]{0,63}$")


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


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
            e = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            raise TraceError(f"line {n}: not JSON ({err})") from None
        if not isinstance(e, dict) or not isinstance(e.get("kind"), str) or not _KIND.match(e["kind"]):
            raise TraceError(f"line {n}: not a trace event (no valid 'kind')")
        for field in ("ids", "payload"):
            if not isinstance(e.get(field, {}), dict):
                raise TraceError(f"line {n}: '{field}' is not an object")
        out.append(e)
    return out


def _figures(payload: dict[str, Any], part: str) -> dict[int, int]:
    observed = payload.get("observed")
    m = observed.get(part) if isinstance(observed, dict) else None
    if m is None and part == "used":  # a composed event carries each named or changed authority's used
        m = payload.get("used")
    if not isinstance(m, dict):
        return {}
    return {int(k): v for k, v in m.items() if isinstance(k, str) and k.isdigit() and type(v) is int}


def timeline_data(lines: Any) -> dict[str, Any]:
    """The page's data: authorities with their series and observed `used`, holders, and event markers."""
    events = _events(lines)
    # A composed trace's events carry each authority's used, not each allocation's charge (a grant, a
    # transaction or an answer moves charges the ledger events never name): its per-holder series and
    # the used-versus-charges check would be guesses, so only used and the markers are drawn.
    composed = any(e.get("contract_revision") == _COMPOSED for e in events)
    holders: dict[int, str] = {}
    auths: dict[int, dict[str, Any]] = {}
    canon: dict[int, int] = {}
    allocs: dict[int, tuple[int, str, int]] = {}  # id -> (holder, role, canonical authority)
    charge: dict[int, int] = {}
    series: dict[int, dict[str, list[list[int]]]] = defaultdict(dict)  # auth -> key -> [[event, value]]
    used: dict[int, list[list[int]]] = defaultdict(list)
    markers: list[dict[str, Any]] = []
    totals: dict[int, dict[str, int]] = defaultdict(dict)
    for i, e in enumerate(events):
        kind, ids, p = e["kind"], e.get("ids", {}), e.get("payload", {})
        ok = p.get("outcome") == "accepted"
        result = _int(ids.get("result"))
        if ok and kind == "register_holder" and result is not None:
            holders[result] = str(p.get("name", result))[:64]
        elif ok and kind == "register_authority" and result is not None:
            auths[result] = {"id": result, "pool": str(p.get("pool", ""))[:64], "tier": str(p.get("tier", ""))[:16],
                             "capacity": _int(p.get("capacity")) or 0}
            canon[result] = result
        elif ok and kind == "register_alias" and result is not None and _int(ids.get("of")) in canon:
            canon[result] = canon[ids["of"]]
        touched: set[int] = set()
        if ok and kind in ("reserve", "record_committed") and result is not None:
            a = canon.get(_int(ids.get("authority")) or -1)
            if a is not None:
                allocs[result] = (_int(ids.get("holder")) or 0, str(p.get("role", "?"))[:16], a)
                touched.add(result)
        if kind in _CHARGE_KINDS and _int(ids.get("allocation")) in allocs:
            touched.add(ids["allocation"])
        if kind in ("lose_device", "confirm_termination"):
            a = canon.get(_int(ids.get("authority")) or -1)
            touched |= {x for x, (_, _, b) in allocs.items() if b == a}
        seen = _figures(p, "charges")
        changed: set[int] = set()
        for x in touched:
            new = seen.get(x, 0)  # a touched allocation absent from `charges` holds nothing now
            if charge.get(x, 0) != new:
                charge[x] = new
                changed.add(allocs[x][2])
        for a in () if composed else changed:
            sums: dict[str, int] = defaultdict(int)
            for x, (h, role, b) in allocs.items():
                if b == a and charge.get(x, 0):
                    sums[f"{holders.get(h, h)} / {role}"] += charge[x]
            for key in set(sums) | set(totals[a]):
                if sums.get(key, 0) != totals[a].get(key, 0):
                    series[a].setdefault(key, [[0, 0]] if i else []).append([i, sums.get(key, 0)])
            totals[a] = dict(sums)
        for a, u in _figures(p, "used").items():
            if a in auths and (not used[a] or used[a][-1][1] != u):
                used[a].append([i, u])
            if a in auths and not composed and u != sum(totals[a].values()):
                markers.append({"i": i, "category": "divergence", "kind": kind, "authority": a,
                                "detail": f"ledger used {u} != sum of its allocations' charges "
                                          f"{sum(totals[a].values())}"})
        # A composed trace's `configure` event (the manager's aging bound) has no outcome: no marker.
        category = CATEGORIES.get(kind) or (None if ok or kind == "configure" else "rejected")
        if category is not None:
            owner = allocs.get(_int(ids.get("allocation")) or -1)
            markers.append({"i": i, "category": category, "kind": kind,
                            "authority": canon.get(_int(ids.get("authority")) or -1, owner[2] if owner else None),
                            "detail": json.dumps({"ids": ids, "outcome": p.get("outcome"), "error": p.get("error"),
                                                  **{k: v for k, v in p.items()
                                                     if k not in ("observed", "used", "outcome", "error")}})[:400]})
    return {"events": len(events), "holders": {str(k): v for k, v in holders.items()},
            "authorities": [{**a, "series": series.get(a["id"], {}), "used": used.get(a["id"], [])}
                            for a in auths.values()],
            "markers": markers}


def render_html(data: dict[str, Any], title: str) -> str:
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return PAGE.replace("__TITLE__", safe_title).replace("__DATA__", payload)


def write_timeline(trace: str | Path, out: str | Path) -> int:
    """Write the page for `trace` to `out`; returns the number of events."""
    with open(trace, "rb") as f:
        data = timeline_data(f)  # bytes lines: the size bound is on bytes, before decoding
    Path(out).write_text(render_html(data, f"ortmem timeline: {Path(trace).name}"), encoding="utf-8")
    return data["events"]
