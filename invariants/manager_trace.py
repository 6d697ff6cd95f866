"""The composed trace format: one event per `ProcessMemoryManager` operation, every part.

Revision `ortmem-manager/2` extends the ledger's envelope
(`invariants.trace_format`) to every composed action: ledger operations,
tickets, pressure, transactions, device loss and limits, and one `grant`
event per grant; it is the one revision of a manager's trace, ledger-only ones
included. One JSON object per line:

    {"contract_revision": "ortmem-manager/2", "topology_epoch": 1, "source": "pmm-1", "source_sequence": 9,
     "kind": "submit", "ids": {"holder": 2, "authority": 1},
     "payload": {"nbytes": 4, "priority": 0, "role": "kv", "outcome": "accepted", "error": null,
                 "result": 3, "used": {"1": 12}, "charges": {}, "bundles": {}}}

`topology_epoch` is the governor's own number (an integer >= 0) of the
topology it decided the event against (`topology_changed`; the replay maps
the numbers onto the spec's topology versions, `invariants.manager_replay`),
`ids` holds the action's id fields, `payload` its other fields, the outcome
(accepted, or the spec error class that rejected it), the operation's
result (an id, bytes credited, a list of ids, or a limit outcome),
`used`: the governor's own `used` of every authority the operation named or
changed (`touched`, required in `/2`), after it, and `bundles`: the governor's own record (part versions,
poisoned) of every state bundle the operation named, opened or advanced
(the one a transaction joined, on its commit), after it (I5, I10), and
`charges`: the charge of every allocation it named, created or charged
(`touched`) that is still held; a
registration's `device` (the physical device, C1) is never left out, and
null only where it was refused. Tuples are JSON lists (`victims`, `needs`); enums are
their values; anything else that does not round-trip exactly is written
opaque (`invariants.trace_format.encode_value`), so recording never fails.

A composed trace names the manager's constants before its first composed
event, in one `configure` event (no ids; payload `{"aging_bound": n}`: the
rounds after which a pending ticket is matured, I13), which the replay builds
its `spec.manager` state with. The governor writes it first; ledger
operations (which no constant changes) may come before it; a composed event
with no `configure` before it fails the replay as "unconfigured", a second
`configure` as malformed.

A grant is its own event (`ortmem-manager/2`): kind `grant`, ids
`{"ticket": t}`, payload result the allocation the grant reserved, `used`
and its `charges` after it (`spec.grants.GrantTicket`). The governor writes it after the event
of the operation that made room (whose `used` then leaves out the bytes its
grants charged, and whose `charges` the allocations they made; each grant's
`used` includes its own), or at any later
event while the grant is still enabled (`invariants.replay_grants`).

Only event types and their (de)coding live here: no transition logic.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import attrs

from invariants.changed import changed
from invariants.trace_format import (ID_FIELDS, KINDS, OPTIONAL_FIELDS, _exact_int, _opaque, decode_value, encode_value,
                                     kind_of)
from spec.grants import GrantTicket
from spec.ledger_actions import TransferAllowance
from spec.manager_actions import MANAGER_ACTIONS, LimitOutcome
from spec.types import MAX_BYTES

__all__ = ["MANAGER_REVISION", "GRANT", "MANAGER_KINDS", "MANAGER_ID_FIELDS", "CONFIGURE", "Configure",
           "encode_manager_event", "encode_configure", "decode_configure", "decode_field", "encode_result",
           "decode_result", "encode_bundles", "decode_bundles", "TUPLE_FIELDS", "LEDGER_ACTIONS", "REQUIRED_FIELDS",
           "touched", "topology_changed", "TOPOLOGY_FIELDS"]

MANAGER_REVISION = "ortmem-manager/2"
#: The event of one grant (`spec.grants.GrantTicket`): ids {ticket}, result the allocation.
GRANT = "grant"
#: Event kind -> the action class it records: the ledger's kinds, every composed action and the grant.
MANAGER_KINDS: dict[str, type] = {**KINDS, **{kind_of(c): c for c in MANAGER_ACTIONS}, GRANT: GrantTicket}
MANAGER_ID_FIELDS = ID_FIELDS | {"ticket", "pressure", "tx", "bundle", "retry"}
#: The event that names the manager's constants, before a composed trace's first composed event.
CONFIGURE = "configure"
#: Tuple-valued fields: (element arity, 1 = ints, 2 = pairs of ints), of any length (the line's bytes bound it).
_TUPLES = {"victims": 1, "needs": 2}
#: Fields that hold tuples (decoded by `decode_field`, not `decode_value`).
TUPLE_FIELDS = frozenset(_TUPLES)
#: The ledger's actions (a trace of only these is judged clause by clause: `invariants.manager_replay`).
LEDGER_ACTIONS = frozenset(KINDS.values())
#: Fields optional elsewhere (`invariants.trace_format.OPTIONAL_FIELDS`) that an event always carries, null only on
#: a refused one:
#: `register_authority`'s physical device (C1, D3: two books over one device are caught whatever their pools are
#: called).
REQUIRED_FIELDS = frozenset({"device"})


@attrs.frozen
class Configure:
    """The constants a composed trace's manager was built with (a `configure` event); not an action."""

    aging_bound: int


