"""The one protocol a governor under test implements, and how its own ids meet the spec's.

A governor (ours, or one in another language behind ctypes or PyO3) is checked by adapting it to
`GovernorAdapter` and handing a factory of it to a machine (`invariants.manager_machine.ManagerMachine` for the
composed manager, `invariants.manager_ledger_machine.LedgerMachine`, its restriction to the ledger):

  execute(action)   perform one spec action (`spec.ledger_actions`, `spec.manager_actions`; every id in it is
                    the governor's own) and return its result in the governor's own ids, or raise the spec's
                    typed `spec.errors.GovernorError` and change nothing;
  abstract()        the refinement mapping: the governor's own records as the spec's state (a
                    `spec.manager_actions.Manager`, for every machine of the composed model), keyed by
                    the governor's own ids. The spec's id counters (`next_ticket`, `next_allocation`, ...) are
                    not read: they are how the spec issues fresh ids, not state a governor holds.

Ids (issue #21: a governor may issue any fresh id): `OwnIds` stands between the machine and the adapter and
keeps, per kind of id, a bijection between the governor's ids and the spec's, as replay does
(`invariants.replay_ids`). An action goes to the governor with the spec's ids replaced by the governor's (an
id the governor never issued goes as it is, or, where the governor did issue that value, as one it never
issued). After the step, the ids the governor shows for the first time (in its result or its records) are
matched to the ids the spec's step issued: the binding under which the governor's result and records equal
the spec's, if one exists; else the ids in the order they appear, and the machine reports the difference.
So any numbering passes, and ids must be fresh: one bound before (a retired object's) names that object, and
a governor that hands it out again differs from the spec. A governor whose ids are the spec's own (ours)
keeps the identity binding, checked at each step with one comparison. The abstraction the machine compares
carries the spec's counters (taken from the spec's step): freshness is checked by the binding, not by them.
Unlike replay, an id may not be reused after its object retired (the spec tells a retired id, refused with
InvalidTransition, from one never issued, refused as unknown), and an alias must have an id of its own (D12).

Which fields hold ids of which kind is read from the field names (`replay_ids.FIELD_KINDS` and the state's
maps); which actions' results are ids, from `RESULT_KINDS`. A field or map outside these tables is compared
as it is: correct for a governor whose ids are the spec's, and a difference to report for one whose are not.
"""

from __future__ import annotations

import enum
import itertools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import immutables

from invariants.replay_ids import FIELD_KINDS
from spec import ledger_actions as A
from spec import manager_actions as M
from spec import view_actions as V
from spec.records import evolve

__all__ = ["GovernorAdapter", "SpecGovernor", "OwnIds", "RESULT_KINDS", "script"]


class GovernorAdapter(Protocol):
    """What a machine needs from a governor under test (the module's docstring says what each returns)."""

    def execute(self, action: Any) -> Any:
        """Perform `action` (ids the governor's own); its result, or raise the spec's `GovernorError`."""

    def abstract(self) -> Any:
        """The governor's records as the spec's state, keyed by its own ids (the refinement mapping)."""


class SpecGovernor:
    """The spec itself as a governor (spec-only runs, the spec layer's negative controls)."""

    def __init__(self, step: Callable[..., tuple[Any, Any]], initial: Any, guards: Any) -> None:
        self._step, self.state, self.guards = step, initial, guards

    def execute(self, action: Any) -> Any:
        self.state, result = self._step(self.state, action, self.guards)
        return result

    def abstract(self) -> Any:
        return self.state


