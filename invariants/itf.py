"""Counterexamples in the Informal Trace Format (ITF), the JSON trace format Apalache and Quint read and write.

A trace is `{"#meta": {...}, "vars": [names], "states": [{"#meta": {"index": i}, name: value, ...}]}`.
The explorer's states are frozen attrs records of ints, strings, enums, tuples, frozensets, `immutables.Map`s
and nested records; `to_itf` maps them onto ITF's values:

- int: a JSON number when |n| <= 2**53 - 1 (exact in a double), else `{"#bigint": "<decimal>"}`;
- bool and str: themselves; an enum member: its name (a string);
- tuple (and list): `{"#tup": [...]}`; set and frozenset: `{"#set": [...]}`, members sorted by their JSON text;
- a mapping: `{"#map": [[key, value], ...]}` in key order;
- an attrs record: a JSON object of its fields (an ITF record);
- None: Quint's empty option, `{"tag": "None", "value": {"#tup": []}}` (ITF has no null).

A top-level record state gives one ITF variable per field; any other state is the one variable `state`. Each
state also carries `action`: the repr of the action that led to it (`"init"` for the first), the variable
Quint's own traces name `mbt::actionTaken`. Pure; no I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = ["MAX_SAFE_INT", "to_itf", "itf_trace"]

#: The largest integer a JSON number (an IEEE double) holds exactly; larger ones are `#bigint`.
MAX_SAFE_INT = 2**53 - 1
_NONE = {"tag": "None", "value": {"#tup": []}}


def to_itf(v: Any) -> Any:
    """One value as ITF JSON (see the module text); a value of any other type is a TypeError naming it."""
    if isinstance(v, str):
        return v
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, int):  # and bool, itself: False and True lie in range
        return v if -MAX_SAFE_INT <= v <= MAX_SAFE_INT else {"#bigint": str(v)}
    if v is None:
        return _NONE
    if attrs.has(type(v)):
        return {f.name: to_itf(getattr(v, f.name)) for f in attrs.fields(type(v))}
    if isinstance(v, Mapping):
        return {"#map": [[to_itf(k), to_itf(x)] for k, x in sorted(v.items(), key=lambda kv: _order(kv[0]))]}
    if isinstance(v, (set, frozenset)):
        return {"#set": sorted((to_itf(x) for x in v), key=_text)}
    if isinstance(v, (tuple, list)):
        return {"#tup": [to_itf(x) for x in v]}
    raise TypeError(f"no ITF form for a {type(v).__name__}: {v!r}")


def _text(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def _order(k: Any) -> tuple[int, Any]:
    """Keys in their own order when they compare (ints, strings), else by their ITF text."""
    if isinstance(k, int) and not isinstance(k, bool):
        return (0, k)
    return (1, k) if isinstance(k, str) else (2, _text(to_itf(k)))


def itf_trace(states: Sequence[Any], actions: Sequence[Any], meta: Mapping[str, Any],
              loop: int | None = None) -> dict[str, Any]:
    """The ITF trace of `states` (the initial one first) reached by `actions` (one fewer than the states).

    `loop`, for a lasso: the index of the state the last one steps back to (ITF's `loop`), forever."""
    if len(actions) != max(len(states) - 1, 0):
        raise ValueError(f"{len(states)} states need {max(len(states) - 1, 0)} actions, got {len(actions)}")
    record = bool(states) and attrs.has(type(states[0]))
    names = [f.name for f in attrs.fields(type(states[0]))] if record else ["state"]
    out = []
    for i, s in enumerate(states):
        values = to_itf(s) if record else {"state": to_itf(s)}
        out.append({"#meta": {"index": i}, "action": "init" if i == 0 else repr(actions[i - 1]), **values})
    if loop is not None and not 0 <= loop < len(states):
        raise ValueError(f"loop {loop} is not the index of one of the {len(states)} states")
    trace = {"#meta": {"format": "ITF", "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
                       **meta},
             "vars": ["action", *names] if states else [], "states": out}
    return trace if loop is None else {**trace, "loop": loop}
