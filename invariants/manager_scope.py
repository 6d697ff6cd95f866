"""The composed manager's exploration scope: a deterministic control for each cross-cutting guard (rule R4).

`manager_model(guards, scope)` turns `spec.manager` into an `explore.Model`
from a fixed start: two canonical authorities (id 1 of 2 B, id 2 of 3 B),
two holders, aging bound 2. Every part acts on those two ledgers: requester
tickets (Submit / Claim / CancelTicket / TimeoutTicket), ledger Release of
free leases, holder pressure (Press / Answer with no victim or one own lease
/ CancelPressure), transactions (PlanTx over one or both authorities /
ReserveTx / CommitTx / AbortTx), device loss and termination, removing an authority, and limit
changes (PrepareLimit to 1 B or back to capacity / CommitLimit), state
bundles opened at the start (JoinBundle by an open transaction /
ReportMismatch) and the allocator path (TryReserve of 1 B on authority 1 by holder 1); `QUICK_SCOPE` and
`PARTS_SCOPE` also shrink each free lease of more than a byte by one (ShrinkLease) and grow each free lease by one
(GrowLease).
Model views (PublishView / ExecuteView / RemapView) are offered only by
`VIEW_SCOPE`, process quotas (SetProcessQuota of the device tier) only by `QUOTA_SCOPE`.
SetUse, Reconfigure, deadlines and ExpirePressure are offered only by the
pressure restriction (`PRESSURE_SCOPE`, explored to a depth bound: a
generation grows without bound). Caps on the
ids ever issued (tickets, pressures, transactions) keep the space finite.
Only the owner acts on its records: ownership refusals and malformed input
are the scripted tests' and the stateful campaign's job.

Each accepted step is judged by `invariants.manager.check_step` (with the
action's result, kept from the step just taken: the explorer's step returns
only states) and each new state by `check_all`. `CONTROLS` names, per
cross-cutting guard, the scope in which switching it off must be found.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from invariants import manager as IM
from invariants.explore import Model
from invariants.explore_checks import IncrementalChecks
from invariants.explore_memo import MemoStep
from invariants.explore_symmetry import manager_symmetry
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.manager_parts import referenced
from spec.types import AllocState, Role, Tier

__all__ = ["ManagerScope", "QUICK_SCOPE", "CONTROL_SCOPE", "ARBITRATION_SCOPE", "PARTS_SCOPE", "VIEW_SCOPE",
           "QUOTA_SCOPE", "COMPLETE_SCOPES", "PRESSURE_SCOPE", "TX_SCOPE",
           "CONTROLS", "control_model", "manager_start", "manager_actions", "manager_model"]


@attrs.frozen
class ManagerScope:
    capacities: tuple[int, ...] = (2, 3)
    holders: int = 2
    aging_bound: int = 2
    tickets: int = 3  # requester tickets ever issued
    pressures: int = 2  # pressure tickets ever issued (limit changes' included)
    txs: int = 2  # transactions ever planned
    nbytes: tuple[int, ...] = (1, 2)
    priorities: tuple[int, ...] = (0,)
    needs: tuple[tuple[tuple[int, int], ...], ...] = (((1, 1),), ((2, 2),), ((1, 1), (2, 2)))
    losses: bool = True  # offer LoseDevice / ConfirmTermination
    limits: bool = True  # offer PrepareLimit / CommitLimit
    tries: bool = False  # offer TryReserve (holder 1, 1 B on authority 1): each issues a fresh allocation id, so
    #                     only a depth-bounded scope offers it (to a fixpoint the ids would grow without bound)
    bundles: int = 1  # state bundles opened at the start (offer JoinBundle / ReportMismatch on them)
    removals: bool = True  # offer RemoveAuthority
    unregisters: bool = False  # offer UnregisterHolder (of every registered holder)
    shrinks: bool = False  # offer ShrinkLease of one byte of every free lease of more than one, by its owner
    grows: bool = False  # offer GrowLease of one byte of every free lease, by its owner (refused where it lacks room)
    #: Leases taken directly on the ledger through a unified-memory alias of authority 1 (RecordCommitted on the
    #: alias; the charge lands on authority 1, which the parts share): while the ledger's allocation ids stay
    #: within this cap (grants included). 0: no alias registered.
    alias_leases: int = 0
    allowances: int = 0  # allowances ever opened (by any holder, on authority 1; owner-only growth, map, close)
    #: Holder pressure's protocol details (the pressure restriction, `PRESSURE_SCOPE`): the deadline every Press
    #: carries (answered on time and one late; ExpirePressure one past it), SetUse flags on a free lease by its
    #: owner, Reconfigure while each authority's generation is below `generations`, and TryReserve only while the
    #: ledger's allocation ids stay within `try_cap` (0: no cap, as `tries` alone).
    deadline: int | None = None
    uses: bool = False
    generations: int = 0
    try_cap: int = 0
    #: Model views (`spec.manager_views`): 0 offers none; n offers PublishView by every live transaction,
    #: ExecuteView of every view by every live transaction at each generation up to the view's (the current one and
    #: every stale one), and RemapView while the view's generation is below n (the cap keeps the scope finite).
    views: int = 0
    #: Retry intents and poisoning (the transactions restriction, `TX_SCOPE`): PlanTx naming each intent its holder
    #: left (a retry takes back its place, C4), and CorruptLedger while the manager is not yet poisoned (I5).
    retries: bool = False
    corruption: bool = False
    #: Process quotas of the device tier (`spec.quota`, I1): SetProcessQuota(Tier.DEVICE, q) for each q (None
    #: removes the quota; one below what the tier charges is refused). (): none offered.
    quotas: tuple[int | None, ...] = ()


QUICK_SCOPE = ManagerScope(tries=True, shrinks=True, grows=True)
#: Each control's scope: small enough that a shortest counterexample is found in a second.
CONTROL_SCOPE = ManagerScope(tickets=2, pressures=1, txs=1, bundles=0)

#: Complete scopes: `ortmem verify` explores every reachable state of each (no depth cut), every guard on,
#: symmetry on; together they reach each situation `invariants.manager_features` names (asserted, with counts, by
#: tests/test_explore_scopes.py). Arbitration: two priorities and aging bound 4 on one 3 B authority, so a 3 B
#: ticket is overtaken by two 1 B ones before it matures, then waits past the bound until capacity returns;
#: an allowance on the same authority. Parts: tickets, pressure, a transaction, limit changes, device loss, a
#: lease through a unified-memory alias and lease shrinks and grows, all on one 2 B authority, by two holders (not
#: permuted: a limit change numbers its pressures in holder order, `invariants.explore_symmetry`).
ARBITRATION_SCOPE = ManagerScope(capacities=(3,), holders=1, aging_bound=4, tickets=4, pressures=0, txs=0,
                                 nbytes=(1, 3), priorities=(0, 1), needs=(), losses=False, limits=False, bundles=0,
                                 allowances=1)
PARTS_SCOPE = ManagerScope(capacities=(2,), holders=2, aging_bound=2, tickets=1, pressures=1, txs=1,
                           needs=(((1, 1),),), bundles=0, alias_leases=1, shrinks=True, grows=True)
#: Views: two transactions on one 2 B authority by one holder publish, execute (at the current and a stale
#: generation), remap up to generation 2, commit (a later transaction binds the committed view), abort, lose the
#: device, drop a view and remove the authority (871 states, 3299 transitions, diameter 13, 0.3 s; an abort leaves its
#: retry intent).
VIEW_SCOPE = ManagerScope(capacities=(2,), holders=1, tickets=0, pressures=0, txs=2, needs=(((1, 1),),),
                          limits=False, bundles=0, views=2)
#: Process quota (`spec.quota`, I1; the quota-aware room of I13's rounds): one holder, two 2 B device ledgers under
#: one tier quota set to 1 B, 2 B or removed, two tickets, a transaction on authority 1 and lease grows. A quota
#: holds a waiter its ledger has room for; raising or removing it grants the waiter; bytes credited on one ledger
#: grant a waiter the quota held on the other (3,572 states, 23,810 transitions, diameter 11, 2 s). Thorough adds
#: the allocator path (TryReserve while the ledger's allocation ids stay within 2; 24,217 states).
QUOTA_SCOPE = ManagerScope(capacities=(2, 2), holders=1, tickets=2, pressures=0, txs=1, needs=(((1, 1),),),
                           losses=False, limits=False, bundles=0, removals=False, grows=True, quotas=(1, 2, None))
#: profile -> scope name -> scope. Thorough adds the parts scope with an allowance too (153,104 states; without
#: shrinks, which would double it, nor grows) and views
#: over a second authority: a transaction needing both publishes over the lower (17,678 states).
COMPLETE_SCOPES: dict[str, dict[str, ManagerScope]] = {
    "quick": {"manager_arbitration": ARBITRATION_SCOPE, "manager_parts": PARTS_SCOPE, "manager_views": VIEW_SCOPE,
              "manager_quota": QUOTA_SCOPE},
    "thorough": {"manager_arbitration": ARBITRATION_SCOPE, "manager_parts": PARTS_SCOPE,
                 "manager_parts_allowance": attrs.evolve(PARTS_SCOPE, allowances=1, shrinks=False, grows=False),
                 "manager_views": VIEW_SCOPE,
                 "manager_views_two_authorities": attrs.evolve(VIEW_SCOPE, capacities=(2, 3),
                                                               needs=(((1, 1),), ((1, 1), (2, 1)))),
                 "manager_quota": QUOTA_SCOPE,
                 "manager_quota_tries": attrs.evolve(QUOTA_SCOPE, tries=True, try_cap=2)},
}

#: The pressure restriction of the composed machine (`ortmem verify`'s pressure checker): one 3 B authority, two
#: holders; requester tickets of two priorities, the allocator path, holder pressure due at time 1 (answered on
#: time or late, expired, cancelled), use flags and reconfigures; no transaction, limit change, device loss,
#: removal, bundle, alias or allowance. Caps on the allocation ids TryReserve may issue and on the generations
#: keep it finite: `ortmem verify` explores it to its fixpoint.
PRESSURE_SCOPE = ManagerScope(capacities=(3,), holders=1, aging_bound=2, tickets=3, pressures=1, txs=0,
                              nbytes=(1, 3), needs=(), losses=False, limits=False, tries=True, bundles=0,
                              removals=False, deadline=1, uses=True, generations=1, try_cap=2)

#: The transactions restriction of the composed spec (`ortmem verify`'s transactions checker, each of its guards'
#: controls): two 1 B authorities, one holder, one state bundle; two transactions ever planned, each needing both
#: authorities, declared in either order (C4's stable order), fresh or retrying an intent; views remapped up to
#: generation 2; the ledger found corrupt. No ticket, pressure, limit change, device loss or removal: those are
#: the composed scopes' (`COMPLETE_SCOPES`). Explored to its fixpoint: 3,220 states, 10,140 transitions (1 s).
TX_SCOPE = ManagerScope(capacities=(1, 1), holders=1, tickets=0, pressures=0, txs=2, nbytes=(1,),
                        needs=(((1, 1), (2, 1)), ((2, 1), (1, 1))), losses=False, limits=False,
                        removals=False, views=2, retries=True, corruption=True)

#: guard -> the scope its explorer control runs in (every guard of model "manager"; `control_model`).
CONTROLS: dict[str, ManagerScope] = {
    "grant_charges_ledger": CONTROL_SCOPE,
    "tx_counts_granted": CONTROL_SCOPE,
    "loss_keeps_charge": CONTROL_SCOPE,
    "limit_after_reclaim": CONTROL_SCOPE,
    "provider_pinned": CONTROL_SCOPE,
    "holder_in_use": attrs.evolve(CONTROL_SCOPE, unregisters=True),
}


def manager_start(scope: ManagerScope) -> M.Manager:
    m = M.initial(scope.aging_bound)
    acts: list[Any] = [A.RegisterAuthority(f"pool{i}", Tier.DEVICE, c) for i, c in enumerate(scope.capacities)]
    acts += [A.RegisterHolder(f"h{h}") for h in range(1, scope.holders + 1)]
    if scope.alias_leases:
        acts.append(A.RegisterAlias(1, "uma"))  # id len(capacities) + 1
    acts += [M.OpenBundle() for _ in range(scope.bundles)]
    for act in acts:
        m = MG.step(m, act)[0]
    return m


def manager_actions(scope: ManagerScope, m: M.Manager) -> Iterator[Any]:
    """Every action the scope allows in `m`, in a fixed order."""
    holders = range(1, scope.holders + 1)
    auths = range(1, len(scope.capacities) + 1)
    if m.next_ticket <= scope.tickets:
        for h in holders:
            for a in auths:
                for n in scope.nbytes:
                    for prio in scope.priorities:
                        yield M.Submit(h, a, n, prio)
    for tid in sorted(m.tickets):
        t = m.tickets[tid]
        yield M.Claim(t.holder, tid)
        yield M.CancelTicket(t.holder, tid)
        yield M.TimeoutTicket(t.holder, tid)
    refs = referenced(m)
    free = [r for _, r in sorted(m.ledger.allocations.items()) if r.state is AllocState.LIVE and r.id not in refs]
    for r in free:
        yield A.Release(r.holder, r.id)
        if scope.shrinks and r.nbytes > 1:
            yield M.ShrinkLease(r.holder, r.id, 1)
        if scope.grows:
            yield M.GrowLease(r.holder, r.id, 1)
    if scope.tries and (not scope.try_cap or m.ledger.next_allocation <= scope.try_cap):
        yield M.TryReserve(1, 1, 1)
    if scope.alias_leases and m.ledger.next_allocation <= scope.alias_leases:
        alias = len(scope.capacities) + 1
        for h in holders:
            for n in scope.nbytes:
                yield A.RecordCommitted(h, alias, Tier.DEVICE, n, Role.STATE)
    if m.ledger.next_allowance <= scope.allowances:
        for h in holders:
            yield A.OpenAllowance(h, 1, 1)
    for w in sorted(m.ledger.allowances.values(), key=lambda w: w.id):
        yield A.ReserveGrowth(w.holder, w.id, 1)
        yield A.MapAllowance(w.holder, w.id, 1)
        yield A.UnmapAllowance(w.holder, w.id, 1)
        yield A.CloseAllowance(w.holder, w.id)
    if scope.uses:
        for r in free:
            yield M.SetUse(r.holder, r.id, r.id not in m.uses, False)  # pin an idle lease; unpin a pinned one
    if m.next_pressure <= scope.pressures:
        for h in holders:
            for a in auths:
                yield M.Press(h, a, 1, 0, scope.deadline)
    times = (None,) if scope.deadline is None else (scope.deadline, scope.deadline + 1)  # on time; late
    for pid in sorted(m.pressures):
        p = m.pressures[pid]
        for now in times:
            yield M.Answer(p.holder, pid, (), now)
            for r in free:
                if r.holder == p.holder and r.authority == p.authority:
                    yield M.Answer(p.holder, pid, (r.id,), now)
        yield M.CancelPressure(pid)
        if scope.deadline is not None:
            yield M.ExpirePressure(pid, scope.deadline + 1)
    for a in auths:
        if m.generations.get(a, 0) < scope.generations:
            yield M.Reconfigure(a)
    if m.next_tx <= scope.txs:
        for h in holders:
            for needs in scope.needs:
                yield M.PlanTx(h, needs)
                if scope.retries:
                    for iid in sorted(i.id for i in m.intents.values() if i.holder == h):
                        yield M.PlanTx(h, needs, 0, iid)
    for xid in sorted(m.txs):
        yield M.ReserveTx(xid)
        yield M.CommitTx(xid)
        yield M.AbortTx(xid)
        if m.txs[xid].bundle is None:
            for bid in sorted(m.bundles):
                yield M.JoinBundle(xid, bid)
    for bid in sorted(m.bundles):
        if not m.bundles[bid].poisoned:
            yield M.ReportMismatch(bid)
    if scope.views:
        for xid in sorted(m.txs):
            yield M.PublishView(xid)
        for vid in sorted(m.views):
            v = m.views[vid]
            for xid in sorted(m.txs):
                for gen in range(1, v.generation + 1):
                    yield M.ExecuteView(xid, vid, gen)
            if v.generation < scope.views:
                yield M.RemapView(vid)
            yield M.DropView(vid)
    if scope.corruption and not m.poisoned:
        yield M.CorruptLedger()
    for a in auths:
        if scope.losses:
            yield A.LoseDevice(a)
            yield A.ConfirmTermination(a)
        if scope.limits:
            if m.next_pressure <= scope.pressures:
                yield M.PrepareLimit(a, 1)
                yield M.PrepareLimit(a, scope.capacities[a - 1])
            yield M.CommitLimit(a)
        if scope.removals:
            yield M.RemoveAuthority(a)
    for q in scope.quotas:
        yield M.SetProcessQuota(Tier.DEVICE, q)
    if scope.unregisters:
        yield from (M.UnregisterHolder(h) for h in sorted(m.ledger.holders.keys()))


def control_model(off: GuardSet) -> Model:
    """The composed spec with the guards `off` switched off, in the scope of that guard's control (`CONTROLS`)."""
    name = next(iter(off.off)) if len(off.off) == 1 else None
    return manager_model(off, CONTROLS.get(name, QUICK_SCOPE))


