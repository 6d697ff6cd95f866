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
takes one. Its scope (`retry_model`, `invariants.manager_tx_scope`) is a retry scope of the composed spec: two
1 B authorities and two clients, each needing 1 B of both, declared in opposite orders; each client plans
(retrying its intent), reserves its next need try-only (a miss is its abort), commits, releases and plans again.

Pure; reads the spec only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from invariants.explore import Model
from invariants.liveness import Graph, Lasso, build_graph, fair_cycle, trap
from invariants.manager_starvation import Watch, Watched, canonical, capacity_returns, pending_watched, starvation_model
from invariants.manager_tx_scope import NEEDS, Client, aborts, canonical_retry, client, no_commit, retry_model
from invariants.model_scopes import batch, elastic
from spec import admission as AD
from spec import manager_actions as M
from spec.catalog import LIVENESS
from spec.guards import ALL_ON, GuardSet

__all__ = ["FAIRNESS", "PROPERTIES", "CHECKER", "LivenessResult", "Watch", "Watched", "starvation_model",
           "canonical", "pending_watched", "capacity_returns", "Client", "retry_model", "canonical_retry", "check_liveness",
           "run_liveness", "liveness_ok"]

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


# --- the checks -----------------------------------------------------------------------------------------------


def _i13(g: Graph) -> Lasso | None:
    # Weak fairness of Claim: a cycle that offers a claim in every state takes one.
    return fair_cycle(g, pending_watched, capacity_returns, (lambda act: isinstance(act, M.Claim),))


def _i12(g: Graph) -> Lasso | None:
    for rid in sorted({r for s in g.states for r in s.requests}):  # every request the scope submits
        lasso = trap(g, lambda s, r=rid: r in s.requests and s.requests[r].state is not AD.ReqState.FINISHED,
                     lambda s, r=rid: r in s.requests and s.requests[r].state is AD.ReqState.FINISHED)
        if lasso is not None:
            return lasso
    return None


def _c4(g: Graph) -> Lasso | None:
    return fair_cycle(g, lambda s: True, aborts, tuple(client(c) for c in range(len(NEEDS))), no_commit)


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
    """No property violated with every guard on, and every control's guard off violated it (`check_liveness`:
    violated exactly when it found a lasso)."""
    return (not any(r.status == "violated" for r in runs.values())
            and all(c.status == "violated" for c in controls.values()))
