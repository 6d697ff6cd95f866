"""Harm clauses of the composed manager's retry intents (C4) and poisoning (I5).

A transaction's arbitration identity (submit sequence, priority, age) is its
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

from invariants.clauses import clause
from spec import manager_actions as M
from spec.tickets import TicketState

__all__ = ["state_C4_intents", "step_C4_intents", "step_I5_poisoned"]

_C4_ONE_PLACE = clause("C4", "state_C4_intents", "one_place_per_request",
                       "no two live transactions or retry intents share a submit sequence: a request holds one "
                       "place in arbitration, never two")
_C4_KEPT = clause("C4", "step_C4_intents", "retry_keeps_place",
                  "a retried transaction keeps its place: its intent's submit sequence and priority, no younger "
                  "than the intent, and the intent is spent")
_C4_LEFT = clause("C4", "step_C4_intents", "abort_leaves_place",
                  "an aborted transaction's place outlives it at zero bytes: an intent with its holder, submit "
                  "sequence and priority, one abort older up to the aging bound")
_I5_POISONED = clause("I5", "step_I5_poisoned", "poisoned_grants_nothing",
                      "while the manager is poisoned no new charge is granted: no allocation is created and no "
                      "ticket becomes granted")


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


_I5_ONE_BUNDLE = clause("I5", "step_I5_poisoned", "mismatch_poisons_one_bundle",
                        "a post-commit mismatch poisons the bundle that disagreed and no other: every other "
                        "bundle's engine keeps its state (the failure scope is the smallest rebuildable unit)")


def step_I5_poisoned(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    hit = [b.id for b in after.bundles.values() if b.poisoned
           and (b.id not in before.bundles or not before.bundles[b.id].poisoned)]
    _I5_ONE_BUNDLE.case(bool(hit))
    others = [bid for bid in hit if not (isinstance(act, M.ReportMismatch) and bid == act.bundle)]
    if others:
        _I5_ONE_BUNDLE.fail(f"{act!r} poisoned bundle(s) {others}, which reported no mismatch")
    _I5_POISONED.case(before.poisoned)
    if not before.poisoned:
        return
    new = [i for i in after.ledger.allocations if i not in before.ledger.allocations]
    granted = [t.id for t in after.tickets.values() if t.state is TicketState.GRANTED
               and (t.id not in before.tickets or before.tickets[t.id].state is not TicketState.GRANTED)]
    if new or granted:
        _I5_POISONED.fail(f"{act!r} on a poisoned manager created allocation(s) {new} and granted ticket(s) "
                          f"{granted}")
