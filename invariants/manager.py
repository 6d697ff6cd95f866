"""Cross-cutting predicates of the composed manager (`spec.manager_actions.Manager`), as named clauses.

Where the parts meet on one ledger: every bucket of an authority partitions its `used` (I1); one credit per grant
across cancel, timeout, abort and answer, a shrink credits what its lease loses (I1; a grow: `.manager_grow`); a
holder's charge falls only by its own action or the environment, only its holder's own action changes an allowance,
and a pinned or in-flight lease is never a victim (I6); a changed limit is not below what is used (I2); an answer to
a closed or late pressure releases nothing (C5); the allocator path never overtakes a waiter, a matured waiter is
never overtaken, no fitting waiter is left waiting (I13); no holder callback runs under the ledger lock (I7). Model
views (C4, C6, I9): `.manager_views`; grant order, aging (I13): `.manager_order`; answers (C5): `.manager_answers`;
intents (C4), poisoning (I5): `.manager_tx`; device loss, termination and removal (C3): `.manager_devices`; holders
(I4a): `.manager_holders`; a bundle moves exactly with its transaction's commit (I10): `.manager_bundles`; the
ticket table holds live tickets only (I1): `.manager_tickets`.

Each clause states a harm and compares the manager's numbers with an independent reading of the records (sums
recomputed here; grant order from `.manager_order.served_before`, never `spec.arith.arbitration_key`). The ledger's
own predicates (`invariants.ledger`) run on `m.ledger` too, one wrapped predicate per ledger predicate.
Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from invariants import ledger as LP
from invariants.changed import changes
from invariants.clauses import clause, conjunction, counting
from invariants.manager_answers import step_C5_answers
from invariants.manager_bundles import step_I10_manager
from invariants.manager_grow import step_I1_grow
from invariants.manager_devices import state_C3_manager, step_C3_manager
from invariants.manager_holders import step_I4a_holders
from invariants.manager_order import served_before, step_I13_order
from invariants.manager_quota import room, step_I1_quota
from invariants.manager_tickets import state_I1_tickets
from invariants.manager_tx import state_C4_holds, state_C4_intents, step_C4_intents, step_I5_abort, step_I5_poisoned
from invariants.manager_views import state_C4_views, state_C6_views, step_C6_views, step_I9_views
from invariants.step_frames import replaced, selected
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.records import evolve
from spec.tickets import TicketState as _T
from spec.types import AllocState, Origin

__all__ = ["STATE_PREDICATES", "STEP_PREDICATES", "OBSERVATION_PREDICATES", "check_all", "check_step",
           "state_I1_manager", "state_I13_manager", "state_C3_manager", "step_I1_manager", "step_I6_manager",
           "step_C3_manager", "step_I2_manager", "step_I10_manager", "step_C5_manager", "step_I13_manager",
           "state_I13_generation", "observed_I7_manager", "state_I1_tickets"]


# --- I1: one ledger, its buckets partition used -----------------------------------

_I1_PARTITION = clause("I1", "state_I1_manager", "buckets_partition_used",
                       "per authority, granted tickets + transaction-held reservations + every other charge add up "
                       "to used: no byte of one part is lost or counted again by another")
_I1_ONE_PART = clause("I1", "state_I1_manager", "one_part_per_reservation",
                      "no reservation is held by two parts (two tickets, two transactions, or a ticket and a "
                      "transaction), so it cannot be claimed or credited twice")
_I1_TICKET = clause("I1", "state_I1_manager", "granted_ticket_reserved",
                    "a granted ticket's reservation is a provisional one of its own holder, authority and size: "
                    "no grant is backed by someone else's bytes or a lease (by nothing: buckets_partition_used)")
_I1_TX = clause("I1", "state_I1_manager", "tx_held_reserved",
                "a transaction's held bytes are provisional reservations of its holder, on its needs' authorities, "
                "of its needs' sizes, held in order")


def state_I1_manager(m: M.Manager) -> None:
    allocs = m.ledger.allocations
    holders_of: dict[int, list[str]] = {}
    part_bytes: dict[int, int] = {}  # authority -> bytes the parts say they hold
    granted = [t for t in m.tickets.values() if t.state is _T.GRANTED]
    for t in granted:
        # A granted ticket's bytes are promised to it whether or not a reservation backs them.
        part_bytes[t.authority] = part_bytes.get(t.authority, 0) + t.nbytes
        if t.allocation is None:
            continue
        holders_of.setdefault(t.allocation, []).append(f"ticket {t.id}")
        r = allocs.get(t.allocation)
        if r is None or (r.state, r.holder, r.authority, r.charge) != (AllocState.PROVISIONAL, t.holder, t.authority,
                                                                        t.nbytes):
            _I1_TICKET.fail(f"granted ticket {t.id} (holder {t.holder}, authority {t.authority}, {t.nbytes} B) "
                            f"references {r!r}")
    _I1_TICKET.case(bool(granted))
    held = False
    for x in m.txs.values():
        if len(x.held) > len(x.needs):
            _I1_TX.fail(f"transaction {x.id} holds {len(x.held)} reservations for {len(x.needs)} needs")
        for (aid, n), alloc in zip(x.needs, x.held):
            held = True
            holders_of.setdefault(alloc, []).append(f"transaction {x.id}")
            r = allocs.get(alloc)
            if r is None or (r.state, r.holder, r.authority, r.charge) != (AllocState.PROVISIONAL, x.holder, aid, n):
                _I1_TX.fail(f"transaction {x.id} (holder {x.holder}) holds {alloc} for ({aid}, {n} B): {r!r}")
            part_bytes[aid] = part_bytes.get(aid, 0) + n
    _I1_TX.case(held)
    _I1_ONE_PART.case(bool(holders_of))
    for alloc, parts in holders_of.items():
        if len(parts) > 1:
            _I1_ONE_PART.fail(f"allocation {alloc} is held by {', '.join(parts)}")
    rest: dict[int, int] = {}
    for r in allocs.values():
        if r.id not in holders_of:
            rest[r.authority] = rest.get(r.authority, 0) + r.charge
    _I1_PARTITION.case(bool(allocs))
    for a in m.ledger.authorities.values():
        if a.alias_of is not None:
            continue
        total = part_bytes.get(a.id, 0) + rest.get(a.id, 0)
        if total != a.used:
            _I1_PARTITION.fail(f"authority {a.id}: used {a.used} B, but parts hold {part_bytes.get(a.id, 0)} B and "
                               f"other charges are {rest.get(a.id, 0)} B")


# --- I13: no fitting waiter is left waiting ---------------------------------------

_I13_IDLE = clause("I13", "state_I13_manager", "no_idle_fitting_waiter",
                   "no authority leaves its first waiter (in grant order) pending while its bytes fit in limit - "
                   "used (and its tier's process quota left): capacity sits idle while a request starves")
_I13_NOTHING = clause("I13", "state_I13_manager", "pending_holds_nothing",
                      "a waiting ticket holds no reservation: waits hold no bytes")


def state_I13_manager(m: M.Manager) -> None:
    first: dict[int, M.Ticket] = {}
    pending = False
    for t in m.tickets.values():
        if t.state is not _T.PENDING:
            continue
        pending = True
        if t.allocation is not None:
            _I13_NOTHING.fail(f"pending ticket {t.id} holds allocation {t.allocation}")
        f = first.get(t.authority)
        if f is None or served_before(t, f, m.aging_bound):
            first[t.authority] = t
    _I13_NOTHING.case(pending)
    _I13_IDLE.case(bool(first))
    for aid, t in first.items():
        if t.nbytes <= (free := room(m, m.ledger.authorities[aid])):
            _I13_IDLE.fail(f"authority {aid}: ticket {t.id} ({t.nbytes} B) is first in grant order and fits in "
                           f"{free} B, but waits")


# --- I1: exactly one credit per grant -------------------------------------------

_I1_ONCE = clause("I1", "step_I1_manager", "credit_exactly_once",
                  "a cancel, timeout, abort or answer credits exactly the charge of the reservations and leases it "
                  "retires, each still charged before and gone after: no byte is credited twice or not at all")

_CREDITING = (M.CancelTicket, M.TimeoutTicket, M.AbortTx, M.Answer)


def _retired_by(before: M.Manager, act: Any) -> tuple[int, ...]:
    """The allocations `act` retires, read from the before-state's parts."""
    if isinstance(act, (M.CancelTicket, M.TimeoutTicket)):
        t = before.tickets.get(act.ticket)
        return (t.allocation,) if t is not None and t.state is _T.GRANTED and t.allocation is not None else ()
    if isinstance(act, M.AbortTx):
        return before.txs[act.tx].held
    return tuple(act.victims)


