"""Harm clauses of the composed manager's model views (C4, C6): what an execution may read through a view.

An execution reads a transaction's bytes through a view it bound at a
mapping generation. The harms: it reads bytes that are not all reserved (a
view of a transaction still missing a need: memory in use without a charge,
C4); it reads through a replaced mapping (a bound generation that is not
the view's, whether it bound a stale one or the view was remapped under it,
C6); it reads another open transaction's provisional bytes, which that
transaction may still abort (C6); it reads through a mapped view bytes the
ledger has credited back (released, cancelled or quarantined under the view,
C6); an execution stays bound after its transaction ended, or a view id is
issued twice (C6); a remap leaves an execution bound to the replaced mapping,
a generation goes back, or a view is torn down while an execution still reads
it (I9). Each clause reads the views and transactions only, never the guards
that prevent it. Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from invariants.clauses import clause
from spec import manager_actions as M
from spec.types import AllocState, ViewState

__all__ = ["state_C4_views", "state_C6_views", "step_C6_views", "step_I9_views"]

_C4_RESERVED = clause("C4", "state_C4_views", "view_over_reserved_bytes",
                      "no open transaction has a view (so no execution reads its bytes) before every need of it "
                      "is reserved")
_C6_CURRENT = clause("C6", "state_C6_views", "no_stale_view_read",
                     "every execution bound to a view reads it at the view's current mapping generation: no stale "
                     "view read")
_C6_PRIVATE = clause("C6", "state_C6_views", "provisional_view_private",
                     "no execution reads another open transaction's provisional view")
_C6_RUNNING = clause("C6", "state_C6_views", "users_are_running",
                     "every execution bound to a view is still running (an open transaction): an ended one reads "
                     "nothing, and left bound it keeps the view from being remapped or dropped, and its bytes "
                     "pinned, for good")


def state_C4_views(m: M.Manager) -> None:
    open_views = [(v, m.txs[v.tx]) for v in m.views.values() if v.tx in m.txs]
    _C4_RESERVED.case(bool(open_views))
    for v, x in open_views:
        if len(x.held) != len(x.needs):
            _C4_RESERVED.fail(f"view {v.id} of transaction {x.id} exists with {len(x.held)} of its "
                              f"{len(x.needs)} needs reserved")


def state_C6_views(m: M.Manager) -> None:
    bound = [v for v in m.views.values() if v.users]
    _C6_CURRENT.case(bool(bound))
    _C6_PRIVATE.case(any(v.tx in m.txs for v in bound))
    _C6_RUNNING.case(bool(bound))
    for v in bound:
        ended = [u for u, _ in v.users if u not in m.txs]
        if ended:
            _C6_RUNNING.fail(f"view {v.id} is bound to execution(s) {ended}, whose transactions have ended")
        stale = [(u, g) for u, g in v.users if g != v.generation]
        if stale:
            _C6_CURRENT.fail(f"view {v.id} is at generation {v.generation}; execution(s) read it at {stale}")
        others = [u for u, _ in v.users if u != v.tx]
        if v.tx in m.txs and others:
            _C6_PRIVATE.fail(f"execution(s) {others} read view {v.id}, the provisional view of open "
                             f"transaction {v.tx}")


_C6_KEPT = clause("C6", "step_C6_views", "view_bytes_kept",
                  "no execution reads through a view bytes the ledger credited back: while a view stays mapped, "
                  "the reservation or lease it is over stays charged (provisional or live)")
_C6_FRESH = clause("C6", "step_C6_views", "view_names_fresh",
                   "a published view takes a name never issued before (at least the previous next view id, below "
                   "the new one): an execution binding (id, generation) never reaches another transaction's bytes")
_HELD = (AllocState.PROVISIONAL, AllocState.LIVE)


def step_C6_views(before: M.Manager, act: object, after: M.Manager, result: object = None) -> None:
    old = before.views
    new = [v for v in after.views.values() if (o := old.get(v.id)) is None or o.tx != v.tx]
    _C6_FRESH.case(bool(new))
    for v in new:
        if not before.next_view <= v.id < after.next_view:
            _C6_FRESH.fail(f"{act!r}: view {v.id} of transaction {v.tx} was issued with next view id "
                           f"{before.next_view} -> {after.next_view}")
    was, views = before.ledger.allocations, after.views  # one pass, each record looked up once
    kept = [(p, r) for p in before.views.values()
            if (r := was.get(p.allocation)) is not None and (v := views.get(p.id)) is not None
            and v.state is ViewState.MAPPED and r.state in _HELD]
    _C6_KEPT.case(bool(kept))
    for p, r in kept:
        now = after.ledger.allocations.get(r.id)
        if now is None or now.state not in _HELD:
            _C6_KEPT.fail(f"{act!r}: allocation {r.id} under mapped view {p.id} is "
                          f"{'gone' if now is None else now.state.value}: its readers read credited bytes")


_I9_DROP = clause("I9", "step_I9_views", "drop_fences_users",
                  "no view is torn down while an execution still reads it: a view leaves only when every execution "
                  "bound to it ended in the same step")
_I9_FORWARD = clause("I9", "step_I9_views", "generation_never_back",
                     "a view's mapping generation never goes back: a remap moves it past every generation it had, so "
                     "an old (id, generation) never names a later mapping")
_I9_FENCE = clause("I9", "step_I9_views", "remap_fences_users",
                   "after a remap no execution is left reading the replaced mapping: every execution bound to the "
                   "view reads its new generation")


def step_I9_views(before: M.Manager, act: object, after: M.Manager, result: object = None) -> None:
    remapped = [(p, after.views[p.id]) for p in before.views.values()
                if p.id in after.views and after.views[p.id].generation != p.generation]
    _I9_FENCE.case(bool(remapped))
    _I9_FORWARD.case(bool(remapped))
    for p, v in remapped:
        if v.generation < p.generation:
            _I9_FORWARD.fail(f"{act!r}: view {v.id}'s generation went back from {p.generation} to {v.generation}")
        left = [u for u, g in v.users if g == p.generation]
        if left:
            _I9_FENCE.fail(f"{act!r}: view {v.id} moved from generation {p.generation} to {v.generation} under "
                           f"execution(s) {left}")
    dropped = [p for p in before.views.values() if p.id not in after.views]
    _I9_DROP.case(bool(dropped))
    for p in dropped:
        left = [u for u, _ in p.users if u in after.txs]
        if left:
            _I9_DROP.fail(f"{act!r}: view {p.id} was dropped under execution(s) {left}, still open")
