"""Successor memoization by component: a step is computed once per (action, the parts of the state it reads).

The composed manager (`spec.manager_actions.Manager`) is a product of parts:
the ledger, tickets, pressures, transactions, limit changes, bundles, use
flags, generations, model views and their id counters. An action reads only some of them and writes fewer (a
`Press` reads the ledger, the open pressures and the next pressure id, and
writes only the last two), and the explorer meets the same action on the
same parts under many different other parts. `MemoStep` keys a step by
`(action, the read parts)` and keeps what it wrote (the written parts'
values and the result) or the rejection (its error type and message); on a
repeat it rebuilds the next state as the current one with those parts
replaced, and raises a fresh error of the same type and message.

This is sound only if each action type's footprint is right: `FOOTPRINTS`
declares, per action type, the parts its step reads (`spec.manager.step`'s
handler and the arbitration rounds after it) and the parts it may write,
the writes a subset of the reads (a written part's new value depends on its
old one). It is checked, not trusted: every computed step is checked to
leave the parts outside its writes as they were (`FootprintError`), and
tests/test_explore_memo.py compares memoized with plain successors over every
(state, action) pair of the composed scopes (results and errors included),
with a negative control: a footprint missing a read part or a write part is
caught by that comparison. The comparison covers what the scopes vary: a
read part the scope never varies for an action (the aging bound; the
transactions for a `Release`, which the scope offers on free leases only)
is declared from the code, not confirmed by it. An action type without a
footprint is stepped plainly, every time.

Pure; one cache per `MemoStep` (per model, so per guard set).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from spec import ledger_actions as A
from spec import manager_actions as M
from spec.records import evolve

__all__ = ["Footprint", "FOOTPRINTS", "FootprintError", "MemoStep"]


@attrs.frozen
class Footprint:
    reads: tuple[str, ...]  # Manager fields the step's outcome is a function of (with the action)
    writes: tuple[str, ...]  # Manager fields the step may change (a subset of `reads`)


class FootprintError(AssertionError):
    """A step changed a part outside its declared writes (the footprint is wrong)."""


def _fp(reads: str, writes: str) -> Footprint:
    return Footprint(tuple(reads.split()), tuple(writes.split()))


# Arbitration (`spec.manager._arbitrate`) runs after every step that changed something: it reads the tickets, the
# ledger (headroom before and after), the aging bound and the process quotas (the room a grant fits, `spec.quota`:
# every grant path reads them with the ledger), and writes the ledger and the tickets. It runs a round
# only where headroom rose (the ledger changed), on a Submit, or on a retired ticket, so an action that writes
# neither the ledger nor the tickets (Press, PlanTx, JoinBundle, ...) leaves the tickets unread.
_ARB = "ledger tickets aging_bound quotas"
# Every step that changes the ledger drops the use flags of leases that stopped being LIVE (`spec.manager.step`).
_USES = "uses"

FOOTPRINTS: dict[type, Footprint] = {
    M.Submit: _fp(f"{_ARB} next_ticket generations poisoned", "ledger tickets next_ticket"),
    M.TryReserve: _fp(f"{_ARB} {_USES} poisoned", f"ledger tickets {_USES}"),
    M.Claim: _fp(f"{_ARB} next_ticket {_USES}", f"ledger tickets {_USES}"),
    M.CancelTicket: _fp(f"{_ARB} next_ticket {_USES}", f"ledger tickets {_USES}"),
    M.TimeoutTicket: _fp(f"{_ARB} next_ticket {_USES}", f"ledger tickets {_USES}"),
    A.Release: _fp(f"{_ARB} txs views {_USES}", f"ledger tickets {_USES}"),
    M.ShrinkLease: _fp(f"{_ARB} txs views {_USES}", f"ledger tickets {_USES}"),  # a part's or pinned lease: refused
    M.GrowLease: _fp(f"{_ARB} txs views {_USES} poisoned", f"ledger tickets {_USES}"),  # a part's lease: refused
    M.Press: _fp("ledger pressures next_pressure generations", "pressures next_pressure"),
    M.Answer: _fp(f"{_ARB} txs views pressures next_pressure changes generations {_USES}",
                  f"ledger tickets pressures changes {_USES}"),
    M.CancelPressure: _fp("pressures next_pressure", "pressures"),
    M.PlanTx: _fp("ledger txs next_tx intents poisoned", "txs next_tx intents"),  # a retry spends its intent
    M.ReserveTx: _fp(f"{_ARB} txs next_tx {_USES} poisoned", f"ledger tickets txs {_USES}"),
    M.CommitTx: _fp(f"{_ARB} txs next_tx bundles views {_USES}", f"ledger tickets txs bundles views {_USES}"),
    M.AbortTx: _fp(f"{_ARB} txs next_tx views intents {_USES}", f"ledger tickets txs views intents {_USES}"),
    M.JoinBundle: _fp("txs next_tx bundles", "txs"),
    M.ReportMismatch: _fp("bundles", "bundles"),
    A.LoseDevice: _fp(f"{_ARB} txs pressures changes views {_USES}",
                      f"ledger tickets txs pressures changes views {_USES}"),
    A.ConfirmTermination: _fp(f"{_ARB} {_USES}", f"ledger tickets {_USES}"),
    M.PrepareLimit: _fp("ledger changes pressures next_pressure generations", "pressures next_pressure changes"),
    M.CommitLimit: _fp(f"{_ARB} changes pressures {_USES}", f"ledger tickets pressures changes {_USES}"),
    M.RemoveAuthority: _fp(f"{_ARB} txs pressures changes generations views {_USES}",
                           f"ledger tickets generations {_USES}"),
    # Model views (`spec.manager_views`): a view id below `next_view` but absent is a dropped one (its error).
    M.PublishView: _fp("txs views next_view", "views next_view"),
    M.ExecuteView: _fp("txs views next_view", "views"),
    M.RemapView: _fp("views next_view", "views"),
    M.DropView: _fp("txs views next_view", "views"),
}


class MemoStep:
    """`step(state, action) -> (next state, result)` with `plain`'s outcomes, memoized by footprint.

    `plain` raises one of `rejects` for a disabled action. `hits` and `misses` count memoized and computed steps.
    """

    def __init__(self, plain: Callable[[Any, Any], tuple[Any, Any]], rejects: tuple[type[BaseException], ...],
                 footprints: Mapping[type, Footprint] = FOOTPRINTS) -> None:
        self._plain = plain
        self._rejects = rejects
        self._cache: dict[Any, tuple] = {}
        self._plan: dict[type, tuple[Callable[[Any], tuple], tuple[str, ...], tuple[str, ...]]] = {}
        fields = tuple(f.name for f in attrs.fields(M.Manager))
        for kind, fp in footprints.items():
            if not set(fp.writes) <= set(fp.reads) or not set(fp.reads) <= set(fields):
                raise ValueError(f"footprint of {kind.__name__}: writes {fp.writes} must be among reads {fp.reads} (Manager fields)")
            untouched = tuple(f for f in fields if f not in fp.writes)
            self._plan[kind] = (operator.attrgetter(*fp.reads), fp.writes, untouched)
        self.hits = self.misses = 0

    def __call__(self, s: Any, act: Any) -> tuple[Any, Any]:
        plan = self._plan.get(act.__class__)
        if plan is None:
            return self._plain(s, act)
        read, writes, untouched = plan
        key = (act, read(s))
        hit = self._cache.get(key)
        if hit is not None:
            self.hits += 1
            changes, result, error = hit
            if error is not None:
                raise error[0](*error[1])
            return evolve(s, **changes), result
        self.misses += 1
        try:
            nxt, result = self._plain(s, act)
        except self._rejects as e:
            self._cache[key] = (None, None, (type(e), e.args))
            raise
        for f in untouched:
            if getattr(nxt, f) is not getattr(s, f) and getattr(nxt, f) != getattr(s, f):
                raise FootprintError(f"{act!r} changed {f}, outside its declared writes {writes}")
        self._cache[key] = ({f: getattr(nxt, f) for f in writes}, result, None)
        return nxt, result