def encode_configure(source: str, sequence: int, epoch: int, aging_bound: int) -> dict[str, Any]:
    """The `configure` event of a manager whose aging bound is `aging_bound` (an int in 1..MAX_BYTES), decided in
    topology epoch `epoch`."""
    return {"contract_revision": MANAGER_REVISION, "topology_epoch": epoch, "source": source,
            "source_sequence": sequence, "kind": CONFIGURE, "ids": {}, "payload": {"aging_bound": aging_bound}}


def decode_configure(ids: Any, payload: Any) -> Configure:
    """Inverse of `encode_configure` on its ids and payload; ValueError on anything else."""
    if ids != {} or type(payload) is not dict or set(payload) != {"aging_bound"}:
        raise ValueError("a configure event has no ids and exactly the payload {aging_bound}")
    bound = payload["aging_bound"]
    if type(bound) is not int or not 1 <= bound <= MAX_BYTES:
        raise ValueError(f"configure: aging_bound must be an integer in [1, {MAX_BYTES}], got {bound!r:.40}")
    return Configure(bound)


def encode_field(name: str, v: Any) -> Any:
    """One argument's JSON form; a tuple field that is not exactly ints (or int pairs) is opaque."""
    arity = _TUPLES.get(name)
    if arity is None:
        return encode_value(name, v)
    if type(v) is tuple:
        if arity == 1 and all(_exact_int(x) for x in v):
            return list(v)
        if arity == 2 and all(type(p) is tuple and len(p) == 2 and all(_exact_int(x) for x in p) for p in v):
            return [list(p) for p in v]
    return _opaque(v)


def decode_field(name: str, v: Any) -> Any:
    """Inverse of `encode_field` on well-formed input; ValueError on anything else."""
    arity = _TUPLES.get(name)
    if arity is None or type(v) is dict:
        return decode_value(name, v)
    if type(v) is not list:
        raise ValueError(f"{name} must be a list or an opaque marker")
    if arity == 1 and all(type(x) is int for x in v):
        return tuple(v)
    if arity == 2 and all(type(p) is list and len(p) == 2 and all(type(x) is int for x in p) for p in v):
        return tuple(tuple(p) for p in v)
    raise ValueError(f"{name} elements must be {'integers' if arity == 1 else '[int, int] pairs'}")


def encode_result(result: Any) -> Any:
    """An operation's result as JSON: int / null / list of ints / a limit outcome object."""
    if isinstance(result, LimitOutcome):
        return {"committed": result.committed, "limit": result.limit,
                "completed": [list(p) for p in result.completed]}
    if type(result) is tuple:
        return list(result)
    return result


