"""Observed ids to the spec's ids, per kind: a governor may issue any fresh identifier (issue #21).

The spec numbers every kind 1, 2, 3, ...; a foreign governor need not. The
replay keeps, per kind (authority, holder, allocation, allowance, ticket,
pressure, transaction, bundle, model view), a bijection between the ids the trace
observed and the spec's ids:

  * an accepted event that creates an object binds its observed id (the
    event's result) to the spec's new id;
  * an observed id already bound to a different object that is still live
    aliases two live objects onto one id: rejected at that event, naming the
    id (for allocations also a retired one: ids are never reused, I4a); a
    retired id of another kind may be bound again;
  * one spec object under two observed ids (the spec returns an existing
    object, the governor a new id) is two identities for one object: for an
    authority, two grantable ledgers over one pool (C1);
  * an id the trace never issued: an accepted event naming it lost the event
    that issued it ("unknown-id", naming the id); a rejected one is replayed
    with an id the spec never issued, so the spec refuses it as unknown;
  * a ticket's grant binds the allocation it creates at its `grant` event;
  * an alias (`register_alias`) may answer with its canonical authority's own
    id: the design's views resolve to the authority (C1), so no new id is
    needed (D12); nothing is bound then.

Messages name ids in the trace's numbering. Replay's own text names them
through `observed_id`; spec text it embeds (a refusal, a predicate's
violation) names the spec's, and `observed_text` rewrites it: each id the
text names after a kind word (`ID_WORDS`: "ticket 3", "tickets [2, 3]",
"ticket(s) [4]", "allocation id 5") becomes its observed id where one is
bound, each unbound placeholder the observed id it stands for, and the
spec's action as a predicate writes it the trace's action. Spec messages
name every id after its kind word ("not holder 2", "alias of authority 1")
for this reason; a word that also precedes byte counts ("lease 64 B") is
not in the table.

No replay logic beyond the ids: `invariants.replay` and
`invariants.manager_replay` call `action`, `bind`, `result`, `figures` and
`observed_text`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from invariants._violation import InvariantViolation
from spec.records import evolve

__all__ = ["IdMap", "FIELD_KINDS", "ID_WORDS", "UnknownObservedId"]

#: Action field -> the kind of id it holds.
FIELD_KINDS = {"holder": "holder", "authority": "authority", "of": "authority", "allocation": "allocation",
               "allowance": "allowance", "source": "allowance", "target": "allowance", "ticket": "ticket",
               "pressure": "pressure", "tx": "tx", "retry": "tx", "bundle": "bundle", "view": "view"}
#: Fields that hold allowance ids only in `TransferAllowance` (`Press.target` is bytes).
_TRANSFER_ONLY = frozenset({"source", "target"})
#: Spec ids handed to the spec for an observed id the trace never issued: never issued by the spec either.
_UNBOUND = -(10 ** 21)
#: An `_UNBOUND` id in a spec message (observed ids have at most 20 digits: `_UNBOUND - abs(obs)` has 22).
_UNBOUND_TEXT = re.compile(r"-1\d{21}(?!\d)")
#: A spec message's word for an id -> the kind of id after it ("intent": an aborted transaction's id; "alias": an
#: authority's).
ID_WORDS = {"authority": "authority", "alias": "authority", "holder": "holder", "allocation": "allocation",
            "allowance": "allowance", "ticket": "ticket", "pressure": "pressure", "transaction": "tx", "tx": "tx",
            "intent": "tx", "bundle": "bundle", "view": "view"}
#: A kind word (plural "s" or "(s)", then "id" allowed) and the id or list of ids after it; not a placeholder
#: (a minus sign never follows the space).
_NAMED = re.compile(r"\b(" + "|".join(ID_WORDS) + r")((?:s|\(s\))?(?: id)? )(\[\d+(?:, \d+)*\]|\d+(?!\w))")
#: The bindings of a kind nothing was bound for yet (read-only).
_NONE: Mapping[int, int] = MappingProxyType({})


def _unbound_as_observed(text: str) -> str:
    """`text` (a spec message) with each unbound placeholder written as the trace's id it stands for."""
    return _UNBOUND_TEXT.sub(lambda m: str(-int(m.group()) + _UNBOUND), text)


def _plan(cls: type) -> tuple[tuple[str, str], ...]:
    """The fields of action class `cls` that hold ids, each with its kind ("victims" / "needs": ids inside)."""
    out = []
    for f in attrs.fields(cls):
        if f.name in FIELD_KINDS and (f.name not in _TRANSFER_ONLY or cls.__name__ == "TransferAllowance"):
            out.append((f.name, FIELD_KINDS[f.name]))
        elif f.name in ("victims", "needs"):
            out.append((f.name, f.name))
    return tuple(out)


#: Action class -> `_plan(cls)`, built on first use.
_PLANS: dict[type, tuple[tuple[str, str], ...]] = {}


class UnknownObservedId(Exception):
    """An accepted event names an id no event of the trace issued."""