_I1_SHRINK = clause("I1", "step_I1_manager", "shrink_credits_what_the_lease_loses",
                    "a lease shrink credits its authority exactly the bytes the lease loses, which are the bytes its "
                    "holder gave back, leaves the lease at least one byte and moves no other charge: a byte credited "
                    "while still leased is granted twice, one lost by the lease but still charged is lost")


def _step_I1_shrink(before: M.Manager, act: Any, after: M.Manager) -> None:
    """The bytes a shrink credits, read from `used` (less what the round after it granted), against the bytes its
    lease lost, read from the lease's records."""
    if not _I1_SHRINK.case(isinstance(act, M.ShrinkLease)):
        return
    was, now = before.ledger.allocations, after.ledger.allocations
    p, n = was.get(act.allocation), now.get(act.allocation)
    if p is None or n is None or n.state is not AllocState.LIVE or n.nbytes < 1:
        _I1_SHRINK.fail(f"{act!r} left no lease of at least one byte: {p!r} -> {n!r}")
        return
    if (lost := p.nbytes - n.nbytes) != act.nbytes:
        _I1_SHRINK.fail(f"{act!r}: the lease lost {lost} B of the {act.nbytes} B its holder gave back")
    granted: dict[int, int] = {}  # per authority, the charge of the reservations the round after it granted
    for i, q, r in changes(was, now):
        if q is None:
            granted[r.authority] = granted.get(r.authority, 0) + r.charge
        elif i != act.allocation:
            _I1_SHRINK.fail(f"{act!r} also moved allocation {i}: {q!r} -> {r!r}")
    for aid, a in after.ledger.authorities.items():
        if (credited := before.ledger.authorities[aid].used - a.used + granted.get(aid, 0)) != (
                lost if aid == p.authority else 0):
            _I1_SHRINK.fail(f"{act!r}: authority {aid} was credited {credited} B; the lease on authority {p.authority} "
                            f"lost {lost} B")


