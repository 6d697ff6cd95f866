"""The composed campaign's model-view rules: publish, execute, remap, drop, and the lease under a view.

A mixin of `invariants.manager_machine.ManagerMachine` (its helpers `_do`,
`_pick`, `_holder`, `_authority` and the abstraction `abs`): a transaction's
view published (refused while a need is unreserved, C4), bound by its own
execution or, once committed, by later ones (a stale generation or another
open transaction's provisional view refused, C6), remapped (refused while
bound, I9), dropped (refused while bound or still provisional, I9), and the
lease under a view released, quarantined or given up before and after its
view is dropped (refused while the view stands, C6).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from spec import ledger_actions as A
from spec import manager_actions as M
from spec.types import AllocState, ViewState

__all__ = ["ViewRules"]


class ViewRules:
    """Rules and helpers over `spec.manager`'s model views (mixed into ManagerMachine)."""

    abs: Any
    _do: Any
    _pick: Any
    _holder: Any
    _authority: Any
    _bundle_step: Any
    _active: Any

    @rule(data=st.data(), op=st.sampled_from(("publish", "execute", "execute", "remap", "drop")))
    def view(self, data: st.DataObject, op: str) -> None:
        """Model views (C4, C6, I9): publish a transaction's view (refused while a need is unreserved); bind its
        own or a committed view, sometimes at a stale generation or another open transaction's provisional view
        (both refused); remap, mostly an unbound view (refused while bound); drop a view (`_drop`)."""
        if op == "drop":
            self._drop(data)
            return
        views, txs = self.abs.views, self.abs.txs
        if op == "publish":
            if data.draw(st.booleans()):  # a fresh one-byte transaction, reserved: most can publish
                tid = self.abs.next_tx
                self._do(M.PlanTx(self._holder(data), ((self._authority(data), 1),)))
                self._do(M.ReserveTx(tid))
            txs = self.abs.txs
            ready = [x.id for x in txs.values() if len(x.held) == len(x.needs)]
            tid, vid = self._pick(data, txs.keys(), self.abs.next_tx, ready), self.abs.next_view
            self._do(M.PublishView(tid))
            then = data.draw(st.integers(0, 3)) if vid in self.abs.views else None
            if then == 0:  # published: bound at once (C6), as an engine does
                self._do(M.ExecuteView(tid, vid, self.abs.views[vid].generation))
            elif then == 1:  # published and idle: remapped (I9)
                self._do(M.RemapView(vid))
        elif op == "remap":
            idle = [v.id for v in views.values() if not v.users]
            self._do(M.RemapView(self._pick(data, views.keys(), self.abs.next_view,
                                            idle if data.draw(st.booleans()) else ())))
        else:
            tid = self._pick(data, txs.keys(), self.abs.next_tx, [v.tx for v in views.values() if v.tx in txs])
            mine = [v.id for v in views.values() if v.tx == tid or v.tx not in txs]
            others = [v.id for v in views.values() if v.tx != tid and v.tx in txs]  # refused (C6)
            vid = self._pick(data, views.keys(), self.abs.next_view,
                             others if others and data.draw(st.integers(0, 3)) == 0 else mine)
            v = views.get(vid)
            self._do(M.ExecuteView(tid, vid, (v.generation if v is not None else 1) + (data.draw(st.integers(0, 5)) == 0)))

    @rule(data=st.data())
    def remap_idle_view(self, data: st.DataObject) -> None:
        """Steered (random search rarely holds an idle view when it draws a remap): a committed view remapped
        while idle (accepted, I9); a fresh execution names the replaced generation (refused, C6), binds the
        current one, and a remap is refused (ViewInUse, I9) until its transaction aborts; then the view is
        remapped again or not, dropped, and its lease released."""
        vid = self._fresh_view(data, commit=True)
        if vid is None or (v := self.abs.views[vid]).tx in self.abs.txs:  # refused commit (a poisoned bundle)
            if vid is not None:
                self._do(M.AbortTx(v.tx))
            return
        self._do(M.RemapView(vid))
        own = self._fresh_view(data, commit=False)
        if own is not None:
            tx = self.abs.views[own].tx
            self._do(M.ExecuteView(tx, vid, v.generation))  # the generation the remap replaced
            self._do(M.ExecuteView(tx, vid, self.abs.views[vid].generation))
            self._do(M.RemapView(vid))
            self._do(M.AbortTx(tx))  # its execution ends (and its own view goes)
        if data.draw(st.booleans()):
            self._do(M.RemapView(vid))
        self._do(M.DropView(vid))
        if (r := self.abs.ledger.allocations.get(v.allocation)) is not None and r.state is AllocState.LIVE:
            self._do(A.Release(r.holder, r.id))

    @rule(data=st.data())
    def execute_foreign_provisional(self, data: st.DataObject) -> None:
        """Steered (the `view` rule binds another open transaction's provisional view only when two happen to be
        open): two transactions publish provisional views, one binds the other's (refused: that transaction may
        still abort its bytes, C6), then both abort."""
        first = self._fresh_view(data, commit=False)
        second = self._fresh_view(data, commit=False)
        if first is not None and second is not None:
            v = self.abs.views[first]
            self._do(M.ExecuteView(self.abs.views[second].tx, first, v.generation))
        for vid in (first, second):
            if vid is not None and (tx := self.abs.views[vid].tx) in self.abs.txs:
                self._do(M.AbortTx(tx))

    def _drop(self, data: st.DataObject) -> None:
        """Drop a view: mostly a committed one (sometimes first bound by a fresh execution: ViewInUse, I9),
        sometimes a provisional one (refused); before the drop, its lease is released or quarantined (refused,
        C6); after it, the lease is released (accepted)."""
        if not self._committed() or data.draw(st.integers(0, 3)) == 0:  # a committed view: its own transaction's
            self._fresh_view(data, commit=True)
        done = self._committed()
        if done and data.draw(st.booleans()):  # a fresh execution binds a committed view first
            v = self.abs.views[data.draw(st.sampled_from(done))]
            own = self._fresh_view(data, commit=False)
            if v.state is ViewState.MAPPED and own is not None:
                self._do(M.ExecuteView(self.abs.views[own].tx, v.id, v.generation))
        vid = self._pick(data, self.abs.views.keys(), self.abs.next_view, done)
        v = self.abs.views.get(vid)
        r = self.abs.ledger.allocations.get(v.allocation) if v is not None and v.allocation is not None else None
        if r is not None and r.state is AllocState.LIVE and data.draw(st.booleans()):
            # the lease under a standing view: refused (C6)
            self._do(A.Quarantine(r.holder, r.id, 0) if data.draw(st.integers(0, 3)) == 0 else A.Release(r.holder, r.id))
        self._do(M.DropView(vid))
        if r is not None and vid not in self.abs.views and data.draw(st.booleans()):
            self._do(A.Release(r.holder, r.id))  # the view is gone: the lease is the holder's again

    def _committed(self) -> list[int]:
        return sorted(v.id for v in self.abs.views.values() if v.tx not in self.abs.txs)

    def _fresh_view(self, data: st.DataObject, commit: bool) -> int | None:
        """A one-byte transaction reserved and its view published (and committed): the view id, None if refused."""
        tid, vid = self.abs.next_tx, self.abs.next_view
        active = self._active()
        two = commit and len(active) > 1 and data.draw(st.integers(0, 2)) == 0  # a step over two ledgers (I10)
        self._do(M.PlanTx(self._holder(data), tuple((a, 1) for a in active[:2]) if two
                          else ((self._authority(data), 1),)))
        self._do(M.ReserveTx(tid))
        if two:
            self._do(M.ReserveTx(tid))
        self._do(M.PublishView(tid))
        if commit:
            if data.draw(st.booleans()):
                self._bundle_step(data, tid)  # as an engine commits a decode step: the bundle moves with it (I10)
            self._do(M.CommitTx(tid))
        return vid if vid in self.abs.views else None
