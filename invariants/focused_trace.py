"""The focused trace format: events of the manager's focused transaction front end, for `spec.transactions`.

`ProcessMemoryManager` has one front end whose actions the composed spec
(`spec.manager`) does not have: the focused transaction protocol of
`spec.transactions` (`tx_*`: phases, retry intents, a poisoned manager). Its
events cannot be composed events: it has its own revision, and
`invariants.focused_replay` replays it against its own spec. (The single-pool
protocol's `ortmem-pool/1` is gone: every pressure feature is a composed verb,
traced as `ortmem-manager/1`; issue #21.)

    {"contract_revision": "ortmem-tx/1", "source": "pmm-1", "source_sequence": 7,
     "kind": "tx_reserve", "ids": {"tx": 1},
     "payload": {"outcome": "accepted", "error": null, "result": 8, "observed": {"used": {"1": 8}}}}

The kind is the manager's method name; the fields are the focused spec
action's (`spec.transactions_actions.*`), plus the manager's own arguments
the spec has no field for (`EXTRA`: the holder of a `tx_plan`). Registering
an authority, device loss, state bundles and model views have no focused
kind: the manager has one verb for each, traced as a composed event, which
the replay of a transaction trace reads as the focused model's action
(`TX_COMPOSED`). `observed`: `used` of every canonical authority. Only event
types and their (de)coding live here: no transition logic.
"""

from __future__ import annotations

from typing import Any

import attrs

from invariants.manager_trace import decode_field, encode_field
from invariants.trace_format import MAX_TEXT, decode_value, encode_value
from spec import transactions_actions as T
from spec.transactions_lifecycle import ViewKind

__all__ = ["TX_REVISION", "TX_KINDS", "TX_COMPOSED", "FOCUSED", "EXTRA",
           "FOCUSED_ID_FIELDS", "encode_focused_event", "decode_args", "tx_kind", "id_and_payload_names"]

TX_REVISION = "ortmem-tx/1"
#: Transaction event kind (the manager's method) -> the `spec.transactions` action it records.
TX_KINDS: dict[str, type] = {
    "tx_plan": T.Plan, "tx_reserve": T.Reserve, "tx_commit": T.Commit, "tx_abort": T.Abort, "tx_release": T.Release,
    "tx_corrupt_ledger": T.CorruptLedger,
}
#: Composed event kind -> the `spec.transactions` action it is in a transaction trace (one verb per concept).
TX_COMPOSED: dict[str, type] = {"register_authority": T.AddAuthority, "lose_device": T.LoseDevice,
                                "confirm_termination": T.ConfirmTermination, "open_bundle": T.OpenBundle,
                                "report_mismatch": T.ReportMismatch, "publish_view": T.Publish,
                                "execute_view": T.Execute, "remap_view": T.Remap}
FOCUSED: dict[str, dict[str, type]] = {TX_REVISION: TX_KINDS}
#: The manager's arguments a focused spec action has no field for: kind -> {name: "ids" | "payload"}.
EXTRA: dict[str, dict[str, str]] = {"tx_plan": {"holder": "ids"}}
FOCUSED_ID_FIELDS = frozenset({"holder", "ticket", "pressure", "tx", "authority", "view", "bundle", "retry"})
_TX_BY_CLASS = {c: k for k, c in TX_KINDS.items()}


def tx_kind(action: Any) -> str:
    return _TX_BY_CLASS[type(action)]


def _encode(name: str, v: Any) -> Any:
    if name == "kind":
        return v.value if type(v) is ViewKind else {"opaque": type(v).__qualname__[:MAX_TEXT] or "?"}
    return encode_field(name, v)


def _decode(name: str, v: Any) -> Any:
    if name == "kind" and type(v) is not dict:
        if type(v) is not str:
            raise ValueError(f"kind {v!r:.80} is not a ViewKind")
        return ViewKind(v)
    return decode_field(name, v)


def _fields(kind: str, cls: type) -> tuple[list[str], list[str]]:
    """(id field names, payload field names) of a kind: the spec action's fields, then the extra arguments."""
    names = [f.name for f in attrs.fields(cls)]
    extra = EXTRA.get(kind, {})
    ids = [f for f in names if f in FOCUSED_ID_FIELDS] + [f for f, where in extra.items() if where == "ids"]
    payload = [f for f in names if f not in FOCUSED_ID_FIELDS] + [f for f, w in extra.items() if w == "payload"]
    return ids, payload


def encode_focused_event(revision: str, source: str, sequence: int, kind: str, action: Any, extra: dict[str, Any],
                         result: Any, error: BaseException | None, observed: dict[str, Any] | None
                         ) -> dict[str, Any]:
    """The event of one focused operation (total: a value that does not round-trip is written opaque)."""
    values = {**attrs.asdict(action, recurse=False), **extra}
    id_names, payload_names = _fields(kind, FOCUSED[revision][kind])
    ids = {f: encode_value(f, values[f]) for f in id_names}
    payload = {f: _encode(f, values[f]) for f in payload_names}
    payload["outcome"] = "accepted" if error is None else "rejected"
    payload["error"] = None if error is None else type(error).__name__
    ok_result = error is None and (result is None or (type(result) is int and len(str(abs(result))) <= 20))
    payload["result"] = result if ok_result else None
    payload["observed"] = None if observed is None else {
        k: ({str(a): u for a, u in sorted(v.items())} if type(v) is dict else v) for k, v in observed.items()}
    return {"contract_revision": revision, "source": source, "source_sequence": sequence, "kind": kind,
            "ids": ids, "payload": payload}


def decode_args(revision: str, kind: str, ids: dict[str, Any], payload: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(the spec action, the extra arguments) an event records; ValueError when a field is ill-formed."""
    cls = FOCUSED[revision][kind]
    id_names, payload_names = _fields(kind, cls)
    values = {f: (decode_value(f, ids[f]) if f in id_names else _decode(f, payload[f]))
              for f in (*id_names, *payload_names)}
    spec_fields = {f.name for f in attrs.fields(cls)}
    act = cls(**{f: v for f, v in values.items() if f in spec_fields})
    return act, {f: v for f, v in values.items() if f not in spec_fields}


def id_and_payload_names(revision: str, kind: str) -> tuple[list[str], list[str]]:
    return _fields(kind, FOCUSED[revision][kind])
