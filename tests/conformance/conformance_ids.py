"""Rewriting a recorded trace's ids, per kind, as another governor could have issued them.

Written from the trace format (docs/trace-format.md, `invariants.manager_trace`), independently of
`invariants.replay_ids`: every place an event names an id, by the kind of id it names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: ids field -> kind (source / target are allowance ids in transfer_allowance only).
_ID_FIELDS = {"holder": "holder", "authority": "authority", "of": "authority", "allocation": "allocation",
              "allowance": "allowance", "ticket": "ticket", "pressure": "pressure", "tx": "tx", "bundle": "bundle"}
#: kind of event -> the kind of id its result is.
_RESULTS = {"register_authority": "authority", "register_alias": "authority", "register_holder": "holder",
            "reserve": "allocation", "record_committed": "allocation", "open_allowance": "allowance",
            "submit": "ticket", "claim": "allocation", "press": "pressure", "plan_tx": "tx", "reserve_tx": "allocation",
            "open_bundle": "bundle", "prepare_limit": "pressure", "commit_tx": "allocation", "publish_view": "view",
            "grant": "allocation", "try_reserve": "allocation"}

Rename = Callable[[str, int], int]


def offset(offsets: dict[str, int]) -> Rename:
    """Each kind's ids shifted by its own offset (kinds not listed keep their ids)."""
    return lambda kind, i: i + offsets.get(kind, 0)


def _ids(rename: Rename, kind: str, v: Any) -> Any:
    if type(v) is int:
        return rename(kind, v)
    if type(v) is list:
        return [_ids(rename, kind, x) for x in v]
    return v


def rename_event(ev: dict[str, Any], rename: Rename) -> dict[str, Any]:
    ev = json.loads(json.dumps(ev))
    kind, ids, payload = ev["kind"], ev["ids"], ev["payload"]
    for f, v in list(ids.items()):
        if f in _ID_FIELDS:
            ids[f] = _ids(rename, _ID_FIELDS[f], v)
        elif f in ("source", "target") and kind == "transfer_allowance":
            ids[f] = _ids(rename, "allowance", v)
    if "result" in payload and payload["result"] is not None:
        r = payload["result"]
        if kind == "commit_limit":
            r["completed"] = [[rename("pressure", p), n] for p, n in r["completed"]]
        elif kind in _RESULTS:
            payload["result"] = _ids(rename, _RESULTS[kind], r)
    if type(payload.get("victims")) is list:
        payload["victims"] = _ids(rename, "allocation", payload["victims"])
    if type(payload.get("view")) is int:  # execute_view / remap_view name the view in the payload
        payload["view"] = rename("view", payload["view"])
    if type(payload.get("needs")) is list:
        payload["needs"] = [[rename("authority", a), n] for a, n in payload["needs"]]
    for part, k in (("used", "authority"), ("charges", "allocation"), ("bundles", "bundle")):
        if type(payload.get(part)) is dict:
            payload[part] = {str(rename(k, int(i))): v for i, v in payload[part].items()}
    return ev


def renamed(lines: list[bytes], rename: Rename) -> list[bytes]:
    return [json.dumps(rename_event(json.loads(raw), rename)).encode() + b"\n" for raw in lines]