def decode_result(v: Any) -> Any:
    """Inverse of `encode_result`; ValueError on anything else."""
    if v is None or type(v) is int:
        return v
    if type(v) is list and all(type(x) is int for x in v):
        return tuple(v)
    if (type(v) is dict and set(v) == {"committed", "limit", "completed"} and type(v["committed"]) is bool
            and type(v["limit"]) is int and type(v["completed"]) is list
            and all(type(p) is list and len(p) == 2 and all(type(x) is int for x in p) for p in v["completed"])):
        return LimitOutcome(v["committed"], v["limit"], tuple(tuple(p) for p in v["completed"]))
    raise ValueError(f"result {v!r:.80} is not an id, a byte count, a list of ids or a limit outcome")


def encode_bundles(bundles: dict[int, tuple[tuple[int, ...], bool]]) -> dict[str, Any]:
    """Bundle id -> (part versions, poisoned) as the event's `bundles` object."""
    return {str(k): {"versions": list(v), "poisoned": p} for k, (v, p) in sorted(bundles.items())}


def decode_bundles(v: Any) -> dict[int, tuple[tuple[int, ...], bool]]:
    """Inverse of `encode_bundles`; ValueError on anything else."""
    if type(v) is not dict:
        raise ValueError("payload.bundles must be an object")
    out = {}
    for k, b in v.items():
        if not (type(k) is str and k.isdigit() and len(k) <= 20):
            raise ValueError("payload.bundles keys must be integer bundle ids")
        if (type(b) is not dict or set(b) != {"versions", "poisoned"} or type(b["poisoned"]) is not bool
                or type(b["versions"]) is not list
                or not all(type(x) is int for x in b["versions"])):
            raise ValueError(f"payload.bundles[{k}] must be {{versions: [int...], poisoned: bool}}")
        out[int(k)] = (tuple(b["versions"]), b["poisoned"])
    return out


def encode_manager_event(source: str, sequence: int, epoch: int, action: Any, result: Any, error: BaseException | None,
                         used: dict[int, int], bundles: dict[int, tuple[tuple[int, ...], bool]] | None = None,
                         charges: dict[int, int] | None = None) -> dict[str, Any]:
    """The event for one operation decided in topology epoch `epoch`, as a JSON-ready dict: `charges` (allocation ->
    charge of each allocation it touched that is still held) and a registration's `device` (never left out)
    included."""
    fields = attrs.asdict(action, recurse=False)
    ids = {k: encode_value(k, v) for k, v in fields.items() if k in MANAGER_ID_FIELDS}
    payload = {k: encode_field(k, v) for k, v in fields.items()
               if k not in MANAGER_ID_FIELDS and not (k in OPTIONAL_FIELDS - REQUIRED_FIELDS and v is None)}
    payload["outcome"] = "accepted" if error is None else "rejected"
    payload["error"] = None if error is None else type(error).__name__
    payload["result"] = encode_result(result) if error is None else None
    payload["used"] = {str(k): v for k, v in sorted(used.items())}
    payload["charges"] = {str(k): v for k, v in sorted((charges or {}).items())}
    payload["bundles"] = encode_bundles(bundles or {})
    kind = GRANT if type(action) is GrantTicket else kind_of(type(action))
    return {"contract_revision": MANAGER_REVISION, "topology_epoch": epoch, "source": source,
            "source_sequence": sequence, "kind": kind, "ids": ids, "payload": payload}


