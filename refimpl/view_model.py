"""The timeline model of `ortmem view`: a trace's events (`ortmem-manager/2`), normalized to one per-authority picture.

Every event reports the governor's own `used` per ledger after its
operation (`used`). The model keeps that
figure exactly, per authority, and splits it into charge per (holder, role)
by one rule: the change of `used` an event
caused goes to the holder and role the event names (its allocation, its
allowance, its ticket, its transaction, its victims, else its holder and
role). A decrease is taken from those first, then from the largest other
charges. What no event names goes to "unattributed". So the stack always
sums to the ledger's own `used`; the split is exact for a ledger trace
(every byte-moving ledger event names its allocation or allowance) and an
attribution for composed traces.

Also per authority: its limit over time (registration, `commit_limit`),
the intervals where `used` exceeds the limit (oversubscription), and one
marker per event that is not a plain charge change (grants, tickets,
pressure, transactions, device loss, limit changes) and per rejected operation.

The page's script (`refimpl.view_page_js.MODEL_JS`) computes the same model
in the browser from the same events; `tests/test_view_browser.py` compares
the two on a trace of every kind. Change both together.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["CATEGORIES", "UNATTRIBUTED", "MAX_EVENTS", "build_model"]

UNATTRIBUTED = "unattributed"
#: The page holds (and `ortmem view` embeds) every event at once, so the timeline bounds their number; replay,
#: which streams, has no such bound.
MAX_EVENTS = 1_000_000
#: Event kind -> marker category; any other kind gets a marker only when rejected.
CATEGORIES: dict[str, str] = {
    **dict.fromkeys(("lose_device", "confirm_termination"),
                    "device loss"),
    **dict.fromkeys(("grant", "claim", "try_reserve", "reserve_tx"), "grant"),
    **dict.fromkeys(("submit", "cancel_ticket", "timeout_ticket", "set_use"), "ticket"),
    **dict.fromkeys(("press", "answer", "cancel_pressure", "expire_pressure", "reconfigure"), "pressure"),
    **dict.fromkeys(("plan_tx", "commit_tx", "abort_tx", "open_bundle", "join_bundle", "report_mismatch",
                     "publish_view", "execute_view", "remap_view", "drop_view"),
                    "transaction"),
    **dict.fromkeys(("prepare_limit", "commit_limit"), "limit"),
    "boundary": "boundary",
}
_STATE_ROLE = {"plan_tx": "state"}  # a transaction's reservations are Role.STATE
_ID = re.compile(r"[0-9]{1,20}")
#: Kinds whose result is a ticket or a pressure on the ledger the event names (a later event names only the id).
_PLACED = {"submit": "ticket", "press": "pressure"}


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _text(v: Any, n: int, default: str = "") -> str:
    return v[:n] if isinstance(v, str) else default


def _role(kind: str, rev: Any, role: Any) -> str:
    """The role a charge is drawn under: the event's role, or a transaction's `state`."""
    return role[:16] if isinstance(role, str) else _STATE_ROLE.get(kind, "?")


def _steps(series: list[list[int]], i: int, v: int) -> None:
    """Append (i, v) to a step series, replacing a point at the same event, skipping a repeat."""
    if series and series[-1][0] == i:
        series[-1][1] = v
        if len(series) > 1 and series[-2][1] == v:
            series.pop()
    elif not series or series[-1][1] != v:
        series.append([i, v])


def build_model(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The timeline model of already-validated events (dicts with a string `kind`)."""
    names: dict[int, str] = {}
    auths: dict[int, dict[str, Any]] = {}
    canon: dict[int, int] = {}
    used: dict[int, int] = {}
    charge: dict[int, dict[str, int]] = {}
    owners: dict[str, dict[int, str]] = {"allocation": {}, "allowance": {}, "ticket": {}, "tx": {}}
    where: dict[str, dict[int, int]] = {"ticket": {}, "pressure": {}}  # the ledger a ticket or pressure is on
    markers: list[dict[str, Any]] = []
    n = len(events)

    def key(h: Any, role: str) -> str:
        return f"{names.get(h, h) if type(h) is int else '?'} / {role}"

    def new_authority(aid: int, pool: Any, tier: Any, capacity: Any, i: int) -> None:
        auths[aid] = {"id": aid, "pool": _text(pool, 64), "tier": _text(tier, 16), "limit": [[i, _int(capacity) or 0]],
                      "used": [], "series": {}, "over": []}
        canon[aid], used[aid], charge[aid] = aid, 0, {}

    for i, e in enumerate(events):
        kind, rev = e["kind"], e.get("contract_revision")
        ids, p = _obj(e.get("ids")), _obj(e.get("payload"))
        ok = p.get("outcome") == "accepted"
        result = _int(p.get("result"))
        holder, role = ids.get("holder"), _role(kind, rev, p.get("role"))
        if ok and kind == "register_holder" and result is not None:
            names[result] = _text(p.get("name"), 64, str(result))
        elif ok and kind == "register_authority" and result is not None:
            new_authority(result, p.get("pool"), p.get("tier"), p.get("capacity"), i)
        elif ok and kind == "register_alias" and result is not None and _int(ids.get("of")) in canon:
            canon[result] = canon[ids["of"]]
        elif ok and kind == "commit_limit" and _int(ids.get("authority")) in auths:
            limit = _int(_obj(p.get("result")).get("limit"))
            if limit is not None:
                _steps(auths[ids["authority"]]["limit"], i, limit)
        # who the event names: its subjects, in the order a decrease is taken from them
        named = canon.get(_int(ids.get("authority")))  # type: ignore[arg-type]
        if ok and result is not None and named is not None and kind in _PLACED:
            where[_PLACED[kind]][result] = named
        if ok and result is not None:
            if kind in ("reserve", "record_committed"):
                owners["allocation"][result] = key(holder, role)
            elif kind == "open_allowance":
                owners["allowance"][result] = key(holder, "allowance")
            elif kind == "submit":
                owners["ticket"][result] = key(holder, role)
            elif kind in _STATE_ROLE:
                owners["tx"][result] = key(holder, role)
            elif kind == "claim" and _int(ids.get("ticket")) in owners["ticket"]:
                owners["allocation"][result] = owners["ticket"][ids["ticket"]]
            elif kind == "reserve_tx" and _int(ids.get("tx")) in owners["tx"]:
                owners["allocation"][result] = owners["tx"][ids["tx"]]
        subjects: list[str] = []
        for field, book in (("allocation", "allocation"), ("allowance", "allowance"), ("source", "allowance"),
                            ("target", "allowance"), ("ticket", "ticket"), ("tx", "tx")):
            k = owners[book].get(_int(ids.get(field)))  # type: ignore[arg-type]
            if k is not None and k not in subjects:
                subjects.append(k)
        victims = p.get("victims")
        for v in victims if isinstance(victims, list) else []:
            k = owners["allocation"].get(_int(v))  # type: ignore[arg-type]
            if k is not None and k not in subjects:
                subjects.append(k)
        if type(holder) is int:
            k = key(holder, role)
            if k not in subjects:
                subjects.append(k)
        # the governor's own used after the event, per canonical authority
        figures: dict[int, int] = {}
        for s, u in _obj(p.get("used")).items():
            if _ID.fullmatch(s) and int(s) in auths and type(u) is int:
                figures[int(s)] = u
        moved = []
        for a in sorted(figures):
            d, u = figures[a] - used[a], figures[a]
            used[a] = u
            if d:
                moved.append(a)
                _apply(charge[a], auths[a]["series"], subjects, d, i)
                _steps(auths[a]["used"], i, u)
        for a, rec in auths.items():
            over, limit = rec["over"], rec["limit"][-1][1]
            if used[a] > limit and (not over or over[-1][1] is not None):
                over.append([i, None])
            elif used[a] <= limit and over and over[-1][1] is None:
                over[-1][1] = i
        category = "rejected" if p.get("outcome") == "rejected" else CATEGORIES.get(kind)
        if category is not None:
            # the ledger it names, else its ticket's or pressure's, else the one ledger whose used it moved
            a = named
            if a is None:
                ticket, pressure = _int(ids.get("ticket")), _int(ids.get("pressure"))
                a = where["ticket"].get(ticket, where["pressure"].get(pressure))  # type: ignore[arg-type]
            if a is None and len(moved) == 1:
                a = moved[0]
            markers.append({"i": i, "category": category, "kind": kind, "authority": a,
                            "holder": names.get(holder) if type(holder) is int else None,
                            "detail": _detail(ids, p)})
    for rec in auths.values():
        for interval in rec["over"]:
            if interval[1] is None:
                interval[1] = n
    return {"events": n, "holders": {str(k): v for k, v in names.items()}, "authorities": list(auths.values()),
            "markers": markers}