#: Actions whose result holds ids, and their kind (a tuple result: each item; `LimitOutcome`: its fields): the
#: ledger's, and every composed action `spec.manager_actions` (or `spec.view_actions`, re-exported by it)
#: documents as "Name(...) -> <kind> id" or "-> tuple of <kind> ids" (a new action documented so is picked up).
RESULT_KINDS: dict[type, str] = {
    A.RegisterAuthority: "authority", A.RegisterAlias: "authority", A.RegisterHolder: "holder",
    A.Reserve: "allocation", A.RecordCommitted: "allocation", A.OpenAllowance: "allowance",
    **{getattr(M, name): kind for name, kind in re.findall(r"^\s*(\w+)\([^)]*\)\s*->\s*(?:tuple of )?(\w+) ids?\b",
                                                          (M.__doc__ or "") + (V.__doc__ or ""), re.M)
       if hasattr(M, name)}}

#: Fields of records and actions that hold ids (`source` / `target` only in `TransferAllowance`).
_FIELDS = {**FIELD_KINDS, "alias_of": "authority", "held": "allocation", "victims": "allocation", "view": "view",
           "seq": "tx"}  # a transaction's submit sequence is the id of its first attempt (C4)
_TRANSFER_ONLY = frozenset({"source", "target"})
#: Fields holding (id, figure) pairs.
_PAIRS = {"needs": "authority", "completed": "pressure", "users": "tx"}
#: Maps of the state keyed by ids, and the kind of their keys (and of their records' `id`).
_MAPS = {"authorities": "authority", "holders": "holder", "allocations": "allocation", "allowances": "allowance",
         "tickets": "ticket", "pressures": "pressure", "txs": "tx", "changes": "authority", "bundles": "bundle",
         "views": "view", "intents": "tx"}
#: Maps of the state keyed by ids whose values are figures (a generation, a lease's use flags).
_KEYS = {"generations": "authority", "uses": "allocation"}
#: Bijections tried per step before falling back to the order of appearance.
_MAX_TRIES = 720

Rename = Callable[[str, Any], Any]


def rename(value: Any, f: Rename, kind: str | None = None) -> Any:
    """`value` (a record, an action, a state, a result) with every id `x` of kind `k` replaced by `f(k, x)`."""
    cls = type(value)
    if kind is not None:
        if cls is tuple:
            return tuple([rename(x, f, kind) for x in value])
        if value is None or cls is bool:
            return value
        if not hasattr(cls, "__attrs_attrs__"):
            return f(kind, value)
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    changes: dict[str, Any] = {}
    for name, op, k in plan:
        x = getattr(value, name)
        if op == "id":
            if kind is None:
                continue
            y = rename(x, f, kind)
        elif op in ("map", "keys"):
            if not isinstance(x, Mapping):
                continue
            items = {f(k, i): rename(r, f, k) if op == "map" else r for i, r in x.items()}
            y = immutables.Map(items) if isinstance(x, immutables.Map) else items
        elif op == "pairs":
            if type(x) is not tuple:
                continue
            y = tuple([(f(k, p[0]), *p[1:]) if type(p) is tuple and p else p for p in x])
        elif op == "ids":
            y = rename(x, f, k)
        elif hasattr(type(x), "__attrs_attrs__"):
            y = rename(x, f)
        else:
            continue
        if y is not x:
            changes[name] = y
    return evolve(value, **changes) if changes else value


#: class -> its fields that may hold ids: (name, "id" | "map" | "keys" | "pairs" | "ids" | "record", kind)
_PLANS: dict[type, tuple[tuple[str, str, str | None], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, str, str | None], ...]:
    if not attrs.has(cls):
        return ()
    plan: list[tuple[str, str, str | None]] = []
    for fld in attrs.fields(cls):
        name = fld.name
        if name == "id":
            plan.append((name, "id", None))
        elif name in _MAPS:
            plan.append((name, "map", _MAPS[name]))
        elif name in _KEYS:
            plan.append((name, "keys", _KEYS[name]))
        elif name in _PAIRS:
            plan.append((name, "pairs", _PAIRS[name]))
        elif name == "view" and cls.__name__ == "RegisterAlias":
            continue  # the alias's name (a string), not a model view's id
        elif name in _FIELDS and (name not in _TRANSFER_ONLY or cls.__name__ == "TransferAllowance"):
            plan.append((name, "ids", _FIELDS[name]))
        elif attrs.has(type(fld.default)):
            plan.append((name, "record", None))  # a component (the manager's ledger)
    return tuple(plan)


