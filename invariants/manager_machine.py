"""The composed campaign: every part's operations interleaved on shared authorities.

One abstract state (`spec.manager_actions.Manager`) holds the one ledger and
the parts' records; after every step the base (`invariants.checked.CheckedMachine`)
checks refinement against `spec.manager.step`, that a rejection changes nothing,
and the cross-cutting predicates of `invariants.manager` (and a grant's charge,
`invariants.replay_predicates`, as replay judges it). The rules issue every
action kind of the composed spec and aim at where parts meet (a transaction
reserving beside a granted ticket; a limit raised while tickets wait; a device
lost holding a quarantined lease or a two-ledger transaction; a release or an
answer whose round grants a waiter; aliases, allowances, recorded commits), with
bad input in every rule; `situations` counts those meetings as campaign events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from invariants.adapter import GovernorAdapter, SpecGovernor
from invariants.campaign import ControlResult, hunt
from invariants.checked import CheckedMachine
from invariants.governor_grants import apply_grants, governor_grants
from invariants.manager import check_all, check_step, observed_I7_manager
from invariants.manager_events import situations
from invariants.manager_pressure_rules import PressureRules
from invariants.manager_steered_rules import SteeredRules
from invariants.manager_view_rules import ViewRules
from invariants.mutation import Mutant
from invariants.replay_predicates import check_observed_step
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.guards import ALL_ON, Guard, GuardSet, Layer
from spec.ledger_state import snapshot
from spec.manager import refusals, step
from spec.manager_parts import holder_refs, pins
from spec.tickets import TicketState
from spec.types import AllocState, ContextState, Role, Tier

__all__ = ["ManagerSpecAdapter", "ManagerMachine", "restrict", "find_counterexample"]

#: (pool, tier, capacity) of the authorities every example registers.
AUTHORITIES = (("hbm0", Tier.DEVICE, 12), ("host", Tier.HOST, 16), ("hbm1", Tier.DEVICE, 8))
HOLDERS = ("weights", "kv", "arena")
BAD_BYTES = (0, -1, 2**63, True, 1.5)
BAD_IDS = (0, -1, None, "1")


class ManagerSpecAdapter(SpecGovernor):
    """The composed spec itself as a manager: for spec-only runs and spec negative controls."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        super().__init__(step, M.initial(), guards)

    def snapshot(self, authority: int) -> Any:
        return snapshot(self.state.ledger, authority)


