"""The composed transactions campaign: the composed machine restricted to transactions, intents, views, bundles
and poisoning (C3 C4 C6 I5 I9 I10).

A focused campaign is a restriction of the one composed model, never a second model (issue #21): the
`TxMachine` is `invariants.manager_machine.ManagerMachine` with only its transaction, view, bundle, lease and
environment rules (`TX_RULES`), the same `spec.manager.step`, refinement and predicates (`invariants.manager`),
plus four steered rules the whole machine draws too rarely: `crossed_needs` (two transactions declare the same
two full authorities in opposite orders and each reserves once: C4's stable order), `retry_place` (a
transaction misses, aborts and is retried by naming its intent, beside a newcomer: C4's place), `own_view`
(a transaction runs on its own view, named by a generation a remap replaced and by the current one, and
commits while bound: C6, I9) and `poison` (the shared ledger found corrupt, then every kind of grant is tried
and refused, and what was granted before settles: I5). The poisoning is an environment event: refimpl
reaches it through the test hook `refimpl.verify.manager_hooks.corrupt_ledger`.
`situations` counts what the campaign reached (`TX_SITUATIONS`).

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from invariants.manager_machine import ManagerMachine, restrict
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.types import AllocState, Role

__all__ = ["TX_RULES", "TX_SITUATIONS", "TxMachine", "tx_situations"]

#: The composed machine's rules this restriction keeps (with its own steered `crossed_needs`, `retry_place`,
#: `own_view`, `poison`).
TX_RULES = ("plan_and_reserve", "transaction", "bundle_commit", "view", "lose_while_held", "release_lease",
            "environment", "crossed_needs", "retry_place", "own_view", "poison")

#: What the campaign must reach (counted per accepted step, `CampaignStats.events`).
TX_SITUATIONS = ("transaction committed", "transaction aborted", "retry took back its place",
                 "commit ended its own execution", "poisoned manager settled a grant")


def tx_situations(prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
    """The transaction cases an accepted step met, read from the two abstractions."""
    out = []
    if isinstance(action, M.CommitTx):
        out.append("transaction committed")
        if any(u == action.tx for v in prev.views.values() for u, _ in v.users):
            out.append("commit ended its own execution")
    if isinstance(action, M.AbortTx):
        out.append("transaction aborted")
    if isinstance(action, M.PlanTx) and action.retry is not None:
        out.append("retry took back its place")
    if prev.poisoned and isinstance(action, (M.AbortTx, M.CommitTx, M.Claim, A.Release, M.CancelTicket)):
        out.append("poisoned manager settled a grant")
    return tuple(out)


class TxMachine(ManagerMachine):
    """The composed machine, restricted to the transaction rules (`TX_RULES`); same adapters, same spec."""

    def situations(self, prev: M.Manager, action: Any, now: M.Manager) -> tuple[str, ...]:
        return tx_situations(prev, action, now)

    @rule(data=st.data())
    def crossed_needs(self, data: st.DataObject) -> None:
        """Two transactions need all the room left on the same two authorities, declared in opposite orders; each
        reserves once (in stable id order the second misses on the first's authority: C4), then each aborts or
        reserves on."""
        live = [aid for aid in self._active() if self.abs.ledger.authorities[aid].used
                < self.abs.ledger.authorities[aid].limit]
        if len(live) < 2:
            return
        low, high = sorted(data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True)))
        room = {aid: self.abs.ledger.authorities[aid].limit - self.abs.ledger.authorities[aid].used
                for aid in (low, high)}
        tids = []
        for order in ((low, high), (high, low)):
            tids.append(self.abs.next_tx)
            self._do(M.PlanTx(data.draw(st.sampled_from(self._holders())), tuple((a, room[a]) for a in order)))
        for tid in tids:
            if tid in self.abs.txs:
                self._do(M.ReserveTx(tid))
        for tid in tids:
            if tid in self.abs.txs:
                self._do(M.AbortTx(tid) if data.draw(st.booleans()) else M.ReserveTx(tid))

    @rule(data=st.data())
    def retry_place(self, data: st.DataObject) -> None:
        """A transaction that cannot fit (the headroom is one byte short) aborts, a newcomer plans, and the
        first retries naming its intent: it keeps its submit sequence, priority and age (C4)."""
        live = self._active()
        if not live:
            return
        aid, holder = data.draw(st.sampled_from(live)), data.draw(st.sampled_from(self._holders()))
        a = self.abs.ledger.authorities[aid]
        tid = self.abs.next_tx
        self._do(M.PlanTx(holder, ((aid, max(1, min(a.limit, a.limit - a.used + 1))),), data.draw(st.integers(0, 3))))
        if tid not in self.abs.txs:
            return
        self._do(M.ReserveTx(tid))  # a miss, mostly (refused: the transaction stays open)
        self._do(M.AbortTx(tid))
        self._do(M.PlanTx(data.draw(st.sampled_from(self._holders())), ((aid, 1),)))  # a newcomer
        for _ in range(data.draw(st.integers(1, 2))):  # the retry; sometimes a second one (refused: spent)
            retry = self.abs.next_tx
            self._do(M.PlanTx(holder, ((aid, 1),), 0, tid))
            if retry in self.abs.txs:
                self._do(M.ReserveTx(retry))
                self._do(M.CommitTx(retry) if data.draw(st.booleans()) else M.AbortTx(retry))

    @rule(data=st.data())
    def own_view(self, data: st.DataObject) -> None:
        """A one-byte transaction publishes its view, remapped up to twice while still idle (I9); its execution
        names the view by the generation it was published at (stale after a remap: refused, C6), then by the
        current one; a remap while it is bound is refused (I9); the transaction commits: its execution ends (C6).
        Then the view is dropped and its lease released, so the rule leaves no byte pinned behind it."""
        live = self._active()
        if not live:
            return
        tid, vid, holder = self.abs.next_tx, self.abs.next_view, data.draw(st.sampled_from(self._holders()))
        self._do(M.PlanTx(holder, ((data.draw(st.sampled_from(live)), 1),)))
        if tid not in self.abs.txs:
            return
        self._do(M.ReserveTx(tid))
        self._do(M.PublishView(tid))
        if vid not in self.abs.views:
            return
        for _ in range(data.draw(st.integers(0, 2))):
            self._do(M.RemapView(vid))
        self._do(M.ExecuteView(tid, vid, 1))
        if vid in self.abs.views and not self.abs.views[vid].users:
            self._do(M.ExecuteView(tid, vid, self.abs.views[vid].generation))
        self._do(M.RemapView(vid))
        self._do(M.CommitTx(tid))
        if (v := self.abs.views.get(vid)) is not None and v.allocation is not None:
            self._do(M.DropView(vid))
            self._do(A.Release(holder, v.allocation))

    @rule(data=st.data())
    def poison(self, data: st.DataObject) -> None:
        """Rarely, the shared ledger found corrupt: every kind of grant is then tried (refused, I5), and what
        was granted before settles (aborts, claims, releases)."""
        if not self.abs.poisoned and data.draw(st.integers(0, 5)):
            return
        self._do(M.CorruptLedger())
        live, holders = self._active(), self._holders()
        if live and holders:
            aid, h = data.draw(st.sampled_from(live)), data.draw(st.sampled_from(holders))
            tier = self.abs.ledger.authorities[aid].tier
            for act in (M.Submit(h, aid, 1), M.TryReserve(h, aid, 1), M.PlanTx(h, ((aid, 1),)),
                        A.Reserve(h, aid, tier, 1, Role.STAGING), A.RecordCommitted(h, aid, tier, 1, Role.STAGING)):
                self._do(act)
        for tid in sorted(self.abs.txs):
            self._do(M.ReserveTx(tid))
            self._do(M.AbortTx(tid))
        for t in sorted(self.abs.tickets.values(), key=lambda t: t.id):
            self._do(M.Claim(t.holder, t.id))
        leases = [r for r in self.abs.ledger.allocations.values() if r.state is AllocState.LIVE]
        if leases:
            r = data.draw(st.sampled_from(sorted(leases, key=lambda r: r.id)))
            self._do(A.Release(r.holder, r.id))


restrict(TxMachine, TX_RULES)  # every composed rule outside `TX_RULES` is switched off
