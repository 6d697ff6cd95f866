"""Named clauses: each predicate is a conjunction of them, and each says how often its case occurred.

A `Clause` is one sentence of the design stated as a harm that must never
happen ("no byte is credited twice"), owned by one catalog ID and one
predicate. A predicate calls `clause.case(held)` once per evaluation, with
`held` true iff the situation the clause is about occurred in the state or
step being checked (an allocation existed, a grant was made, a ticket had
matured...), and `clause.fail(message)` to report a violation. A clause that
is evaluated a million times on states where its case never occurs proves
nothing; the counts make that visible (TLC's `-coverage`, Hypothesis'
`event()`).

Counting is off unless a `Coverage` is active (`recording(cov)`), so
contracts in a debug build pay one context-variable read per clause. The
checked machine records only its own evaluations, not the contracts the
implementation runs on itself.

Clauses are declared at import time into `CLAUSES` (a constant once the
predicate modules are imported); `clauses_of(id)` lists an ID's clauses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

import attrs

from invariants._violation import InvariantViolation

__all__ = ["Clause", "Coverage", "CLAUSES", "clause", "clauses_of", "recording", "conjunction", "collecting",
           "counting"]


@attrs.define(eq=False, repr=False)
class Coverage:
    """Per clause key: [evaluations, evaluations in which the clause's case occurred]."""

    counts: dict[str, list[int]] = attrs.field(factory=dict)

    def add(self, other: "Coverage | dict[str, list[int]]") -> None:
        for k, (e, h) in (other.counts if isinstance(other, Coverage) else other).items():
            c = self.counts.setdefault(k, [0, 0])
            c[0] += e
            c[1] += h

    def of(self, key: str) -> tuple[int, int]:
        e, h = self.counts.get(key, (0, 0))
        return e, h


_ACTIVE: ContextVar[Coverage | None] = ContextVar("ortmem_coverage", default=None)
_COLLECT: ContextVar[list[str] | None] = ContextVar("ortmem_collect", default=None)


@attrs.frozen(repr=False)
class Clause:
    id: str  # the catalog ID whose statement this clause is part of
    predicate: str  # the predicate function that evaluates it
    name: str
    statement: str  # the harm it rules out, in the design's words
    #: "predicate.name": built once (`case` reads it at every evaluation)
    key: str = attrs.field(init=False, default=attrs.Factory(lambda c: f"{c.predicate}.{c.name}", takes_self=True))

    def case(self, held: bool) -> bool:
        """Count one evaluation (and, if `held`, one in which the clause's case occurred); returns `held`."""
        cov = _ACTIVE.get()
        if cov is not None:
            c = cov.counts.get(self.key)
            if c is None:
                c = cov.counts[self.key] = [0, 0]
            c[0] += 1
            if held:
                c[1] += 1
        return held

    def fail(self, message: str) -> NoReturn:
        raise InvariantViolation(self.id, message, clause=self.key)

    def __repr__(self) -> str:
        return f"<clause {self.id} {self.key}>"


#: Every declared clause by key, in declaration order.
CLAUSES: dict[str, Clause] = {}


def clause(id: str, predicate: str, name: str, statement: str) -> Clause:
    """Declare a clause (at import time, next to the predicate that evaluates it)."""
    c = Clause(id, predicate, name, statement)
    if c.key in CLAUSES:
        raise ValueError(f"clause {c.key} declared twice")
    CLAUSES[c.key] = c
    return c


def clauses_of(id: str) -> tuple[Clause, ...]:
    return tuple(c for c in CLAUSES.values() if c.id == id)


@contextmanager
def recording(cov: Coverage | None) -> Iterator[None]:
    """Count clause evaluations into `cov` for the duration of the block (None: count nothing)."""
    token = _ACTIVE.set(cov)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def conjunction(table: Mapping[str, tuple[Callable[..., None], ...]], *args: Any) -> None:
    """Evaluate every predicate of a registry (TLA+ `Inv == P1 /\\ P2 ...`): raise at the first failure,
    or, while `collecting`, note each failing predicate's clause and go on to the next predicate."""
    found = _COLLECT.get()
    for preds in table.values():
        for p in preds:
            if found is None:
                p(*args)
                continue
            try:
                p(*args)
            except InvariantViolation as e:
                found.append(e.clause or e.id)
            except Exception as e:  # a state this broken may trip a later predicate's own reading
                found.append(f"{p.__name__}:crashed:{type(e).__name__}")


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Within the block, `conjunction` reports every failing clause instead of the first only.

    Used after a control found a violation, to credit every clause the bad state breaks (rule R3):
    a state clause is often shadowed by a step clause that fails first on the same bug.
    """
    found: list[str] = []
    token = _COLLECT.set(found)
    try:
        yield found
    finally:
        _COLLECT.reset(token)


def counting() -> bool:
    """True iff clause evaluations are being counted (`recording`) or collected (`collecting`) here: a check that
    skips repeated evaluations (`invariants.explore_checks`) must then evaluate everything."""
    return _ACTIVE.get() is not None or _COLLECT.get() is not None