def step_I1_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    _step_I1_shrink(before, act, after)
    step_I1_grow(before, act, after)
    crediting = isinstance(act, _CREDITING)
    _I1_ONCE.case(crediting)
    if not crediting:
        return
    gone = _retired_by(before, act)
    charge = 0
    for i in gone:
        if (r := before.ledger.allocations.get(i)) is None:
            _I1_ONCE.fail(f"{act!r} retires allocation {i}, which was already credited")
        charge += r.charge
        if i in after.ledger.allocations:
            _I1_ONCE.fail(f"{act!r} retired allocation {i}, but it is still charged")
    if result != charge:
        _I1_ONCE.fail(f"{act!r} reports {result!r} B credited; the allocations it retired {list(gone)} charged "
                      f"{charge} B")


# --- I6: a holder's charge falls only by its own action ------------------------------

_I6_OWN = clause("I6", "step_I6_manager", "charge_falls_by_own_action",
                 "no holder's charge falls except by its own action (its ticket, lease, answer or transaction) or "
                 "by the environment (device loss, confirmed termination): no part takes a holder's bytes")

_TX_ACTIONS = (M.ReserveTx, M.CommitTx, M.AbortTx)
_ENVIRONMENT = (A.LoseDevice, A.ConfirmTermination)


def _charges(m: M.Manager, holder: int) -> int:
    return sum(r.charge for r in m.ledger.allocations.values() if r.holder == holder)


def _charge_moves(before: M.Manager, after: M.Manager) -> dict[int, int]:
    """Per holder, how far its total charge moved: summed over the records that changed (the rest move nothing)."""
    out: dict[int, int] = {}
    for _, p, n in changes(before.ledger.allocations, after.ledger.allocations):
        if p is not None:
            out[p.holder] = out.get(p.holder, 0) - p.charge
        if n is not None:
            out[n.holder] = out.get(n.holder, 0) + n.charge
    return out


# A ledger action's allowance changes are judged by the ledger's own I6 (`only_owner_changes_allowance`, wrapped
# below); this clause judges every other action, none of which is an allowance's holder acting on it.
_I6_ALLOWANCE = clause("I6", "step_I6_manager", "allowance_changes_by_own_action",
                       "no allowance changes except by its holder's own allowance action: no part and no device "
                       "loss rewrites or drops a holder's limit, growth or mapped bytes")

_I6_PINNED = clause("I6", "step_I6_manager", "pinned_never_reclaimed",
                    "no pressure answer releases a lease its holder flagged pinned or in flight: that data is in "
                    "use, and reclaiming it corrupts a running execution")


