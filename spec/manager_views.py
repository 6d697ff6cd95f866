"""The composed manager's model views (C4, C6, I9): publish, execute, remap, drop; and what a transaction's end does to them.

A transaction that holds every need publishes one provisional view over its
bytes (the lowest needed authority's reservation); only its own execution
may bind it until the transaction commits, and then the view stays, over
the leases, for any later execution to bind. An execution binds a view by
(id, mapping generation); a remap advances the generation, and only while
no execution binds the view (I9), so no execution is left reading a
replaced mapping (C6). Commit and abort end the transaction's execution
(it unbinds); abort also drops its own view; a lost device invalidates the
views over it and aborts the executions bound to them (`spec.manager`).
A committed view is dropped by DropView, only while no execution binds it
(I9); until then its lease is pinned like bytes a part holds
(`spec.manager_parts.referenced`), so no execution reads credited bytes.
Records and prose: `spec.view_actions`. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec.errors import DeviceLost, InvalidArgument, InvalidTransition, StaleGeneration, UnknownView, ViewInUse
from spec.guards import GuardSet
from spec.manager_tx import _tx
from spec.records import evolve
from spec.types import ViewState

__all__ = ["VIEW_HANDLERS", "end_execution", "lose_views"]


def _int_id(v: object, what: str) -> int:
    if type(v) is not int:
        raise InvalidArgument(f"{what} must be an int id, got {v!r:.80}")
    return v


def _view(m: M.Manager, vid: object) -> M.View:
    v = m.views.get(_int_id(vid, "view"))
    if v is None:
        if 1 <= vid < m.next_view:  # type: ignore[operator]
            raise InvalidTransition(f"view {vid} is already dropped")
        raise UnknownView(f"view {vid!r} is not known")
    return v


def _mapped(v: M.View, guards: GuardSet) -> None:
    if v.state is not ViewState.MAPPED:
        guards.refuse("mapped", DeviceLost(f"view {v.id} is invalid: its device context was lost"))


def _publish_view(m: M.Manager, act: M.PublishView, guards: GuardSet) -> tuple[M.Manager, int]:
    x = _tx(m, _int_id(act.tx, "tx"))
    # Verify the provisional view is published only when every need is held (C4).
    if len(x.held) != len(x.needs) and guards.on("publish_after_all_held"):
        guards.refuse("held", InvalidTransition(f"transaction {x.id} holds {len(x.held)} of its {len(x.needs)} "
                                                "needs: no view before every need is held"))
    if any(v.tx == x.id for v in m.views.values()):
        raise InvalidTransition(f"transaction {x.id} has already published its view")
    v = M.View(m.next_view, x.id, x.needs[0][0], x.held[0] if x.held else None, 1, ViewState.MAPPED, ())
    return evolve(m, views=m.views.set(v.id, v), next_view=v.id + 1), v.id


def _execute_view(m: M.Manager, act: M.ExecuteView, guards: GuardSet) -> tuple[M.Manager, None]:
    _int_id(act.tx, "tx")
    _int_id(act.view, "view")
    if type(act.generation) is not int or act.generation < 1:
        raise InvalidArgument(f"generation must be an int >= 1, got {act.generation!r:.80}")
    x = _tx(m, act.tx)
    v = _view(m, act.view)
    _mapped(v, guards)
    if not any(w.tx == x.id for w in m.views.values()):
        guards.refuse("published", InvalidTransition(f"transaction {x.id} has published no view: it cannot execute"))
    if v.tx != x.id and v.tx in m.txs:
        guards.refuse("provisional", InvalidArgument(f"view {v.id} is the provisional view of transaction {v.tx}"))
    if any(u == x.id for u, _ in v.users):
        guards.refuse("bound", InvalidTransition(f"transaction {x.id} already binds view {v.id}"))
    # Verify the view is named by its current mapping generation (C6).
    if act.generation != v.generation and guards.on("current_generation"):
        guards.refuse("generation", StaleGeneration(f"view {v.id} is at generation {v.generation}, not "
                                                    f"{act.generation}"))
    nv = evolve(v, users=tuple(sorted(v.users + ((x.id, act.generation),))))
    return evolve(m, views=m.views.set(v.id, nv)), None


def _remap_view(m: M.Manager, act: M.RemapView, guards: GuardSet) -> tuple[M.Manager, int]:
    v = _view(m, act.view)
    _mapped(v, guards)
    # Verify a view is remapped only while no execution binds it (I9).
    if v.users and guards.on("remap_when_idle"):
        raise ViewInUse(f"view {v.id} is bound to execution(s) {[u for u, _ in v.users]}")
    nv = evolve(v, generation=v.generation + 1)
    return evolve(m, views=m.views.set(v.id, nv)), nv.generation


def _drop_view(m: M.Manager, act: M.DropView, guards: GuardSet) -> tuple[M.Manager, None]:
    v = _view(m, act.view)
    if v.tx in m.txs:
        guards.refuse("provisional", InvalidTransition(f"view {v.id} is the provisional view of open transaction "
                                                       f"{v.tx}: AbortTx drops it"))
    # Verify a view is dropped only while no execution binds it: none is left reading a torn-down mapping (I9).
    if v.users:
        raise ViewInUse(f"view {v.id} is bound to execution(s) {[u for u, _ in v.users]}")
    return evolve(m, views=m.views.delete(v.id)), None


def end_execution(m: M.Manager, xid: int, drop_own: bool) -> M.Manager:
    """`m` with transaction `xid`'s execution ended (it binds no view); with `drop_own`, its own view dropped."""
    if not m.views:
        return m
    views = m.views
    for v in m.views.values():
        if drop_own and v.tx == xid:
            views = views.delete(v.id)
        elif any(u == xid for u, _ in v.users):
            views = views.set(v.id, evolve(v, users=tuple(b for b in v.users if b[0] != xid)))
    return evolve(m, views=views)


def lose_views(m: M.Manager, aid: int) -> M.Manager:
    """`m` with every view over authority `aid` invalid and bound by no execution (C3)."""
    views = m.views
    for v in m.views.values():
        if v.authority == aid:
            views = views.set(v.id, evolve(v, state=ViewState.INVALID, users=()))
    return m if views is m.views else evolve(m, views=views)


VIEW_HANDLERS: dict[type, Any] = {
    M.PublishView: _publish_view,
    M.ExecuteView: _execute_view,
    M.RemapView: _remap_view,
    M.DropView: _drop_view,
}
