"""Survivors of invariants/itf.py's mutation run, killed (benchmarks/mutation.py): whole outputs pinned."""

from __future__ import annotations

import enum

import attrs
import immutables
import pytest

from invariants.itf import MAX_SAFE_INT, itf_trace, to_itf

_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"
_NONE = {"tag": "None", "value": {"#tup": []}}


class _Mode(enum.IntEnum):
    ON = 7


class _Name(enum.Enum):
    ON = "on"


@attrs.frozen
class _BA:  # fields out of alphabetical order: a set of records sorts by their key-sorted JSON text
    b: int
    a: int


def test_scalars_and_the_safe_integer_bounds() -> None:
    assert MAX_SAFE_INT == 9007199254740991
    assert [to_itf(x) for x in (True, False, "s", "", 0, -3, None, _Mode.ON)] == [True, False, "s", "", 0, -3, _NONE, "ON"]
    assert to_itf(True) is True and to_itf(False) is False
    assert to_itf(MAX_SAFE_INT) == MAX_SAFE_INT and to_itf(-MAX_SAFE_INT) == -MAX_SAFE_INT
    assert to_itf(MAX_SAFE_INT + 1) == {"#bigint": "9007199254740992"}
    assert to_itf(-MAX_SAFE_INT - 1) == {"#bigint": "-9007199254740992"}


def test_sequences_sets_and_maps() -> None:
    assert to_itf([1, (2, "x")]) == {"#tup": [1, {"#tup": [2, "x"]}]} and to_itf(()) == {"#tup": []}
    assert to_itf({10, 9}) == {"#set": [10, 9]}  # by JSON text: "10" < "9"
    assert to_itf(frozenset({_BA(1, 2), _BA(2, 1)})) == {"#set": [{"b": 2, "a": 1}, {"b": 1, "a": 2}]}
    assert to_itf(set()) == {"#set": []}
    # keys: ints by value, then strings by value, then any other key by its ITF text (a bool is not an int here)
    keys = [(1, 1), "~", True, 2, "a", -5, (0,), 10]
    got = to_itf(immutables.Map({k: i for i, k in enumerate(keys)}))
    assert got == {"#map": [[-5, 5], [2, 3], [10, 7], ["a", 4], ["~", 1], [True, 2], [{"#tup": [0]}, 6],
                            [{"#tup": [1, 1]}, 0]]}
    assert to_itf({3: 0, 1: 9}) == {"#map": [[1, 9], [3, 0]]}  # by key, not value
    # strings by their own order ("z" < "é"), before an enum key (its name) and the others by text, whatever the
    # mapping's own order
    got = to_itf({(1, 1): 0, (0,): 1, _Name.ON: 2, "é": 3, "z": 4})
    assert got == {"#map": [["z", 4], ["é", 3], ["ON", 2], [{"#tup": [0]}, 1], [{"#tup": [1, 1]}, 0]]}


def test_a_value_without_a_form_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError) as e:
        to_itf(b"x")
    assert str(e.value) == "no ITF form for a bytes: b'x'"
    with pytest.raises(TypeError, match="no ITF form for a float: 0.5"):
        to_itf({0.5})


def test_a_trace_of_records_whole() -> None:
    t = itf_trace((_BA(1, 2), _BA(3, 4)), ("step",), {"violated": "X"})
    assert t == {"#meta": {"format": "ITF", "format-description": _URL, "violated": "X"},
                 "vars": ["action", "b", "a"],
                 "states": [{"#meta": {"index": 0}, "action": "init", "b": 1, "a": 2},
                            {"#meta": {"index": 1}, "action": "'step'", "b": 3, "a": 4}]}


def test_a_trace_of_plain_states_and_its_lasso() -> None:
    t = itf_trace((5, 6, 7), (1, 2), {}, loop=0)
    assert t == {"#meta": {"format": "ITF", "format-description": _URL}, "vars": ["action", "state"],
                 "states": [{"#meta": {"index": 0}, "action": "init", "state": 5},
                            {"#meta": {"index": 1}, "action": "1", "state": 6},
                            {"#meta": {"index": 2}, "action": "2", "state": 7}], "loop": 0}
    assert itf_trace((5, 6, 7), (1, 2), {}, loop=2)["loop"] == 2
    assert itf_trace((_BA(1, 2),), (), {})["vars"] == ["action", "b", "a"]  # one record state: its own fields
    assert itf_trace((5,), (), {}) == {"#meta": {"format": "ITF", "format-description": _URL},
                                       "vars": ["action", "state"],
                                       "states": [{"#meta": {"index": 0}, "action": "init", "state": 5}]}
    assert itf_trace((), (), {"m": 1}) == {"#meta": {"format": "ITF", "format-description": _URL, "m": 1},
                                           "vars": [], "states": []}


@pytest.mark.parametrize("states, actions, loop, message", [
    ((), (1,), None, "0 states need 0 actions, got 1"),
    ((1,), (1,), None, "1 states need 0 actions, got 1"),
    ((1, 2), (), None, "2 states need 1 actions, got 0"),
    ((1, 2), (1, 2), None, "2 states need 1 actions, got 2"),
    ((5, 6, 7), (1, 2), -1, "loop -1 is not the index of one of the 3 states"),
    ((5, 6, 7), (1, 2), 3, "loop 3 is not the index of one of the 3 states"),
])
def test_actions_that_do_not_match_the_states_or_a_loop_outside_them_are_refused(states, actions, loop, message):
    with pytest.raises(ValueError) as e:
        itf_trace(states, actions, {}, loop=loop)
    assert str(e.value) == message
