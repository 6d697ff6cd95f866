"""The liveness properties of the catalog, each under its stated fairness, checked on a whole explored scope.

Each property, with the fairness it assumes and its scope, is stated once, in `spec.catalog.LIVENESS`:
I13 (no ticket pending forever while leases return infinitely often), I12 (an admitted request can always
still finish), I8c (max context always reachable without oversubscription), C4 (no fair run of aborts forever
without a commit).

I13 and C4 are fair-cycle checks (`invariants.liveness.fair_cycle`): for I13 a reachable cycle that keeps the
watched ticket pending and returns a lease.
I12 and I8c are possibility checks (`liveness.trap`): on a finite graph, "from every reachable state the goal
stays reachable" makes every run reach it under strong fairness of every step.

I13's scope (`starvation_model`) is a starvation scope of the composed spec (`invariants.manager_starvation`):
one holder, one 2 B authority, aging bound 2, at most three tickets and leases at once, sizes {1, 2},
priorities {0, 1}; retired ids are recycled, and a monitor watches one ticket.

C4 is a fair-cycle check under weak fairness of each client: no reachable cycle in which nobody commits and a
reservation misses (an abort), and in which every client that is offered a step in every state of the cycle
takes one. Its scope (`retry_model`) is `spec.transactions` with two 1 B authorities and two clients, each
needing 1 B of both, declared in opposite orders; each client plans (or retries its intent), tries to reserve
each need it does not hold yet (the spec refuses any but the lowest while `ordered_reservation` is on), publishes,
executes on its own view, commits, releases and plans again (no explicit Abort, no device loss: an abort here
is the coordinator's own, a miss). Transaction, intent and view ids and submit sequences are recycled (renamed
1..k in id order after each step: in this scope's steps the spec compares them only for equality), and an intent's age, raised by every abort and read by no transition, is capped at
`_AGE_CAP`; `tests/test_liveness.py` checks on every edge that the renamed state steps as the original does.

Pure; reads the spec only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import immutables

from invariants.explore import Model
from invariants.liveness import Graph, Lasso, build_graph, fair_cycle, trap
from invariants.manager_starvation import Watch, Watched, canonical, capacity_returns, pending_watched, starvation_model
from invariants.model_scopes import batch, elastic
from spec import admission as AD
from spec import manager_actions as M
from spec import transactions as TX
from spec import transactions_actions as TA
from spec.errors import GovernorError
from spec.catalog import LIVENESS
from spec.guards import ALL_ON, GuardSet
from spec.records import evolve
from spec.tickets import TicketState
from spec.transactions_lifecycle import TxPhase, ViewKind

__all__ = ["FAIRNESS", "PROPERTIES", "CHECKER", "LivenessResult", "Watch", "Watched", "starvation_model",
           "canonical", "pending_watched", "capacity_returns", "Client", "Clients", "retry_model", "canonical_clients", "check_liveness", "run_liveness", "liveness_ok"]

#: Each property with its fairness, as the catalog states it (`spec.catalog.LIVENESS`, the one text).
FAIRNESS: dict[str, str] = {pid: text for pid, (text, _) in LIVENESS.items()}


@attrs.frozen
class LivenessResult:
    id: str
    scope: str
    fairness: str
    status: str  # "verified", "violated" or "partial"
    states: int = 0
    transitions: int = 0
    complete: bool = False  # the whole reachable graph was built (else the verdict is partial)
    diameter: int = 0
    seconds: float = 0.0
    lasso: Lasso | None = None
    reason: str = ""  # for "partial": what is not checked, and why


# --- C4: the retry scope -------------------------------------------------------------------------------------


@attrs.frozen
class Client:
    """Client `client`'s next step `act` (the process a weak-fairness condition names)."""

    client: int
    act: Any


@attrs.frozen
class Clients:
    tx: TX.TxState
    at: tuple[tuple[int | None, int | None], ...]  # per client: (its transaction, the intent its abort left)


#: Each client's needs, declared in opposite orders: 1 B on each of two 1 B authorities.
_CLIENT_NEEDS = (((1, 1), (2, 1)), ((2, 1), (1, 1)))
_AGE_CAP = 2  # an intent's age, raised by every abort, is kept as min(age, _AGE_CAP): nothing reads it


