"""invariants/trace_format.py's mutation run (benchmarks/mutation.py): the shared vocabulary and its values, pinned whole."""

from __future__ import annotations

import decimal
import math

import pytest

from invariants import trace_format as F
from spec.types import Role, Tier

_TOP = 10**20 - 1  # 20 digits: the longest integer written exactly


def test_kinds_are_the_action_names_in_snake_case() -> None:
    assert list(F.KINDS) == [
        "register_authority", "register_alias", "register_holder", "reserve", "commit", "cancel", "release",
        "quarantine", "record_committed", "lose_device", "confirm_termination", "open_allowance", "reserve_growth",
        "map_allowance", "unmap_allowance", "transfer_allowance", "close_allowance"]
    assert F.kind_of(type("ABc", (), {})) == "a_bc"


def test_opaque_is_its_type_name() -> None:
    o = F.Opaque("Decimal")
    assert o.type_name == "Decimal" and repr(o) == "<opaque Decimal>"
    assert o == F.Opaque("Decimal") and o != F.Opaque("bytes") and o != "Decimal"
    assert hash(o) == hash(("Opaque", "Decimal")) != hash(F.Opaque("bytes"))
    fake = type("Fake", (), {"type_name": "Decimal"})()
    assert o != fake


class _Named:
    class Inner:
        pass


@pytest.mark.parametrize(("v", "want"), [
    (None, None), (True, True), (False, False), (0, 0), (_TOP, _TOP), (-_TOP, -_TOP), (1.5, 1.5), (-0.0, -0.0),
    ("", ""), ("x" * F.MAX_TEXT, "x" * F.MAX_TEXT),
    (_TOP + 1, {"opaque": "int"}), (-_TOP - 1, {"opaque": "int"}), (math.nan, {"opaque": "float"}),
    (math.inf, {"opaque": "float"}), (-math.inf, {"opaque": "float"}), ("x" * (F.MAX_TEXT + 1), {"opaque": "str"}),
    (b"x", {"opaque": "bytes"}), (decimal.Decimal(1), {"opaque": "Decimal"}), (Tier.DEVICE, {"opaque": "Tier"}),
    ([1], {"opaque": "list"}), (_Named.Inner(), {"opaque": "_Named.Inner"}),
    (type("", (), {})(), {"opaque": "?"}), (type("N" * (F.MAX_TEXT + 3), (), {})(), {"opaque": "N" * F.MAX_TEXT}),
])
def test_a_value_is_written_exactly_or_opaque(v: object, want: object) -> None:
    got = F.encode_value("nbytes", v)
    assert got == want and type(got) is type(want)


def test_an_enum_field_holds_its_enum_or_opaque() -> None:
    assert F.encode_value("tier", Tier.HOST) == "host" and F.encode_value("role", Role.KV) == "kv"
    assert F.encode_value("tier", Role.KV) == {"opaque": "Role"}
    assert F.encode_value("role", "kv") == {"opaque": "str"}
    assert F.encode_value("tier", None) == {"opaque": "NoneType"}
    assert F.decode_value("tier", "disk") is Tier.DISK and F.decode_value("role", "prefix") is Role.PREFIX
    with pytest.raises(ValueError):
        F.decode_value("tier", "kv")


@pytest.mark.parametrize("v", [None, True, 0, -_TOP - 10, 2.5, "", "y" * F.MAX_TEXT])
def test_a_scalar_decodes_to_itself(v: object) -> None:
    got = F.decode_value("nbytes", v)
    assert got == v and type(got) is type(v)


def test_an_opaque_marker_decodes_to_opaque() -> None:
    assert F.decode_value("nbytes", {"opaque": "x"}) == F.Opaque("x")
    assert F.decode_value("tier", {"opaque": "y" * F.MAX_TEXT}) == F.Opaque("y" * F.MAX_TEXT)
    for v in ({"opaque": ""}, {"opaque": "y" * (F.MAX_TEXT + 1)}, {"opaque": 1}, {"opaque": "x", "more": 1}, {},
              {"other": "x"}):
        with pytest.raises(ValueError) as e:
            F.decode_value("tier", v)
        assert str(e.value) == "tier: an object value must be exactly {'opaque': type name}"


@pytest.mark.parametrize(("field", "v", "message"), [
    ("tier", 5, "tier 5 is not a Tier"), ("role", None, "role None is not a Role"),
    ("tier", list(range(40)), f"tier {repr(list(range(40)))[:80]} is not a Tier"),
    ("nbytes", "x" * (F.MAX_TEXT + 1), f"nbytes must be a JSON scalar (strings up to {F.MAX_TEXT} characters) or an "
                                       "opaque marker"),
    ("holder", [1], f"holder must be a JSON scalar (strings up to {F.MAX_TEXT} characters) or an opaque marker"),
])
def test_an_ill_formed_value_is_refused_by_its_whole_message(field: str, v: object, message: str) -> None:
    with pytest.raises(ValueError) as e:
        F.decode_value(field, v)
    assert str(e.value) == message


