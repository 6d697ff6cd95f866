"""The seeded synthetic workload of `ortmem trace`: every part of the manager, then settled.

Drives one `ProcessMemoryManager` (with a trace sink) through ledger
leases (reserve / commit / cancel, recorded commits, quarantine),
allowances (growth, map, transfer, unmap, close; some stay open across
later steps and a device loss), an alias, ledger verbs by any holder on
any lease or allowance in any state (mostly refused), requester
tickets (claimed, cancelled, timed out), holder pressure, capacity transactions, state
bundles (a transaction joins one and its commit advances it; a mismatch
poisons it, after which joins and commits of it are refused), limit
changes and a device loss on shared authorities, with some bad input, and
ends with every ticket, lease, allowance, transaction, pressure and limit
change settled (`settle`), so the trace replays clean against `spec.manager` with no
declared boundary. Deterministic for a given seed. A limit change is taken as
the spec's two steps (`refimpl.verify.manager_adapter`: no public verbs), with
the holders' answers between them, so the trace records answered changes. After
the random steps a scripted tour (`_tour`) reaches, whatever the seed, what they
reach only by luck, and ages a ticket so that the trace tells aging bounds apart.
"""

from __future__ import annotations

import random
from typing import Any

from refimpl.verify.manager_adapter import commit_limit, prepare_limit
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.errors import GovernorError
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Role, Tier

__all__ = ["run_manager_workload", "settle"]

_AUTHORITIES = (("hbm0", Tier.DEVICE, 64), ("host", Tier.HOST, 96), ("hbm1", Tier.DEVICE, 32))


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except GovernorError:
        return None  # a refusal is part of the workload: the trace records it