def step_I6_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    answer = isinstance(act, M.Answer)
    # The case: an answer that released a lease (whether or not any was flagged: a correct step never shows one).
    _I6_PINNED.case(answer and any(v not in after.ledger.allocations for v in act.victims))
    flagged = [v for v in act.victims if v in before.uses and any(before.uses[v])] if answer else []
    for v in flagged:
        r = after.ledger.allocations.get(v)
        if r is None or r.state is not AllocState.LIVE:
            _I6_PINNED.fail(f"{act!r} released allocation {v}, flagged (pinned, in flight) = {before.uses[v]}")
    foreign = not isinstance(act, _LEDGER_ACTIONS)
    # The case: a step of no allowance's holder while some allowance exists (it could rewrite one).
    _I6_ALLOWANCE.case(foreign and bool(before.ledger.allowances))
    if foreign:
        for wid, p, n in changes(before.ledger.allowances, after.ledger.allowances):
            if p is not None:
                _I6_ALLOWANCE.fail(f"{act!r} changed holder {p.holder}'s allowance {wid}: {p!r} -> {n!r}")
    fell = sorted([h for h, d in _charge_moves(before, after).items() if d < 0])
    _I6_OWN.case(bool(fell))
    if not fell or isinstance(act, _ENVIRONMENT):
        return
    actor = before.txs[act.tx].holder if isinstance(act, _TX_ACTIONS) else getattr(act, "holder", None)
    for h in fell:
        if h != actor:
            _I6_OWN.fail(f"{act!r} (by {actor!r}) lowered holder {h}'s charge {_charges(before, h)} -> "
                         f"{_charges(after, h)} B")


# --- C5: a late or closed pressure's answer credits nothing --------------------------------

# The harm is bytes leaving the ledger for an answer nobody awaits any more: read from the allocation records
# an answer retired and the pressure record the before-state holds, never from the handler's refusal.
_C5_STALE = clause("C5", "step_C5_manager", "stale_answer_credits_nothing",
                   "no answer releases a holder's bytes for a pressure that is no longer open (answered, cancelled, "
                   "expired), of an older generation than its authority's (reconfigured since), or after that "
                   "pressure's deadline: the requester has moved on and the bytes are lost to the holder for nothing")


def step_C5_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    if not isinstance(act, M.Answer):
        _C5_STALE.case(False)
        return
    was, now = before.ledger.allocations, after.ledger.allocations
    gone = [i for i in act.victims if i in was and i not in now]
    _C5_STALE.case(bool(gone))
    if not gone:
        return
    p = before.pressures.get(act.pressure)
    if p is None:
        _C5_STALE.fail(f"{act!r} released allocations {gone} for pressure {act.pressure}, which was not open")
    if p.generation != before.generations.get(p.authority, 0):
        _C5_STALE.fail(f"{act!r} released allocations {gone} for pressure {p.id} of generation {p.generation}; "
                       f"authority {p.authority} is at {before.generations.get(p.authority, 0)}")
    if p.deadline is not None and (act.now is None or act.now > p.deadline):
        _C5_STALE.fail(f"{act!r} released allocations {gone} at time {act.now} for pressure {p.id} due at "
                       f"{p.deadline}")


# --- I13: no ticket waits under a configuration that is gone ------------------------------------

_I13_GEN = clause("I13", "state_I13_generation", "no_waiter_of_an_older_generation",
                  "no pending ticket waits under an older generation than its authority's: a reconfigure fails "
                  "every older waiter, else a later round grants it bytes of a configuration that no longer exists")


def state_I13_generation(m: M.Manager) -> None:
    stale = [t for t in m.tickets.values() if t.state is _T.PENDING
             and t.generation != m.generations.get(t.authority, 0)]
    _I13_GEN.case(bool(m.generations))
    for t in stale:
        _I13_GEN.fail(f"ticket {t.id} waits at generation {t.generation}; authority {t.authority} is at "
                      f"{m.generations.get(t.authority, 0)}")


# --- I13: the allocator path never overtakes a waiter ----------------------------------------

_I13_TRY = clause("I13", "step_I13_manager", "allocator_never_overtakes_a_waiter",
                  "no try-only request (the allocator path: a new lease or a lease grown) takes bytes of an "
                  "authority on which a ticket is waiting: the waiter would be overtaken by every allocation, round "
                  "after round")
_I13_MATURED = clause("I13", "step_I13_manager", "matured_not_overtaken",
                      "once a waiting ticket has matured (its age reached the aging bound), no ticket submitted after "
                      "it on its authority is granted while it still waits: returned capacity accumulates for it, "
                      "else later, smaller requests overtake it round after round")


