"""Incremental checks for the explorer: a predicate is re-evaluated only when what it reads changed.

The composed manager's predicates (`invariants.manager`) are one registry, but
most of them read only a part of the state: the ledger's own predicates read
`m.ledger` (state) or `(before.ledger, act, after.ledger)` (step), and two
cross-cutting step predicates (C3, I2) read the same three. Many manager
steps (a ticket submitted, a pressure answered with nothing) leave the ledger
as it was, and many ledger transitions recur under different tickets around
them, so the explorer would judge the same ledger, or the same ledger step,
again and again. The cross-cutting predicates read the ledger with the parts
that hold its bytes (`parts_of`, `parts_step_of`: I1, I13, I6) or the
transactions and bundles (`bundles_step_of`: I10), which recur as well.

`READS` declares, per predicate, the projection of its arguments it is a pure
function of. `IncrementalChecks` keeps, per projection, the inputs on which
that predicate group already passed, and skips the group on a repeat: the
verdict is the same because the inputs are. A predicate not in `READS` is
evaluated every time (the safe default for one added later). Evaluation order
is the registry's, so the first failing clause is the one the full check
reports; a failure is never remembered (the explorer stops at it).

Clause counting (`recording`) and collecting count evaluations, which a skip
would change: while either is active, the full `conjunction` runs instead.

Pure; reads spec values only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from invariants import manager as IM
from invariants.clauses import counting
from invariants.manager_answers import step_C5_answers
from invariants.manager_holders import step_I4a_holders
from invariants.manager_quota import step_I1_quota
from invariants.manager_tickets import state_I1_tickets
from invariants.manager_order import step_I13_order
from invariants.manager_tx import state_C4_holds, state_C4_intents, step_C4_intents, step_I5_abort, step_I5_poisoned
from spec import manager_actions as M

__all__ = ["READS", "IncrementalChecks", "ledger_of", "ledger_step_of", "parts_of", "parts_step_of", "order_step_of",
           "holders_step_of", "answers_step_of",
           "bundles_step_of", "parts_uses_step_of", "removal_step_of", "pressure_step_of", "tickets_step_of",
           "generations_of", "tickets_of", "views_of", "views_step_of", "view_bytes_step_of", "intents_of",
           "intents_step_of", "poisoned_step_of"]


def ledger_of(m: Any) -> Hashable:
    return m.ledger


def ledger_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    return before.ledger, act, after.ledger


def removal_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the C3 step predicate reads: both ledgers and the action; where an authority was removed, also the
    after-parts that could still name it (tickets, pressures, limit changes, transactions)."""
    base = ledger_step_of(before, act, after)
    if any(aid not in after.ledger.authorities for aid in before.ledger.authorities):
        return base, after.tickets, after.pressures, after.changes, after.txs
    return base


def parts_of(m: Any) -> Hashable:
    """What the cross-cutting state predicates read: the ledger and the parts that hold its bytes."""
    return m.ledger, m.tickets, m.txs, m.aging_bound, m.quotas  # I13's room is quota-aware (`manager_quota.room`)


_NAMES_TICKET = (M.CancelTicket, M.TimeoutTicket)
_NAMES_TX = (M.ReserveTx, M.CommitTx, M.AbortTx, M.JoinBundle)


def parts_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the crediting and charge-falling step predicates read (I1, I6): both ledgers, the action, its result,
    and the before-record of the ticket or transaction the action names (what it retires, and whose holder acts);
    the other tickets and transactions are not read."""
    if isinstance(act, _NAMES_TICKET):
        named = before.tickets.get(act.ticket)
    elif isinstance(act, _NAMES_TX):
        named = before.txs.get(act.tx)
    else:
        named = None
    return before.ledger, act, after.ledger, named, result


def parts_uses_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """`parts_step_of` and the before-use flags (I6: a pinned or in-flight lease is never a victim)."""
    return parts_step_of(before, act, after, result), before.uses


def pressure_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the stale-answer predicate reads (C5): act, the pressure it names, the generations, both ledgers."""
    named = before.pressures.get(act.pressure) if isinstance(act, M.Answer) else None
    return act, named, before.generations, before.ledger, after.ledger


def tickets_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the allocator-path predicate reads (I13): act, the before-tickets, both ledgers, the result."""
    return act, before.tickets, before.ledger, after.ledger, result


def order_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What grant order and aging read (I13): both ticket tables, who was new, the ledger after, the bound."""
    return act, before.tickets, before.next_ticket, after.tickets, after.ledger, after.aging_bound, after.quotas