def manager_model(guards: GuardSet = ALL_ON, scope: ManagerScope = QUICK_SCOPE, *, incremental: bool = True,
                  memo: bool = False, symmetry: bool = False, name: str = "manager") -> Model:
    """The composed spec as an explorable model (guards as given, every manager and ledger predicate checked).

    `incremental` skips a predicate group on inputs it already passed on (`invariants.explore_checks`: the same
    verdicts, asserted over whole scopes in tests/test_explore_fast.py); False runs the full registries each time.
    `memo` computes each step once per (action, the parts of the state it reads) (`invariants.explore_memo`: the
    same successors, results and errors, asserted over whole scopes in tests/test_explore_memo.py). Off by
    default (`ortmem verify` runs without it): a read the scope never varies (the aging bound; `txs` for a
    `Release`) cannot be confirmed by that comparison, and a verifier must not trust an unconfirmed footprint.
    `symmetry` keeps one state per orbit of interchangeable holders and authorities
    (`invariants.explore_symmetry`, whose docstring gives the soundness argument).
    """
    checks = IncrementalChecks() if incremental else None
    check_state = checks.check_state if checks is not None else IM.check_all
    judge_step = checks.check_step if checks is not None else IM.check_step

    def plain(s: M.Manager, act: Any) -> tuple[M.Manager, Any]:
        return MG.step(s, act, guards)

    stepper = MemoStep(plain, (GovernorError,)) if memo else plain
    last: list[Any] = [None, None, None]  # (state, action, result) of the latest accepted step

    def step(s: M.Manager, act: Any) -> M.Manager:
        nxt, result = stepper(s, act)
        last[:] = (s, act, result)
        return nxt

    def check_step(s: M.Manager, act: Any, n: M.Manager) -> None:
        # The explorer checks a step right after taking it: reuse its result instead of stepping again.
        result = last[2] if last[0] is s and last[1] is act else MG.step(s, act, guards)[1]
        judge_step(s, act, n, result)

    return Model(
        name=name,
        initial=manager_start(scope),
        step=step,
        actions=lambda s: manager_actions(scope, s),
        check_state=check_state,
        check_step=check_step,
        rejects=(GovernorError,),
        key=manager_symmetry(scope.holders, scope.capacities, scope.needs, scope.limits).key if symmetry else None,
    )