def step_I13_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    _step_I13_matured(before, act, after)
    if not _I13_TRY.case(isinstance(act, (M.TryReserve, M.GrowLease))):
        return
    # Every try-only charge, a new lease or a lease grown (a correct step never shows a waiter behind it).
    if isinstance(act, M.GrowLease):
        p, r = before.ledger.allocations.get(act.allocation), after.ledger.allocations.get(act.allocation)
        if p is None or r is None:
            return  # no lease grew (a lease gone: step_I1_manager.grow_charges_what_the_lease_gains)
        aid, took = p.authority, r.charge - p.charge
    else:
        r = after.ledger.allocations.get(result) if type(result) is int else None
        if r is None or r.id in before.ledger.allocations:
            return
        aid, took = act.authority, r.charge
    waiting = [t.id for t in before.tickets.values() if t.authority == aid and t.state is _T.PENDING]
    if waiting and took > 0:
        _I13_TRY.fail(f"{act!r} took {took} B as allocation {r.id} while tickets {waiting} wait")


def _step_I13_matured(before: M.Manager, act: Any, after: M.Manager) -> None:
    matured = [t for t in after.tickets.values() if t.state is _T.PENDING and t.age >= after.aging_bound]
    if not _I13_MATURED.case(bool(matured)):
        return
    granted = [t for t in after.tickets.values() if t.state is not _T.PENDING
               and (t.id not in before.tickets or before.tickets[t.id].state is _T.PENDING)]
    for w in matured:
        ahead = sorted(g.id for g in granted if g.authority == w.authority and g.id > w.id)
        if ahead:
            _I13_MATURED.fail(f"{act!r}: matured ticket {w.id} ({w.nbytes} B, priority {w.priority}, age {w.age}) "
                              f"waits on authority {w.authority} while later ticket(s) {ahead} were granted")


# --- I7: no holder callback runs under the ledger lock ---------------------------------------

_I7_UNLOCKED = clause("I7", "observed_I7_manager", "callback_without_ledger_lock",
                      "no holder callback runs while its caller holds the ledger lock: a callback that re-enters the "
                      "governor (to answer or release) would deadlock, and every other thread waits on it")


def observed_I7_manager(deliveries: Sequence[tuple[int, int, int, bool]]) -> None:
    """`deliveries`: (holder, pressure, target, ledger lock held by the calling thread) per callback one step ran."""
    for holder, pressure, _target, held in deliveries if _I7_UNLOCKED.case(bool(deliveries)) else ():
        if held:
            _I7_UNLOCKED.fail(f"holder {holder}'s callback for pressure {pressure} ran while its caller held the "
                              f"ledger lock")


# --- I2: a changed limit still backs every grant ---------------------------------------------

# What is lost, not the guard's comparison: counted from the allocation records (not `used`), granted only.
_I2_LIMIT = clause("I2", "step_I2_manager", "limit_backs_every_grant",
                   "no limit change leaves an authority granting bytes it cannot back: the new limit stays within "
                   "the pool's capacity (or grants could take bytes the device does not have), and the bytes it "
                   "already granted (reservations and leases charged before they existed; bytes recorded after "
                   "the fact excepted) stay within the new limit")


_I2_GRANT = clause("I2", "step_I2_manager", "grant_within_limit",
                   "no step that charges an authority (a grant, a claim, a transaction's reservation) leaves it past "
                   "its limit; only recorded (already taken) bytes may oversubscribe")


def step_I2_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    was, now = before.ledger.authorities, after.ledger.authorities
    rose, changed = [], []  # one walk of the authorities the step replaced (none when the map is the same)
    for x in now.values() if now is not was else ():
        if (p := was.get(x.id)) is not None and p is not x and x.used > p.used:
            rose.append(x)
        if p is not None and p is not x and x.limit != p.limit:
            changed.append(x)
    _I2_GRANT.case(bool(rose) and not isinstance(act, A.RecordCommitted))
    if not isinstance(act, A.RecordCommitted):
        for x in rose:
            if x.used > x.limit:
                _I2_GRANT.fail(f"{act!r}: authority {x.id} charged {before.ledger.authorities[x.id].used} -> "
                               f"{x.used} B past its {x.limit} B limit")
    _I2_LIMIT.case(bool(changed))
    for x in changed:
        granted = sum(r.charge for r in after.ledger.allocations.values()
                      if r.authority == x.id and r.origin is Origin.GRANTED)
        if granted > x.limit or x.limit > x.capacity:
            _I2_LIMIT.fail(f"{act!r}: authority {x.id}'s limit moved to {x.limit} B with {granted} B granted on a "
                           f"{x.capacity} B pool")


