"""State bundles, model views and failure scope of `ProcessMemoryManager` (C6, I5, I9, I10).

A model view is what an execution reads a transaction's bytes through; it is
named by (allocation id, mapping generation): its `allocation` is the
transaction that owns the bytes (a transaction's id is its allocation-set
id) and its generation advances only by a remap, only while no execution
uses it (I9). A transaction's provisional view is published once every need
is held (C4) and bound only by its own execution until commit (C6).

A state bundle (KV, recurrent/conv, sampler, progress) advances all its part
versions together when a transaction of it commits (I10). Failure scope (I5):
a post-commit mismatch poisons that bundle only (no new work for it); a
corrupt ledger poisons the manager (no transaction is granted anything).

Records only: the bytes are the ledger's, held by the transactions
(`refimpl.manager.transactions`); this part keeps no byte figure.
"""

from __future__ import annotations

from typing import Any

from spec import manager_actions as M
from spec.errors import (
    BundlePoisoned,
    DeviceLost,
    InvalidArgument,
    InvalidTransition,
    StaleGeneration,
    UnknownBundle,
    UnknownView,
    ViewInUse,
)
from spec.types import BundlePart, TxPhase, ViewState

__all__ = ["Bundles"]

_P = TxPhase
_EXECUTABLE = (_P.PUBLISHED, _P.EXECUTING)


class _View:
    __slots__ = ("id", "allocation", "authority", "generation", "state", "users", "lease")

    def __init__(self, id: int, allocation: int, authority: int, lease: Any) -> None:
        self.id, self.allocation, self.authority = id, allocation, authority
        self.lease = lease  # the record of its bytes on `authority` (None: published holding nothing)
        self.generation = 1
        self.state = ViewState.MAPPED
        self.users: set[int] = set()  # executing transactions bound to it

    def __repr__(self) -> str:
        return f"view {self.id}"


class _Bundle:
    __slots__ = ("id", "versions", "poisoned")

    def __init__(self, id: int) -> None:
        self.id = id
        self.versions = [0] * len(BundlePart)
        self.poisoned = False


def _int_id(v: object, what: str) -> int:
    if type(v) is not int:
        raise InvalidArgument(f"{what} must be an int id, got {v!r}")
    return v


