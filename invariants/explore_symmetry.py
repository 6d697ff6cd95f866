"""Symmetry reduction for the explorer: one representative per orbit of interchangeable holders and authorities.

A `Symmetry` maps a state to a canonical key: the set of the state's images
under every permutation of the interchangeable ids (its orbit, encoded as
plain tuples). Two states get the same key iff one is a permutation of the
other, so the explorer's seen-set keeps one state per orbit (TLC's
`SYMMETRY`); the state it keeps and expands is the first one it reached, a
real state, so counterexamples replay unchanged.

Soundness. Let G be the permutations of the holder ids and of each group
of interchangeable authorities. Exploring one state per orbit finds a
violation iff the full exploration does, at the same breadth-first depth, if
every σ in G is an automorphism of the explored graph and the checks
cannot tell σ(s) from s:

1. The initial state is fixed by σ up to labels no step or check reads
   apart from equality (holder names; a permuted authority's pool name,
   compared by C1 for equality only, and the scope registers no authority).
2. The scope's action enumerator treats every holder (authority) alike:
   actions(σ s) = σ actions(s) as sets (the order may differ).
3. The spec never orders or compares those ids: step(σ s, σ a) =
   σ step(s, a). Arbitration orders by maturity, priority and ticket id
   (`spec.manager._round`); allocation, ticket, pressure and transaction ids
   are issued by counters whatever the holder. Holders qualify, except where
   the scope changes limits: `PrepareLimit` opens one pressure per holder
   holding leases, numbered in holder id order, so holder 1's pressure is
   always the older one (found by tests/test_explore_symmetry.py's
   bisimulation check, not foreseen); there the group is trivial. Authorities
   qualify only with the same tier, capacity and limit, and only if no
   transaction spans two of them, or one of them and an authority whose id
   lies between them: a transaction reserves its needs in ascending
   authority id (`spec.manager_parts`) and publishes its view over the
   lowest (`spec.manager_views`), an order such a swap does not preserve. `manager_symmetry` refuses a group that breaks this rule, or
   rule 2 (the scope offers transactions whose needs a swap does not map
   onto needs it also offers: 1 B on authority 1 but 2 B on authority 2).
4. Every state and step predicate is invariant under σ (a per-holder or
   per-authority judgement, never "holder 1 first").

Then σ maps reachable states to reachable states at the same depth, and a
check fails at s iff it fails at σ(s), so a violation exists iff one exists
in an explored representative. tests/test_explore_symmetry.py checks the
consequence on whole scopes: reduced and unreduced runs agree on every
guard's verdict (the violated ID and the counterexample's length) and on
"no violation" with every guard on, and a guard switched off is still found
with symmetry on.

Pure; reads spec values only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import attrs

from spec import manager_actions as M
from spec.ledger_state import State

__all__ = ["Symmetry", "ledger_symmetry", "manager_symmetry"]

Perm = dict[int, int]


def _perms(ids: Iterable[int]) -> list[Perm]:
    ids = sorted(ids)
    return [dict(zip(ids, p)) for p in itertools.permutations(ids)]


def _product(groups: list[list[Perm]]) -> list[Perm]:
    out: list[Perm] = [{}]
    for g in groups:
        out = [{**a, **b} for a in out for b in g]
    return out


@attrs.frozen
class Symmetry:
    """`key(state)`: the canonical key of the state's orbit (hashable; equal iff the states are permutations)."""

    name: str
    key: Callable[[Any], Hashable]


# --- encodings under one permutation (h: holder ids, a: authority ids; an id absent from a map stays) -------------


def _at(p: Perm, i: int | None) -> int | None:
    return p.get(i, i)


def _ledger(s: State, h: Perm, a: Perm, unlabelled: frozenset[int]) -> tuple:
    auths = tuple(sorted(
        (_at(a, x.id), None if x.id in unlabelled else x.pool, x.tier, x.capacity, x.limit,
         _at(a, x.alias_of), x.view, x.context, x.used, x.device)  # no alias: None, absent from a, stays
        for x in s.authorities.values()))
    holders = tuple(sorted(_at(h, x.id) for x in s.holders.values()))  # keyed by id; names: labels, dropped
    allocs = tuple((r.id, _at(a, r.authority), _at(h, r.holder), r.tier, r.role, r.reserved,
                    r.nbytes, r.charge, r.state, r.origin) for _, r in sorted(s.allocations.items()))
    allows = tuple((w.id, _at(a, w.authority), _at(h, w.holder), w.limit, w.reserved, w.mapped)
                   for _, w in sorted(s.allowances.items()))
    return (auths, holders, allocs, allows, s.next_authority, s.next_holder, s.next_allocation, s.next_allowance)