def _retry_start() -> TX.TxState:
    s = TX.TX_EMPTY
    for act in (TA.AddAuthority("dev", 1), TA.AddAuthority("host", 1)):
        s = TX.step(s, act)[0]
    return s


def canonical_clients(s: Clients) -> Clients:
    """Transactions, intents, views and submit sequences renamed 1..k in id order; ages capped at `_AGE_CAP`;
    the clients follow their transaction and intent."""
    t = s.tx
    txs = {old: new for new, old in enumerate(sorted(t.txs), 1)}
    intents = {old: new for new, old in enumerate(sorted(t.intents), 1)}
    views = {old: new for new, old in enumerate(sorted(t.views), 1)}
    seqs = {old: new for new, old in enumerate(sorted({x.seq for x in (*t.txs.values(), *t.intents.values())}), 1)}
    new_txs = immutables.Map({txs[x.id]: evolve(x, id=txs[x.id], seq=seqs[x.seq], age=min(x.age, _AGE_CAP),
                                                 bound=tuple((views[v], g) for v, g in x.bound))
                              for x in t.txs.values()})
    new_intents = immutables.Map({intents[i.id]: evolve(i, id=intents[i.id], seq=seqs[i.seq],
                                                        age=min(i.age, _AGE_CAP)) for i in t.intents.values()})
    new_views = immutables.Map({views[v.id]: evolve(v, id=views[v.id], allocation=txs[v.allocation],
                                                    users=tuple(sorted(txs[u] for u in v.users)))
                                for v in t.views.values()})
    tx = evolve(t, txs=new_txs, intents=new_intents, views=new_views, next_tx=len(txs) + 1,
                next_intent=len(intents) + 1, next_view=len(views) + 1, next_seq=len(seqs) + 1)
    at = tuple((None if x is None else txs[x], None if i is None else intents[i]) for x, i in s.at)
    return Clients(tx, at)


def _retry_actions(s: Clients) -> Iterator[Any]:
    """Each client's program: plan (or retry its intent), try to reserve any need not yet held (declared order
    first), publish, execute on its own view, commit, release, and plan again."""
    for c, (tid, iid) in enumerate(s.at):
        if tid is None:
            yield Client(c, TA.Plan(_CLIENT_NEEDS[c], 0, ViewKind.CONTIGUOUS, None, iid))
            continue
        t = s.tx.txs[tid]
        if t.phase in (TxPhase.PLANNED, TxPhase.RESERVING):
            held = {a for a, _ in t.held}
            for aid, _ in t.needs:
                if aid not in held:
                    yield Client(c, TA.Reserve(tid, aid))
        elif t.phase is TxPhase.RESERVED:
            yield Client(c, TA.Publish(tid))
        elif t.phase is TxPhase.PUBLISHED:
            for v in s.tx.views.values():
                if v.allocation == tid:
                    yield Client(c, TA.Execute(tid, v.id, v.generation))
        elif t.phase is TxPhase.EXECUTING:
            yield Client(c, TA.Commit(tid))
        else:
            yield Client(c, TA.Release(tid))


def _retry_step(guards: GuardSet, s: Clients, act: Client) -> Clients:
    nxt, result = TX.step(s.tx, act.act, guards)
    tid, iid = s.at[act.client]
    if isinstance(act.act, TA.Plan):
        tid, iid = result, None
    elif isinstance(act.act, TA.Reserve) and result is not None:  # a miss: aborted, its intent left
        tid, iid = None, result
    elif isinstance(act.act, TA.Release):
        tid = None
    at = (*s.at[:act.client], (tid, iid), *s.at[act.client + 1:])
    return canonical_clients(Clients(nxt, at))


def retry_model(guards: GuardSet = ALL_ON) -> Model:
    """Two clients whose transactions each need 1 B of both 1 B authorities, planning, reserving (try-only),
    aborting on a miss and retrying forever (no invariant checks: liveness reads the graph)."""
    return Model("tx_retry", Clients(_retry_start(), ((None, None),) * len(_CLIENT_NEEDS)),
                 lambda s, a: _retry_step(guards, s, a), _retry_actions, lambda s: None, lambda s, a, n: None,
                 (GovernorError,))


