"""The stateful checker for capacity transactions: refinement + invariants after every step.

A sibling of `invariants.ledger_machine.GovernorMachine` for the transaction model
(`spec.transactions`). An adapter executes one `spec.transactions_actions` action and
returns its abstraction (`TxState`). After every step the machine checks:

  (a) `check_step` for accepted steps, then `check_all` on the abstraction;
  (b) refinement: the concrete step equals `spec.transactions.step` on the
      previous abstraction (same result, same next state, same error type);
  (c) a rejected action leaves the whole abstraction unchanged (G4).

Rules draw mostly valid ids (so transactions get deep: reserve, publish,
execute, commit) and on purpose also bad input: unknown and retired ids,
out-of-order reservations, stale generations, lost contexts, bad bytes.
`run_tx_campaign` / `find_tx_counterexample` are the campaign runners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from hypothesis import settings

from invariants.campaign import CampaignStats, ControlResult, hunt, run_machine
from invariants.checked import CheckedMachine
from invariants.transactions import check_all, check_step
from spec import transactions_actions as T
from spec.guards import ALL_ON, Guard, GuardSet, Layer
from spec.transactions import TX_EMPTY, TxState, step as spec_step
from spec.transactions_lifecycle import TxPhase, ViewKind
from spec.types import ContextState

__all__ = ["TxAdapter", "TxSpecAdapter", "TxMachine", "run_tx_campaign",
           "find_tx_counterexample"]


class TxAdapter(Protocol):
    def execute(self, action: Any) -> Any:
        """Perform `action`; return its result or raise the spec's `GovernorError`."""

    def abstract(self) -> TxState:
        """The coordinator's state mapped to `TxState` (the refinement mapping)."""