class Bundles:
    """Model views, state bundles, poisoning; needs the transaction part's tables and `_run`."""

    def _init_bundles(self) -> None:
        self._mviews: dict[int, _View] = {}  # model views (`_views` is the ledger's alias table)
        self._bundles: dict[int, _Bundle] = {}
        self._poisoned = False
        self._next_mview = self._next_bundle = 1

    # --- bundles and failure scope (I5, I10) --------------------------------------

    def _open_bundle(self) -> int:
        bid = self._next_bundle
        self._next_bundle += 1
        self._bundles[bid] = _Bundle(bid)
        return bid

    def _report_mismatch(self, bundle: Any) -> None:
        b = self._bundle(bundle)
        b.poisoned = True

    # the composed operations (spec.manager): the same bundles, joined by a composed transaction
    def open_bundle(self) -> int:
        """Open a state bundle (composed: `spec.manager_actions.OpenBundle`)."""
        return self._run(M.OpenBundle, self._ms_none, self._open_bundle)

    def join_bundle(self, tx: int, bundle: int) -> None:
        """Open transaction `tx` commits `bundle`'s next step (I10)."""
        return self._run(M.JoinBundle, self._ms_join, self._join_bundle, tx, bundle)

    def _ms_join(self, tx: object, bundle: object) -> Any:
        return self._ms_tx(tx)

    def _join_bundle(self, tx: Any, bundle: Any) -> None:
        t = self._live_tx(tx)
        b = self._bundles.get(bundle) if type(bundle) is int else None
        if b is None:
            raise UnknownBundle(f"bundle {bundle!r} is not known")
        if t.bundle is not None:
            raise InvalidTransition(f"transaction {t.id} is already in bundle {t.bundle}")
        if b.poisoned:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; the engine must rebuild it")
        t.bundle = b.id

    def report_mismatch(self, bundle: int) -> None:
        """A post-commit mismatch poisons that bundle only (composed: `spec.manager_actions.ReportMismatch`)."""
        return self._run(M.ReportMismatch, self._ms_none, self._report_mismatch, bundle)

    # trace hooks (refimpl.manager.views `_run_full`): the bundles an event reports (I5, I10)
    def _bundles_named(self, action: Any) -> tuple[int, ...]:
        """Read before a composed action runs: the bundle it names and the one its transaction joined."""
        ids = []
        bid = getattr(action, "bundle", None)
        if type(bid) is int and bid in self._bundles:
            ids.append(bid)
        tid = getattr(action, "tx", None)
        t = self._txs.get(tid) if type(tid) is int else None
        if t is not None and t.bundle is not None:
            ids.append(t.bundle)
        return tuple(ids)

    def _bundle_figures(self, named: tuple[int, ...], first: int) -> dict[int, tuple[tuple[int, ...], bool]]:
        """After it: (part versions, poisoned) of those bundles and of every bundle it opened (ids from `first`)."""
        out = {}
        for bid in (*named, *range(first, self._next_bundle)):
            b = self._bundles[bid]
            out[bid] = (tuple(b.versions), b.poisoned)
        return out

    def _bundle(self, bid: object) -> _Bundle:
        b = self._bundles.get(bid) if type(bid) is int else None
        if b is None:
            if type(bid) is int and 1 <= bid < self._next_bundle:
                raise InvalidTransition(f"bundle {bid} is gone")
            raise UnknownBundle(f"bundle {bid!r} is not known")
        return b

    def _advance_bundle(self, t: Any) -> None:
        """`t` commits: its bundle's parts advance together, or BundlePoisoned and nothing moves."""
        if t.bundle is None:
            return
        b = self._bundles[t.bundle]
        if b.poisoned:
            raise BundlePoisoned(f"bundle {b.id} is poisoned; abort and rebuild")
        if self._guards.on("atomic_bundle"):  # I10
            b.versions = [x + 1 for x in b.versions]
        else:
            b.versions[0] += 1

    # --- model views (C4, C6, I9) ---------------------------------------------------

    def publish_view(self, tx: int) -> int:
        """Publish the provisional view over the transaction's allocation (C4: only when all held)."""
        return self._run(M.PublishView, self._ms_tx, self._publish, tx)

    def _publish(self, tx: Any) -> int:
        t = self._live_tx(_int_id(tx, "tx"))
        if self._guards.on("publish_after_all_held") or t.phase not in (_P.PLANNED, _P.RESERVING):
            self._phase(t, (_P.RESERVED,), "publish")  # C4: only once every need is held
        t.phase = _P.PUBLISHED
        vid = self._next_mview
        self._next_mview += 1
        lease = next((r for r in t.held if r.auth.id == min(t.need)), None)
        self._mviews[vid] = _View(vid, t.id, min(t.need), lease)
        return vid

    def execute_view(self, tx: int, view: int, generation: int) -> None:
        """Bind view (id, generation) to the transaction's execution (C6)."""
        return self._run(M.ExecuteView, self._ms_execute, self._execute, tx, view, generation)

    def _execute(self, tx: Any, view: Any, generation: Any) -> None:
        _int_id(tx, "tx")
        _int_id(view, "view")
        if type(generation) is not int or generation < 1:
            raise InvalidArgument(f"generation must be an int >= 1, got {generation!r}")
        t = self._live_tx(tx)
        v = self._mview(view)
        if v.state is not ViewState.MAPPED:
            raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
        self._phase(t, _EXECUTABLE, "execute")
        if v.allocation != t.id and v.allocation in self._txs:  # the owner is open: its view is provisional
            raise InvalidArgument(f"view {v.id} is the provisional view of transaction {v.allocation}")
        if v.id in t.bound:
            raise InvalidTransition(f"transaction {t.id} already binds view {v.id}")
        if generation != v.generation and self._guards.on("current_generation"):  # C6
            raise StaleGeneration(f"view {v.id} is at generation {v.generation}, not {generation}")
        t.phase = _P.EXECUTING
        t.bound[v.id] = generation
        v.users.add(t.id)

    def remap_view(self, view: int) -> int:
        """Advance a view's mapping generation; only while no execution uses it (I9)."""
        return self._run(M.RemapView, self._ms_view, self._remap, view)

    def drop_view(self, view: int) -> None:
        """Drop a committed (or invalid) view; only while no execution binds it (I9). Its lease is free again."""
        return self._run(M.DropView, self._ms_view, self._drop_view, view)

    def _drop_view(self, view: Any) -> None:
        v = self._mview(_int_id(view, "view"))
        if v.allocation in self._txs:
            raise InvalidTransition(f"view {v.id} is the provisional view of open transaction {v.allocation}")
        if v.users:  # I9: no execution left reading a torn-down mapping
            raise ViewInUse(f"view {v.id} is bound to execution(s) {sorted(v.users)}")
        del self._mviews[v.id]
        if v.lease is not None and v.lease.part is v:
            v.lease.part = None  # the holder's lease to release again

    def _ms_view(self, view: object) -> tuple[frozenset[int], tuple[int, ...]]:
        v = self._mviews.get(view) if type(view) is int else None
        return (frozenset(), ()) if v is None else (frozenset({v.authority}), ())

    def _ms_execute(self, tx: object, view: object, generation: object) -> tuple[frozenset[int], tuple[int, ...]]:
        auths, allocs = self._ms_tx(tx)
        return auths | self._ms_view(view)[0], allocs

    def _view_recs(self, auths: Any) -> dict[int, M.View]:
        """`spec.manager_actions.View` of every model view (auths None) or of those over the given authorities."""
        return {v.id: M.View(v.id, v.allocation, v.authority, None if v.lease is None else v.lease.id, v.generation,
                             v.state,
                             tuple(sorted((u, self._txs[u].bound[v.id]) for u in v.users)))
                for v in self._mviews.values() if auths is None or v.authority in auths}

    def _remap(self, view: Any) -> int:
        v = self._mview(_int_id(view, "view"))
        if v.state is not ViewState.MAPPED:
            raise DeviceLost(f"view {v.id} is invalid: its device context was lost")
        if v.users and self._guards.on("remap_when_idle"):  # I9
            raise ViewInUse(f"view {v.id} is bound to execution(s) {sorted(v.users)}")
        v.generation += 1
        return v.generation

    def _mview(self, vid: int) -> _View:
        v = self._mviews.get(vid)
        if v is None:
            if 1 <= vid < self._next_mview:
                raise InvalidTransition(f"view {vid} is already dropped")
            raise UnknownView(f"view {vid!r} is not known")
        return v

    def _views_of(self, t: Any) -> list[_View]:
        return [v for v in self._mviews.values() if v.allocation == t.id]

    def _unbind(self, t: Any) -> None:
        """`t`'s execution ends: it no longer uses the views it bound."""
        for vid in t.bound:
            v = self._mviews.get(vid)
            if v is not None:
                v.users.discard(t.id)
        t.bound = {}

    def _drop_views(self, t: Any) -> None:
        """`t` is gone: unbind it and drop the views over its bytes."""
        if not self._mviews:
            return
        self._unbind(t)
        for vid in [v.id for v in self._views_of(t)]:
            del self._mviews[vid]

    def _bound_on(self, aid: int) -> set[int]:
        """Ids of the model views over bytes of authority `aid`."""
        return {v.id for v in self._mviews.values() if v.authority == aid}

    def _invalidate_views(self, aid: int) -> None:
        """Authority `aid`'s context was lost: its views are invalid and no execution uses them (C3)."""
        for v in self._mviews.values():
            if v.authority == aid:
                v.state, v.users = ViewState.INVALID, set()