def quota_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the quota clause reads (I1): the action, both ledgers' authorities and both quota maps."""
    return act, before.ledger.authorities, before.quotas, after.ledger.authorities, after.quotas


def answers_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What a press's and an answer's harms read (C5): both ledgers, tickets and transactions, the result."""
    return act, before.ledger, after.ledger, before.tickets, after.tickets, before.txs, after.txs, result


def generations_of(m: Any) -> Hashable:
    """What the generation state predicate reads (I13): tickets and generations."""
    return m.tickets, m.generations


def tickets_of(m: Any) -> Hashable:
    """What the live-ticket state predicate reads (I1): the ticket table."""
    return m.tickets


def views_of(m: Any) -> Hashable:
    """What the model views' state predicates read (C4, C6): the views and the transactions."""
    return m.views, m.txs


def views_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the remap and drop step predicate reads (I9): both views maps, the action, the live transactions after."""
    return before.views, act, after.views, after.txs


def view_bytes_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the view-bytes and fresh-name step predicate reads (C6): both views maps and next view ids, the action,
    the before and after records of the allocations the views are over."""
    was, now = before.ledger.allocations, after.ledger.allocations
    under = tuple((v.allocation, was.get(v.allocation), now.get(v.allocation)) for v in before.views.values())
    return before.views, act, after.views, under, before.next_view, after.next_view


def bundles_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the bundle step predicate reads (I10): the transactions and bundles, the action, and the before and
    after records of the allocations a transaction in a bundle holds (whether its bytes became leases)."""
    was, now = before.ledger.allocations, after.ledger.allocations
    held = tuple((a, was.get(a), now.get(a)) for x in before.txs.values() if x.bundle is not None for a in x.held)
    return before.txs, before.bundles, act, after.txs, after.bundles, held


def intents_of(m: Any) -> Hashable:
    """What the one-place state predicate reads (C4): the transactions and intents (their sequences)."""
    return m.txs, m.intents


def intents_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the retry-intent step predicate reads (C4): act, result, both txs and intents maps, the aging bound."""
    return act, result, before.txs, before.intents, after.txs, after.intents, before.aging_bound


def holds_of(m: Any) -> Hashable:
    """What the circular-holding state predicate reads (C4): the open transactions and, if any, the authorities."""
    return (m.txs, m.ledger.authorities) if m.txs else ()


def abort_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the abort step predicate reads (I5): for an abort, the action, the before-txs, the after-allocation ids."""
    if not isinstance(act, M.AbortTx):
        return ()
    return act, before.txs, frozenset(after.ledger.allocations)


def poisoned_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the poisoning step predicate reads (I5): both bundles maps and the mismatch report naming one; whether
    the manager was poisoned before; if so, both allocation id sets and both tickets maps."""
    scope = before.bundles, after.bundles, act if isinstance(act, M.ReportMismatch) else None
    if not before.poisoned:
        return scope
    return (scope, frozenset(before.ledger.allocations), frozenset(after.ledger.allocations), before.tickets,
            after.tickets)