def _apply(charge: dict[str, int], series: dict[str, list[list[int]]], subjects: list[str], d: int, i: int) -> None:
    """Move `d` bytes of one authority's charge: an increase to the first subject, a decrease from the subjects
    first, then from the largest other charges (ties by name)."""
    if d > 0:
        k = subjects[0] if subjects else UNATTRIBUTED
        charge[k] = charge.get(k, 0) + d
        _steps(series.setdefault(k, []), i, charge[k])
        return
    rest = -d
    others = sorted((k for k in charge if k not in subjects), key=lambda k: (-charge[k], k))
    for k in [*(s for s in subjects if s in charge), *others]:
        take = min(rest, charge[k])
        if take:
            charge[k] -= take
            rest -= take
            _steps(series[k], i, charge[k])
        if not rest:
            break


def _detail(ids: dict[str, Any], p: dict[str, Any]) -> str:
    """The hover text of a marker: ids, outcome, error and the other arguments (figures left out), compact JSON."""
    rest = {k: v for k, v in p.items() if k not in ("used", "charges", "outcome", "error", "bundles")}
    text = json.dumps({"ids": ids, "outcome": p.get("outcome"), "error": p.get("error"), **rest},
                      separators=(",", ":"), ensure_ascii=False)
    return text[:400]  # code points: the page slices Array.from(text) alike
