"""I13's liveness scope: a starvation scope of the composed spec (`spec.manager`), with a watched ticket.

One holder, one device authority of 2 B, aging bound 2, at most three tickets and leases at once, sizes
{1, 2}, priorities {0, 1}; the holder submits, claims, cancels and releases leases (no pressure, no
reconfigure, no transactions: a scope of the one model, restricted to the actions starvation needs).
Retired ids are recycled: after each step the live tickets are renamed 1..k in id order and the live
allocations 1..m in id order (a ticket's grant follows its allocation). The composed spec compares ticket
ids only by order (arbitration) and equality, allocation ids only by equality, and the scope never names a
retired id, so the renamed state steps as the original does (`tests/test_liveness.py` checks it on every
edge); without the renaming ids would grow and no run could repeat a state. A monitor watches one ticket:
`Watch(Submit(...))` submits and marks the new ticket (if none is watched); the mark follows its ticket
through the renaming and clears when it retires (claimed, cancelled).

The property (`invariants.liveness_props`): no fair cycle keeps the watched ticket pending while leases
return (`capacity_returns`), under weak fairness of Claim. With the `aging` guard off, a lasso exists.
Pure; reads the spec only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import immutables

from invariants.explore import Model
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.records import evolve
from spec.tickets import TicketState
from spec.types import AllocState, Tier

__all__ = ["Watch", "Watched", "starvation_model", "canonical", "pending_watched", "capacity_returns"]

_TABLE = 3  # tickets and leases at once
_H, _DEV = 1, 1


@attrs.frozen
class Watch:
    """Submit `submit` and watch the new ticket (the monitor's choice of which ticket must not starve)."""

    submit: M.Submit


@attrs.frozen
class Watched:
    m: M.Manager
    watched: int | None = None  # the watched ticket's (renamed) id; None before one is chosen or once it retires


def canonical(s: Watched) -> Watched:
    """Live tickets renamed 1..k in id order, live allocations 1..m in id order; the watch follows its ticket
    (None if it is not a live ticket)."""
    m = s.m
    ids = {old: new for new, old in enumerate(sorted(m.tickets), 1)}
    allocs = {old: new for new, old in enumerate(sorted(m.ledger.allocations), 1)}
    tickets = immutables.Map({ids[t.id]: evolve(t, id=ids[t.id], allocation=allocs.get(t.allocation))
                              for t in m.tickets.values()})
    records = immutables.Map({allocs[r.id]: evolve(r, id=allocs[r.id]) for r in m.ledger.allocations.values()})
    ledger = evolve(m.ledger, allocations=records, next_allocation=len(allocs) + 1)
    return Watched(evolve(m, ledger=ledger, tickets=tickets, next_ticket=len(ids) + 1), ids.get(s.watched))


def _leases(m: M.Manager) -> list[int]:
    return sorted(r.id for r in m.ledger.allocations.values() if r.state is AllocState.LIVE)


def _actions(s: Watched) -> Iterator[Any]:
    m = s.m
    if len(m.tickets) + len(_leases(m)) < _TABLE:
        for n in (1, 2):
            for prio in (0, 1):
                yield M.Submit(_H, _DEV, n, prio)
                if s.watched is None:
                    yield Watch(M.Submit(_H, _DEV, n, prio))
    for tid in sorted(m.tickets):
        yield M.Claim(_H, tid)
        yield M.CancelTicket(_H, tid)
    for aid in _leases(m):
        yield A.Release(_H, aid)


def _step(guards: GuardSet, s: Watched, act: Any) -> Watched:
    watched = s.watched
    if isinstance(act, Watch):
        watched = s.m.next_ticket
        act = act.submit
    # canonical drops the watch of a ticket that retired (it is no longer live, so it has no new id)
    return canonical(Watched(MG.step(s.m, act, guards)[0], watched))


def _start() -> M.Manager:
    m = M.initial(aging_bound=2)
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("dev", Tier.DEVICE, 2)):
        m = MG.step(m, act)[0]
    return m


def starvation_model(guards: GuardSet = ALL_ON) -> Model:
    """The scope with recycled ids and a watched ticket (no invariant checks: liveness reads the graph)."""
    return Model("starvation", Watched(_start()), lambda s, a: _step(guards, s, a), _actions,
                 lambda s: None, lambda s, a, n: None, (GovernorError,))


def pending_watched(s: Watched) -> bool:
    return s.watched is not None and s.m.tickets[s.watched].state is TicketState.PENDING


def capacity_returns(s: Watched, act: Any, n: Watched) -> bool:
    """A lease is released: its bytes go back to the authority."""
    return isinstance(act, A.Release)