def _counters(state: Any, want: Any) -> Any:
    """`state` with every `next_*` counter (and its components') taken from `want`."""
    fields = getattr(type(state), "__attrs_attrs__", None)  # `attrs.fields`, read once per call (a hot path)
    if fields is None or type(state) is not type(want):
        return state
    changes = {}
    for fld in fields:
        x, y = getattr(state, fld.name), getattr(want, fld.name)
        if fld.name.startswith("next_") and x != y:
            changes[fld.name] = y
        elif hasattr(type(x), "__attrs_attrs__"):  # a component (the manager's ledger): its own counters
            z = _counters(x, y)
            if z is not x:
                changes[fld.name] = z
    return evolve(state, **changes) if changes else state


@attrs.frozen
class Unmatched:
    """A governor's id that matches no id the spec issued in that step (it shows in the machine's report)."""

    kind: str
    id: Any

    def __repr__(self) -> str:
        return f"<the governor's {self.kind} {self.id!r}: no {self.kind} the spec issued>"


class OwnIds:
    """A `GovernorAdapter` seen in the spec's ids: what a machine drives when refinement is checked."""

    def __init__(self, gov: Any, initial: Any) -> None:
        self.gov = gov
        self.identity = True  # every id so far is the spec's own (then the maps below are empty)
        self.spec_of: dict[str, dict[Any, int]] = {}  # kind -> governor id -> spec id
        self.gov_of: dict[str, dict[int, Any]] = {}  # kind -> spec id -> governor id
        self.want = initial  # the spec's state the counters are read from

    def __getattr__(self, name: str) -> Any:
        if name == "gov":
            raise AttributeError(name)
        if name == "snapshot" and not self.identity:  # the ledger machine's observation: an authority's figures
            inner = self.gov.snapshot
            return lambda authority: rename(inner(self.gov_id("authority", authority)), self._spec_id)
        return getattr(self.gov, name)

    # --- the machine's side ---------------------------------------------------------

    def execute(self, action: Any) -> Any:
        """Perform `action` (spec ids); the governor's raw result (`match` names it in the spec's ids)."""
        return self.gov.execute(action if self.identity else rename(action, self.gov_id))

    def match(self, raw: Any, action: Any, want: Any, want_result: Any) -> tuple[Any, Any]:
        """(result, abstraction) in the spec's ids, binding the ids the step issued; `want`, `want_result`:
        the spec's outcome (the state before and None where the spec refused)."""
        before, self.want = self.want, want
        kind = RESULT_KINDS.get(type(action))
        got = self.gov.abstract()
        if self.identity:
            mine = _counters(got, want)
            if mine == want and raw == want_result:
                return raw, mine
            self._leave_identity(before)
        new_gov = self._fresh(got, raw, kind, self.spec_of)
        new_spec = self._fresh(want, want_result, kind, self.gov_of)
        kinds = sorted(set(new_gov) | set(new_spec))
        options = [_pairings(new_gov.get(k, []), new_spec.get(k, [])) for k in kinds]
        best = None
        for n, combo in enumerate(itertools.product(*options)):
            f = self._trial(dict(zip(kinds, combo)))
            trial = dict(zip(kinds, combo)), rename(raw, f, kind), _counters(rename(got, f), want)
            if best is None or (trial[2] == want and trial[1] == want_result):
                best = trial
            if (trial[2] == want and trial[1] == want_result) or n + 1 >= _MAX_TRIES:
                break
        assert best is not None  # the product of no options is one empty combination
        pairs, result, now = best
        for k, p in pairs.items():
            for g, s in p:
                self.spec_of.setdefault(k, {})[g] = s
                self.gov_of.setdefault(k, {})[s] = g
        return result, now

    def abstract(self) -> Any:
        """The governor's records in the spec's ids (no binding: read again between steps)."""
        got = self.gov.abstract()
        return _counters(got if self.identity else rename(got, self._spec_id), self.want)

    # --- ids ---------------------------------------------------------------------------

    def _spec_id(self, kind: str, x: Any) -> Any:
        got = self.spec_of.get(kind, {}).get(x)
        return Unmatched(kind, x) if got is None else got

    def gov_id(self, kind: str, x: Any) -> Any:
        """The governor's id for spec id `x`; one the spec never issued stays `x` unless the governor issued
        that value (then a value it never issued)."""
        got = self.gov_of.get(kind, {}).get(x)
        if got is not None or type(x) is not int:
            return x if got is None else got
        issued = self.spec_of.get(kind, {})
        while x in issued:
            x = -(10 ** 18) - abs(x)
        return x

    def _trial(self, pairs: dict[str, tuple[tuple[Any, int], ...]]) -> Rename:
        extra = {k: dict(p) for k, p in pairs.items()}

        def f(kind: str, x: Any) -> Any:
            got = extra.get(kind, {}).get(x)
            return self._spec_id(kind, x) if got is None else got
        return f

    def _fresh(self, state: Any, result: Any, kind: str | None, bound: dict[str, dict[Any, Any]]) -> dict[str, list]:
        """Ids of each kind in `state` and `result` that `bound` does not hold, in order of appearance."""
        seen: dict[str, dict[Any, None]] = {}

        def note(k: str, x: Any) -> Any:
            if x not in bound.get(k, {}):
                seen.setdefault(k, {})[x] = None
            return x
        rename(result, note, kind)
        rename(state, note)
        return {k: list(v) for k, v in seen.items()}

    def _leave_identity(self, before: Any) -> None:
        """Every id the spec issued so far (below its counters) is bound to itself; from now on, maps."""
        self.identity = False
        for k, n in _issued(before).items():
            self.spec_of[k] = {i: i for i in range(1, n)}
            self.gov_of[k] = dict(self.spec_of[k])


