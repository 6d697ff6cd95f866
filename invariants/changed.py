"""Which keys of a record map one step changed, in time proportional to the change (issue #21).

A step predicate judges the records a step changed; walking every record of
`prev` and `next` to find them makes each event cost as much as everything
still live (a paged KV cache holds thousands of leases). `changed(prev, nxt)`
returns the keys whose value differs (added, removed or replaced):

- when `nxt` was derived from `prev` by `Tracked.set` / `delete` / `update`
  (the only ways the spec derives its maps), by following `nxt`'s parent
  links back to `prev` and collecting the keys each derivation names:
  O(keys touched), however many records are live;
- otherwise (plain `immutables.Map`s, a map built afresh, a chain that does
  not reach `prev`), by comparing every key of both: the same answer, O(n).

Soundness does not rest on knowing what an action can touch: a derivation
that bypasses the three methods yields a map with no parent link (a plain
`immutables.Map`, or `mutate()`'s result), and the walk falls back to the
full comparison rather than trusting a partial one. Only the replay installs
`Tracked` maps (`track`); `changes(prev, nxt)` gives the same walk as
`(key, old record, new record)` in key order (keys are ids: ordered), so the
step predicates of one event share one walk and one lookup per record.
After a walk reaches `prev`, `prev`'s own parent link is dropped so history
does not accumulate (a later diff from an older map falls back to the full
comparison). The answer is a frozenset (`changes`: a tuple); the last few
answers over immutable maps are remembered, because the step predicates of
one event ask for the same diff several times. Pure; spec values only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import immutables

__all__ = ["Tracked", "changed", "changes", "track"]

_MISSING = object()


class Tracked(Mapping):
    """An `immutables.Map` that remembers its parent map and the keys that distinguish it from that parent."""

    __slots__ = ("_map", "_parent", "_keys")

    def __init__(self, m: Any = immutables.Map(), parent: Tracked | None = None, keys: tuple = ()) -> None:
        self._map = m if type(m) is immutables.Map else immutables.Map(m)
        self._parent, self._keys = parent, keys

    def __getitem__(self, k: Any) -> Any:
        return self._map[k]

    def get(self, k: Any, default: Any = None) -> Any:
        return self._map.get(k, default)

    def __contains__(self, k: Any) -> bool:
        return k in self._map

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._map)

    def keys(self) -> Any:
        return self._map.keys()

    def values(self) -> Any:
        return self._map.values()

    def items(self) -> Any:
        return self._map.items()

    def set(self, k: Any, v: Any) -> Tracked:
        return Tracked(self._map.set(k, v), self, (k,))

    def delete(self, k: Any) -> Tracked:
        return Tracked(self._map.delete(k), self, (k,))

    def update(self, *args: Any, **kw: Any) -> Tracked:
        new = dict(*args, **kw)
        return Tracked(self._map.update(new), self, tuple(new))

    def mutate(self) -> Any:
        return self._map.mutate()  # its `finish()` is a plain map: `changed` compares it in full

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tracked):
            return self._map == other._map
        if isinstance(other, immutables.Map):
            return self._map == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._map)

    def __repr__(self) -> str:
        return f"Tracked({dict(self._map.items())!r})"


def track(m: Any) -> Tracked:
    """`m` as a root `Tracked` map (no parent)."""
    return m if isinstance(m, Tracked) else Tracked(m)


#: The last few answers, newest first: the step predicates of one step ask for the same diff several times.
#: Only `Tracked` and `immutables.Map` values are remembered (immutable: the answer cannot go stale).
_MEMO: list[tuple[Any, Any, frozenset, tuple]] = []
_MEMO_SIZE = 4


def changed(prev: Mapping, nxt: Mapping) -> frozenset:
    """The keys whose value differs between `prev` and `nxt` (present in one only, or unequal values)."""
    if prev is nxt:
        return frozenset()
    for p, n, keys, _ in _MEMO:
        if p is prev and n is nxt:
            return keys
    return _diff(prev, nxt)[0]


def changes(prev: Mapping, nxt: Mapping) -> tuple[tuple[Any, Any, Any], ...]:
    """`(key, value in prev, value in nxt)` per key of `changed(prev, nxt)`, in key order, None where absent.

    The one walk of a step's changed records that every step predicate reads (the records themselves, so no
    predicate looks them up again)."""
    if prev is nxt:
        return ()
    for p, n, _, moved in _MEMO:
        if p is prev and n is nxt:
            return moved
    return _diff(prev, nxt)[1]


def _diff(prev: Mapping, nxt: Mapping) -> tuple[frozenset, tuple[tuple[Any, Any, Any], ...]]:
    keys: Any = set()
    n = nxt
    if type(n) is Tracked and n._parent is prev:  # one derivation (most steps): its keys, distinct by construction
        keys, n = n._keys, prev
    while type(n) is Tracked and n is not prev and n._parent is not None:
        keys.update(n._keys)
        n = n._parent
    if n is prev and type(prev) is Tracked:
        prev._parent, prev._keys = None, ()  # nothing older is needed by a diff from `prev` onwards
    else:  # not derived from `prev` by the tracked methods: compare everything
        keys = set(prev.keys()) | set(nxt.keys())
    was = prev._map if type(prev) is Tracked else prev
    now = nxt._map if type(nxt) is Tracked else nxt
    moved = []
    for k in sorted(keys):
        old, new = was.get(k, _MISSING), now.get(k, _MISSING)
        if old != new:
            moved.append((k, None if old is _MISSING else old, None if new is _MISSING else new))
    out = (frozenset([k for k, _, _ in moved]), tuple(moved))
    if type(was) is immutables.Map and type(now) is immutables.Map:
        _MEMO.insert(0, (prev, nxt, *out))
        del _MEMO[_MEMO_SIZE:]
    return out
