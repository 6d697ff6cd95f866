"""The ledger model's exploration scope: which actions the explorer tries in each state.

A `LedgerScope` bounds the abstract governor of `spec.ledger`: how many
authorities (canonical or alias), holders, allocations and allowances may
ever be issued, which byte counts and tiers requests use, and the pool
capacity. `ledger_model(scope, guards)` turns it into an `explore.Model`
starting from the empty state, so every registration order is explored too.

Only well-typed actions on known ids are enumerated (malformed input is the
stateful campaign's job); an action the spec rejects is simply not a
transition. Holder actions are tried with every holder, owners and foreign
ones alike, so ownership guards are exercised.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import json

import attrs

from invariants.explore import Model, explore, render_counterexample
from invariants.explore_symmetry import ledger_symmetry
from invariants.itf import itf_trace
from invariants.ledger import check_all, check_step
from spec import ledger_actions as A
from spec.errors import GovernorError
from spec.guards import ALL_ON, Guard, GuardSet
from spec.ledger import step as spec_step
from spec.ledger_state import EMPTY, State
from spec.types import Role, Tier

__all__ = ["LedgerScope", "QUICK_SCOPE", "COMPLETE_SCOPES", "CONTROL_SCOPE",
           "GOLDEN_DEPTH", "ledger_model", "ledger_actions",
           "golden_counterexample", "golden_itf"]


@attrs.frozen
class LedgerScope:
    authorities: int = 2  # authorities ever registered (canonical + aliases)
    holders: int = 2
    allocations: int = 2  # allocation ids ever issued ("tickets")
    allowances: int = 1
    capacity: int = 2
    nbytes: tuple[int, ...] = (1, 2)
    tiers: tuple[Tier, ...] = (Tier.DEVICE, Tier.HOST)
    pool: str = "gpu0"
    view: str = "uma"
    #: Whether device loss and termination are explored (they multiply the states).
    device_loss: bool = True


#: The scope of the explorer phase of `ortmem verify --quick` (every guard on).
QUICK_SCOPE = LedgerScope()
#: Scopes `ortmem verify` explores to their fixpoints (every guard on, symmetry on), per profile: quick splits the
#: quick scope's product in two (one byte size; no allowance), about 9,000 and 6,300 states; thorough explores
#: the whole quick scope (105,379 states with symmetry, 185,505 without).
COMPLETE_SCOPES: dict[str, dict[str, LedgerScope]] = {
    "quick": {"ledger_one_size": LedgerScope(nbytes=(1,)), "ledger_no_allowance": LedgerScope(allowances=0)},
    "thorough": {"ledger": QUICK_SCOPE},
}
#: The scope negative controls search (small enough to exhaust in well under a second per guard).
CONTROL_SCOPE = LedgerScope(allowances=2)


def ledger_actions(scope: LedgerScope, s: State) -> Iterator[Any]:
    """Every action the scope allows in state `s`, in a fixed order."""
    auths = sorted(s.authorities)
    holders = sorted(s.holders)
    if s.next_holder <= scope.holders:
        yield A.RegisterHolder(f"h{s.next_holder}")
    if s.next_authority <= scope.authorities:
        for tier in scope.tiers:
            yield A.RegisterAuthority(scope.pool, tier, scope.capacity)
        yield A.RegisterAuthority(scope.pool, scope.tiers[0], scope.capacity + 1)
        for a in auths:
            yield A.RegisterAlias(a, scope.view)
    for h in holders:
        for a in auths:
            if s.next_allocation <= scope.allocations:
                for tier in scope.tiers:
                    for n in scope.nbytes:
                        yield A.Reserve(h, a, tier, n, Role.WEIGHTS)
                for n in scope.nbytes:
                    yield A.RecordCommitted(h, a, scope.tiers[0], n, Role.STATE)
            if s.next_allowance <= scope.allowances:
                for n in scope.nbytes:
                    yield A.OpenAllowance(h, a, n)
        for r in sorted(s.allocations):
            for n in scope.nbytes:
                yield A.Commit(h, r, n)
            yield A.Cancel(h, r)
            yield A.Release(h, r)
            for n in (0, *scope.nbytes):
                yield A.Quarantine(h, r, n)
        for w in sorted(s.allowances):
            for n in scope.nbytes:
                yield A.ReserveGrowth(h, w, n)
                yield A.MapAllowance(h, w, n)
                yield A.UnmapAllowance(h, w, n)
                for t in sorted(s.allowances):
                    if t != w:
                        yield A.TransferAllowance(h, w, t, n)
            yield A.CloseAllowance(h, w)
    if scope.device_loss:
        for a in auths:
            yield A.LoseDevice(a)
            yield A.ConfirmTermination(a)


def ledger_model(scope: LedgerScope = QUICK_SCOPE, guards: GuardSet = ALL_ON, *, symmetry: bool = False,
                 name: str = "ledger") -> Model:
    """The spec's ledger as an explorable model (guards as given, invariants all checked); `symmetry`: one state
    per orbit of interchangeable holders (`invariants.explore_symmetry`)."""
    return Model(
        name=name,
        initial=EMPTY,
        step=lambda s, a: spec_step(s, a, guards)[0],
        actions=lambda s: ledger_actions(scope, s),
        check_state=check_all,
        check_step=check_step,
        rejects=(GovernorError,),
        key=ledger_symmetry(scope.holders).key if symmetry else None,
    )


#: Depth of the golden counterexample search (deeper than any ledger counterexample needs).
GOLDEN_DEPTH = 8


def golden_counterexample(g: Guard) -> str:
    """The text of `tests/golden/<guard>.txt`: the explorer's shortest counterexample with `g` off."""
    r = explore(ledger_model(CONTROL_SCOPE, GuardSet.without(g.name)), max_depth=GOLDEN_DEPTH)
    head = (f"# guard {g.name} switched off in the spec (protects {', '.join(g.ids)}): {g.harm}\n"
            f"# shortest counterexample in {CONTROL_SCOPE!r}, depth <= {GOLDEN_DEPTH}\n"
            "# regenerate: python -m refimpl.cli explore --write-golden\n")
    return head + render_counterexample(r)


def golden_itf(g: Guard) -> str:
    """The text of `tests/golden/itf/<guard>.json`: the same counterexample as an ITF trace (states at each step)."""
    r = explore(ledger_model(CONTROL_SCOPE, GuardSet.without(g.name)), max_depth=GOLDEN_DEPTH)
    meta = {"source": "ortmem explore --write-golden", "guard_off": g.name, "protects": list(g.ids),
            "scope": repr(CONTROL_SCOPE), "violated": r.violated, "clause": r.clause, "message": r.message}
    return json.dumps(itf_trace(r.trace, r.counterexample, meta), indent=1) + "\n"
