"""The JSONL trace format's shared vocabulary: the envelope, the ledger's event kinds and value encoding.

Every manager event is written and read in the one revision `ortmem-manager/2` (`invariants.manager_trace`, which
builds on this vocabulary), one JSON object per line (schema: `docs/trace-schema.json`,
`invariants.trace_schema`; meaning: `docs/trace-format.md`).

Envelope: the contract revision (bumped when old traces would change meaning),
the topology epoch (the governor's number of the topology the event was decided
against: `invariants.manager_trace.topology_changed`), the source (one
governor), a sequence number monotone per source starting at 1 (never a
clock), the kind, the stable ids the event names, and the payload
(`invariants.manager_trace`).

Encoding is total, so recording can never fail or change a result: an
argument that is not exactly a JSON scalar that decodes back to the same
value and type (a numpy scalar, Decimal, bytes, NaN, inf, an int past 20
digits, a text past MAX_TEXT, a raw string where an enum belongs, an enum
where none belongs) is written as `{"opaque": "<type name>"}`, which the
replay decodes to an `Opaque` value every spec guard refuses as ill-typed,
exactly as the governor refused the original.

Only event types and their (de)coding live here: no transition logic, so
the replay checker shares vocabulary with refimpl, never transition code.
"""

from __future__ import annotations

import math
import re
from typing import Any

from spec import ledger_actions as A
from spec.types import MAX_NAME, Role, Tier

__all__ = [
    "BOUNDARY",
    "KINDS",
    "ID_FIELDS",
    "OPTIONAL_FIELDS",
    "ENUMS",
    "MAX_LINE_BYTES",
    "MAX_SOURCES",
    "MAX_TEXT",
    "kind_of",
    "Opaque",
    "encode_value",
    "decode_value",
]

#: A declared crash/snapshot boundary: work may legitimately be in flight when the trace ends there.
BOUNDARY = "boundary"

#: Bounds on untrusted input. A line's bytes bound every list and object in it, so none has a count of its own
#: (a KV cache answers pressure with as many pages as it holds), and a trace's length has none: replay streams.
#: 16 MiB holds a device lost under about a million leases (its event lists each one's charge).
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_SOURCES = 64
MAX_TEXT = MAX_NAME
#: Integers of more digits are written opaque (and refused by the parser when bare).
MAX_DIGITS = 20


def kind_of(cls: type) -> str:
    """`ReserveGrowth` -> `reserve_growth` (the event kind is the refimpl method name)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


_ACTIONS = (
    A.RegisterAuthority, A.RegisterAlias, A.RegisterHolder, A.Reserve, A.Commit, A.Cancel, A.Release,
    A.Quarantine, A.RecordCommitted, A.LoseDevice, A.ConfirmTermination, A.OpenAllowance, A.ReserveGrowth,
    A.MapAllowance, A.UnmapAllowance, A.TransferAllowance, A.CloseAllowance,
)
#: Event kind -> the spec action class it records.
KINDS: dict[str, type] = {kind_of(c): c for c in _ACTIONS}
#: Action fields that are stable ids (they go to the envelope's `ids`).
ID_FIELDS = frozenset({"holder", "authority", "allocation", "allowance", "source", "target", "of"})
#: Payload fields an event may leave out when they are null, added without changing what any earlier trace means
#: (issue #21): `register_authority`'s physical device (D3; required in `ortmem-manager/2`); a request's stated
#: alignment (D13: `reserve`, `submit`, `try_reserve`). An event kind has at most one.
OPTIONAL_FIELDS = frozenset({"device", "alignment"})
#: Fields holding an enum, encoded by value.
ENUMS: dict[str, type] = {"tier": Tier, "role": Role}


class Opaque:
    """A caller value the trace could not carry exactly; every spec guard refuses it as ill-typed."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<opaque {self.type_name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash(("Opaque", self.type_name))


def _opaque(v: Any) -> dict[str, str]:
    return {"opaque": type(v).__qualname__[:MAX_TEXT] or "?"}


def _exact_int(v: Any) -> bool:  # an int the trace carries exactly
    return type(v) is int and len(str(abs(v))) <= MAX_DIGITS


def encode_value(field: str, v: Any) -> Any:
    """The JSON form of one argument: exact when it round-trips, else `{"opaque": type name}` (total)."""
    if field in ENUMS:
        return v.value if type(v) is ENUMS[field] else _opaque(v)
    t = type(v)
    if v is None or t is bool:
        return v
    if t is int:
        return v if _exact_int(v) else _opaque(v)
    if t is float:
        return v if math.isfinite(v) else _opaque(v)
    if t is str:
        return v if len(v) <= MAX_TEXT else _opaque(v)
    return _opaque(v)


def decode_value(field: str, v: Any) -> Any:
    """Inverse of `encode_value` on well-formed input; raises ValueError on anything else."""
    if type(v) is dict:
        if set(v) != {"opaque"} or type(v["opaque"]) is not str or not 0 < len(v["opaque"]) <= MAX_TEXT:
            raise ValueError(f"{field}: an object value must be exactly {{'opaque': type name}}")
        return Opaque(v["opaque"])
    if field in ENUMS:
        if type(v) is not str:
            raise ValueError(f"{field} {v!r:.80} is not a {ENUMS[field].__name__}")
        return ENUMS[field](v)  # ValueError for an unknown member
    if v is None or type(v) in (bool, int, float) or (type(v) is str and len(v) <= MAX_TEXT):
        return v
    raise ValueError(f"{field} must be a JSON scalar (strings up to {MAX_TEXT} characters) or an opaque marker")
