"""The situations a composed manager scope must reach, counted over the steps an exploration accepts.

A complete scope says nothing about a situation it never reaches, so each
situation the issue names (#26: two priorities, the aging bound reached and
passed, a matured misfit granted once capacity returns, repeated overtaking,
and every part acting on a shared authority) is a predicate over one
accepted step `(before, action, after)`, read from the states alone (TLC's
coverage; Hypothesis' `event()`). `counting_features(model)` counts them;
tests/test_explore_scopes.py asserts each is reached in the complete quick
scopes, and `ortmem verify` reports the counts with the run.

Pure; reads spec values only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from invariants.explore import Model
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.quota import quota_left
from spec.tickets import TicketState

__all__ = ["FEATURES", "features", "counting_features"]

_P, _G = TicketState.PENDING, TicketState.GRANTED


def _headroom(m: M.Manager, aid: int) -> int:
    a = m.ledger.authorities[aid]
    return a.limit - a.used


def _pending(m: M.Manager) -> Iterator[M.Ticket]:
    return (t for t in m.tickets.values() if t.state is _P)


def _granted_now(before: M.Manager, after: M.Manager) -> list[M.Ticket]:
    return [t for t in after.tickets.values() if t.state is _G and (
        t.id not in before.tickets or before.tickets[t.id].state is _P)]


def _round_ran(before: M.Manager, act: Any, after: M.Manager, aid: int) -> bool:
    """A round ran on `aid` (`spec.manager._arbitrate`): its headroom rose, or a Submit targeted it."""
    return (isinstance(act, M.Submit) and act.authority == aid) or _headroom(after, aid) > _headroom(before, aid)


def _priorities(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A grant chose between two priorities: granted while a ticket of another priority waits on its authority."""
    return any(u.authority == t.authority and u.priority != t.priority and u.id in after.tickets
               and after.tickets[u.id].state is _P for t in _granted_now(before, after) for u in _pending(before))


def _aging_reached(before: M.Manager, act: Any, after: M.Manager) -> bool:
    return any((before.tickets[t.id].age if t.id in before.tickets else 0) < after.aging_bound <= t.age
               for t in _pending(after))


