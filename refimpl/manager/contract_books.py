"""The debug-build contract's own books: the charge it last saw on each row of each ledger, and their sum.

Conservation (I1) at contracts level "local" is checked against these books
rather than recomputed from every row: an operation's check reads the rows it
touched (their charge before and after), moves the books by exactly those
deltas, and compares the ledger's `used` with the books' total. Its cost is
that of the rows touched, whatever the ledger holds (issue #24). The books are
an independent computation: sums of row charges the contract read itself,
never the ledger's own `used` restated.

What an O(touched) check cannot see at once is a row changed by an
operation that did not name it (its charge moved, `used` did not, or both
moved alike). The books keep the charge they last saw, so the next operation
that touches that row reports it (`local.row_as_booked`), and `checkpoint`
reports every such row at once, with the full recomputation. Level "full"
recomputes conservation from every row of each touched ledger on every
operation.

The frozen-view path at level "local" (composed operations, and any operation
while a pressure ticket or transaction is open) views only the rows an
operation touches and the rows the parts hold on its ledgers (`view_ids`),
moves the books by them (`settle`), and runs the catalog's state predicates
that sum a ledger's rows against `used` on that view restricted by the books
(`check_state`): the same predicates, on every ledger size, at the same cost.

One ledger's book, as a table (the ledger is canonical; an alias has none):

    absent   --first checked operation on it--------------->  counted (every row summed: O(rows), once)
    counted  --an operation checked at level "local"------->  counted (moved by the touched rows' deltas)
    counted  --a path that keeps no books, or a violation-->  absent  (drain: `forget`)
    any      --contracts switched or level changed--------->  absent  (`invariants.contracts.SWITCH.watch`)

Refimpl's own code: spec values are read, never spec transitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from invariants._violation import InvariantViolation
from invariants.clauses import conjunction
from invariants.contracts import SWITCH as _SWITCH
from invariants.ledger import state_I1 as _ledger_state_I1
from refimpl.manager.runner import contracted

__all__ = ["Books", "book", "recount", "open_books", "settle", "check_state", "checkpoint", "moved_unnamed",
           "view_ids", "check_partial", "contracted_partial"]

T = TypeVar("T")


def _fail(id: str, clause: str, msg: str) -> None:
    raise InvariantViolation(id, msg, clause=f"local.{clause}")


class _Book:
    """One canonical ledger: `rows` is allocation id -> the charge the contract last saw; `total` their sum."""

    __slots__ = ("auth", "total", "rows")

    def __init__(self, auth: Any, total: int, rows: dict[int, int]) -> None:
        self.auth, self.total, self.rows = auth, total, rows


class Books:
    """Every book of one manager; the contract switch makes them `forget` at every change of (on, level)."""

    __slots__ = ("of", "split", "__weakref__")

    def __init__(self) -> None:
        self.of: dict[int, _Book] = {}  # canonical authority id -> its book (cleared in place, never rebound)
        self.split: Any = None  # (invariants.manager, its state predicates split by `_split`), once looked up
        _SWITCH.watch(self)

    def forget(self, aid: int | None = None) -> None:
        """Drop one ledger's book (or every book): a path that kept none changed it."""
        if aid is None:
            self.of.clear()
        else:
            self.of.pop(aid, None)


def recount(a: Any) -> _Book:
    """I1 from every row of ledger `a` (O(rows)): each row listed on it is charged to it, `used` is their sum, an
    alias carries nothing. Returns the book those rows make."""
    rows: dict[int, int] = {}
    total = 0
    for r in a.allocs.values():
        if r.auth is not a:
            _fail("I1", "one_ledger", f"allocation {r.id} is listed on {a.id} but charged to {r.auth.id}")
        rows[r.id] = r.charge
        total += r.charge
    if total != a.used:
        _fail("I1", "conserved", f"authority {a.id}: used {a.used} B, its allocations charge {total} B")
    if a.alias_of is not None and (a.used or a.allocs):
        _fail("I1", "alias_no_charge", f"alias {a.id} of {a.alias_of} carries {a.used} B")
    return _Book(a, total, rows)