def touched(m: Any, act: Any, nxt: Any) -> tuple[set[int], set[int], set[int]]:
    """What an event must observe (issue #21): (authorities, allocations, bundles), spec ids, for action `act` taken
    (accepted or refused) from `m` (a `spec.manager_actions.Manager`) to `nxt`. The one definition: replay requires
    it (`invariants.manager_replay`); refimpl's recorder writes it (or more: every figure listed is checked).

    Authorities: the canonical ledger (an alias owns none) of every authority the action names, in its arguments
    (`authority`, an alias's `of`, a plan's `needs`) or through the records it names (an allocation, `victims`, an
    allowance, a ticket, a pressure, a transaction's needs, a model view), that exists after it; and every one
    whose `used` it changed. Allocations (`charges`): the one it names, while still held after it; and every one
    held after it that it created or whose charge it changed (a grant's, a claim's, a transaction's, a grown or
    shrunk lease: moved without being named). Bundles: the one it names and its transaction's. A refused action
    names the same (it observes no change, G4: listing them is how books that drifted are caught). An id naming
    nothing in `m` names nothing."""
    led, after = m.ledger, nxt.ledger.authorities
    cls = type(act)
    fields = _NAMING.get(cls)
    if fields is None:
        fields = _NAMING[cls] = _naming(cls)
    named: list[Any] = []
    allocs: set[int] = set()
    bundles: set[int] = set()
    for f in fields:
        v = getattr(act, f)
        if type(v) is tuple:  # `needs` ((authority, bytes), ...), `victims` (allocation, ...); ill-typed: opaque
            if f == "needs":
                named.extend(n[0] for n in v if type(n) is tuple and n)
            else:
                named.extend(led.allocations[r].authority for r in v if type(r) is int and r in led.allocations)
        elif type(v) is not int:
            continue
        elif f in ("authority", "of"):
            named.append(v)
        elif f == "allocation":
            if v in led.allocations:
                named.append(led.allocations[v].authority)
            if v in nxt.ledger.allocations:
                allocs.add(v)
        elif f in ("allowance", "source", "target"):
            if v in led.allowances:
                named.append(led.allowances[v].authority)
        elif f == "tx":
            t = m.txs.get(v)
            if t is not None:
                named.extend(a for a, _ in t.needs)
                if t.bundle is not None and t.bundle in m.bundles:
                    bundles.add(t.bundle)
        elif f == "bundle":
            if v in m.bundles:
                bundles.add(v)
        else:  # ticket, pressure, view
            r = getattr(m, _RECORDS[f]).get(v)
            if r is not None:
                named.append(r.authority)
    auths = set()
    for a in named:
        rec = led.authorities.get(a) if type(a) is int else None
        if rec is not None:
            a = rec.alias_of if rec.alias_of is not None else a
            if a in after:
                auths.add(a)
    if after is not led.authorities:
        before = led.authorities
        auths.update(a for a, r in after.items() if a in before and before[a].used != r.used)
    held, now = led.allocations, nxt.ledger.allocations
    if now is not held:  # `changed`: O(records changed) on the replay's tracked maps
        allocs.update(r for r in changed(held, now) if r in now and (r not in held or held[r].charge != now[r].charge))
    return auths, allocs, bundles


#: The fields of an authority record that make up the topology (`topology_changed`): its identity and physical
#: facts. Not `used`, not `limit`: figures the governor moves without changing what exists.
TOPOLOGY_FIELDS = ("pool", "tier", "capacity", "device", "alias_of", "view", "context")
_TOPOLOGY = attrgetter(*TOPOLOGY_FIELDS)


def topology_changed(m: Any, nxt: Any) -> bool:
    """True iff the step from `m` to `nxt` (`spec.manager_actions.Manager`s) changed the topology: which authorities
    exist, or one's `TOPOLOGY_FIELDS` (pool, tier, capacity, device, alias, context state). The one definition
    (`invariants.manager_replay` numbers the trace's topology versions with it).

    False at once when the step kept the authority map; else one identity test per authority (as many as the
    topology has: a few devices) and a field comparison of each record the step replaced. Measured on the
    ledger benchmark, `changed`'s general diff cost the replay 9% (4 us an event), this 2%."""
    before, after = m.ledger.authorities, nxt.ledger.authorities
    if after is before:
        return False
    if len(after) != len(before):
        return True
    get = before.get
    for a, new in after.items():
        old = get(a)
        if old is not new and (old is None or _TOPOLOGY(old) != _TOPOLOGY(new)):
            return True
    return False


#: The fields of an action that name an authority or a record (`touched`), per action class, looked up once.
_NAMING: dict[type, tuple[str, ...]] = {}
_RECORDS = {"ticket": "tickets", "pressure": "pressures", "view": "views"}


def _naming(cls: type) -> tuple[str, ...]:
    have = {f.name for f in attrs.fields(cls)}
    names = ["authority", "of", "needs", "allocation", "victims", "allowance", "tx", "bundle", *_RECORDS]
    if cls is TransferAllowance:  # elsewhere `target` is bytes (`press`)
        names += ["source", "target"]
    return tuple(f for f in names if f in have)