def _manager(m: M.Manager, h: Perm, a: Perm, unlabelled: frozenset[int]) -> tuple:
    # Every field of `Manager` and of each of its records, in field order (tests/test_explore_symmetry.py varies
    # each one alone and asserts a different key): a component left out merges states whose futures differ.
    tickets = tuple((t.id, _at(h, t.holder), _at(a, t.authority), t.nbytes, t.priority, t.role,
                     t.age, t.state, t.allocation, t.generation) for _, t in sorted(m.tickets.items()))
    pressures = tuple((p.id, _at(h, p.holder), _at(a, p.authority), p.target, p.change,
                       p.priority, p.deadline, p.generation) for _, p in sorted(m.pressures.items()))
    txs = tuple((x.id, _at(h, x.holder), tuple((_at(a, y), n) for y, n in x.needs), x.held, x.bundle,
                 x.seq, x.priority, x.age) for _, x in sorted(m.txs.items()))
    intents = tuple((i.id, _at(h, i.holder), i.seq, i.priority, i.age) for _, i in sorted(m.intents.items()))
    changes = tuple(sorted((_at(a, c.authority), c.target, c.completed)  # keyed by its authority
                           for c in m.changes.values()))
    generations = tuple(sorted((_at(a, k), g) for k, g in m.generations.items()))
    views = tuple((v.id, v.tx, _at(a, v.authority), v.allocation, v.generation, v.state, v.users)
                  for _, v in sorted(m.views.items()))
    return (_ledger(m.ledger, h, a, unlabelled), m.aging_bound, tickets, pressures, txs, changes, m.next_ticket,
            m.next_pressure, m.next_tx, tuple(sorted(m.bundles.items())), m.next_bundle,
            tuple(sorted(m.uses.items())), generations, views, m.next_view, intents, m.poisoned,
            tuple(sorted((t.value, q) for t, q in m.quotas.items())))  # per tier: no permutation moves them


def _orbit_key(encode: Callable[..., tuple], perms: list[tuple[Perm, Perm]],
               unlabelled: frozenset[int]) -> Callable[[Any], Hashable]:
    if len(perms) <= 1:
        return lambda s: s  # the trivial group: the state is its own key

    def key(s: Any) -> Hashable:
        return frozenset([encode(s, h, a, unlabelled) for h, a in perms])
    return key


def manager_symmetry(holders: int, capacities: tuple[int, ...],
                     needs: tuple[tuple[tuple[int, int], ...], ...], limits: bool = False) -> Symmetry:
    """Holders 1..`holders` interchangeable unless the scope changes limits (`limits`: rule 3); authorities
    (ids 1..) with equal capacity interchangeable where the scope's transactions allow it (rules 2 and 3): no
    transaction spans two of them, and the needs offered are the same set once they are permuted."""
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(capacities, start=1):
        groups.setdefault(c, []).append(i)
    offered = set(needs)

    def closed(g: list[int]) -> bool:
        for n in needs:
            inside = set(g) & {y for y, _ in n}
            if len(inside) > 1:
                return False
            # A need on a member and on an authority whose id lies between members: a swap reorders them.
            if inside and any(min(g) < y < max(g) for y, _ in n if y not in g):
                return False
        return all({tuple(sorted((_at(p, y), k) for y, k in n)) for n in needs} == offered for p in _perms(g))
    auth_groups = [g for g in groups.values() if len(g) > 1 and closed(g)]
    hs = [{}] if limits else _perms(range(1, holders + 1))
    as_ = _product([_perms(g) for g in auth_groups])
    perms = [(h, a) for h in hs for a in as_]
    unlabelled = frozenset(i for g in auth_groups for i in g)
    parts = [f"{len(hs[0])} holders"] * (len(hs) > 1) + [f"authorities {g}" for g in auth_groups]
    return Symmetry(" x ".join(parts) or "none", _orbit_key(_manager, perms, unlabelled))


def ledger_symmetry(holders: int) -> Symmetry:
    """Holders 1..`holders` interchangeable once registered (the ledger scope registers holders as it explores:
    a permutation applies to the ids registered so far, so a state with one holder has the trivial group)."""
    def key(s: State) -> Hashable:
        p = _perms(range(1, len(s.holders) + 1))
        if len(p) <= 1:
            return s
        return frozenset([_ledger(s, h, {}, frozenset()) for h in p])
    return Symmetry(f"{holders} holders", key)
