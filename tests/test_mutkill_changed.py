"""Survivors of invariants/changed.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

import immutables
import pytest

from invariants import changed as C
from invariants.changed import Tracked, changed, changes, track


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "_MEMO", [])  # other tests' answers must not answer these


def test_a_tracked_map_wraps_a_map_without_copying_and_takes_any_mapping() -> None:
    m = immutables.Map({1: 2})
    assert track(m)._map is m  # O(1): the map itself, not a copy
    t = Tracked({1: 2})  # a plain dict becomes a map with the map's methods
    assert type(t._map) is immutables.Map and t.set(3, 4) == immutables.Map({1: 2, 3: 4})
    assert track(t) is t
    assert Tracked() == immutables.Map() and len(Tracked()) == 0


def test_a_tracked_map_reads_like_its_map() -> None:
    t = Tracked({1: 2, 3: 4})
    assert t.get(9, 5) == 5 and t.get(9) is None and t.get(1, 5) == 2
    assert list(iter(t)) == list(immutables.Map({1: 2, 3: 4})) and 1 in t and 9 not in t
    assert t == Tracked(immutables.Map({1: 2, 3: 4})) and t == immutables.Map({1: 2, 3: 4})
    assert t != Tracked({1: 2}) and t != immutables.Map({1: 2}) and t != {1: 2, 3: 4}
    assert hash(t) == hash(immutables.Map({1: 2, 3: 4}))
    assert repr(Tracked({1: 2})) == "Tracked({1: 2})"


def test_update_takes_a_mapping_and_keywords_and_links_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tracked({0: 0})
    assert t.update({1: -1}, x=5) == immutables.Map({0: 0, 1: -1, "x": 5})
    prev = track(immutables.Map({i: i for i in range(1000)}))
    nxt = prev.update({7: -7, 2000: 1}).update({8: -8})

    def whole(self: Tracked) -> None:
        raise AssertionError("compared the whole map")
    monkeypatch.setattr(Tracked, "keys", whole)
    assert changed(prev, nxt) == {7, 8, 2000}


def test_a_key_whose_value_is_none_is_present() -> None:
    empty, held = immutables.Map(), immutables.Map({1: None})
    assert changed(empty, held) == {1} and changed(held, empty) == {1}
    assert changes(track(empty), track(empty).set(1, None)) == ((1, None, None),)
    assert changes(track(held), track(held).delete(1)) == ((1, None, None),)


def test_the_memo_answers_the_same_maps_only() -> None:
    prev = track(immutables.Map({1: 1, 2: 2}))
    nxt = prev.set(1, -1)
    first = changes(prev, nxt)
    assert changes(prev, nxt) is first  # remembered: tracked maps are immutable
    assert changed(prev, nxt) is changed(prev, nxt)
    other = track(immutables.Map({1: -1, 2: 3}))  # the same nxt from another prev: its own answer
    assert changed(other, nxt) == {2} and changes(other, nxt) == ((2, 3, 2),)
    p2 = immutables.Map({5: 5})
    assert changes(p2, nxt) == ((1, None, -1), (2, None, 2), (5, 5, None))
    assert changed(p2, nxt) == {1, 2, 5}


@pytest.mark.parametrize("which", ["prev", "nxt"])
def test_the_memo_never_holds_a_mutable_side(which: str) -> None:
    plain = {1: 1}
    fixed = immutables.Map({1: 1})
    prev, nxt = (plain, fixed) if which == "prev" else (fixed, plain)
    assert changed(prev, nxt) == set() and changes(prev, nxt) == ()
    plain[1] = 2
    assert changed(prev, nxt) == {1} and changes(prev, nxt) == ((1, 1, 2) if which == "nxt" else (1, 2, 1),)


def test_the_memo_forgets_the_oldest_of_five() -> None:
    base = immutables.Map({0: 0})
    pairs = [(base, base.set(0, i)) for i in range(1, 6)]
    first = [changes(p, n) for p, n in pairs]
    # newest first, so that the one miss (the oldest, recomputed and remembered) comes last
    hits = [changes(p, n) is f for (p, n), f in reversed(list(zip(pairs, first)))]
    assert hits == [True, True, True, True, False]