class TxSpecAdapter:
    """The spec itself as a coordinator: for spec-only runs and spec negative controls."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.state, self.guards = TX_EMPTY, guards

    def execute(self, action: Any) -> Any:
        self.state, result = spec_step(self.state, action, self.guards)
        return result

    def abstract(self) -> TxState:
        return self.state


AUTHORITIES = (("device", 24), ("host", 32), ("staging", 16))
BAD_BYTES = (0, -1, 2**63, True, 1.5)
BAD_IDS = (0, -1, None, "1")
_OPEN = (TxPhase.PLANNED, TxPhase.RESERVING)


class TxMachine(CheckedMachine):
    """Subclass and set `adapter_factory` (a no-argument adapter factory)."""

    adapter_factory: Callable[[], TxAdapter] = TxSpecAdapter

    def __init__(self) -> None:
        super().__init__()
        self.start(type(self).adapter_factory(), TX_EMPTY)

    def spec_step(self, state: TxState, action: Any) -> tuple[TxState, Any]:
        return spec_step(state, action)

    def check_state(self, state: TxState) -> None:
        check_all(state)

    def check_step(self, prev: TxState, action: Any, now: TxState) -> None:
        check_step(prev, action, now)

    # --- pickers -------------------------------------------------------------

    def _pick(self, data: st.DataObject, ids: Any, nxt: int, prefer: Any = ()) -> Any:
        prefer, known = sorted(prefer), sorted(ids)
        k = data.draw(st.integers(0, 19))
        if k == 0 or not known:
            return data.draw(st.sampled_from(BAD_IDS + (nxt, nxt + 3)))
        if k == 1 and nxt > 1:
            return data.draw(st.integers(1, nxt - 1))  # possibly retired
        if prefer and k > 4:
            return data.draw(st.sampled_from(prefer))
        return data.draw(st.sampled_from(known))

    def _tx(self, data: st.DataObject, *phases: TxPhase) -> Any:
        prefer = [t.id for t in self.abs.txs.values() if t.phase in phases]
        return self._pick(data, self.abs.txs.keys(), self.abs.next_tx, prefer)

    def _view(self, data: st.DataObject) -> Any:
        return self._pick(data, self.abs.views.keys(), self.abs.next_view)

    # --- rules ---------------------------------------------------------------

    @initialize(n=st.integers(2, 3), bundles=st.integers(1, 2))
    def setup(self, n: int, bundles: int) -> None:
        for name, capacity in AUTHORITIES[:n]:
            self._do(T.AddAuthority(name, capacity))
        for _ in range(bundles):
            self._do(T.OpenBundle())

    @rule(data=st.data(), priority=st.integers(0, 9), kind=st.sampled_from(ViewKind))
    def plan(self, data: st.DataObject, priority: int, kind: ViewKind) -> None:
        auths = sorted(self.abs.authorities.keys())
        pool = auths + [self.abs.next_authority] if data.draw(st.integers(0, 9)) == 0 else auths
        if not pool:
            pool = [1]
        chosen = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
        needs: Any = tuple((a, data.draw(st.integers(1, 12) if data.draw(st.integers(0, 15)) else
                                          st.sampled_from(BAD_BYTES + (40,)))) for a in chosen)
        if data.draw(st.integers(0, 30)) == 0:
            needs = data.draw(st.sampled_from(((), [(1, 1)], ((1,),), ((1, 1), (1, 2)))))
        bundle = None
        if data.draw(st.integers(0, 2)):
            bundle = self._pick(data, self.abs.bundles.keys(), self.abs.next_bundle)
        retry = None
        if (self.abs.intents and data.draw(st.booleans())) or data.draw(st.integers(0, 15)) == 0:
            retry = self._pick(data, self.abs.intents.keys(), self.abs.next_intent)
        if data.draw(st.integers(0, 30)) == 0:
            priority = data.draw(st.sampled_from((-1, 10, True)))
        self._do(T.Plan(needs, priority, kind, bundle, retry))

    @rule(data=st.data())
    def reserve(self, data: st.DataObject) -> None:
        tid = self._tx(data, *_OPEN)
        t = self.abs.txs.get(tid)
        if t is not None and t.phase in _OPEN and data.draw(st.integers(0, 5)) > 0:
            held = {a for a, _ in t.held}
            unheld = sorted(a for a, _ in t.needs if a not in held)
            aid = unheld[0] if data.draw(st.booleans()) else data.draw(st.sampled_from(unheld))
        else:
            aid = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority)
        self._do(T.Reserve(tid, aid))

    @rule(data=st.data(), op=st.sampled_from(("publish", "execute", "execute", "commit", "commit", "abort",
                                               "release")))
    def progress(self, data: st.DataObject, op: str) -> None:
        if op == "publish":
            self._do(T.Publish(self._tx(data, TxPhase.RESERVED, TxPhase.RESERVING)))
        elif op == "execute":
            tid = self._tx(data, TxPhase.PUBLISHED, TxPhase.EXECUTING)
            own = [v.id for v in self.abs.views.values() if v.allocation == tid]
            shared = [v.id for v in self.abs.views.values()
                      if v.allocation in self.abs.txs and self.abs.txs[v.allocation].phase is TxPhase.COMMITTED]
            choices = own * 3 + shared
            vid = data.draw(st.sampled_from(choices)) if choices and data.draw(st.integers(0, 5)) else self._view(data)
            v = self.abs.views.get(vid)
            gen: Any = v.generation if v is not None else 1
            if data.draw(st.integers(0, 3)) == 0:
                gen = data.draw(st.sampled_from((gen - 1 if gen > 1 else 0, gen + 1, gen + 1, None)))
            self._do(T.Execute(tid, vid, gen))
        elif op == "commit":
            self._do(T.Commit(self._tx(data, TxPhase.EXECUTING)))
        elif op == "abort":
            # I5/I10's case first: a bundle's transaction aborted part-way through its execution
            partial = sorted(t.id for t in self.abs.txs.values() if t.phase is TxPhase.EXECUTING and t.bundle)
            if partial and data.draw(st.booleans()):
                self._do(T.Abort(data.draw(st.sampled_from(partial))))
            else:
                self._do(T.Abort(self._tx(data, *(_OPEN + (TxPhase.RESERVED, TxPhase.PUBLISHED, TxPhase.EXECUTING)))))
        else:
            self._do(T.Release(self._tx(data, TxPhase.COMMITTED)))

    @rule(data=st.data(), priority=st.integers(0, 9), kind=st.sampled_from(ViewKind))
    def open_and_reserve(self, data: st.DataObject, priority: int, kind: ViewKind) -> None:
        """A valid multi-authority transaction, reserved in stable order until held or missed."""
        live = sorted(a.id for a in self.abs.authorities.values() if a.context.value == "active")
        if not live:
            return
        chosen = data.draw(st.lists(st.sampled_from(live), min_size=min(2, len(live)), max_size=3, unique=True))
        needs = tuple((a, data.draw(st.integers(1, 10))) for a in chosen)
        bundles = sorted(b.id for b in self.abs.bundles.values() if b.state.value == "active")
        bundle = data.draw(st.sampled_from(bundles)) if bundles and data.draw(st.integers(0, 3)) else None
        before = self.abs.next_tx
        self._do(T.Plan(needs, priority, kind, bundle))
        t = self.abs.txs.get(before)
        while t is not None and t.phase in _OPEN:
            held = {a for a, _ in t.held}
            unheld = sorted(a for a, _ in t.needs if a not in held)
            if data.draw(st.integers(0, 3)) == 0:
                self._do(T.Reserve(t.id, unheld[-1]))  # the highest first: out of order unless alone (C4)
                return
            self._do(T.Reserve(t.id, unheld[0]))
            t = self.abs.txs.get(before)
        if t is not None and t.phase is TxPhase.RESERVED and data.draw(st.integers(0, 2)) == 0:
            view = self.abs.next_view
            self._do(T.Publish(t.id))  # and run it to commit
            self._do(T.Execute(t.id, view, 1))
            self._do(T.Commit(t.id))

    @rule(data=st.data())
    def contend(self, data: st.DataObject) -> None:
        """Two large requests declared in opposite orders, each reserving its first declared need.

        Each needs more than half of both authorities, so neither fits beside the other: with ordered
        reservation the second one's out-of-order reserve is refused and its in-order one misses (an
        intent is left); without it each holds what the other needs (the hold-and-wait cycle, C4).
        """
        live = sorted(a.id for a in self.abs.authorities.values() if a.context.value == "active")
        if len(live) < 2:
            return
        lo, hi = sorted(data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True)))
        caps = {a: self.abs.authorities[a].capacity for a in (lo, hi)}

        def big(a: int) -> int:
            return data.draw(st.integers(caps[a] // 2 + 1, caps[a]))
        first, second = self.abs.next_tx, self.abs.next_tx + 1
        self._do(T.Plan(((lo, big(lo)), (hi, big(hi))), data.draw(st.integers(0, 9)), ViewKind.CONTIGUOUS))
        self._do(T.Plan(((hi, big(hi)), (lo, big(lo))), data.draw(st.integers(0, 9)), ViewKind.CONTIGUOUS))
        self._do(T.Reserve(first, lo))
        self._do(T.Reserve(second, hi))  # out of order: refused (C4 bad input) unless the guard is off
        if data.draw(st.booleans()):
            self._do(T.Reserve(second, lo))  # in order: misses beside the first, leaves an intent

    @rule(data=st.data())
    def share_view(self, data: st.DataObject) -> None:
        """A running execution reads a view it does not own, and the view's owner tries to go away.

        A committed transaction's view is shared (legal); releasing its lease set while another
        execution reads it must be refused (the view is in use). Another transaction's provisional
        view must be refused outright (C6). Both cases are rare in random scripts, so they are
        steered to here rather than hoped for.
        """
        readers = sorted(t.id for t in self.abs.txs.values() if t.phase in (TxPhase.PUBLISHED, TxPhase.EXECUTING))
        if not readers:
            return
        tid = data.draw(st.sampled_from(readers))
        others = sorted(v.id for v in self.abs.views.values()
                        if v.allocation != tid and v.state.value == "mapped" and tid not in v.users)
        if not others:
            return
        v = self.abs.views[data.draw(st.sampled_from(others))]
        self._do(T.Execute(tid, v.id, v.generation))
        owner = self.abs.txs.get(v.allocation)
        if owner is not None and owner.phase is TxPhase.COMMITTED and data.draw(st.booleans()):
            self._do(T.Release(owner.id))  # under a reader: refused unless the reader has ended

    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Take one transaction one step along the happy path (keeps campaigns deep)."""
        live = sorted(self.abs.txs.keys())
        if not live:
            return
        t = self.abs.txs[data.draw(st.sampled_from(live))]
        if t.phase in _OPEN and data.draw(st.integers(0, 5)) == 0:
            self._do(T.Publish(t.id))  # too early: refused (C4 bad input)
        elif t.phase in _OPEN:
            held = {a for a, _ in t.held}
            self._do(T.Reserve(t.id, min(a for a, _ in t.needs if a not in held)))
        elif t.phase is TxPhase.RESERVED:
            self._do(T.Publish(t.id))
        elif t.phase is TxPhase.PUBLISHED:
            own = [v for v in self.abs.views.values() if v.allocation == t.id]
            if own:
                # Sometimes name a generation that is not current (C6 bad input).
                stale = data.draw(st.sampled_from((1, -1))) if data.draw(st.integers(0, 3)) == 0 else 0
                self._do(T.Execute(t.id, own[0].id, own[0].generation + stale))
        elif t.phase is TxPhase.EXECUTING and data.draw(st.integers(0, 3)) == 0:
            self._do(T.Remap(data.draw(st.sampled_from(t.bound))[0]))  # under its execution: refused (I9)
        elif t.phase is TxPhase.EXECUTING and data.draw(st.booleans()):
            self._do(T.Commit(t.id))
        elif t.phase is TxPhase.EXECUTING:
            shared = [v for v in self.abs.views.values() if v.state.value == "mapped" and t.id not in v.users
                      and self.abs.txs[v.allocation].phase is TxPhase.COMMITTED]
            if shared:
                v = data.draw(st.sampled_from(shared))
                self._do(T.Execute(t.id, v.id, v.generation))
        elif data.draw(st.integers(0, 2)) == 0:
            self._do(T.Release(t.id))

    @rule(data=st.data())
    def remap(self, data: st.DataObject) -> None:
        busy = [v.id for v in self.abs.views.values() if v.users]
        if busy and data.draw(st.booleans()):
            self._do(T.Remap(data.draw(st.sampled_from(busy))))  # in use: refused (I9)
        else:
            self._do(T.Remap(self._pick(data, self.abs.views.keys(), self.abs.next_view)))

    @rule(data=st.data(), kind=st.sampled_from(("lose", "confirm", "confirm", "add", "bundle", "mismatch",
                                                 "corrupt")))
    def environment(self, data: st.DataObject, kind: str) -> None:
        if kind == "corrupt":
            if data.draw(st.booleans()):
                self._do(T.CorruptLedger())
        elif kind == "bundle":
            self._do(T.OpenBundle())
        elif kind == "mismatch":
            self._do(T.ReportMismatch(self._pick(data, self.abs.bundles.keys(), self.abs.next_bundle)))
        elif kind == "add":
            name, cap = data.draw(st.sampled_from(AUTHORITIES + (("nvme", 64),)))
            self._do(T.AddAuthority(data.draw(st.sampled_from((name,) * 5 + ("",))),
                                    data.draw(st.sampled_from((cap,) * 5 + BAD_BYTES))))
        else:
            charged = [a.id for a in self.abs.authorities.values() if a.used]
            if kind == "confirm":  # C3's refund case: a lost context's termination (any other is refused)
                charged = [a.id for a in self.abs.authorities.values() if a.context is ContextState.LOST] or charged
            aid = self._pick(data, self.abs.authorities.keys(), self.abs.next_authority, charged)
            cls = T.LoseDevice if kind == "lose" else T.ConfirmTermination
            self._do(cls(aid))


def run_tx_campaign(factory: Callable[[], TxAdapter], cfg: settings, *, refine: bool = True) -> CampaignStats:
    """Run the machine; an `InvariantViolation` propagates (the campaign failed)."""
    return run_machine(TxMachine, factory, cfg, refine=refine)


def find_tx_counterexample(g: Guard, layer: Layer, cfg: settings,
                           refimpl_factory: Callable[[GuardSet], TxAdapter] | None = None) -> ControlResult:
    """Switch guard `g` off in `layer`; search for a violation of an ID it protects (or a divergence)."""
    impl = None if refimpl_factory is None else (lambda off: lambda: refimpl_factory(off))
    return hunt(TxMachine, g, layer, cfg, spec=lambda off: lambda: TxSpecAdapter(off), impl=impl)
