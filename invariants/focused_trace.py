"""The focused trace formats: events of the manager's focused front ends, for the focused specs.

`ProcessMemoryManager` has two front ends whose actions the composed spec
(`spec.manager`) does not have: the single-pool protocol of `spec.pressure`
(`refimpl.manager.leases`: ticket generations, use flags, pressure
deadlines, leases named by ticket id, the cancellation mailbox) and the
focused transaction protocol of `spec.transactions` (`tx_*`: phases, model
views and generations, retry intents, a poisoned manager). `spec.manager`
leaves those out on purpose ("not in the composition"), so their events
cannot be composed events: each front end has its own revision, and
`invariants.focused_replay` replays it against its own spec.

    {"contract_revision": "ortmem-pool/1", "source": "pmm-1", "source_sequence": 7,
     "kind": "pool_answer", "ids": {"holder": 2, "pressure": 1, "authority": 1},
     "payload": {"victims": [3], "now": 5, "outcome": "accepted", "error": null, "result": 8,
                 "observed": {"free": 40, "generation": 0, "aging_bound": 4, "mailbox": 65536}}}

The kind is the manager's method name; the fields are the focused spec
action's (`spec.pressure_state.*`, `spec.transactions_actions.*`), plus the
manager's own arguments the spec has no field for (`EXTRA`: the ledger a
pool operation names, the holder of a `tx_plan`). Registering an
authority, device loss, state bundles and model views have no focused kind: the manager
has one verb for each, traced as a composed event, which the replay of a
transaction trace reads as the focused model's action (`TX_COMPOSED`). `ids.authority` of a pool
event is the ledger the operation ran on (null when it named none the
manager knows). `observed`: for a pool event, that ledger's free bytes and
generation and the pool's constants (aging bound, mailbox slots), or null;
for a transaction event, `used` of every canonical authority. Only event
types and their (de)coding live here: no transition logic.
"""

from __future__ import annotations

from typing import Any

import attrs

from invariants.manager_trace import decode_field, encode_field
from invariants.trace_format import MAX_TEXT, decode_value, encode_value
from spec import pressure_state as P
from spec import transactions_actions as T
from spec.transactions_lifecycle import ViewKind

__all__ = ["POOL_REVISION", "TX_REVISION", "POOL_KINDS", "TX_KINDS", "TX_COMPOSED", "FOCUSED", "EXTRA",
           "FOCUSED_ID_FIELDS", "encode_focused_event", "decode_args", "pool_kind", "tx_kind", "id_and_payload_names"]

POOL_REVISION = "ortmem-pool/1"
TX_REVISION = "ortmem-tx/1"
#: Pool event kind (the manager's method) -> the `spec.pressure` action it records.
POOL_KINDS: dict[str, type] = {
    "pool_submit": P.Submit, "pool_try_reserve": P.TryReserve, "pool_claim": P.Claim, "pool_release": P.Release,
    "pool_cancel": P.Cancel, "pool_timeout": P.Timeout, "pool_reconfigure": P.Reconfigure, "pool_set_use": P.SetUse,
    "pool_press": P.Press, "pool_answer": P.Answer, "pool_cancel_pressure": P.CancelPressure,
    "pool_expire_pressure": P.ExpirePressure,
    # a cancel a dropped handle posted (`drop`), applied from the mailbox under the lock: spec.pressure's Cancel
    "drained_cancel": P.Cancel,
}
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
FOCUSED: dict[str, dict[str, type]] = {POOL_REVISION: POOL_KINDS, TX_REVISION: TX_KINDS}
#: The manager's arguments a focused spec action has no field for: kind -> {name: "ids" | "payload"}.
EXTRA: dict[str, dict[str, str]] = {
    **{k: {"authority": "ids"} for k in POOL_KINDS},
    "pool_try_reserve": {"authority": "ids", "role": "payload"},
    "tx_plan": {"holder": "ids"},
}
FOCUSED_ID_FIELDS = frozenset({"holder", "ticket", "pressure", "tx", "authority", "view", "bundle", "retry"})
_POOL_BY_CLASS = {c: k for k, c in POOL_KINDS.items() if k != "drained_cancel"}
_TX_BY_CLASS = {c: k for k, c in TX_KINDS.items()}


def pool_kind(action: Any) -> str:
    return _POOL_BY_CLASS[type(action)]


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