def _aborts(s: Clients, act: Any, n: Clients) -> bool:
    """A reservation missed: the client's transaction is gone, an intent left in its place."""
    return isinstance(act.act, TA.Reserve) and n.at[act.client][0] is None


def _no_commit(s: Clients, act: Any, n: Clients) -> bool:
    return not isinstance(act.act, TA.Commit)


def _client(c: int) -> Callable[[Any], bool]:
    return lambda act: act.client == c


# --- the checks -----------------------------------------------------------------------------------------------


def _i13(g: Graph) -> Lasso | None:
    # Weak fairness of Claim: a cycle that offers a claim in every state takes one.
    return fair_cycle(g, pending_watched, capacity_returns, (lambda act: isinstance(act, M.Claim),))


def _i12(g: Graph) -> Lasso | None:
    for rid in (1, 2, 3):  # the kv_batch scope submits at most three requests
        lasso = trap(g, lambda s, r=rid: r in s.requests and s.requests[r].state is not AD.ReqState.FINISHED,
                     lambda s, r=rid: r in s.requests and s.requests[r].state is AD.ReqState.FINISHED)
        if lasso is not None:
            return lasso
    return None


def _c4(g: Graph) -> Lasso | None:
    return fair_cycle(g, lambda s: True, _aborts, tuple(_client(c) for c in range(len(_CLIENT_NEEDS))),
                      _no_commit)


def _i8c(g: Graph) -> Lasso | None:
    return trap(g, lambda s: True, lambda s: s.tokens == s.max_context,
                along=lambda s: s.used + s.headroom <= s.budget)


#: The `ortmem verify` checker each property belongs to (its guard's model).
CHECKER: dict[str, str] = {"I13": "pressure", "I12": "admission", "I8c": "admission", "C4": "transactions"}

#: ID -> (scope name, the scope's model for a guard set, the check, the guard whose control must fail it).
PROPERTIES: dict[str, tuple[str, Callable[[GuardSet], Model], Callable[[Graph], Lasso | None], str]] = {
    "I13": ("starvation", starvation_model, _i13, "aging"),
    "I12": ("kv_batch", batch, _i12, "kv_admission_fits"),
    "I8c": ("elastic", elastic, _i8c, "elastic_guaranteed_path"),
    "C4": ("tx_retry", retry_model, _c4, "ordered_reservation"),
}

def check_liveness(pid: str, guards: GuardSet = ALL_ON, *, max_states: int = 200_000) -> LivenessResult:
    """Build `pid`'s scope whole with `guards` and check its property: verified, violated (a lasso) or partial."""
    scope, model, check, _ = PROPERTIES[pid]
    t0 = time.perf_counter()
    g = build_graph(model(guards), max_states=max_states)
    lasso = check(g)
    status = "violated" if lasso is not None else "verified" if g.complete else "partial"
    why = "" if g.complete or lasso is not None else f"state bound {max_states} hit: the graph is not whole"
    return LivenessResult(pid, scope, FAIRNESS[pid], status, len(g.states), g.transitions, g.complete, g.diameter,
                          time.perf_counter() - t0, lasso, why)


def run_liveness(checkers: tuple[str, ...]) -> tuple[dict[str, LivenessResult], dict[str, LivenessResult]]:
    """`ortmem verify`'s liveness phase for the named checkers: each property with every guard on, then with
    its guard off (the negative control, which must yield a lasso)."""
    pids = [pid for pid in PROPERTIES if CHECKER[pid] in checkers]
    runs = {pid: check_liveness(pid) for pid in pids}
    controls = {PROPERTIES[pid][3]: check_liveness(pid, GuardSet.without(PROPERTIES[pid][3])) for pid in pids}
    return runs, controls


def liveness_ok(runs: dict[str, LivenessResult], controls: dict[str, LivenessResult]) -> bool:
    """No property violated with every guard on, and every control's guard off violated it (a lasso)."""
    return (not any(r.status == "violated" for r in runs.values())
            and all(c.status == "violated" and c.lasso is not None for c in controls.values()))