def book(m: Any, a: Any) -> _Book:
    """The book of ledger `a`, counted now if it has none (caller holds the ledger lock)."""
    of = m._books.of
    bk = of.get(a.id)
    if bk is None or bk.auth is not a:
        bk = of[a.id] = recount(a)
    return bk


def open_books(m: Any, auths: Iterable[int]) -> None:
    """Count the book of every canonical ledger in `auths` that has none, before an operation runs."""
    for aid in auths:
        a = m._auths.get(aid)
        if a is not None and a.alias_of is None:
            book(m, a)


def settle(m: Any, before: Mapping[int, Any], after: Mapping[int, Any], auths: Iterable[int]) -> None:
    """After an accepted operation checked on frozen partial views: move the books by every row in view
    (`before` / `after`: allocation id -> `spec.ledger_state.Allocation`), then check each booked ledger in
    `auths` or under a row in view against its book (I1). A row of a ledger with no book is left to its count."""
    of = m._books.of
    for i, p in before.items():
        bk = of.get(p.authority)
        if bk is not None and bk.rows.get(i) != p.charge:
            moved_unnamed(i, p.charge, bk.rows.get(i))
    seen = set(auths)
    for i in before.keys() | after.keys():
        p, n = before.get(i), after.get(i)
        if p is not None and (bk := of.get(p.authority)) is not None:
            del bk.rows[i]
            bk.total -= p.charge
            seen.add(p.authority)
        if n is not None and (bk := of.get(n.authority)) is not None:
            bk.rows[i] = n.charge
            bk.total += n.charge
            seen.add(n.authority)
    for aid in seen:
        bk = of.get(aid)
        if bk is not None and bk.auth.used != bk.total:
            _fail("I1", "conserved", f"authority {aid}: used {bk.auth.used} B, its allocations charge {bk.total} B "
                                     "(the rows as the contract booked them)")


def moved_unnamed(i: int, charge: int | None, seen: int | None, when: str = "before this operation") -> None:
    """I1: allocation `i` is charged `charge` (None: not on its ledger) `when`, but the books last saw `seen`."""
    _fail("I1", "row_as_booked", f"allocation {i} is charged {_b(charge)} {when}, but {_b(seen)} when the "
                                 "contract last saw it: it moved in an operation that did not name it (a byte "
                                 "lost or doubled)")


def _b(charge: int | None) -> str:
    return "nothing (not on the ledger)" if charge is None else f"{charge} B"


def _on(p: Callable[[Any], None], sums: bool) -> Callable[[Any, Any], None]:
    """`p` on (view, restricted view): the restricted one where `p` sums a ledger's rows against its `used`."""
    def run(view: Any, restricted: Any) -> None:
        p(restricted if sums else view)
    run.__name__ = p.__name__
    return run


def _split(mod: Any) -> dict[str, tuple[Callable[[Any, Any], None], ...]]:
    """`mod.STATE_PREDICATES` (invariants.manager) in order, each taking (view, restricted view) (`_on`): the
    restricted one where it sums every row of a ledger against its `used` (the ledger's own I1 sum, the parts' I1
    partition). Built once per manager: a check calls them, it builds nothing."""
    return {id: tuple(_on(p, p is mod.state_I1_manager or getattr(p, "__wrapped__", None) is _ledger_state_I1)
                      for p in preds) for id, preds in mod.STATE_PREDICATES.items()}