class IdMap:
    """Observed id <-> spec id, per kind. `live(kind, spec_id)`: the spec still holds that object."""

    def __init__(self, live: Callable[[str, int], bool]) -> None:
        self.live = live
        self.to_spec: dict[str, dict[int, int]] = {}
        self.to_obs: dict[str, dict[int, int]] = {}

    # --- observed -> spec ------------------------------------------------------------

    def spec_id(self, kind: str, obs: Any, strict: bool) -> Any:
        """The spec's id for observed `obs` (non-int values pass through: the spec refuses them as ill-typed)."""
        if type(obs) is not int:
            return obs
        got = self.to_spec.get(kind, _NONE).get(obs)
        if got is not None:
            return got
        if strict:
            raise UnknownObservedId(f"{kind} {obs}, which no event of this trace issued: an event is missing")
        return _UNBOUND - abs(obs)

    def action(self, act: Any, strict: bool) -> Any:
        """`act` with every id field (and the ids inside `victims` / `needs`) in the spec's numbering.

        `strict` (an accepted event): an unknown id raises UnknownObservedId."""
        plan = _PLANS.get(type(act))
        if plan is None:
            plan = _PLANS[type(act)] = _plan(type(act))
        changes: dict[str, Any] = {}
        for name, kind in plan:
            v = getattr(act, name)
            if kind == "victims":
                new = tuple(self.spec_id("allocation", x, strict) for x in v) if type(v) is tuple else v
            elif kind == "needs":
                new = tuple((self.spec_id("authority", p[0], strict), *p[1:]) if type(p) is tuple and p else p
                            for p in v) if type(v) is tuple else v
            elif type(v) is int and (got := self.to_spec.get(kind, _NONE).get(v)) is not None:
                new = got  # the common case: an id bound before (`spec_id`'s first answer)
            else:
                new = self.spec_id(kind, v, strict)
            if new != v:
                changes[name] = new
        return evolve(act, **changes) if changes else act

    def figures(self, kind: str, observed: dict[int, Any]) -> dict[int, Any]:
        """An observed id -> figure map (`used`, `charges`, `bundles`) keyed by the spec's ids.

        An id never issued raises UnknownObservedId."""
        if not observed:
            return {}
        out = {}
        for obs, v in observed.items():
            got = self.to_spec.get(kind, _NONE).get(obs)
            if got is None:
                raise UnknownObservedId(f"observed {kind} {obs}, which no event of this trace issued")
            out[got] = v
        return out

    # --- binding what an accepted event issued ------------------------------------------

    def bind(self, kind: str, obs: Any, spec: int, canonical: int | None = None) -> None:
        """The accepted event issued observed id `obs` for the spec's object `spec`.

        `canonical`: for an alias, the spec id of its canonical authority (the governor may answer with it).
        Raises InvariantViolation (a reused id, I4a; two ids for one authority, C1) or ValueError (other)."""
        if type(obs) is not int:
            raise ValueError(f"the governor issued {kind} id {obs!r}, not an integer")
        to_spec, to_obs = self.to_spec.setdefault(kind, {}), self.to_obs.setdefault(kind, {})
        if canonical is not None and to_spec.get(obs) == canonical:
            return  # D12: the view answers with its authority's id (C1: views resolve to it)
        old = to_spec.get(obs)
        if old == spec:
            return  # the same object again (re-registering returns the existing id)
        if old is not None and (kind == "allocation" or self.live(kind, old)):
            what = "still live" if self.live(kind, old) else "retired (allocation ids are never reused)"
            msg = (f"the governor issued {kind} id {obs} for a new object, but {obs} already names another "
                   f"{kind} ({what}): two objects aliased onto one id")
            if kind == "allocation":
                raise InvariantViolation("I4a", msg)
            raise ValueError(msg)
        prev = to_obs.get(spec)
        if prev is not None and prev != obs:
            msg = (f"the governor issued {kind} id {obs} for the object it already calls {kind} {prev}: "
                   "one object under two ids")
            if kind == "authority":
                raise InvariantViolation("C1", msg + " (two grantable ledgers over one pool)")
            raise ValueError(msg)
        if old is not None:
            to_obs.pop(old, None)
        to_spec[obs], to_obs[spec] = spec, obs

    def observed_id(self, kind: str, spec: Any) -> Any:
        """The observed id of spec object `spec` (itself when unbound: only in messages)."""
        return self.to_obs.get(kind, _NONE).get(spec, spec) if type(spec) is int else spec

    def observed_text(self, text: str, act: Any = None, sact: Any = None) -> str:
        """Spec message `text` in the trace's numbering (module docstring); `repr(sact)` in it (the spec's action
        `sact`, which the trace wrote as `act`) becomes `repr(act)`, never rewritten (no action: "None" stays)."""
        def named(m: re.Match[str]) -> str:
            to_obs = self.to_obs.get(ID_WORDS[m[1]], _NONE)
            return m[1] + m[2] + re.sub(r"\d+", lambda d: str(to_obs.get(int(d[0]), d[0])), m[3])
        return repr(act).join(_unbound_as_observed(_NAMED.sub(named, part)) for part in text.split(repr(sact)))