class ManagerMachine(PressureRules, ViewRules, SteeredRules, CheckedMachine):
    """Subclass and set `adapter_factory` (a no-argument factory of an `invariants.adapter.GovernorAdapter`,
    whose ids are its own). A violation's note lists the example's actions as a script: `state.act(action)`."""

    adapter_factory: Callable[[], GovernorAdapter] = ManagerSpecAdapter
    own_ids = script_note = True

    def __init__(self) -> None:
        super().__init__()
        self.start(type(self).adapter_factory(), M.initial())

    def spec_step(self, state: M.Manager, action: Any) -> tuple[M.Manager, Any]:
        return step(state, action, eager=False)  # rounds age; the governor's own grants are `own_steps`

    def own_steps(self, expected: tuple[M.Manager, Any], action: Any, raw: Any) -> tuple[M.Manager, Any]:
        granted = governor_grants(self.gov, *expected, action, raw)  # each as the spec's `GrantTicket`
        for key in ("steps", "accepted", "accepted:GrantTicket") * len(granted):
            self._count(key)
        return (apply_grants(expected[0], action, granted) if self.check_refinement else expected[0]), expected[1]

    def refusals(self, state: M.Manager, action: Any) -> tuple[Exception, ...]:
        return refusals(state, action)

    def check_state(self, state: M.Manager) -> None:
        check_all(state)

    def check_step(self, prev: M.Manager, action: Any, now: M.Manager) -> None:
        check_step(prev, action, now, self.last_result)  # the credits an action reports are judged too
        check_observed_step(prev.ledger, action, now.ledger)  # a grant charged what it granted (as replay judges)
        if isinstance(action, M.Press):  # I7: the holder callbacks the adapter saw this step (counted as coverage)
            observed_I7_manager(getattr(self.gov, "delivered", ()))

    def situations(self, prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
        return situations(prev, action, now)

    # --- views of the current abstraction ---------------------------------------

    def _holders(self) -> list[int]:
        return sorted(self.abs.ledger.holders.keys())

    def _active(self) -> list[int]:
        return sorted(a.id for a in self.abs.ledger.authorities.values()
                      if a.alias_of is None and a.context is ContextState.ACTIVE)

    def _leases(self, holder: int | None = None, authority: int | None = None) -> list[Any]:
        owned = {t.allocation for t in self.abs.tickets.values()} | {i for t in self.abs.txs.values() for i in t.held}
        return [r for r in self.abs.ledger.allocations.values()
                if r.state is AllocState.LIVE and r.id not in owned
                and (holder is None or r.holder == holder) and (authority is None or r.authority == authority)]

    def _pick(self, data: st.DataObject, ids: Any, nxt: int, prefer: Any = ()) -> Any:
        """Mostly a preferred live id; sometimes any live one, a retired one, or garbage."""
        prefer, known = sorted(prefer), sorted(ids)
        k = data.draw(st.integers(0, 19))
        if k == 0 or not known and not prefer:
            return data.draw(st.sampled_from(BAD_IDS + (nxt, nxt + 3)))
        if k == 1 and nxt > 1:
            return data.draw(st.integers(1, nxt - 1))  # possibly retired
        if prefer and (k > 4 or not known):
            return data.draw(st.sampled_from(prefer))
        return data.draw(st.sampled_from(known))

    def _holder(self, data: st.DataObject) -> Any:
        hs = self._holders()
        if not hs or data.draw(st.integers(0, 24)) == 0:
            return data.draw(st.sampled_from(BAD_IDS + (len(hs) + 1,)))
        return data.draw(st.sampled_from(hs))

    def _authority(self, data: st.DataObject) -> Any:
        return self._pick(data, self.abs.ledger.authorities.keys(), self.abs.ledger.next_authority, self._active())

    def _nbytes(self, data: st.DataObject, high: int = 8) -> Any:
        if data.draw(st.integers(0, 24)) == 0:
            return data.draw(st.sampled_from(BAD_BYTES))
        return data.draw(st.integers(1, high))

    def _owner(self, data: st.DataObject, owner: int) -> int:
        """The record's owner, sometimes another holder (ForeignHolder, I6)."""
        if data.draw(st.integers(0, 15)) == 0:
            others = [h for h in self._holders() if h != owner]
            if others:
                return data.draw(st.sampled_from(others))
        return owner

    # --- rules -----------------------------------------------------------------------

    @initialize(n=st.integers(2, 3))
    def setup(self, n: int) -> None:
        for name in HOLDERS:
            self._do(A.RegisterHolder(name))
        for pool, tier, capacity in AUTHORITIES[:n]:
            self._do(A.RegisterAuthority(pool, tier, capacity))

    @rule(data=st.data(), priority=st.integers(0, 3))
    def submit(self, data: st.DataObject, priority: int) -> None:
        role = data.draw(st.sampled_from((Role.KV, Role.STAGING, Role.PREFIX)))
        if data.draw(st.integers(0, 30)) == 0:
            priority = data.draw(st.sampled_from((True, 1.5, None)))  # type: ignore[arg-type]
        alignment = data.draw(st.sampled_from((None, None, None, None, None, 64, 3)))  # D13: mostly none stated
        self._do(M.Submit(self._holder(data), self._authority(data), self._nbytes(data), priority, role, alignment))

    @rule(data=st.data(), op=st.sampled_from(("claim", "claim", "claim", "cancel", "timeout")))
    def ticket(self, data: st.DataObject, op: str) -> None:
        granted = [t.id for t in self.abs.tickets.values() if t.state is TicketState.GRANTED]
        tid = self._pick(data, self.abs.tickets.keys(), self.abs.next_ticket, granted)
        t = self.abs.tickets.get(tid)
        holder = self._owner(data, t.holder) if t is not None else self._holder(data)
        cls = {"claim": M.Claim, "cancel": M.CancelTicket, "timeout": M.TimeoutTicket}[op]
        self._do(cls(holder, tid))

    def _headroom(self, aid: int) -> int:
        return (a := self.abs.ledger.authorities[aid]).limit - a.used

    @rule(data=st.data())
    def wait_for_release(self, data: st.DataObject) -> None:
        """A request that does not fit waits; a release (or an answer) lets the round grant it."""
        leases = self._leases()
        if not leases:
            return
        r = data.draw(st.sampled_from(leases))
        a = self.abs.ledger.authorities[r.authority]
        if a.context is not ContextState.ACTIVE:
            return
        how = data.draw(st.sampled_from(("release", "answer", "shrink")))
        shrink = how == "shrink" and r.nbytes > 1  # lacking less than the lease, so a shrink keeps a byte (I1)
        want = self._headroom(a.id) + data.draw(st.integers(1, r.nbytes - 1 if shrink else max(1, r.charge)))
        if want > a.limit:
            return
        holder = data.draw(st.sampled_from(self._holders()))
        tid = self.abs.next_ticket
        self._do(M.Submit(holder, a.id, want, data.draw(st.integers(0, 3)), Role.PREFIX))
        if shrink:  # gives back what the waiter lacks (I1, I13)
            self._do(M.ShrinkLease(r.holder, r.id, want - self._headroom(a.id)))
        elif how != "answer":
            self._do(A.Release(r.holder, r.id))
        else:
            pid = self.abs.next_pressure
            self._do(M.Press(r.holder, a.id, want))
            if pid in self.abs.pressures:
                self._do(M.Answer(r.holder, pid, (r.id,)))
        t = self.abs.tickets.get(tid)
        if t is not None and t.state is TicketState.GRANTED and data.draw(st.integers(0, 3)):
            self._do(M.Claim(holder, tid))

    @rule(data=st.data())
    def release_lease(self, data: st.DataObject) -> None:
        """A holder gives back a lease (a claimed ticket's or a committed transaction's), or part of it: a shrink
        (ShrinkLease, I1), at times of all of it (InvalidBytes) or of bad bytes."""
        leases = self._leases()
        live = [r.id for r in leases]
        aid = self._pick(data, self.abs.ledger.allocations.keys(), self.abs.ledger.next_allocation, live)
        r = self.abs.ledger.allocations.get(aid)
        holder = self._owner(data, r.holder) if r is not None else self._holder(data)
        if data.draw(st.integers(0, 2)):
            self._do(A.Release(holder, aid))
        elif r is None:
            self._do(M.ShrinkLease(holder, aid, 1))
        else:  # mostly less than the lease, so a byte stays
            high = r.nbytes if data.draw(st.integers(0, 3)) == 0 else max(1, r.nbytes - 1)
            self._do(M.ShrinkLease(holder, aid, self._nbytes(data, high)))

    @rule(data=st.data())
    def grow_lease(self, data: st.DataObject) -> None:
        """A holder's lease grows (GrowLease, I1): admitted as a try-reserve of its bytes, so mostly within the
        headroom, at times one byte past it (I2), behind a waiter (I13), or of bad bytes (CapacityDenied)."""
        waited = {t.authority for t in self.abs.tickets.values() if t.state is TicketState.PENDING}
        room = [a for a in self._active() if a not in waited and self._headroom(a) >= 2]
        if room and self._holders() and data.draw(st.booleans()):  # a fresh try-only lease (the KV bucket that grows)
            self._do(M.TryReserve(data.draw(st.sampled_from(self._holders())), data.draw(st.sampled_from(room)), 1,
                                  0, Role.KV))
        live = [r.id for r in self._leases()]  # preferred: a lease with room and no waiter, so it is accepted
        fits = [i for i in live if (a := self.abs.ledger.allocations[i].authority) not in waited
                and self._headroom(a) >= 1]
        aid = self._pick(data, self.abs.ledger.allocations.keys(), self.abs.ledger.next_allocation, fits or live)
        r = self.abs.ledger.allocations.get(aid)
        holder = self._owner(data, r.holder) if r is not None else self._holder(data)
        room = self._headroom(r.authority) if r is not None and r.authority in self.abs.ledger.authorities else 0
        self._do(M.GrowLease(holder, aid, room + 1 if room < 1 or data.draw(st.integers(0, 3)) == 0
                             else self._nbytes(data, room)))

    @rule(data=st.data())
    def direct_reserve(self, data: st.DataObject) -> None:
        """The plain allocator path beside the parts: reserve, then commit or cancel; or the try-only path."""
        if data.draw(st.integers(0, 2)) == 0:
            self._try_reserve_and_pin(data)
            return
        a = self.abs.ledger.authorities.get(self._authority(data))
        if a is None:
            return
        before = self.abs.ledger.next_allocation
        self._do(A.Reserve(self._holder(data), a.id, a.tier, self._nbytes(data, 6), Role.WEIGHTS))
        r = self.abs.ledger.allocations.get(before)
        if r is not None and r.id == before:
            if data.draw(st.integers(0, 3)):
                self._do(A.Commit(r.holder, r.id, r.reserved))
            else:
                self._do(A.Cancel(r.holder, r.id))

    @rule(data=st.data())
    def touch_part_allocation(self, data: st.DataObject) -> None:
        """Ledger calls on an allocation a ticket or transaction owns: refused (the part owns it)."""
        owned = [t.allocation for t in self.abs.tickets.values() if t.allocation is not None]
        owned += [i for t in self.abs.txs.values() for i in t.held]
        if not owned:
            return
        r = self.abs.ledger.allocations.get(data.draw(st.sampled_from(owned)))
        if r is None:
            return
        op = data.draw(st.sampled_from(("commit", "cancel", "release")))
        self._do(A.Commit(r.holder, r.id, r.reserved) if op == "commit" else
                 (A.Cancel if op == "cancel" else A.Release)(r.holder, r.id))

    @rule(data=st.data())
    def plan_and_reserve(self, data: st.DataObject) -> None:
        """A transaction over two authorities, reserved in id order as far as it fits."""
        live = self._active()
        chosen = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=3, unique=True)) if live else [1]
        needs: Any = tuple((a, self._nbytes(data, 6)) for a in chosen)
        if data.draw(st.integers(0, 30)) == 0:
            needs = data.draw(st.sampled_from(((), ((1, 1), (1, 2)), ((99, 1),), [(1, 1)])))
        tid = self.abs.next_tx
        # Sometimes the retry of an aborted attempt (C4), by its holder: it takes back its place.
        retry = data.draw(st.sampled_from(sorted(self.abs.intents))) if self.abs.intents and data.draw(
            st.booleans()) else None
        holder = self.abs.intents[retry].holder if retry is not None else self._holder(data)
        self._do(M.PlanTx(holder, needs, data.draw(st.integers(0, 2)), retry))
        while tid in self.abs.txs and data.draw(st.integers(0, 4)):
            t = self.abs.txs[tid]
            if len(t.held) == len(t.needs):
                commit = data.draw(st.integers(0, 2))
                if commit and data.draw(st.integers(0, 3)) == 0:
                    self._bundle_step(data, tid)
                self._do(M.CommitTx(tid) if commit else M.AbortTx(tid))
                return
            before = self.abs
            self._do(M.ReserveTx(tid))
            if self.abs == before:  # refused (no room, or the device is gone): stop here
                return

    def _bundle_step(self, data: st.DataObject, tid: int) -> None:
        """State bundles (I5, I10), inside a transaction (no rule of their own: the other rules' draws stay as they
        were): a bundle (a new one while fewer than 3), joined by `tid` before its commit, sometimes poisoned first."""
        if len(self.abs.bundles) < 3 and data.draw(st.booleans()):
            self._do(M.OpenBundle())
        bid = self._pick(data, self.abs.bundles.keys(), self.abs.next_bundle)
        self._do(M.JoinBundle(tid, bid))
        if data.draw(st.integers(0, 2)) == 0:
            self._do(M.ReportMismatch(bid))  # the commit that follows must be refused (I5)

    @rule(data=st.data(), op=st.sampled_from(("reserve", "reserve", "commit", "abort")))
    def transaction(self, data: st.DataObject, op: str) -> None:
        tid = self._pick(data, self.abs.txs.keys(), self.abs.next_tx)
        self._do({"reserve": M.ReserveTx, "commit": M.CommitTx, "abort": M.AbortTx}[op](tid))

    @rule(data=st.data(), kind=st.sampled_from(("lose", "confirm", "confirm", "remove", "reconfigure", "corrupt")))
    def environment(self, data: st.DataObject, kind: str) -> None:
        """Device loss and its confirmation, preferring authorities that parts are using; removing a provider;
        a reconfigure; rarely, the shared ledger found corrupt (I5: from then on nothing new is granted)."""
        if kind == "corrupt":
            if not data.draw(st.integers(0, 2)):
                self._do(M.CorruptLedger())
        elif kind in ("remove", "reconfigure"):
            (self._remove if kind == "remove" else self._reconfigure)(data)
        else:
            self._device(data, kind)

    def _device(self, data: st.DataObject, kind: str) -> None:
        busy = [t.authority for t in self.abs.tickets.values()]
        busy += [a for t in self.abs.txs.values() for a, _ in t.needs]
        if kind == "confirm":
            busy = [a.id for a in self.abs.ledger.authorities.values() if a.context is ContextState.LOST] * 3
            if not busy and data.draw(st.booleans()):
                # Nothing lost yet (a loss is rare): a spare device is lost, so its termination is confirmed.
                aid = self.abs.ledger.next_authority
                self._do(A.RegisterAuthority("spare", Tier.HOST, 8))
                self._do(A.LoseDevice(aid))
                busy = [aid]
        aid = self._pick(data, self.abs.ledger.authorities.keys(), self.abs.ledger.next_authority, busy)
        if kind == "lose" and data.draw(st.integers(0, 2)):
            return  # device loss is rare: an example keeps its authorities long enough to get deep
        self._do(A.LoseDevice(aid) if kind == "lose" else A.ConfirmTermination(aid))

    def _remove(self, data: st.DataObject) -> None:
        """RemoveAuthority (C3): mostly a terminated device or a spare nothing references (registered here when
        there is none), so the campaign's own ledgers stay; sometimes one in use (refused: ProviderPinned)."""
        free = [aid for aid, a in self.abs.ledger.authorities.items() if not pins(self.abs, aid)
                and (a.pool == "spare" or a.context is ContextState.TERMINATED)]
        if not free and data.draw(st.booleans()):
            self._do(A.RegisterAuthority("spare", Tier.HOST, 8))
            free = [aid for aid, a in self.abs.ledger.authorities.items() if a.pool == "spare"]
        self._do(M.RemoveAuthority(self._pick(data, self.abs.ledger.authorities.keys(),
                                              self.abs.ledger.next_authority, free)))

    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        """UnregisterHolder (I4a): mostly a spare holder (registered here when there is none, at times with an
        aborted transaction's retry intent or a ticket), so the campaign's own holders stay; sometimes one in use
        (refused: HolderInUse)."""
        free = [h for h, x in self.abs.ledger.holders.items() if x.name == "spare" and not holder_refs(self.abs, h)]
        if not free and data.draw(st.booleans()):
            hid, tid = self.abs.ledger.next_holder, self.abs.next_tx
            self._do(A.RegisterHolder("spare"))
            what = data.draw(st.sampled_from(("none", "intent", "ticket")))
            if (live := self._active()) and what != "none":
                aid = data.draw(st.sampled_from(live))
                if what == "intent":  # it leaves a retry intent behind (zero bytes: it goes with the holder)
                    self._do(M.PlanTx(hid, ((aid, 1),)))
                    self._do(M.AbortTx(tid))
                else:  # a ticket, pending or granted, is all that names it (refused: HolderInUse)
                    self._do(M.Submit(hid, aid, data.draw(st.integers(1, 8)), 0, Role.KV))
            free = [h for h, x in self.abs.ledger.holders.items() if x.name == "spare"]
        busy = [h for h in self.abs.ledger.holders.keys() if holder_refs(self.abs, h)]
        # Never a campaign holder nothing names: the rules that follow need their holders.
        self._do(M.UnregisterHolder(self._pick(data, free + busy, self.abs.ledger.next_holder, free + busy)))

    @rule(data=st.data())
    def lower_limit(self, data: st.DataObject) -> None:
        """Prepare a lower limit, let holders answer the pressure (or not), then commit."""
        aid = self._authority(data)
        a = self.abs.ledger.authorities.get(aid)
        limit: Any = data.draw(st.integers(0, a.capacity + 1)) if a is not None else 4
        if a is not None and a.used and data.draw(st.booleans()):  # below what is used: its holders are pressed
            limit = data.draw(st.integers(0, a.used - 1))
        if data.draw(st.integers(0, 30)) == 0:
            limit = data.draw(st.sampled_from(BAD_BYTES[1:]))
        before = self.abs.next_pressure
        self._do(M.PrepareLimit(aid, limit))
        for pid in range(before, self.abs.next_pressure):
            if pid in self.abs.pressures and data.draw(st.integers(0, 2)):
                self._answer(data, pid)
        if data.draw(st.integers(0, 3)):
            self._do(M.CommitLimit(aid))

    @rule(data=st.data())
    def commit_limit(self, data: st.DataObject) -> None:
        a = self.abs.ledger
        self._do(M.CommitLimit(self._pick(data, a.authorities.keys(), a.next_authority, self.abs.changes.keys())))

    @rule(data=st.data())
    def raise_limit(self, data: st.DataObject) -> None:
        """Back to full capacity: a raise needs no pressure and wakes waiters."""
        lowered = [a.id for a in self.abs.ledger.authorities.values()
                   if a.alias_of is None and a.limit < a.capacity and a.id not in self.abs.changes]
        if lowered:
            aid = data.draw(st.sampled_from(lowered))
            self._do(M.PrepareLimit(aid, self.abs.ledger.authorities[aid].capacity))
            self._do(M.CommitLimit(aid))

    # --- the ledger actions the parts meet: aliases, recorded commits, quarantine, allowances (issue #21) ---

    @rule(data=st.data())
    def alias_record_quarantine(self, data: st.DataObject) -> None:
        """An alias of a ledger (a view: it owns no ledger), memory recorded as committed (it may oversubscribe),
        and a release the allocator could only partly confirm (quarantined: the residual stays charged)."""
        op = data.draw(st.sampled_from(("alias", "record", "record", "quarantine", "quarantine")))
        if op == "alias":
            if len(self.abs.ledger.authorities) < 6:
                self._do(A.RegisterAlias(self._authority(data), data.draw(st.sampled_from(("uma", "view")))))
        elif op == "record":
            a = self.abs.ledger.authorities.get(self._authority(data))
            tier, h = (a.tier if a is not None else Tier.DEVICE), self._holder(data)
            self._do(A.RecordCommitted(h, a.id if a else 1, tier, self._nbytes(data, 5), Role.KV))
            b = self.abs.ledger.authorities.get(a.id) if a is not None else None
            if b is not None and b.used > b.limit:  # steered: a part acts on the oversubscribed ledger (thin at random)
                self._do(M.Submit(h, b.id, 1, 0, Role.KV))
        else:
            leases = self._leases()
            aid = self._pick(data, self.abs.ledger.allocations.keys(), self.abs.ledger.next_allocation,
                             [r.id for r in leases])
            r = self.abs.ledger.allocations.get(aid)
            holder = self._owner(data, r.holder) if r is not None else self._holder(data)
            released = data.draw(st.integers(0, r.charge)) if r is not None else self._nbytes(data)
            self._do(A.Quarantine(holder, aid, released))

    @rule(data=st.data())
    def allowance(self, data: st.DataObject) -> None:
        """An allowance's life (I4b): open, reserve growth, map, maybe transfer to another, unmap, close."""
        holder, aid, wid = self._holder(data), self._authority(data), self.abs.ledger.next_allowance
        self._do(A.OpenAllowance(holder, aid, self._nbytes(data, 6)))
        if wid not in self.abs.ledger.allowances:
            return
        self._do(A.ReserveGrowth(holder, wid, self._nbytes(data, 3)))
        self._do(A.MapAllowance(holder, wid, self._nbytes(data, 3)))
        if data.draw(st.booleans()):
            other = self.abs.ledger.next_allowance
            self._do(A.OpenAllowance(holder, aid, self._nbytes(data, 6)))
            self._do(A.TransferAllowance(holder, wid, other, self._nbytes(data, 2)))
            self._close(data, holder, other)
        if data.draw(st.integers(0, 3)):
            self._close(data, holder, wid)

    def _close(self, data: st.DataObject, holder: int, wid: int) -> None:
        if (w := self.abs.ledger.allowances.get(wid)) is not None and w.mapped and data.draw(st.integers(0, 5)):
            self._do(A.UnmapAllowance(holder, wid, w.mapped))
        self._do(A.CloseAllowance(holder, wid))

    @rule(data=st.data())
    def bundle_commit(self, data: st.DataObject) -> None:
        """A one-byte transaction of a state bundle (I5, I10): planned, reserved, joined, committed."""
        if live := self._active():
            tid = self.abs.next_tx
            self._do(M.PlanTx(data.draw(st.sampled_from(self._holders())), ((data.draw(st.sampled_from(live)), 1),)))
            if tid in self.abs.txs:
                self._do(M.ReserveTx(tid))
                self._bundle_step(data, tid)
                self._do(M.CommitTx(tid))