def run_manager_workload(pmm: Any, seed: int = 0, operations: int = 400) -> dict[str, int]:
    """Run the workload; returns how many operations of each kind were attempted."""
    rng = random.Random(seed)
    holders = [pmm.register_holder(n) for n in ("weights", "kv", "prefix")]
    auths = [pmm.register_authority(p, t, c) for p, t, c in _AUTHORITIES]
    alias = pmm.register_alias(auths[0], "uma")  # a view of hbm0: it owns no ledger, so no part takes it
    wrong = {a: Tier.HOST if t is Tier.DEVICE else Tier.DEVICE for a, (_, t, _) in zip(auths, _AUTHORITIES)}
    wrong[alias] = wrong[auths[0]]  # the tier no lease on it may have
    counts: dict[str, int] = {}

    def active() -> list[int]:
        m = abstract_manager(pmm)
        return [a for a in auths if m.ledger.authorities[a].context is ContextState.ACTIVE]

    def leases(m: Any) -> list[Any]:
        return [r for r in m.ledger.allocations.values() if r.state is AllocState.LIVE and r.id not in _owned(m)]

    lost = False
    seen: dict[int, int] = {}  # every allocation issued so far, retired ones too: its holder (for `_misuse_step`)
    for step in range(operations):
        m = abstract_manager(pmm)
        seen.update((r.id, r.holder) for r in m.ledger.allocations.values())
        live = active()
        if not live:
            break
        op = rng.choice(("submit", "submit", "claim", "cancel", "timeout", "lease", "lease", "release", "press",
                         "tx", "limit", "bundle", "bundle", "allowance", "misuse", "bad")
                        + (("lose",) if not lost and 2 * step >= operations else ()))  # one loss, late
        counts[op] = counts.get(op, 0) + 1
        if op == "submit":
            h, a, n, prio = rng.choice(holders), rng.choice(live), rng.randint(1, 24), rng.randint(0, 2)
            _try(pmm.submit, h, a, n, prio, Role.KV, 64 if n % 5 == 0 else None)  # a stated alignment (D13)
        elif op in ("claim", "cancel", "timeout"):
            ts = sorted(m.tickets.values(), key=lambda t: t.id)
            if ts:
                t = rng.choice(ts)
                if op == "claim" and t.state is TicketState.GRANTED:
                    _try(pmm.claim, t.holder, t.id)
                else:
                    _try(pmm.cancel_ticket if op == "cancel" else pmm.timeout_ticket, t.holder, t.id)
        elif op == "lease":
            a = rng.choice(live)
            if auths[0] in live and rng.random() < 0.1:
                a = alias  # a lease through the alias charges hbm0
            h = rng.choice(holders)
            if rng.random() < 0.15:  # memory the holder already allocated, recorded as committed
                _try(pmm.record_committed, h, a, m.ledger.authorities[a].tier, rng.randint(1, 8), Role.KV)
                continue
            aid = _try(pmm.reserve, h, a, m.ledger.authorities[a].tier, rng.randint(1, 16), Role.WEIGHTS)
            if aid is not None:
                r = abstract_manager(pmm).ledger.allocations[aid]
                if rng.random() < 0.25:
                    _try(pmm.cancel, r.holder, aid)  # the allocator failed: the reservation goes back
                    # and retries try-only (on the ledger: tickets never name an alias): a lease or a refusal now
                    got = _try(pmm.try_reserve, r.holder, m.ledger.authorities[a].alias_of or a, 1)
                    if got is not None:  # which then grows, admitted as a try-reserve would be (refused past it)
                        _try(pmm.grow_lease, r.holder, got, 1)
                        _try(pmm.grow_lease, r.holder, got, m.ledger.authorities[a].capacity)
                else:
                    if aid % 4 == 0:
                        _try(pmm.commit, r.holder, aid, r.reserved + 1)  # past the reservation: refused (C2)
                    _try(pmm.commit, r.holder, aid, rng.randint(1, r.reserved))
        elif op == "release":
            ls = leases(m)
            if ls:
                r = rng.choice(ls)
                if r.id % 3 == 0:  # the holder gives part of it back first (all of it is refused: a release)
                    _try(pmm.shrink_lease, r.holder, r.id, r.nbytes)
                    _try(pmm.shrink_lease, r.holder, r.id, r.nbytes // 2 or 1)
                if rng.random() < 0.25:  # a free the allocator could not confirm: quarantined, part released
                    _try(pmm.quarantine, r.holder, r.id, rng.randint(0, r.charge + 1))  # past it: refused
                else:
                    _try(pmm.release, r.holder, r.id)
        elif op == "allowance":
            _allowance_step(pmm, rng, rng.choice(holders), rng.choice(live + [alias]))
        elif op == "misuse":  # mostly on a recent lease, retired ones too; never on a ticket's or a transaction's
            pool = sorted(seen.items())
            pool = [r for r in (pool[-8:] if rng.random() < 0.75 else pool) if r[0] not in _owned(m)]
            ws = sorted((w.id, w.holder) for w in m.ledger.allowances.values())
            for _ in range(8):
                _misuse_step(pmm, rng, holders, wrong, pool, ws)
        elif op == "press":
            ls = leases(m)
            if ls:
                r = rng.choice(ls)
                pid = _try(pmm.press, r.holder, r.authority, rng.randint(1, 16), 1, 4)  # priority 1, due at 4
                if pid is not None and rng.random() < 0.2:
                    if pid % 2:
                        _try(pmm.cancel_pressure, pid)  # withdrawn before the holder answers
                    else:
                        _try(pmm.expire_pressure, pid, 5)  # nobody answered by its deadline (C5)
                        _try(pmm.answer, r.holder, pid, (), 5)  # too late: refused (StaleAnswer)
                elif pid is not None:
                    mine = [x.id for x in leases(abstract_manager(pmm)) if x.holder == r.holder
                            and x.authority == r.authority]
                    if pid % 3 == 0:  # the holder pins the lease first: it is no victim (PinnedVictim, I6)
                        _try(pmm.set_use, r.holder, r.id, True, False)
                        _try(pmm.answer, r.holder, pid, (r.id,), 4)
                        _try(pmm.set_use, r.holder, r.id, False, False)
                    _try(pmm.answer, r.holder, pid, tuple(rng.sample(mine, rng.randint(0, min(2, len(mine))))), 4)
        elif op == "tx":
            chosen = sorted(rng.sample(live, min(len(live), rng.randint(1, 2))))
            tid = _try(pmm.plan_tx, rng.choice(holders), tuple((a, rng.randint(1, 16)) for a in chosen))
            if tid is not None:
                _try(pmm.reserve_all, tid)  # a refusal aborts it: its place stays as a retry intent (C4)
                t = abstract_manager(pmm).txs.get(tid)
                if t is not None and len(t.held) == len(t.needs) and rng.random() < 0.7:
                    _try(pmm.commit_tx, tid)
                elif t is not None:
                    _try(pmm.abort_tx, tid)
        elif op == "bundle":
            _bundle_step(pmm, rng, rng.choice(holders), live, sorted(m.bundles))
        elif op == "limit":
            a = rng.choice(live)
            cap = m.ledger.authorities[a].capacity
            pids = _try(prepare_limit, pmm, a, rng.randint(cap // 2, cap)) or ()  # the steps, answered between
            for pid in pids:
                p = abstract_manager(pmm).pressures.get(pid)
                if p is not None:
                    mine = [x.id for x in leases(abstract_manager(pmm)) if x.holder == p.holder
                            and x.authority == a]
                    _try(pmm.answer, p.holder, pid, tuple(mine[: rng.randint(0, len(mine))]))
            _try(commit_limit, pmm, a)
            if len(pids) % 2:  # the topology changed with it: the waiters there fail (a new generation)
                _try(pmm.reconfigure, a)
        elif op == "lose":
            lost = True
            a = rng.choice(live + [alias])  # through the alias, its ledger's device is lost
            h = rng.choice(holders)
            w = _try(pmm.open_allowance, h, a, 4)  # an allowance open and mapped there when the device goes
            if w is not None:
                _try(pmm.reserve_growth, h, w, 2)
                _try(pmm.map_allowance, h, w, 1)
            m = abstract_manager(pmm)
            dev = m.ledger.authorities[a].alias_of or a
            on = {x for x, au in m.ledger.authorities.items() if dev in (x, au.alias_of)}
            rs = sorted((r.id, r.holder) for r in m.ledger.allocations.values()
                        if r.authority in on and r.id not in _owned(m))
            ws = sorted((w.id, w.holder) for w in m.ledger.allowances.values() if w.authority in on)
            for verb in (pmm.lose_device, pmm.confirm_termination, pmm.lose_device):  # a late second report
                _try(verb, a)
            if w is not None:  # its holder, not told yet, grows and maps there: refused
                _try(pmm.reserve_growth, h, w, 1)
                _try(pmm.map_allowance, h, w, 1)
            for _ in range(6):  # and so do the others, with what they had there
                _misuse_step(pmm, rng, holders, {a: wrong[a]}, rs, ws)
        else:  # bad input: every part refuses it with a typed error, and the trace records the refusal
            _try(rng.choice((lambda: pmm.submit(holders[0], auths[0], 0, 0, Role.KV),
                             lambda: pmm.claim(holders[0], 10**6),
                             lambda: pmm.answer(holders[1], 10**6, ()),
                             lambda: pmm.reserve_all(10**6),
                             lambda: pmm.report_mismatch(10**6),
                             lambda: pmm.submit(holders[0], alias, 4, 0, Role.KV),  # tickets name the ledger
                             lambda: pmm.lower_limit(auths[0], -1))))
    _tour(pmm, *holders)
    _try(pmm.submit, holders[0], auths[0], 4, 0, Role.KV, 3)  # D13: an alignment that is no power of two
    _try(pmm.try_reserve, holders[0], auths[0], 4, 0, Role.KV, 6)
    # The device tier's process quota (I1): set at what it charges, so a try-reserve is refused; then removed (its
    # waiters may fit then).
    charged = sum(a.used for a in abstract_manager(pmm).ledger.authorities.values()
                  if a.alias_of is None and a.tier is Tier.DEVICE)
    _try(pmm.set_process_quota, Tier.DEVICE, charged)
    _try(pmm.try_reserve, holders[1], auths[2], 1)
    _try(pmm.set_process_quota, Tier.DEVICE, None)
    settle(pmm)
    # Removing a provider (C3): refused while its alias (or anything else) pins it; the alias owns nothing.
    for a in (auths[0], alias, auths[0]):
        _try(pmm.remove_authority, a)
    # Unregistering a holder (I4a): refused while anything names it; a holder that holds nothing goes.
    _try(pmm.unregister_holder, holders[0])
    _try(pmm.unregister_holder, pmm.register_holder("done"))
    return counts


def _tour(pmm: Any, h: int, k: int, p: int) -> None:
    """What random steps reach only by luck, reached whatever the seed, on a ledger of its own (its rounds are the
    tour's) and settled. Aging (I13): of 10 B, 9 B leased and an 8 B ticket waiting, a 1 B probe submitted in round
    2j and cancelled in round 2j + 1 is granted iff 2j < the aging bound: the trace tells bounds 2, 4, 6 and 8
    apart. Then the lease shrinks, is pinned when pressed, the pressure expires, another is withdrawn; released,
    the waiting ticket is granted and claimed, its lease grows; a reservation is cancelled, a try-reserve
    quarantined (its byte stays charged), a commit recorded, allowance moved, a bundle poisoned, the ledger
    reconfigured. Each is accepted; the steps marked refused are refused (a refusal would be recorded, not raised)."""
    a = pmm.register_authority("aging", Tier.HOST, 10)
    lease = _try(pmm.reserve, h, a, Tier.HOST, 9, Role.WEIGHTS)
    _try(pmm.commit, h, lease, 9)
    big = _try(pmm.submit, k, a, 8)  # round 1: waits
    for _ in range(3):
        _try(pmm.cancel_ticket, p, _try(pmm.submit, p, a, 1))  # granted or still waiting: cancelled either way
    _try(pmm.shrink_lease, h, lease, 9)  # all of it: refused (that is a release)
    _try(pmm.shrink_lease, h, lease, 4)
    _try(pmm.set_use, h, lease, True, False)
    pid = _try(pmm.press, h, a, 4, 1, 4)
    _try(pmm.answer, h, pid, (lease,), 4)  # pinned: refused (PinnedVictim)
    _try(pmm.set_use, h, lease, False, False)
    _try(pmm.expire_pressure, pid, 5)
    _try(pmm.answer, h, pid, (), 5)  # too late: refused (StaleAnswer)
    _try(pmm.cancel_pressure, _try(pmm.press, h, a, 4))
    _try(pmm.release, h, lease)  # the 8 B ticket fits now: granted
    mine = _try(pmm.claim, k, big)
    _try(pmm.grow_lease, k, mine, 1)
    _try(pmm.grow_lease, k, mine, 10)  # past the capacity: refused
    _try(pmm.cancel, k, _try(pmm.reserve, k, a, Tier.HOST, 1, Role.WEIGHTS))
    _try(pmm.quarantine, k, _try(pmm.try_reserve, k, a, 1), 0)
    _try(pmm.release, k, mine)
    _try(pmm.release, p, _try(pmm.record_committed, p, a, Tier.HOST, 2, Role.KV))
    w, w2 = _try(pmm.open_allowance, p, a, 2), _try(pmm.open_allowance, p, a, 2)
    _try(pmm.transfer_allowance, p, w, w2, 1)
    _try(pmm.close_allowance, p, w)
    _try(pmm.close_allowance, p, w2)
    _try(pmm.report_mismatch, _try(pmm.open_bundle))
    _try(pmm.reconfigure, a)


def _allowance_step(pmm: Any, rng: random.Random, holder: int, authority: int) -> None:
    """An allowance's life in one step: open, reserve growth, map, maybe move some to another, unmap, close."""
    w = _try(pmm.open_allowance, holder, authority, rng.randint(1, 16))
    if w is None:
        return
    _try(pmm.reserve_growth, holder, w, rng.randint(1, 8))
    _try(pmm.map_allowance, holder, w, rng.randint(1, 4))
    if rng.random() < 0.5:
        w2 = _try(pmm.open_allowance, holder, authority, rng.randint(1, 16))
        if w2 is not None:
            _try(pmm.transfer_allowance, holder, w, w2, rng.randint(1, 2))
            _close(pmm, holder, w2)
    if rng.random() < 0.7:  # else it stays open (mapped or not) for later steps, a loss, or `settle`
        _close(pmm, holder, w)


def _owned(m: Any) -> set[int]:
    """The allocations a ticket or a transaction holds: theirs to settle, not a holder's lease."""
    return {t.allocation for t in m.tickets.values()} | {i for t in m.txs.values() for i in t.held}


def _misuse_step(pmm: Any, rng: random.Random, holders: list[int], wrong: dict[int, Tier],
                 rs: list[tuple[int, int]], ws: list[tuple[int, int]]) -> None:
    """A ledger verb, of any size, by its owner or any holder, on one of the leases `rs` (in any state, retired
    too) or the allowances `ws` (each (id, owner)): the owner's verb in the right state and size is taken, the
    rest refused (ForeignHolder, InvalidTransition, InvalidBytes); or an admission no ledger of `wrong` takes (an
    alias, a lost device): a lease of the tier it is not (TierMismatch, DeviceLost on a lost one first), an
    allowance past its capacity (AllowanceExceeded). A refusal changes nothing."""
    h, n = rng.choice(holders), rng.choice((1, 2, 48))
    pick = rng.randrange(3)
    if pick == 0 and rs:
        r, owner = rng.choice(rs)
        h = owner if rng.random() < 0.5 else h
        _try(*rng.choice(((pmm.commit, h, r, n), (pmm.quarantine, h, r, rng.choice((0, n))), (pmm.release, h, r),
                          (pmm.cancel, h, r))))
    elif pick == 1 and ws:
        w, owner = rng.choice(ws)
        h = owner if rng.random() < 0.5 else h
        _try(*rng.choice(((pmm.reserve_growth, h, w, n), (pmm.map_allowance, h, w, n), (pmm.unmap_allowance, h, w, n),
                          (pmm.close_allowance, h, w))))
    else:
        a = rng.choice(sorted(wrong))
        _try(*rng.choice(((pmm.reserve, h, a, wrong[a], n, Role.WEIGHTS),
                          (pmm.record_committed, h, a, wrong[a], n, Role.KV), (pmm.open_allowance, h, a, 1 << 20))))


def _close(pmm: Any, holder: int, w: int) -> None:
    view = abstract_ledger(pmm).allowances.get(w)
    if view is not None and view.mapped:
        _try(pmm.unmap_allowance, holder, w, view.mapped)
    _try(pmm.close_allowance, holder, w)


def _bundle_step(pmm: Any, rng: random.Random, holder: int, live: list[int], bundles: list[int]) -> None:
    """One step of a state bundle: open one (while there are few), or a transaction joins one and commits it.

    A poisoned bundle refuses the join (BundlePoisoned); a bundle poisoned after the join refuses the
    commit, and the transaction is aborted. Now and then a post-commit mismatch poisons the bundle."""
    if len(bundles) < 2 or rng.random() < 0.1:
        _try(pmm.open_bundle)
        return
    b = rng.choice(bundles)
    a = rng.choice(live)
    tid = _try(pmm.plan_tx, holder, ((a, rng.randint(1, 12)),))
    if tid is None:
        return
    _try(pmm.join_bundle, tid, b)
    if rng.random() < 0.1:
        _try(pmm.join_bundle, tid, b)  # a second join: InvalidTransition
    _try(pmm.reserve_all, tid)  # a refusal aborts it
    if rng.random() < 0.15:
        _try(pmm.report_mismatch, b)  # poisoned between join and commit: the commit is refused
    t = abstract_manager(pmm).txs.get(tid)
    view = _try(pmm.publish_view, tid) if t is not None and len(t.held) == len(t.needs) else None
    if view is not None:  # its execution binds the view (sometimes naming a stale generation: refused)
        _try(pmm.execute_view, tid, view, 1 + (rng.random() < 0.1))
        _try(pmm.remap_view, view)  # bound: ViewInUse (I9)
    if t is None:
        return  # refused and aborted by reserve_all
    if len(t.held) != len(t.needs) or _try(pmm.commit_tx, tid) is None:
        _try(pmm.abort_tx, tid)
    else:
        if view is not None:
            _try(pmm.remap_view, view)  # committed, unbound: the mapping generation advances
            if rng.random() < 0.5:
                _try(pmm.drop_view, view)  # the view goes: its lease is the holder's to release again (C6)
        if rng.random() < 0.15:
            _try(pmm.report_mismatch, b)


def settle(pmm: Any) -> None:
    """Leave nothing live, through the public verbs: cancel tickets, abort transactions, close pressure and limit
    changes, drop views, unmap and close allowances, release leases and cancel reservations (the trace ends
    clean)."""
    m = abstract_manager(pmm)
    for t in sorted(m.tickets.values(), key=lambda t: t.id):
        _try(pmm.cancel_ticket, t.holder, t.id)
    for t in sorted(abstract_manager(pmm).txs.values(), key=lambda t: t.id):
        _try(pmm.abort_tx, t.id)
    for p in sorted(abstract_manager(pmm).pressures.values(), key=lambda p: p.id):
        if not p.change:
            _try(pmm.cancel_pressure, p.id)
    for a in sorted(abstract_manager(pmm).changes):
        _try(commit_limit, pmm, a)
    for v in sorted(abstract_manager(pmm).views):
        _try(pmm.drop_view, v)  # a view pins the lease it is over (C6)
    for w in sorted(abstract_ledger(pmm).allowances.values(), key=lambda w: w.id):
        _close(pmm, w.holder, w.id)
    for r in sorted(abstract_manager(pmm).ledger.allocations.values(), key=lambda r: r.id):
        if r.state is AllocState.LIVE:
            _try(pmm.release, r.holder, r.id)
        elif r.state is AllocState.PROVISIONAL:
            _try(pmm.cancel, r.holder, r.id)
