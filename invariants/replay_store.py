"""The replay checker's state store: partial views per event, so replay is linear in the trace (issue #14).

The spec's `step` and the catalog's predicates read a `spec.ledger_state.State`; on
a full state, one event would cost time proportional to everything still
live (whole-state predicates and the spec's own scans), so a trace leaving
n reservations open took O(n^2). The store keeps the replayed state as
mutable indexed records and hands each event a *partial* `State` holding
exactly what that action can read or change (its `scope`): the records it
names, their canonical authority and holder, and the few sets the spec
scans for it, taken from indexes:

- `register_authority`: the canonical authorities of that pool, and of its
  declared (device, tier);
- `register_alias`: the canonical authority and its alias of that view;
- `lose_device`: the authority's allocations not yet device-lost (each
  allocation becomes device-lost once, so repeats cost nothing);
- `confirm_termination`: its device-lost allocations (each is retired once);
- `open_allowance`: the ledger's other allowances, summarised as one
  record with id 0 holding their total limit (the spec sums limits only).

After the spec step the partial next state, with the governor's observed
figures substituted, is checked by the step predicates, the local state
predicates (C2, I4a, I4b per record) and `check_ledgers`, which keeps
per-ledger running totals of charges, granted charges and allowance
limits, computed from the allocation and allowance records as they change,
and compares them with each touched ledger's `used`, `limit` and
`capacity` (I1, I2, I4b). `full()` rebuilds the whole `State` for the
whole-state predicates, which the replay runs at boundaries and at the end.
Spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

import immutables

from spec import ledger_actions as A
from spec.ledger_state import Allowance, State
from spec.types import AllocState, Origin

from invariants._violation import InvariantViolation

__all__ = ["Store", "SUMMARY_ID"]

#: Id of the one synthetic allowance that summarises a ledger's untouched allowances (ids start at 1).
SUMMARY_ID = 0


class Store:
    """The replayed state, indexed; `view(act, extra)` / `merge(prev, nxt)` per event."""

    def __init__(self) -> None:
        self.auths: dict[int, Any] = {}
        self.holders: dict[int, Any] = {}
        self.allocs: dict[int, Any] = {}
        self.allows: dict[int, Any] = {}
        self.next = {"authority": 1, "holder": 1, "allocation": 1, "allowance": 1}
        self.canonical_of_pool: dict[str, list[int]] = {}
        self.canonical_of_device: dict[tuple[str, Any], list[int]] = {}  # (device, tier) -> canonical authorities
        self.alias_of_view: dict[tuple[int, str], int] = {}
        self.live_of: dict[int, set[int]] = {}  # ledger -> allocations not device-lost
        self.lost_of: dict[int, set[int]] = {}  # ledger -> device-lost allocations
        self.allows_of: dict[int, set[int]] = {}  # ledger -> allowances
        self.charged: dict[int, int] = {}  # ledger -> sum of its allocations' charges
        self.granted: dict[int, int] = {}  # ledger -> sum of charges of granted-origin allocations
        self.promised: dict[int, int] = {}  # ledger -> sum of its allowances' limits

    def size(self) -> int:
        return len(self.auths) + len(self.holders) + len(self.allocs) + len(self.allows)

    # --- the partial view of one event -----------------------------------------

    def view(self, act: Any, observed: dict[str, dict[int, int]]) -> State:
        auths: set[int] = set(i for i in observed["used"] if i in self.auths)
        allocs: set[int] = set(i for i in observed["charges"] if i in self.allocs)
        allows: set[int] = set()
        holders: set[int] = set()
        summary: Allowance | None = None
        for f, v in _ids(act):
            if f == "holder" and v in self.holders:
                holders.add(v)
            elif f in ("authority", "of") and v in self.auths:
                auths.add(v)
            elif f == "allocation" and v in self.allocs:
                allocs.add(v)
            elif f in ("allowance", "source", "target") and v in self.allows:
                allows.add(v)
        if isinstance(act, A.RegisterAuthority) and type(act.pool) is str:
            auths.update(self.canonical_of_pool.get(act.pool, ()))
            if type(act.device) is str:
                auths.update(self.canonical_of_device.get((act.device, act.tier), ()))
        auths |= {self.auths[i].alias_of for i in auths if self.auths[i].alias_of is not None}
        if isinstance(act, A.RegisterAlias) and type(act.view) is str:
            for i in list(auths):
                alias = self.alias_of_view.get((i, act.view))
                if alias is not None:
                    auths.add(alias)
        ledger = getattr(act, "authority", None)
        if type(ledger) is int and ledger in self.auths:
            canon = self.auths[ledger].alias_of or ledger
            if isinstance(act, A.LoseDevice):
                allocs |= self.live_of.get(canon, set())
            elif isinstance(act, A.ConfirmTermination):
                allocs |= self.lost_of.get(canon, set())
            elif isinstance(act, A.OpenAllowance) and self.allows_of.get(canon):
                summary = Allowance(SUMMARY_ID, canon, 0, self.promised.get(canon, 0), 0, 0)
        for i in allocs:
            r = self.allocs[i]
            auths.add(r.authority)
            holders.add(r.holder)
        for i in allows:
            w = self.allows[i]
            auths.add(w.authority)
            holders.add(w.holder)
        auths |= {self.auths[i].alias_of for i in auths if self.auths[i].alias_of is not None}
        w_recs = {i: self.allows[i] for i in allows}
        if summary is not None:
            w_recs[SUMMARY_ID] = summary
        return State(immutables.Map({i: self.auths[i] for i in auths}),
                     immutables.Map({i: self.holders[i] for i in holders if i in self.holders}),
                     immutables.Map({i: self.allocs[i] for i in allocs}), immutables.Map(w_recs),
                     self.next["authority"], self.next["holder"], self.next["allocation"], self.next["allowance"])

    # --- applying a checked step -------------------------------------------------

    def merge(self, prev: State, nxt: State) -> None:
        """Write the partial next state back (records changed, added or removed), updating every index."""
        for i, a in nxt.authorities.items():
            if i not in self.auths:
                if a.alias_of is None:
                    self.canonical_of_pool.setdefault(a.pool, []).append(i)
                    if a.device is not None:
                        self.canonical_of_device.setdefault((a.device, a.tier), []).append(i)
                else:
                    self.alias_of_view[(a.alias_of, a.view)] = i
            self.auths[i] = a
        for i, h in nxt.holders.items():
            self.holders[i] = h
        for i in set(prev.allocations.keys()) | set(nxt.allocations.keys()):
            p, n = prev.allocations.get(i), nxt.allocations.get(i)
            if p is n:
                continue
            if p is not None:
                self._account(p, -1)
                del self.allocs[i]
            if n is not None:
                self._account(n, 1)
                self.allocs[i] = n
        for i in set(prev.allowances.keys()) | set(nxt.allowances.keys()):
            if i == SUMMARY_ID:
                continue
            p, n = prev.allowances.get(i), nxt.allowances.get(i)
            if p is n:
                continue
            if p is not None:
                self.promised[p.authority] -= p.limit
                self.allows_of[p.authority].discard(i)
                del self.allows[i]
            if n is not None:
                self.promised[n.authority] = self.promised.get(n.authority, 0) + n.limit
                self.allows_of.setdefault(n.authority, set()).add(i)
                self.allows[i] = n
        self.next = {"authority": nxt.next_authority, "holder": nxt.next_holder,
                     "allocation": nxt.next_allocation, "allowance": nxt.next_allowance}

    def _account(self, r: Any, sign: int) -> None:
        self.charged[r.authority] = self.charged.get(r.authority, 0) + sign * r.charge
        if r.origin is Origin.GRANTED:
            self.granted[r.authority] = self.granted.get(r.authority, 0) + sign * r.charge
        index = self.lost_of if r.state is AllocState.DEVICE_LOST else self.live_of
        if sign > 0:
            index.setdefault(r.authority, set()).add(r.id)
        else:
            index[r.authority].discard(r.id)

    # --- incremental whole-ledger clauses ---------------------------------------

    def check_ledgers(self, nxt: State) -> None:
        """I1, I2, I4b for each ledger the step touched, against the running totals (after `merge`)."""
        for i, a in nxt.authorities.items():
            if a.alias_of is not None:
                if a.used:
                    raise InvariantViolation("I1", f"alias {i} of {a.alias_of} carries {a.used} B: the bytes "
                                                   "are charged twice")
                continue
            charged = self.charged.get(i, 0)
            if a.used != charged:
                raise InvariantViolation("I1", f"authority {i} used {a.used} B but its allocations charge "
                                               f"{charged} B")
            if self.granted.get(i, 0) > a.limit:
                raise InvariantViolation("I2", f"authority {i}: {self.granted[i]} B granted against a "
                                               f"{a.limit} B limit")
            if self.promised.get(i, 0) > a.capacity:
                raise InvariantViolation("I4b", f"authority {i}: allowance limits {self.promised[i]} B exceed "
                                                f"capacity {a.capacity} B")

    def full(self) -> State:
        """The whole replayed state (for the whole-state predicates and the leftover check)."""
        return State(immutables.Map(self.auths), immutables.Map(self.holders), immutables.Map(self.allocs),
                     immutables.Map(self.allows), self.next["authority"], self.next["holder"],
                     self.next["allocation"], self.next["allowance"])


def _ids(act: Any) -> list[tuple[str, Any]]:
    return [(f, getattr(act, f)) for f in ("holder", "authority", "of", "allocation", "allowance", "source",
                                           "target") if hasattr(act, f) and type(getattr(act, f)) is int]
