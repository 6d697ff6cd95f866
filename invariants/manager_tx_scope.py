"""C4's liveness scope: a retry scope of the composed spec (`spec.manager`), two clients aborting and retrying.

Two holders (clients 0 and 1), two authorities of 1 B (`dev` 1, `host` 2), aging bound 2; each client needs
1 B of both, declared in opposite orders. A client's program, one step at a time: plan (naming the intent
its last abort left, so the retry keeps its place), try to reserve its next need (`ReserveTx`; a miss is
the client's `AbortTx` in the same step: try-only, it never waits), commit once every need is held, release
its leases one by one, and plan again. No other action: a scope of the one model, restricted to the actions
a retry livelock needs. The program aborts only on a miss, so a cycle of aborts is the scope's own doing.

Retired ids are recycled: after each step the live transactions and intents (one id space: an intent is
keyed by its aborted transaction's id) are renamed 1..k in id order, submit sequences 1..j in order and
allocations 1..m in id order. The composed spec compares these ids only by equality and by order against
`next_tx` (a fresh transaction's sequence is its id, above every live one), so the renamed state steps as
the original does (`tests/test_liveness.py` checks it on every edge). Ages are capped by the aging bound.

The property (`invariants.liveness_props`): no cycle that is weakly fair to each client, in which a
reservation misses and nobody commits. With `ordered_reservation` off (needs kept in declared order), each
client holds the authority the other needs next: a lasso. Pure; reads the spec only.
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
from spec.errors import CapacityDenied, GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.records import evolve
from spec.types import AllocState, Tier

__all__ = ["Client", "NEEDS", "retry_model", "canonical_retry", "aborts", "no_commit", "client"]

#: Each client's needs, declared in opposite orders: 1 B on each of two 1 B authorities.
NEEDS = (((1, 1), (2, 1)), ((2, 1), (1, 1)))


@attrs.frozen
class Client:
    """Client `client`'s next step `act` (the process a weak-fairness condition names)."""

    client: int
    act: Any


def canonical_retry(m: M.Manager) -> M.Manager:
    """Transactions and intents renamed 1..k, sequences 1..j, allocations 1..m, each in order."""
    ids = {old: new for new, old in enumerate(sorted({*m.txs, *m.intents}), 1)}
    seqs = {old: new for new, old in enumerate(sorted({r.seq for r in (*m.txs.values(), *m.intents.values())}), 1)}
    allocs = {old: new for new, old in enumerate(sorted(m.ledger.allocations), 1)}
    txs = immutables.Map({ids[x.id]: evolve(x, id=ids[x.id], seq=seqs[x.seq], held=tuple(allocs[a] for a in x.held))
                          for x in m.txs.values()})
    intents = immutables.Map({ids[i.id]: evolve(i, id=ids[i.id], seq=seqs[i.seq]) for i in m.intents.values()})
    records = immutables.Map({allocs[r.id]: evolve(r, id=allocs[r.id]) for r in m.ledger.allocations.values()})
    ledger = evolve(m.ledger, allocations=records, next_allocation=len(allocs) + 1)
    return evolve(m, ledger=ledger, txs=txs, intents=intents, next_tx=len(ids) + 1)


def _actions(m: M.Manager) -> Iterator[Client]:
    """Each client's one next step."""
    for c, needs in enumerate(NEEDS):
        h = c + 1
        x = next((x for x in m.txs.values() if x.holder == h), None)
        held = set(x.held) if x is not None else set()
        leases = sorted(r.id for r in m.ledger.allocations.values() if r.holder == h and r.id not in held
                        and r.state is AllocState.LIVE)
        if leases:
            yield Client(c, A.Release(h, leases[0]))
        elif x is None:
            intent = next((i.id for i in m.intents.values() if i.holder == h), None)
            yield Client(c, M.PlanTx(h, needs, 0, intent))
        elif len(x.held) == len(x.needs):
            yield Client(c, M.CommitTx(x.id))
        else:
            yield Client(c, M.ReserveTx(x.id))


def _step(guards: GuardSet, m: M.Manager, act: Client) -> M.Manager:
    try:
        nxt = MG.step(m, act.act, guards)[0]
    except CapacityDenied:
        if not isinstance(act.act, M.ReserveTx):
            raise
        nxt = MG.step(m, M.AbortTx(act.act.tx), guards)[0]  # a miss: the client aborts, leaving its intent
    return canonical_retry(nxt)


def _start() -> M.Manager:
    m = M.initial(aging_bound=2)
    for act in (A.RegisterHolder("c0"), A.RegisterHolder("c1"), A.RegisterAuthority("dev", Tier.DEVICE, 1),
                A.RegisterAuthority("host", Tier.HOST, 1)):
        m = MG.step(m, act)[0]
    return m


def retry_model(guards: GuardSet = ALL_ON) -> Model:
    """The two clients' programs over the composed spec (no invariant checks: liveness reads the graph)."""
    return Model("tx_retry", _start(), lambda s, a: _step(guards, s, a), _actions, lambda s: None,
                 lambda s, a, n: None, (GovernorError,))


def aborts(s: M.Manager, act: Client, n: M.Manager) -> bool:
    """A reservation missed: the client's transaction is gone, its intent left in its place."""
    h = act.client + 1
    return isinstance(act.act, M.ReserveTx) and not any(x.holder == h for x in n.txs.values())


def no_commit(s: M.Manager, act: Client, n: M.Manager) -> bool:
    return not isinstance(act.act, M.CommitTx)


def client(c: int) -> Any:
    return lambda act: act.client == c