def _aging_passed(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A matured ticket waits through another round: it was at the bound before the round and still waits."""
    return any(t.age >= before.aging_bound and t.id in after.tickets and after.tickets[t.id].state is _P
               and _round_ran(before, act, after, t.authority) for t in _pending(before))


def _matured_misfit_granted(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A matured ticket that did not fit is granted in a step that returned capacity to its authority."""
    return any(t.age >= before.aging_bound and t.nbytes > _headroom(before, t.authority)
               and _headroom(after, t.authority) + t.nbytes > _headroom(before, t.authority)
               and t.id in after.tickets and after.tickets[t.id].state is _G for t in _pending(before))


def _overtaken_twice(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A ticket still waits while two tickets submitted after it on its authority hold grants (each was granted
    while it waited: it has waited since its submit), one of them granted in this step."""
    new = {t.id for t in _granted_now(before, after)}
    for t in _pending(after):
        later = [u.id for u in after.tickets.values()
                 if u.authority == t.authority and u.id > t.id and u.state is _G]
        if len(later) >= 2 and new & set(later):
            return True
    return False


def _shared(m: M.Manager, aid: int, but: str) -> bool:
    """Another part acts on authority `aid` in `m` (a ticket, a transaction, a pressure, a change, a lease)."""
    parts = {
        "ticket": any(t.authority == aid for t in m.tickets.values()),
        "tx": any(y == aid for x in m.txs.values() for y, _ in x.needs[:len(x.held)]),
        "pressure": any(p.authority == aid for p in m.pressures.values()),
        "lease": any(r.authority == aid and r.state.value == "live" for r in m.ledger.allocations.values()),
    }
    return any(v for k, v in parts.items() if k != but)


def _tx_committed(before: M.Manager, act: Any, after: M.Manager) -> bool:
    if not isinstance(act, M.CommitTx):
        return False
    return any(_shared(before, y, "tx") for y, _ in before.txs[act.tx].needs)


def _ticket_claimed(before: M.Manager, act: Any, after: M.Manager) -> bool:
    return isinstance(act, M.Claim) and _shared(before, before.tickets[act.ticket].authority, "ticket")


def _pressure_answered(before: M.Manager, act: Any, after: M.Manager) -> bool:
    return (isinstance(act, M.Answer) and bool(act.victims) and act.pressure not in after.pressures
            and _shared(before, before.pressures[act.pressure].authority, "pressure"))


def _limit_lowered(before: M.Manager, act: Any, after: M.Manager) -> bool:
    return (isinstance(act, M.CommitLimit) and after.ledger.authorities[act.authority].limit
            < before.ledger.authorities[act.authority].limit and _shared(before, act.authority, ""))


def _device_lost(before: M.Manager, act: Any, after: M.Manager) -> bool:
    return isinstance(act, A.LoseDevice) and after.ledger is not before.ledger and _shared(before, act.authority, "")


def _allowance_mapped(before: M.Manager, act: Any, after: M.Manager) -> bool:
    if not isinstance(act, A.MapAllowance) or after.ledger is before.ledger:
        return False
    return _shared(before, before.ledger.allowances[act.allowance].authority, "")


def _shrink_grants(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A lease shrink returned capacity and the round after it granted a waiter (I1, I13)."""
    return isinstance(act, M.ShrinkLease) and bool(_granted_now(before, after))


def _alias_lease(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A lease taken through an alias charges the canonical authority another part acts on."""
    if not isinstance(act, A.RecordCommitted) or after.ledger is before.ledger:
        return False
    a = before.ledger.authorities[act.authority]
    return a.alias_of is not None and _shared(before, a.alias_of, "lease")


def _committed_view_remapped(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """The view a committed transaction left over its leases is remapped (no execution binds it)."""
    return isinstance(act, M.RemapView) and before.views[act.view].tx not in before.txs


def _committed_view_bound(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A later transaction binds the view a committed transaction left over its leases."""
    return (isinstance(act, M.ExecuteView) and act.view in before.views
            and before.views[act.view].tx not in before.txs)


def _view_invalidated(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A lost device invalidates a view over it that an execution had bound."""
    return isinstance(act, A.LoseDevice) and any(
        v.users and v.id in after.views and after.views[v.id].state is not v.state for v in before.views.values())


def _held_by_quota(m: M.Manager, t: M.Ticket) -> bool:
    """Waiting ticket `t` fits its own ledger but not what its tier's process quota leaves (`spec.quota`)."""
    left = quota_left(m.quotas, m.ledger, m.ledger.authorities[t.authority].tier)
    return t.nbytes <= _headroom(m, t.authority) and left is not None and t.nbytes > left


def _quota_holds_waiter(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A ticket waits that its own ledger has room for: the tier's process quota holds it (I1, I13)."""
    return any(_held_by_quota(after, t) for t in _pending(after))


def _quota_raise_grants(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A process quota raised or removed, and the round it owes granted a waiter."""
    return isinstance(act, M.SetProcessQuota) and bool(_granted_now(before, after))


def _quota_room_elsewhere_grants(before: M.Manager, act: Any, after: M.Manager) -> bool:
    """A waiter the quota held is granted by bytes credited on another ledger of its tier (its own ledger's room did
    not rise; the quota did not change)."""
    if isinstance(act, M.SetProcessQuota):
        return False
    new = [t for t in _granted_now(before, after) if t.id in before.tickets]
    return any(_held_by_quota(before, before.tickets[t.id])
               and _headroom(after, t.authority) + sum(u.nbytes for u in new if u.authority == t.authority)
               <= _headroom(before, t.authority) for t in new)


#: name -> predicate over an accepted step (before, action, after).
FEATURES: dict[str, Callable[[M.Manager, Any, M.Manager], bool]] = {
    "two priorities arbitrated": _priorities,
    "aging bound reached": _aging_reached,
    "aging bound passed": _aging_passed,
    "matured misfit granted after capacity returns": _matured_misfit_granted,
    "overtaken twice": _overtaken_twice,
    "transaction committed on a shared authority": _tx_committed,
    "ticket claimed on a shared authority": _ticket_claimed,
    "pressure answered on a shared authority": _pressure_answered,
    "limit lowered on a shared authority": _limit_lowered,
    "device lost under a part": _device_lost,
    "allowance mapped on a shared authority": _allowance_mapped,
    "alias lease on a shared authority": _alias_lease,
    "lease shrink grants a waiter": _shrink_grants,
    "committed transaction's view remapped": _committed_view_remapped,
    "committed transaction's view bound by a later one": _committed_view_bound,
    "bound view invalidated by a device loss": _view_invalidated,
    "process quota holds a waiter its ledger has room for": _quota_holds_waiter,
    "quota raised or removed grants a waiter": _quota_raise_grants,
    "quota room credited on another ledger grants a waiter": _quota_room_elsewhere_grants,
}


def features(before: M.Manager, act: Any, after: M.Manager) -> list[str]:
    """The named situations the accepted step `before --act--> after` reaches."""
    return [name for name, f in FEATURES.items() if f(before, act, after)]


def counting_features(model: Model) -> tuple[Model, dict[str, int]]:
    """`model` with every step it checks counted by `features` into the returned dict (each name, from 0)."""
    counts = dict.fromkeys(FEATURES, 0)
    check = model.check_step

    def counted(before: Any, act: Any, after: Any) -> None:
        check(before, act, after)
        for name in features(before, act, after):
            counts[name] += 1
    return attrs.evolve(model, check_step=counted), counts