def restrict(machine: type, rules: frozenset[str] | set[str]) -> None:
    """Switch off in `machine` (a ManagerMachine subclass) every composed rule outside `rules`: a restriction of
    the one machine (Hypothesis collects a machine's rules from its attributes, so an attribute that is no
    rule removes one)."""
    for name in dir(ManagerMachine):
        if hasattr(getattr(ManagerMachine, name), "hypothesis_stateful_rule") and name not in rules:
            setattr(machine, name, None)


def find_counterexample(machine: type[ManagerMachine], g: Guard | Mutant, layer: Layer, cfg: settings,
                        refimpl_factory: Callable[[GuardSet], Any] | None = None) -> ControlResult:
    """Switch guard `g` off in `layer` (or run mutant `g`) on `machine` (the composed one or a restriction);
    search for a harm of an ID it protects. The spec layer drives `ManagerSpecAdapter(off)`;
    `refimpl_factory(off)` builds the implementation's adapter. (A campaign, every guard on, is
    `invariants.campaign.run_machine(machine, factory, cfg)`.)"""
    impl = None if refimpl_factory is None else (lambda off: lambda: refimpl_factory(off))
    return hunt(machine, g, layer, cfg, spec=lambda off: lambda: ManagerSpecAdapter(off), impl=impl)