# --- the ledger's own predicates, on the one ledger ------------------------------------

_LEDGER_ACTIONS = (A.RegisterAuthority, A.RegisterAlias, A.RegisterHolder, A.Reserve, A.Commit, A.Cancel,
                   A.Release, A.Quarantine, A.RecordCommitted, A.ConfirmTermination, A.OpenAllowance,
                   A.ReserveGrowth, A.MapAllowance, A.UnmapAllowance, A.TransferAllowance, A.CloseAllowance)


def _on_ledger_state(p: Callable[[Any], None]) -> Callable[[M.Manager], None]:
    def run(m: M.Manager) -> None:
        p(m.ledger)
    run.__name__, run.__wrapped__ = f"ledger_{p.__name__}", p  # type: ignore[attr-defined]
    return run


def _on_ledger_step(p: Callable[[Any, Any, Any], None]) -> Callable[..., None]:
    # The ledger's I6 reads `act.holder`; a part's or the environment's action is judged by step_I6_manager.
    ledger_only = p is LP.step_I6

    def run(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
        if ledger_only and not isinstance(act, _LEDGER_ACTIONS):
            return
        ledger = before.ledger
        if isinstance(act, M.RemoveAuthority) and act.authority in ledger.authorities:
            # A removal is no change of the ledger's identity (C1): it is judged by step_C3_manager.
            kept = {k: v for k, v in ledger.authorities.items() if k != act.authority}  # a Map, or a partial view's dict
            ledger = evolve(ledger, authorities=type(ledger.authorities)(kept))
        p(ledger, act, after.ledger)
    run.__name__, run.__wrapped__ = f"ledger_{p.__name__}", p  # type: ignore[attr-defined]
    if ledger_only:
        run.judges = _LEDGER_ACTIONS  # type: ignore[attr-defined]  # `invariants.step_frames.selected` reads it
    return run


def _merge(own: dict[str, tuple], ledger: dict[str, tuple], wrap: Callable) -> dict[str, tuple]:
    out = {id: tuple(wrap(p) for p in preds) for id, preds in ledger.items()}
    for id, preds in own.items():
        out[id] = out.get(id, ()) + preds
    return out


STATE_PREDICATES: dict[str, tuple[Callable[[M.Manager], None], ...]] = _merge(
    {"I1": (state_I1_manager, state_I1_tickets), "I13": (state_I13_manager, state_I13_generation), "C3": (state_C3_manager,),
     "C4": (state_C4_views, state_C4_holds, state_C4_intents), "C6": (state_C6_views,)}, LP.STATE_PREDICATES,
    _on_ledger_state)

STEP_PREDICATES: dict[str, tuple[Callable[..., None], ...]] = _merge(
    {"I1": (step_I1_manager, step_I1_quota), "I6": (step_I6_manager,), "C3": (step_C3_manager,), "I2": (step_I2_manager,),
     "I10": (step_I10_manager,), "C5": (step_C5_manager, step_C5_answers),
     "I13": (step_I13_manager, step_I13_order), "I9": (step_I9_views,), "C6": (step_C6_views,),
     "C4": (step_C4_intents,), "I5": (step_I5_abort, step_I5_poisoned), "I4a": (step_I4a_holders,)},
    LP.STEP_PREDICATES, _on_ledger_step)


#: Predicates over what the adapter observed outside the abstract state during one step (a lock probe).
OBSERVATION_PREDICATES: dict[str, tuple[Callable[..., None], ...]] = {"I7": (observed_I7_manager,)}


def check_all(m: M.Manager) -> None:
    """Inv: every manager and ledger state predicate."""
    conjunction(STATE_PREDICATES, m)


#: (action class, parts replaced) -> the step predicates such a step can make fail (`invariants.step_frames`).
_PLANS: dict[tuple[type, int], tuple[Callable[..., None], ...]] = {}


def check_step(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    """Next: every manager and ledger step predicate for one accepted action and its result; those the step
    cannot make fail (it replaced nothing they judge, `invariants.step_frames`) pass unevaluated, unless clauses are
    being counted or collected (every evaluation is then counted)."""
    if counting():
        conjunction(STEP_PREDICATES, before, act, after, result)
        return
    key = (type(act), replaced(before, after))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = selected(tuple(p for preds in STEP_PREDICATES.values() for p in preds), *key)
    for p in plan:
        p(before, act, after, result)
