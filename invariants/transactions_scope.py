"""The capacity-transaction model's exploration scope: a deterministic control for C3 C4 C6 I5 I9 I10 (rule R4).

`tx_model(guards)` turns `spec.transactions` into an `explore.Model` from a
fixed start: two authorities of 1 B each (ids 1 and 2, so reservation order
has a choice) and one state bundle. At most two transactions are ever
planned, each needing one or both authorities, with or without the bundle,
fresh or as the retry of a left intent; a view is remapped at most twice.
Every well-typed action on known ids is tried in every state, in a fixed
order, and judged by `invariants.transactions.check_all` / `check_step`.
Registration and malformed input are the stateful campaign's job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from invariants.explore import Model
from invariants.transactions import check_all, check_step
from spec import transactions as S
from spec import transactions_actions as T
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.transactions_lifecycle import ViewKind

__all__ = ["TX_START", "tx_actions", "tx_model"]

_NEEDS = (((1, 1),), ((2, 1),), ((2, 1), (1, 1)))
_MAX_TXS = 2
_MAX_GENERATION = 3


def _start() -> S.TxState:
    s = S.TX_EMPTY
    for act in (T.AddAuthority("dev", 1), T.AddAuthority("host", 1), T.OpenBundle()):
        s = S.step(s, act)[0]
    return s


TX_START = _start()


def tx_actions(s: S.TxState) -> Iterator[Any]:
    """Every action the scope allows in state `s`, in a fixed order."""
    if s.next_tx <= _MAX_TXS:
        for needs in _NEEDS:
            for bundle in (None, 1):
                yield T.Plan(needs, 0, ViewKind.CONTIGUOUS, bundle)
                for iid in sorted(s.intents):
                    yield T.Plan(needs, 0, ViewKind.CONTIGUOUS, bundle, iid)
    for tid in sorted(s.txs):
        t = s.txs[tid]
        for aid, _ in t.needs:
            yield T.Reserve(tid, aid)
        yield T.Publish(tid)
        for vid in sorted(s.views):
            v = s.views[vid]
            for gen in sorted({v.generation, max(1, v.generation - 1)}):
                yield T.Execute(tid, vid, gen)
        yield T.Commit(tid)
        yield T.Abort(tid)
        yield T.Release(tid)
    for vid in sorted(s.views):
        if s.views[vid].generation < _MAX_GENERATION:
            yield T.Remap(vid)
    for aid in sorted(s.authorities):
        yield T.LoseDevice(aid)
        yield T.ConfirmTermination(aid)
    for bid in sorted(s.bundles):
        yield T.ReportMismatch(bid)
    yield T.CorruptLedger()


def tx_model(guards: GuardSet = ALL_ON) -> Model:
    """The spec's transaction coordinator as an explorable model (guards as given, every predicate checked)."""
    return Model(
        name="transactions",
        initial=TX_START,
        step=lambda s, a: S.step(s, a, guards)[0],
        actions=tx_actions,
        check_state=check_all,
        check_step=check_step,
        rejects=(GovernorError,),
    )