def _issued(state: Any) -> dict[str, int]:
    """kind -> the spec's next id of that kind (`next_<kind>` counters, components included)."""
    out: dict[str, int] = {}
    if attrs.has(type(state)):
        for fld in attrs.fields(type(state)):
            x = getattr(state, fld.name)
            if fld.name.startswith("next_") and type(x) is int:
                out[fld.name[5:]] = x
            elif attrs.has(type(x)):
                out.update(_issued(x))
    return out


def _pairings(gov: list[Any], spec: list[int]) -> list[tuple[tuple[Any, int], ...]]:
    """The ways to bind the governor's new ids to the spec's (order of appearance first)."""
    n = min(len(gov), len(spec))
    if math.perm(len(gov), n) > _MAX_TRIES:
        return [tuple(zip(gov, spec))]
    return [tuple(zip(p, spec)) for p in itertools.permutations(gov, n)]


def script(machine: str, actions: list[Any]) -> str:
    """A failing example's actions as a script that runs as it stands: `state.act(...)` per action."""
    lines = ["The example's actions that changed the state, and the failing one, in the spec's ids (runs as "
             "it stands):",
             "from spec import ledger_actions as A, manager_actions as M",
             "from spec.types import Role, Tier", f"state = {machine}()"]
    return "\n".join(lines + [f"state.act({_source(a)})" for a in actions])


def _source(v: Any) -> str:
    if attrs.has(cls := type(v)):  # an action as the script's two modules name it (M re-exports V's, lifetime's)
        mod = "A." if getattr(A, cls.__name__, None) is cls else "M." if getattr(M, cls.__name__, None) is cls else ""
        args = ", ".join(f"{f.name}={_source(getattr(v, f.name))}" for f in attrs.fields(cls))
        return f"{mod}{cls.__name__}({args})"
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    if type(v) is tuple:
        return "(" + ", ".join(_source(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)
