"""The composed campaign's steered cross-part rules: situations random search rarely builds.

A mixin of `invariants.manager_machine.ManagerMachine` (its helpers `_do`,
`_active`, `_holders`, `_headroom`, `_leases` and the abstraction `abs`); each rule builds
one meeting of parts that `invariants.manager_events.situations` counts: a
ticket granted but unclaimed while a transaction reserves on its authority; a
limit raised while a ticket waits, a cancel or timeout whose round must grant
the waiter behind it (I13), a device lost while it holds a quarantined lease
or while a two-ledger transaction holds on it (C3); and a tier's process quota (I1) set a little above what the
tier charges, so the two device ledgers meet it (a credit on one is room for a waiter on the other). And one for
arbitration itself (I13): two waiters of different priority behind one lease whose release has room for one of
them, so a governor that grants by the wrong priority is caught in a few steps; and a request just too big for the
headroom behind a burst of small newcomers until it matures (`burst`), so one that lets newcomers overtake a
matured waiter (aging ignored) is too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from spec import ledger_actions as A
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import ContextState, Role, Tier

__all__ = ["SteeredRules"]


class SteeredRules:
    """Steered rules over `spec.manager`'s parts where they meet (mixed into ManagerMachine)."""

    abs: Any
    _do: Any
    _active: Any
    _holders: Any
    _headroom: Any
    _leases: Any
    _reconfigure: Any

    @rule(data=st.data(), order=st.permutations((0, 3)))
    def order_among_waiters(self, data: st.DataObject, order: list[int]) -> None:
        """Two waiters of different priority (in either submit order) behind one lease, each too big to fit beside
        the other; its release makes room for one: the design's order grants the higher priority (I13). (Two
        granted at once would not show the order to a governor with ids of its own.)"""
        leases = [r for r in self._leases() if self.abs.ledger.authorities[r.authority].context is ContextState.ACTIVE
                  and r.authority not in self.abs.changes]
        if not leases:
            return
        r = data.draw(st.sampled_from(leases))
        room = self._headroom(r.authority)
        low = max(room + 1, (room + r.charge) // 2 + 1)  # waits now; two never fit together
        if low > room + r.charge:
            return
        for priority in order:  # each fits alone once the lease is released: the order decides which is granted
            self._do(M.Submit(data.draw(st.sampled_from(self._holders())), r.authority,
                              data.draw(st.integers(low, room + r.charge)), priority, Role.KV))
        self._do(A.Release(r.holder, r.id))

    def _lease_on(self, aid: int, holder: int, nbytes: int) -> None:
        tid = self.abs.next_ticket
        self._do(M.Submit(holder, aid, nbytes, 0, Role.KV))
        t = self.abs.tickets.get(tid)
        if t is not None and t.state is TicketState.GRANTED:
            self._do(M.Claim(holder, tid))

    @rule(data=st.data(), count=st.integers(2, 5), nbytes=st.integers(1, 2), priority=st.sampled_from((0, 0, 1)))
    def burst(self, data: st.DataObject, count: int, nbytes: int, priority: int) -> None:
        """A request just too big for the headroom, then a stream of small newcomers (each Submit a round, so
        the big one ages and matures: I13), then leases return until the matured misfit is granted."""
        live = [a for a in self._active() if self.abs.ledger.authorities[a].capacity >= 4]
        if not live:
            return
        aid = data.draw(st.sampled_from(live))
        holders = self._holders()
        big_holder, small = data.draw(st.sampled_from(holders)), data.draw(st.sampled_from(holders))
        a = self.abs.ledger.authorities[aid]
        if a.limit - a.used == a.limit:
            self._lease_on(aid, small, 1)  # nothing held: nothing could be "just too big"
        a = self.abs.ledger.authorities[aid]
        if a.limit - a.used < a.limit:
            self._do(M.Submit(big_holder, aid, a.limit - a.used + 1, 0, Role.KV))
        for _ in range(count):
            self._lease_on(aid, small, nbytes)
        if data.draw(st.integers(0, 5)) == 0:  # a pressure opened, then a reconfigure: its answer is stale (C5)
            self._do(M.Press(small, aid, 1))
            self._reconfigure(data)
        if data.draw(st.integers(0, 3)):
            for r in self._leases(None, aid):  # returned capacity accumulates for the matured waiter
                self._do(A.Release(r.holder, r.id))
                if not any(t.state is TicketState.PENDING and t.authority == aid for t in self.abs.tickets.values()):
                    break

    @rule(data=st.data())
    def raise_while_waiting(self, data: st.DataObject) -> None:
        """A limit lowered, a ticket that no longer fits waits, then the limit is raised: the raise grants it."""
        live = self._active()
        if not live:
            return
        aid = data.draw(st.sampled_from(live))
        a = self.abs.ledger.authorities[aid]
        if aid not in self.abs.changes and a.limit == a.capacity and a.used < a.capacity:
            self._do(M.PrepareLimit(aid, a.used))
            self._do(M.CommitLimit(aid))
        a = self.abs.ledger.authorities[aid]
        low = max(1, a.limit - a.used + 1)  # does not fit now, can fit the limit: it waits
        if a.limit < a.capacity and aid not in self.abs.changes and low <= a.limit:
            self._do(M.Submit(data.draw(st.sampled_from(self._holders())), aid, data.draw(st.integers(low, a.limit)),
                              data.draw(st.integers(0, 3)), Role.KV))
            self._do(M.PrepareLimit(aid, a.capacity))
            self._do(M.CommitLimit(aid))

    @rule(data=st.data())
    def cancel_frees_a_waiter(self, data: st.DataObject) -> None:
        """A granted ticket holds an authority's headroom, a second one waits behind it; cancelling or timing out
        the first must let the round grant the second (I13)."""
        live = [aid for aid in self._active() if self._headroom(aid) >= 1 and aid not in self.abs.changes]
        if not live:
            return
        aid = data.draw(st.sampled_from(live))
        first, holder = self.abs.next_ticket, data.draw(st.sampled_from(self._holders()))
        self._do(M.Submit(holder, aid, self._headroom(aid), data.draw(st.integers(0, 3)), Role.KV))
        if (t := self.abs.tickets.get(first)) is None or t.state is not TicketState.GRANTED:
            return
        self._do(M.Submit(data.draw(st.sampled_from(self._holders())), aid, data.draw(st.integers(1, t.nbytes)),
                          data.draw(st.integers(0, 3)), Role.KV))
        self._do(data.draw(st.sampled_from((M.CancelTicket, M.TimeoutTicket)))(holder, first))

    @rule(data=st.data())
    def lose_while_held(self, data: st.DataObject) -> None:
        """A device lost while it holds a quarantined lease or a two-ledger transaction's bytes; new work on it then."""
        live = self._active()
        if len(live) < 2 or data.draw(st.integers(0, 2)):
            return  # device loss stays rare: an example keeps its authorities long enough to get deep
        first, second = sorted(data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True)))
        holder = data.draw(st.sampled_from(self._holders()))
        lost = None
        if data.draw(st.booleans()):
            lost, rid = first, self.abs.ledger.next_allocation  # the quarantined lease's device
            self._do(A.Reserve(holder, first, self.abs.ledger.authorities[first].tier, 1, Role.WEIGHTS))
            if rid in self.abs.ledger.allocations:
                self._do(A.Commit(holder, rid, 1))
                self._do(A.Quarantine(holder, rid, 0))
        else:
            tid = self.abs.next_tx
            self._do(M.PlanTx(holder, ((first, 1), (second, 1))))
            self._do(M.ReserveTx(tid))
            if data.draw(st.booleans()):
                self._do(M.ReserveTx(tid))
        self._do(A.LoseDevice(lost := lost or data.draw(st.sampled_from((first, second)))))
        self._do(M.PlanTx(holder, ((lost, 1),)))  # refused: a lost context gets no new work (C3)

    @rule(data=st.data())
    def process_quota(self, data: st.DataObject) -> None:
        """Set a tier's process quota (SetProcessQuota, I1) 0-6 B above what it charges; at times below it
        (CapacityDenied), removed (None: its waiters may fit now), or bad input."""
        tier = data.draw(st.sampled_from((Tier.DEVICE, Tier.DEVICE, Tier.HOST)))
        charged = sum(a.used for a in self.abs.ledger.authorities.values() if a.alias_of is None and a.tier is tier)
        pick = data.draw(st.integers(0, 9))
        nbytes: Any = (None if pick == 0 else max(0, charged - 1) if pick == 1 else data.draw(st.sampled_from(
            (-1, 2**63, True, 1.5, "1"))) if pick == 2 else charged + data.draw(st.integers(0, 6)))
        self._do(M.SetProcessQuota(tier if data.draw(st.integers(0, 30)) else "device", nbytes))

    @rule(data=st.data())
    def contend(self, data: st.DataObject) -> None:
        """Where parts meet: a ticket granted but unclaimed while a transaction reserves on its authority."""
        live = self._active()
        if not live:
            return
        aid = data.draw(st.sampled_from(live))
        room = self._headroom(aid)
        if room < 1:
            return
        holder = data.draw(st.sampled_from(self._holders()))
        tid = self.abs.next_ticket
        self._do(M.Submit(holder, aid, data.draw(st.integers(1, room)), 0, Role.KV))
        t = self.abs.tickets.get(tid)
        if t is None or t.state is not TicketState.GRANTED:
            return
        # The bytes are the ticket's until it is claimed or cancelled: a reservation of the rest plus one is refused.
        other = data.draw(st.sampled_from(self._holders()))
        txid = self.abs.next_tx
        self._do(M.PlanTx(other, ((aid, self._headroom(aid) + data.draw(st.integers(0, t.nbytes))),)))
        if txid in self.abs.txs:
            self._do(M.ReserveTx(txid))
            if txid in self.abs.txs and data.draw(st.booleans()):
                self._do(M.AbortTx(txid))
        if data.draw(st.integers(0, 9)) == 0:
            self._do(A.LoseDevice(aid))  # device loss while the grant is unclaimed and a transaction may hold
        elif data.draw(st.integers(0, 2)):
            self._do(M.Claim(holder, tid))
        else:
            self._do(data.draw(st.sampled_from((M.CancelTicket, M.TimeoutTicket)))(holder, tid))
