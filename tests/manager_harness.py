"""Shared helpers of the composed-manager tests: a small start, a checked step, whole-state expectations."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from attrs import evolve
from clause_harness import judged

from invariants import manager as IM
from invariants.clauses import collecting
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import Allocation
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Origin, Role, Tier

__all__ = ["DEV", "HOST", "H1", "H2", "run", "broken_by", "judged", "clause_counts", "start", "make_alloc", "expect",
           "make_ticket", "lease", "granted", "outcome", "walk", "with_allocs"]

DEV, HOST = 1, 2
H1, H2 = 1, 2
_T = TicketState


def run(m: M.Manager, act: Any, guards: GuardSet = ALL_ON) -> tuple[M.Manager, Any]:
    """One accepted step, judged by every manager and ledger clause."""
    nxt, result = MG.step(m, act, guards)
    IM.check_step(m, act, nxt, result)
    IM.check_all(nxt)
    return nxt, result


def broken_by(m: M.Manager, act: Any, guards: GuardSet) -> tuple[M.Manager, list[str]]:
    """One step with `guards`; every clause it breaks (step and state)."""
    nxt, result = MG.step(m, act, guards)
    with collecting() as found:
        IM.check_step(m, act, nxt, result)
        IM.check_all(nxt)
    return nxt, found


def clause_counts(pred: Any, *args: Any) -> dict[str, tuple[int, int]]:
    """`pred` on `args`, which must hold: its clauses' (evaluated, case held)."""
    message, counts = judged(pred, *args)
    assert message is None, message
    return counts


def start(dev: int = 4, host: int = 4, aging_bound: int = 4) -> M.Manager:
    m = M.initial(aging_bound)
    for act in (A.RegisterAuthority("dev", Tier.DEVICE, dev), A.RegisterAuthority("host", Tier.HOST, host),
                A.RegisterHolder("h1"), A.RegisterHolder("h2")):
        m = run(m, act)[0]
    return m


def granted() -> M.Manager:
    """`start()` after holder 1's 3 B ticket on DEV, granted at once."""
    return run(start(), M.Submit(H1, DEV, 3))[0]


def with_allocs(m: M.Manager, allocs: Any, used: int | None = None) -> M.Manager:
    """`m` with the ledger's allocations `allocs` (and DEV's used bytes `used`, if given), nothing else."""
    auths = m.ledger.authorities
    if used is not None:
        auths = auths.set(DEV, evolve(auths[DEV], used=used))
    return evolve(m, ledger=evolve(m.ledger, allocations=allocs, authorities=auths))


def make_alloc(id: int, auth: int, holder: int, nbytes: int, state: AllocState = AllocState.PROVISIONAL,
           role: Role = Role.STAGING) -> Allocation:
    tier = Tier.DEVICE if auth == DEV else Tier.HOST
    return Allocation(id, auth, holder, tier, role, nbytes, nbytes, nbytes, state, Origin.GRANTED)


def expect(prev: M.Manager, *, used: dict[int, int] | None = None, limit: dict[int, int] | None = None,
            context: dict[int, ContextState] | None = None, allocs: dict[int, Allocation | None] | None = None,
            tickets: dict[int, M.Ticket | None] | None = None, txs: dict[int, M.Tx | None] | None = None,
            pressures: dict[int, M.Pressure | None] | None = None,
            changes: dict[int, M.LimitChange | None] | None = None,
            intents: dict[int, M.Intent | None] | None = None, **counters: int) -> M.Manager:
    """`prev` with exactly the named changes (None deletes)."""
    def patch(mp: Any, diff: dict | None) -> Any:
        for k, v in (diff or {}).items():
            mp = mp.delete(k) if v is None else mp.set(k, v)
        return mp

    auths = prev.ledger.authorities
    for field, diff in (("used", used), ("limit", limit), ("context", context)):
        for aid, v in (diff or {}).items():
            auths = auths.set(aid, evolve(auths[aid], **{field: v}))
    ledger_counters = {k: counters.pop(k) for k in list(counters) if k == "next_allocation"}
    ledger = evolve(prev.ledger, authorities=auths, allocations=patch(prev.ledger.allocations, allocs),
                    **ledger_counters)
    return evolve(prev, ledger=ledger, tickets=patch(prev.tickets, tickets), txs=patch(prev.txs, txs),
                  pressures=patch(prev.pressures, pressures), changes=patch(prev.changes, changes),
                  intents=patch(prev.intents, intents), **counters)


def make_ticket(id: int, holder: int, auth: int, nbytes: int, state: TicketState, age: int,
            allocation: int | None = None, priority: int = 0) -> M.Ticket:
    return M.Ticket(id, holder, auth, nbytes, priority, Role.STAGING, age, state, allocation)


def lease(m: M.Manager, holder: int, auth: int, nbytes: int) -> tuple[M.Manager, int]:
    m, tid = run(m, M.Submit(holder, auth, nbytes))
    return run(m, M.Claim(holder, tid))


def outcome(step: Callable[[Any, Any], tuple[Any, Any]], s: Any, act: Any) -> tuple:
    """("accepted", next state, result type, result) or ("rejected", error type, message)."""
    try:
        nxt, result = step(s, act)
    except GovernorError as e:
        return ("rejected", type(e), str(e))
    return ("accepted", nxt, type(result), result)


def walk(start: Any, actions: Callable[[Any], Iterator[Any]], step: Callable[[Any, Any], tuple[Any, Any]],
         depth: int) -> Iterator[tuple[Any, Any, tuple]]:
    """Breadth-first from `start`, as the explorer goes: every (state, action, outcome) within `depth` steps."""
    seen, frontier = {start}, deque([(start, 0)])
    while frontier:
        s, d = frontier.popleft()
        if d >= depth:
            continue
        for act in actions(s):
            o = outcome(step, s, act)
            yield s, act, o
            if o[0] == "accepted" and o[1] not in seen:
                seen.add(o[1])
                frontier.append((o[1], d + 1))
