"""`spec.records.evolve` is a pure speedup: every step of the explorer's scopes (the ledger's quick scope and the
composed manager's, every guard on and each manager guard off) gives the same next state, result, error type and
error message as with `attrs.evolve`, and record by record the two build equal values and raise the same errors."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from manager_harness import outcome, walk

import spec
from invariants.ledger_scope import QUICK_SCOPE as LEDGER_QUICK
from invariants.ledger_scope import ledger_actions
from invariants.manager_scope import CONTROL_SCOPE, QUICK_SCOPE, manager_actions, manager_start
from spec import ledger as L
from spec import manager as MG
from spec import records
from spec.guards import ALL_ON, GUARDS, GuardSet
from spec.ledger_state import EMPTY, Authority
from spec.manager_actions import Manager, Ticket
from spec.tickets import TicketState
from spec.types import ContextState, Role, Tier


def _users() -> list[tuple[Any, str]]:
    """(module, name) of every spec module's binding of `spec.records.evolve`."""
    out = []
    for info in pkgutil.iter_modules(spec.__path__):
        mod = importlib.import_module(f"spec.{info.name}")
        for name, value in vars(mod).items():
            if value is records.evolve and mod is not records:
                out.append((mod, name))
    return out


def _pairs(initial: Any, actions: Callable[[Any], Iterator[Any]], step: Callable[..., Any], guards: GuardSet,
           depth: int) -> list[tuple[Any, Any, tuple]]:
    """Every (state, action, outcome) the explorer tries within `depth` steps of `initial`, in its order."""
    return list(walk(initial, actions, lambda s, a: step(s, a, guards), depth))


def _differential(monkeypatch: pytest.MonkeyPatch, initial: Any, actions: Callable[[Any], Iterator[Any]],
                  step: Callable[..., Any], guards: GuardSet, depth: int) -> int:
    pairs = _pairs(initial, actions, step, guards, depth)
    with monkeypatch.context() as mp:
        for mod, name in _users():
            mp.setattr(mod, name, attrs.evolve)
        plain = [outcome(lambda s, a: step(s, a, guards), s, a) for s, a, _ in pairs]
    for (s, a, f), p in zip(pairs, plain):
        assert f == p, (s, a)
    assert any(o[0] == "rejected" for *_, o in pairs) and any(o[0] == "accepted" for *_, o in pairs)
    return len(pairs)


def test_every_spec_user_of_the_fast_evolve_is_patched_by_the_differential() -> None:
    # The differential swaps these bindings back to attrs.evolve: the transition modules must all be among them.
    names = {mod.__name__ for mod, _ in _users()}
    assert {"spec.ledger", "spec.manager", "spec.manager_parts"} <= names


def test_ledger_quick_scope_steps_are_the_same_with_attrs_evolve(monkeypatch: pytest.MonkeyPatch) -> None:
    n = _differential(monkeypatch, EMPTY, lambda s: ledger_actions(LEDGER_QUICK, s), L.step, ALL_ON, 7)
    assert n > 10_000


def test_manager_quick_scope_steps_are_the_same_with_attrs_evolve(monkeypatch: pytest.MonkeyPatch) -> None:
    n = _differential(monkeypatch, manager_start(QUICK_SCOPE), lambda s: manager_actions(QUICK_SCOPE, s), MG.step,
                      ALL_ON, 4)
    assert n > 150_000


@pytest.mark.parametrize("guard", sorted(g.name for g in GUARDS if g.model == "manager"))
def test_manager_steps_with_a_guard_off_are_the_same_with_attrs_evolve(monkeypatch: pytest.MonkeyPatch,
                                                                       guard: str) -> None:
    _differential(monkeypatch, manager_start(CONTROL_SCOPE), lambda s: manager_actions(CONTROL_SCOPE, s), MG.step,
                  GuardSet.without(guard), 4)


_RECORDS = [
    Authority(1, "pool0", Tier.DEVICE, 4, 4, None, None, ContextState.ACTIVE, 0),
    Ticket(1, 1, 1, 2, 0, Role.STAGING, 0, TicketState.PENDING, None),
    Manager(),
    EMPTY,
]


@pytest.mark.parametrize("rec", _RECORDS, ids=lambda r: type(r).__name__)
def test_evolve_builds_attrs_evolve_s_record(rec: Any) -> None:
    assert records.evolve(rec) == attrs.evolve(rec) == rec
    for f in attrs.fields(type(rec)):
        value = object()
        fast, plain = records.evolve(rec, **{f.name: value}), attrs.evolve(rec, **{f.name: value})
        assert type(fast) is type(plain) and attrs.astuple(fast, recurse=False) == attrs.astuple(plain, recurse=False)
        assert getattr(fast, f.name) is value
        assert all(getattr(fast, g.name) is getattr(rec, g.name) for g in attrs.fields(type(rec)) if g is not f)


def test_evolve_of_an_unknown_field_raises_attrs_evolve_s_error() -> None:
    with pytest.raises(TypeError) as plain:
        attrs.evolve(Manager(), nope=1)
    with pytest.raises(TypeError) as fast:
        records.evolve(Manager(), nope=1)
    assert str(fast.value) == str(plain.value)


@attrs.frozen
class _Odd:
    a: int
    b: int = attrs.field(init=False, default=7)
    c: int = attrs.field(kw_only=True, default=0)
    d: int = attrs.field(default=0, validator=attrs.validators.le(5))


@attrs.frozen
class _Checked:
    a: int = attrs.field(validator=attrs.validators.instance_of(int))
    b: tuple = attrs.field(converter=tuple, default=())


@pytest.mark.parametrize(("x", "change", "want", "bad", "error"), [
    (_Odd(1, c=2, d=3), {"a": 5}, _Odd(5, c=2, d=3), {"d": 9}, ValueError),  # not buildable positionally
    (_Checked(1, [2]), {"b": [3]}, _Checked(1, (3,)), {"a": "1"}, TypeError),
], ids=["a_class_it_cannot_build_positionally", "validators_and_converters"])
def test_evolve_of_an_unusual_class_is_attrs_evolve(x: Any, change: dict, want: Any, bad: dict, error: type) -> None:
    assert records.evolve(x, **change) == attrs.evolve(x, **change) == want
    with pytest.raises(error):  # validators and converters still run
        records.evolve(x, **bad)


def test_cached_hashes_are_the_recomputed_ones_over_the_manager_scope() -> None:
    # State and Manager cache their hash (attrs cache_hash): sound only while no record changes after it was first
    # hashed. Every state the explorer met (hashed into its seen-set as it was found) still hashes as a fresh copy.
    seen = {s for s, *_ in _pairs(manager_start(QUICK_SCOPE), lambda s: manager_actions(QUICK_SCOPE, s), MG.step,
                                  ALL_ON, 4)}
    assert len(seen) > 4000
    for s in seen:
        assert hash(s) == hash(records.evolve(s)) and hash(s.ledger) == hash(records.evolve(s.ledger))
        assert s == records.evolve(s)


def test_a_record_changed_after_hashing_is_caught_by_the_cached_hash_check() -> None:
    # The check above is not vacuous: a record changed behind the cache no longer hashes as its fresh copy.
    s = manager_start(QUICK_SCOPE)
    h = hash(s)
    object.__setattr__(s, "next_ticket", s.next_ticket + 1)
    assert hash(s) == h != hash(records.evolve(s))
