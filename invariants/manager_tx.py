"""Harm clauses of the composed manager's transactions: holds (C4), retry intents (C4), aborts and poisoning (I5).

Transactions reserve try-only; the harm of taking authorities out of a
stable order is a circle of holds: each transaction holds an authority the
next one needs and cannot get now, so none finishes without another's abort
(and, aborting and retrying, they can miss forever). An abort that leaves a
reservation behind keeps bytes charged that nobody holds. A transaction's
arbitration identity (submit sequence, priority, age) is its
place. The harms: an abort throws the place away (the retry queues behind
every newcomer: overtaken without bound), a retry comes back with a newer
sequence, a lower priority or a younger age, or one request holds two places
at once (an intent not spent by its retry). A post-commit mismatch that
poisons bundles other than the one that disagreed (I5). A poisoned manager
(the shared ledger found corrupt) that still grants: a new allocation, a
granted ticket, a transaction's reservation, charged from a ledger known to
be wrong (I5).
Each clause reads the records only, never the guards that prevent it.
Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.changed import changes
from invariants.clauses import clause
from spec import manager_actions as M
from spec.tickets import TicketState

__all__ = ["circle_of_holds", "state_C4_holds", "state_C4_intents", "step_C4_intents", "step_I5_abort", "step_I5_poisoned"]

_C4_CYCLE = clause("C4", "state_C4_holds", "no_circular_holding",
                   "no set of open transactions each holds an authority the next needs and cannot get now: a circle "
                   "of holds that none can finish without another's abort")
_C4_ONE_PLACE = clause("C4", "state_C4_intents", "one_place_per_request",
                       "no two live transactions or retry intents share a submit sequence: a request holds one "
                       "place in arbitration, never two")
_C4_KEPT = clause("C4", "step_C4_intents", "retry_keeps_place",
                  "a retried transaction keeps its place: its intent's submit sequence and priority, no younger "
                  "than the intent, and the intent is spent")
_C4_LEFT = clause("C4", "step_C4_intents", "abort_leaves_place",
                  "an aborted transaction's place outlives it at zero bytes: an intent with its holder, submit "
                  "sequence and priority, one abort older up to the aging bound")
_I5_ABORT = clause("I5", "step_I5_abort", "abort_leaves_no_charge",
                   "an aborted transaction leaves no charge on any ledger: every reservation it held is gone (its "
                   "bytes credited, free for the next grant)")
_I5_POISONED = clause("I5", "step_I5_poisoned", "poisoned_grants_nothing",
                      "while the manager is poisoned no new charge is granted: no allocation is created, no lease "
                      "grows and no ticket becomes granted")


def _blocked_by(m: M.Manager) -> dict[int, set[int]]:
    """Per open transaction whose next need does not fit now, the others holding a reservation on that authority
    (read from the allocation records, not from the needs' order)."""
    allocs, auths = m.ledger.allocations, m.ledger.authorities
    out: dict[int, set[int]] = {}
    for x in m.txs.values():
        if len(x.held) == len(x.needs):
            continue
        aid, n = x.needs[len(x.held)]
        a = auths.get(aid)
        if a is not None and n > a.limit - a.used:
            out[x.id] = {y.id for y in m.txs.values() if y.id != x.id
                         and any(r in allocs and allocs[r].authority == aid for r in y.held)}
    return out


def circle_of_holds(m: M.Manager) -> list[int]:
    """Open transactions in a circle, each blocked by the next (empty: none)."""
    blocked = _blocked_by(m)

    def walk(path: list[int]) -> list[int]:
        for y in sorted(blocked.get(path[-1], ())):
            if y in path:
                return path[path.index(y):]
            if found := walk(path + [y]):
                return found
        return []

    for start in sorted(blocked):
        if found := walk([start]):
            return found
    return []


def state_C4_holds(m: M.Manager) -> None:
    _C4_CYCLE.case(len(m.txs) > 1)
    if len(m.txs) > 1 and (circle := circle_of_holds(m)):
        _C4_CYCLE.fail(f"transactions {circle} each hold an authority the next needs and cannot get: "
                       f"{[(t, m.txs[t].needs, m.txs[t].held) for t in circle]}")


def state_C4_intents(m: M.Manager) -> None:
    _C4_ONE_PLACE.case(bool(m.intents))
    seen: dict[int, str] = {}
    for name, rec in [*((f"transaction {x.id}", x) for x in m.txs.values()),
                      *((f"intent {i.id}", i) for i in m.intents.values())]:
        if rec.seq in seen:
            _C4_ONE_PLACE.fail(f"{name} and {seen[rec.seq]} both hold submit sequence {rec.seq}")
        seen[rec.seq] = name


def step_C4_intents(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    retry = isinstance(act, M.PlanTx) and act.retry is not None and act.retry in before.intents
    _C4_KEPT.case(retry)
    if retry:
        i, x = before.intents[act.retry], after.txs.get(result)
        if x is None or (x.seq, x.priority) != (i.seq, i.priority) or x.age < i.age or i.id in after.intents:
            _C4_KEPT.fail(f"{act!r}: intent {i!r} came back as {x!r}"
                          f"{' and is still there' if i.id in after.intents else ''}")
    aborted = isinstance(act, M.AbortTx) and act.tx in before.txs
    _C4_LEFT.case(aborted)
    if aborted:
        x, i = before.txs[act.tx], after.intents.get(act.tx)
        age = min(x.age + 1, before.aging_bound)
        if i is None or (i.holder, i.seq, i.priority, i.age) != (x.holder, x.seq, x.priority, age):
            _C4_LEFT.fail(f"{act!r}: transaction {x!r} left intent {i!r}, not its place "
                          f"(holder {x.holder}, seq {x.seq}, priority {x.priority}, age {age})")


def step_I5_abort(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    aborted = isinstance(act, M.AbortTx) and act.tx in before.txs and bool(before.txs[act.tx].held)
    _I5_ABORT.case(aborted)
    if not aborted:
        return
    # Records, not `used`: the bytes an abort credits may be granted to a waiting ticket in the same step.
    x = before.txs[act.tx]
    left = [a for a in x.held if a in after.ledger.allocations]
    if left:
        _I5_ABORT.fail(f"{act!r}: transaction {x.id}'s reservation(s) {left} of {list(x.held)} are still charged")


_I5_ONE_BUNDLE = clause("I5", "step_I5_poisoned", "mismatch_poisons_one_bundle",
                        "a post-commit mismatch poisons the bundle that disagreed and no other: every other "
                        "bundle's engine keeps its state (the failure scope is the smallest rebuildable unit)")


def step_I5_poisoned(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    # An unreplaced bundle map (the same object) holds the same records: none newly poisoned, and no walk of them.
    hit = [] if after.bundles is before.bundles else [
        b.id for b in after.bundles.values() if b.poisoned
        and (b.id not in before.bundles or not before.bundles[b.id].poisoned)]
    _I5_ONE_BUNDLE.case(bool(hit))
    others = [bid for bid in hit if not (isinstance(act, M.ReportMismatch) and bid == act.bundle)]
    if others:
        _I5_ONE_BUNDLE.fail(f"{act!r} poisoned bundle(s) {others}, which reported no mismatch")
    _I5_POISONED.case(before.poisoned)
    if not before.poisoned:
        return
    new = [i for i in after.ledger.allocations if i not in before.ledger.allocations]
    grown = [i for i, p, n in changes(before.ledger.allocations, after.ledger.allocations)
             if p is not None and n is not None and n.charge > p.charge]
    granted = [t.id for t in after.tickets.values() if t.state is TicketState.GRANTED
               and (t.id not in before.tickets or before.tickets[t.id].state is not TicketState.GRANTED)]
    if new or grown or granted:
        _I5_POISONED.fail(f"{act!r} on a poisoned manager created allocation(s) {new} and granted ticket(s) "
                          f"{granted}{f', and grew lease(s) {grown}' if grown else ''}")