def holders_step_of(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    """What the holder-lifetime step predicate reads (I4a): both registries; if they differ, every record of after
    that names a holder (an unchanged registry passes whatever the records are)."""
    if before.ledger.holders == after.ledger.holders:
        return ()
    led = after.ledger
    return (act, before.ledger.holders, led.holders, led.allocations, led.allowances, after.tickets, after.pressures,
            after.txs, after.intents)


def _reads() -> dict[Callable[..., None], Callable[..., Hashable]]:
    out: dict[Callable[..., None], Callable[..., Hashable]] = {}
    for preds in IM.STATE_PREDICATES.values():
        for p in preds:
            if hasattr(p, "__wrapped__"):  # `invariants.manager._on_ledger_state`: p(m.ledger)
                out[p] = ledger_of
    for preds in IM.STEP_PREDICATES.values():
        for p in preds:
            if hasattr(p, "__wrapped__"):  # `_on_ledger_step`: p(before.ledger, act, after.ledger) (I6 by act type)
                out[p] = ledger_step_of
    # Both ledgers and act (C3: loss, termination; and the parts, on a removal).
    out[IM.step_C3_manager] = removal_step_of
    out[IM.step_I2_manager] = ledger_step_of
    # I1 (partition, grants and transactions backed by reservations): ledger, tickets, txs. I13: tickets, the
    # ledger's headroom and the aging bound (grant order).
    out[IM.state_I1_manager] = parts_of
    out[IM.state_I13_manager] = parts_of
    out[IM.state_C3_manager] = parts_of  # C3 (no work on a lost context): the contexts, the transactions' needs
    # I1 (credit once): act, the before-tickets and -txs it retires, both ledgers' allocations, the result.
    # I6: both ledgers' charges, act, the before-txs (a transaction's holder).
    out[IM.step_I1_manager] = parts_step_of
    out[IM.step_I6_manager] = parts_uses_step_of  # and the before-use flags (pinned victims)
    # C5: act, the pressure it answers, generations, both ledgers. I13 (allocator): act, tickets, ledgers, result.
    out[IM.step_C5_manager] = pressure_step_of
    out[IM.step_I13_manager] = tickets_step_of
    out[step_I13_order] = order_step_of
    out[step_C5_answers] = answers_step_of
    out[IM.state_I13_generation] = generations_of
    out[state_I1_tickets] = tickets_of  # `invariants.manager_tickets`
    # I10: act, the before-txs (its bundle), the after-txs (committed), both bundles maps.
    out[IM.step_I10_manager] = bundles_step_of
    # C4, C6 (model views): the views and the transactions that own or bind them.
    out[IM.state_C4_views] = views_of
    out[IM.state_C6_views] = views_of
    out[IM.step_I9_views] = views_step_of
    out[IM.step_C6_views] = view_bytes_step_of
    # C4 (retry intents), I5 (poisoned manager): `invariants.manager_tx`.
    out[step_C4_intents] = intents_step_of
    out[state_C4_intents] = intents_of
    out[state_C4_holds] = holds_of
    out[step_I5_abort] = abort_step_of
    out[step_I5_poisoned] = poisoned_step_of
    out[step_I4a_holders] = holders_step_of  # `invariants.manager_holders`
    out[step_I1_quota] = quota_step_of  # `invariants.manager_quota`
    return out


#: predicate -> the projection of its arguments it reads (absent: it reads everything, and always runs).
READS: dict[Callable[..., None], Callable[..., Hashable]] = _reads()


class IncrementalChecks:
    """`check_state` / `check_step` with the verdicts of `invariants.manager.check_all` / `check_step`."""

    def __init__(self, reads: Mapping[Callable[..., None], Callable[..., Hashable]] = READS) -> None:
        self._state = _Plan(IM.STATE_PREDICATES, reads, IM.check_all)
        self._step = _Plan(IM.STEP_PREDICATES, reads, IM.check_step)
        self.evaluated = self.skipped = 0  # predicate groups run / skipped (a measure of what was saved)

    def check_state(self, m: Any) -> None:
        self._run(self._state, (m,))

    def check_step(self, before: Any, act: Any, after: Any, result: Any = None) -> None:
        self._run(self._step, (before, act, after, result))

    def _run(self, plan: "_Plan", args: tuple[Any, ...]) -> None:
        if counting():
            plan.full(*args)
            return
        keys = [proj(*args) for proj in plan.projections]
        fresh = [k not in passed for k, passed in zip(keys, plan.passed_sets)]
        if not any(fresh):
            self.skipped += len(keys)
            for p in plan.always:
                p(*args)
            return
        todo = sum(fresh)
        self.evaluated += todo
        self.skipped += len(keys) - todo
        for p, i in plan.indexed:
            if i is None or fresh[i]:
                p(*args)
        for k, passed, new in zip(keys, plan.passed_sets, fresh):
            if new:
                passed.add(k)


class _Plan:
    """One registry in evaluation order, each predicate tagged with its projection (None: always run)."""

    def __init__(self, table: Mapping[str, tuple[Callable[..., None], ...]],
                 reads: Mapping[Callable[..., None], Callable[..., Hashable]], full: Callable[..., None]) -> None:
        order = [(p, reads.get(p)) for preds in table.values() for p in preds]
        self.projections = list(dict.fromkeys(proj for _, proj in order if proj is not None))
        self.always = [p for p, proj in order if proj is None]
        self.passed_sets: list[set[Hashable]] = [set() for _ in self.projections]  # per projection: inputs passed
        # (predicate, its projection's index in `projections`, None: always run), in evaluation order
        self.indexed = [(p, None if proj is None else self.projections.index(proj)) for p, proj in order]
        self.full = full