def check_state(m: Any, mod: Any, view: Any) -> None:
    """`mod.STATE_PREDICATES` (invariants.manager) on a partial view of the touched rows, with the books current.

    The two that sum a ledger's rows against its `used` (I1: the ledger's sum, the parts' partition) run on the
    view restricted to its rows: each booked ledger's `used` less the books' charge of its rows out of view. The
    others (limits, waiters, tiers, ids, allowances) read `used` as it is, on the view itself."""
    books = m._books
    if books.split is None or books.split[0] is not mod:
        books.split = mod, _split(mod)
    inview: dict[int, int] = {}
    for r in view.ledger.allocations.values():
        inview[r.authority] = inview.get(r.authority, 0) + r.charge
    auths, out = {}, False
    for aid, a in view.ledger.authorities.items():
        # The caller opened the books of the ledgers it names; a ledger pulled into view only by a part (a
        # transaction's, a quota tier's) is counted here, the first time it is in view.
        bk = None if a.alias_of is not None else books.of.get(aid) or book(m, m._auths[aid])
        if bk is None or bk.total == inview.get(aid, 0):
            auths[aid] = a  # every row of it is in view (or an alias: none)
        else:
            out = True
            auths[aid] = attrs.evolve(a, used=a.used - (bk.total - inview.get(aid, 0)))
    restricted = attrs.evolve(view, ledger=attrs.evolve(view.ledger, authorities=auths)) if out else view
    conjunction(books.split[1], view, restricted)


def view_ids(m: Any, auths: Any, allocs: Any) -> set[int]:
    """`allocs` and the rows the parts hold on ledgers `auths`: granted tickets' reservations, transactions'
    holdings (the composed predicates read them). O(live tickets + transactions), never O(rows)."""
    ids = set(allocs)
    for t in m._tickets.values():
        if t.alloc is not None and t.auth.id in auths:
            ids.add(t.alloc.id)
    for x in m._txs.values():
        if x.held and any(aid in auths for aid, _ in x.needs):
            ids.update(r.id for r in x.held)
    return ids


def check_partial(m: Any, before: Any, action: Any, after: Any, result: Any, auths: Any) -> None:
    """Level "local" on partial `Manager` views of the touched rows: the catalog's step predicates, the books
    moved by the rows in view (`settle`), then the state predicates (`check_state`)."""
    mod = m._manager_checks()
    if mod is not None:
        mod.check_step(before, action, after, result)
    settle(m, before.ledger.allocations, after.ledger.allocations, auths)
    if mod is not None:
        check_state(m, mod, after)


def contracted_partial(m: Any, auths: Any, allocs: Any, first: int, action: Any, body: Callable[..., T],
                       args: tuple[Any, ...]) -> T:
    """A composed operation checked at level "local" (`runner.contracted`): partial `Manager` views of ledgers
    `auths` holding only `allocs`, the parts' rows and the rows issued from id `first` on, and the books."""
    open_books(m, auths)
    ids = view_ids(m, auths, allocs)
    return contracted(lambda: m._manager_view(auths, ids, True),
                      lambda b, act, now, res: check_partial(m, b, act, now, res, auths), None,
                      lambda: action, "manager", body, args,
                      after=lambda: m._manager_view(auths, view_ids(m, auths, [*ids, *range(first, m._next_alloc)]),
                                                    True))


def checkpoint(m: Any) -> None:
    """A checkpoint a user asks for: every ledger's book against its rows (which names a row that moved in an
    operation that did not name it), conservation recomputed from every row, then every state predicate of the
    catalog on the whole manager. Runs whether contracts are on or off; raises `InvariantViolation`.

    The books are counted afresh afterwards. Costs O(every record): call it where a test or a debug session wants
    the whole state checked (after a workload, before a snapshot), not per operation."""
    mod = m._manager_checks()
    with m._lock:
        books = m._books
        for aid, bk in list(books.of.items()):
            a = m._auths.get(aid)
            if a is not bk.auth:
                continue  # removed: nothing of it is relied on
            for i, r in a.allocs.items():
                if bk.rows.get(i) != r.charge:
                    moved_unnamed(i, r.charge, bk.rows.get(i), "now")
            for i in bk.rows.keys() - a.allocs.keys():
                moved_unnamed(i, None, bk.rows[i], "now")
        books.forget()
        keep = _SWITCH.on and not _SWITCH.full  # the books are kept only while level "local" checks run
        for a in list(m._auths.values()):
            bk = recount(a)
            if keep and a.alias_of is None:
                books.of[a.id] = bk
        if mod is not None:
            mod.check_all(m._manager_view(None, None))
