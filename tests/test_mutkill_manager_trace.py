"""Survivors of invariants/manager_trace.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from invariants import manager_trace as T
from invariants.trace_format import MAX_TEXT, Opaque
from spec import errors as E
from spec import ledger_actions as A
from spec.grants import GrantTicket
from spec.manager_actions import LimitOutcome, PlanTx, Submit
from spec.types import MAX_BYTES, Role, Tier

_BIG = 10**19  # 20 digits: the longest integer a tuple carries exactly
_MANY = 5000  # past every count bound events once had (64, 4096): only the line's bytes bound a list


def test_configure_round_trips_and_names_its_bounds() -> None:
    ev = T.encode_configure("pmm-1", 3, 2, 7)
    assert ev == {"contract_revision": "ortmem-manager/2", "topology_epoch": 2, "source": "pmm-1", "source_sequence": 3,
                  "kind": "configure", "ids": {}, "payload": {"aging_bound": 7}}
    assert T.decode_configure(ev["ids"], ev["payload"]) == T.Configure(7)
    assert T.decode_configure({}, {"aging_bound": 1}) == T.Configure(1)
    assert T.decode_configure({}, {"aging_bound": MAX_BYTES}) == T.Configure(MAX_BYTES)
    shape = "a configure event has no ids and exactly the payload {aging_bound}"
    for ids, payload in (({"x": 1}, {"aging_bound": 1}), ({}, [("aging_bound", 1)]), ({}, {"aging_bound": 1, "x": 0}),
                         ({}, {})):
        with pytest.raises(ValueError) as e:
            T.decode_configure(ids, payload)
        assert str(e.value) == shape
    for bound, shown in ((0, "0"), (MAX_BYTES + 1, str(MAX_BYTES + 1)), (True, "True"), (-1, "-1"),
                         ("x" * 60, repr("x" * 60)[:40])):
        with pytest.raises(ValueError) as e:
            T.decode_configure({}, {"aging_bound": bound})
        assert str(e.value) == f"configure: aging_bound must be an integer in [1, {MAX_BYTES}], got {shown}"


def test_tuple_fields_encode_exactly_or_opaque() -> None:
    assert T.encode_field("nbytes", 5) == 5 and T.encode_field("role", Role.KV) == "kv"
    assert T.encode_field("victims", (1, _BIG, -_BIG)) == [1, _BIG, -_BIG]
    assert T.encode_field("victims", ()) == []
    assert T.encode_field("victims", tuple(range(_MANY))) == list(range(_MANY))
    assert T.encode_field("needs", ((1, 2),) * _MANY) == [[1, 2]] * _MANY
    assert T.encode_field("needs", ((1, 2), (3, _BIG))) == [[1, 2], [3, _BIG]]
    tup = {"opaque": "tuple"}
    for name, v in (("victims", (10 * _BIG,)), ("victims", (-10 * _BIG,)),
                    ("victims", (True,)), ("victims", ((1, 2),)), ("needs", (1, 2)), ("needs", ((1, 2, 3),)),
                    ("needs", ((1,),)), ("needs", ([1, 2],)), ("needs", ((1, 10 * _BIG),)), ("needs", ((False, 1),))):
        assert T.encode_field(name, v) == tup, (name, v)
    assert T.encode_field("victims", [1]) == {"opaque": "list"}
    assert T.encode_field("needs", "ab") == {"opaque": "str"}
    assert T.encode_field("victims", type("", (), {})()) == {"opaque": "?"}
    assert T.encode_field("victims", type("N" * (MAX_TEXT + 5), (), {})()) == {"opaque": "N" * MAX_TEXT}


def test_tuple_fields_decode_exactly_or_refuse_with_their_message() -> None:
    assert T.decode_field("nbytes", 5) == 5
    assert T.decode_field("victims", [1, 2]) == (1, 2) and T.decode_field("victims", []) == ()
    assert T.decode_field("victims", list(range(_MANY))) == tuple(range(_MANY))
    assert T.decode_field("needs", [[1, 2], [3, 4]]) == ((1, 2), (3, 4))
    assert T.decode_field("needs", [[1, 2]] * _MANY) == ((1, 2),) * _MANY
    opaque = T.decode_field("victims", {"opaque": "tuple"})
    assert type(opaque) is Opaque and opaque.type_name == "tuple"
    with pytest.raises(ValueError) as e:
        T.decode_field("victims", {"x": 1})
    assert str(e.value) == "victims: an object value must be exactly {'opaque': type name}"
    size = "must be a list or an opaque marker"
    for name, v in (("victims", "1"), ("needs", 3), ("victims", None), ("needs", (1, 2))):
        with pytest.raises(ValueError) as e:
            T.decode_field(name, v)
        assert str(e.value) == f"{name} {size}"
    for name, v, what in (("victims", [True], "integers"), ("victims", [[1, 2]], "integers"),
                          ("victims", [1.0], "integers"), ("needs", [1, 2], "[int, int] pairs"),
                          ("needs", [[1, 2, 3]], "[int, int] pairs"), ("needs", [[1]], "[int, int] pairs"),
                          ("needs", [[1, True]], "[int, int] pairs"), ("needs", [(1, 2)], "[int, int] pairs")):
        with pytest.raises(ValueError) as e:
            T.decode_field(name, v)
        assert str(e.value) == f"{name} elements must be {what}", (name, v)


def test_results_round_trip_and_refuse_with_their_message() -> None:
    outcome = LimitOutcome(True, 9, ((1, 2), (3, 4)))
    assert T.encode_result(outcome) == {"committed": True, "limit": 9, "completed": [[1, 2], [3, 4]]}
    for r in (None, 0, 7, (), (1, 2), outcome, LimitOutcome(False, 0, ())):
        assert T.decode_result(T.encode_result(r)) == r
    assert type(T.decode_result([1])) is tuple and T.encode_result((1, 2)) == [1, 2]
    assert T.decode_result(list(range(_MANY))) == tuple(range(_MANY))
    full = {"committed": False, "limit": 1, "completed": [[1, 2]] * _MANY}
    assert T.decode_result(full) == LimitOutcome(False, 1, ((1, 2),) * _MANY)
    bad = [True, 1.5, "3", [True], [1, None], {"committed": 1, "limit": 1, "completed": []},
           {"committed": True, "limit": True, "completed": []}, {"committed": True, "limit": 1, "completed": ()},
           {"committed": True, "limit": 1, "completed": [[1]]}, {"committed": True, "limit": 1, "completed": [(1, 2)]},
           {"committed": True, "limit": 1, "completed": [[1, 2.0]]},
           {"committed": True, "limit": 1, "completed": [], "x": 0}, {"committed": True, "limit": 1},
           "y" * 200]
    for v in bad:
        with pytest.raises(ValueError) as e:
            T.decode_result(v)
        assert str(e.value) == f"result {v!r:.80} is not an id, a byte count, a list of ids or a limit outcome", v


def test_bundles_round_trip_in_key_order_and_refuse_with_their_message() -> None:
    enc = T.encode_bundles({10: ((3, 1), True), 2: ((), False)})
    assert enc == {"2": {"versions": [], "poisoned": False}, "10": {"versions": [3, 1], "poisoned": True}}
    assert list(enc) == ["2", "10"]
    assert T.decode_bundles(enc) == {2: ((), False), 10: ((3, 1), True)}
    many = {str(i): {"versions": [i], "poisoned": False} for i in range(_MANY)}
    assert T.decode_bundles(many) == {i: ((i,), False) for i in range(_MANY)}
    assert T.decode_bundles({"1": {"versions": [0] * _MANY, "poisoned": True}}) == {1: ((0,) * _MANY, True)}
    assert T.decode_bundles({"9" * 20: {"versions": [], "poisoned": True}}) == {int("9" * 20): ((), True)}
    for v in ([], None, [["1", {"versions": [], "poisoned": False}]]):
        with pytest.raises(ValueError) as e:
            T.decode_bundles(v)
        assert str(e.value) == "payload.bundles must be an object"
    ok = {"versions": [1], "poisoned": False}
    for k in ("a", "-1", "", "1" * 21, 1):
        with pytest.raises(ValueError) as e:
            T.decode_bundles({k: ok})
        assert str(e.value) == "payload.bundles keys must be integer bundle ids", k
    for b in ([], {"versions": [1]}, {**ok, "x": 0}, {"versions": [1], "poisoned": 0}, {"versions": (1,), "poisoned": True},
              {"versions": [True], "poisoned": True},
              {"versions": [1, "2"], "poisoned": True}):
        with pytest.raises(ValueError) as e:
            T.decode_bundles({"4": b})
        assert str(e.value) == "payload.bundles[4] must be {versions: [int...], poisoned: bool}", b


def test_events_are_whole() -> None:
    sub = Submit(holder=2, authority=1, nbytes=4, priority=0, role=Role.KV)
    assert T.encode_manager_event("pmm-1", 9, 4, sub, 3, None, {1: 12, 0: 5}) == {
        "contract_revision": "ortmem-manager/2", "topology_epoch": 4, "source": "pmm-1", "source_sequence": 9,
        "kind": "submit",
        "ids": {"holder": 2, "authority": 1},
        "payload": {"nbytes": 4, "priority": 0, "role": "kv", "outcome": "accepted", "error": None, "result": 3,
                    "used": {"0": 5, "1": 12}, "charges": {}, "bundles": {}}}
    aligned = T.encode_manager_event("s", 1, 0, Submit(2, 1, 4, alignment=8), 3, None, {})
    assert aligned["payload"]["alignment"] == 8
    plan = PlanTx(holder=2, needs=((1, 4),), retry=None)
    ev = T.encode_manager_event("s", 2, 0, plan, 5, ValueError("no"), {1: 0}, {3: ((1,), False)})
    assert ev["ids"] == {"holder": 2, "retry": None}
    assert ev["payload"] == {"needs": [[1, 4]], "priority": 0, "outcome": "rejected", "error": "ValueError",
                             "result": None, "used": {"1": 0}, "charges": {},
                             "bundles": {"3": {"versions": [1], "poisoned": False}}}
    grant = T.encode_manager_event("s", 3, 0, GrantTicket(7), 11, None, {1: 4}, None, {11: 4})
    assert (grant["kind"], grant["ids"], grant["payload"]["result"], grant["payload"]["charges"]) == (
        "grant", {"ticket": 7}, 11, {"11": 4})
    assert T.MANAGER_KINDS["grant"] is GrantTicket and T.MANAGER_KINDS["submit"] is Submit
    assert T.TUPLE_FIELDS == {"victims", "needs"}


def test_an_attrs_value_in_a_field_is_written_opaque_by_its_own_type() -> None:
    bad = Submit(2, 1, T.Configure(3))  # type: ignore[arg-type]
    ev = T.encode_manager_event("s", 1, 0, bad, None, ValueError("no"), {})
    assert ev["payload"]["nbytes"] == {"opaque": "Configure"}  # not flattened into its fields


def test_a_ledger_operation_is_written_whole_with_its_charges() -> None:
    """One revision: a ledger operation's event is `ortmem-manager/2`, its result in the payload, its `charges` (in
    key order) after `used`; a composed operation's too (issue #21 item 4)."""
    act = A.Reserve(holder=2, authority=1, tier=Tier.DEVICE, nbytes=16, role=Role.WEIGHTS)
    ev = T.encode_manager_event("pmm-1", 7, 0, act, 3, None, {5: 1, 1: 16}, None, {9: 2, 3: 16})
    assert ev == {"contract_revision": "ortmem-manager/2", "topology_epoch": 0, "source": "pmm-1", "source_sequence": 7,
                  "kind": "reserve", "ids": {"holder": 2, "authority": 1},
                  "payload": {"tier": "device", "nbytes": 16, "role": "weights", "outcome": "accepted", "error": None,
                              "result": 3, "used": {"1": 16, "5": 1}, "charges": {"3": 16, "9": 2}, "bundles": {}}}
    assert list(ev["payload"]["charges"]) == ["3", "9"]
    refused = T.encode_manager_event("s", 1, 0, A.Commit(2, 3, 8), None, E.InvalidBytes("no"), {1: 8})
    assert refused["payload"] == {"nbytes": 8, "outcome": "rejected", "error": "InvalidBytes", "result": None,
                                  "used": {"1": 8}, "charges": {}, "bundles": {}}
    charged = T.encode_manager_event("s", 1, 0, Submit(2, 1, 4), 3, None, {}, None, {3: 4})
    assert charged["payload"]["charges"] == {"3": 4}
    assert T.LEDGER_ACTIONS == frozenset(T.KINDS.values()) and A.Reserve in T.LEDGER_ACTIONS


def test_a_registration_always_names_its_device_and_a_request_its_alignment_only_when_stated() -> None:
    named = T.encode_manager_event("s", 1, 0, A.RegisterAuthority("p", Tier.DEVICE, 64, "cuda:0"), 1, None, {1: 0})
    assert named["payload"]["device"] == "cuda:0"
    unnamed = T.encode_manager_event("s", 1, 0, A.RegisterAuthority("p", Tier.DEVICE, 64), 1, None, {1: 0})
    assert "device" in unnamed["payload"] and unnamed["payload"]["device"] is None  # the replay refuses it
    assert "alignment" not in T.encode_manager_event("s", 1, 0, Submit(2, 1, 4), 3, None, {})["payload"]
    assert T.REQUIRED_FIELDS == {"device"}


# --- touched: what an event must observe (issue #21 item 4) --------------------------------------------------


def _touching() -> tuple[Any, int]:
    """Two device ledgers; a lease of 4 B on ledger 1, a pressure on ledger 2, a transaction on both in a bundle;
    (manager, the pressure's id)."""
    from spec import manager as MG
    from spec import manager_actions as M
    m = M.initial()
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", Tier.DEVICE, 64, "d0"),
                A.RegisterAuthority("gpu1", Tier.DEVICE, 64, "d1"), A.Reserve(1, 1, Tier.DEVICE, 4, Role.KV),
                A.Commit(1, 1, 4), A.Reserve(1, 2, Tier.DEVICE, 4, Role.KV), A.Commit(1, 2, 4)):
        m = MG.step(m, act)[0]
    m, pid = MG.step(m, M.Press(1, 2, 4))
    m, tx = MG.step(m, PlanTx(1, ((1, 2), (2, 2))))
    m, bundle = MG.step(m, M.OpenBundle())
    m = MG.step(m, M.JoinBundle(tx, bundle))[0]
    return m, pid


@pytest.mark.parametrize("cls, fields", [
    (A.Reserve, ("authority",)), (A.RegisterAlias, ("of", "view")), (PlanTx, ("needs",)), (A.Release, ("allocation",)),
    (A.TransferAllowance, ("source", "target")), (A.ReserveGrowth, ("allowance",)),
])
def test_the_fields_that_name_records_per_action_class(cls: type, fields: tuple[str, ...]) -> None:
    """`_naming` (what `touched`'s cache holds) read directly: the cache is filled before a mutant runs."""
    assert T._naming(cls) == fields


def test_the_fields_that_name_records_of_the_part_actions() -> None:
    from spec import manager_actions as M
    assert T._naming(M.Answer) == ("victims", "pressure")  # `target` of a press is bytes, not an allowance
    assert T._naming(M.Press) == ("authority",)
    assert T._naming(M.JoinBundle) == ("tx", "bundle")
    assert T._naming(M.Claim) == ("ticket",)


def test_touched_with_an_empty_cache_is_the_same() -> None:
    from spec import manager_actions as M
    m, pid = _touching()
    act = M.Answer(1, pid, (1,))
    T._NAMING.clear()
    assert T.touched(m, act, m) == ({1, 2}, set(), set())
    assert T._NAMING[M.Answer] == ("victims", "pressure")


def test_touched_reads_past_ill_typed_or_unknown_values() -> None:
    """An ill-typed field names nothing and the next field is still read; ids naming nothing name nothing."""
    from spec import manager_actions as M
    m, pid = _touching()
    assert T.touched(m, M.Answer(1, pid, "x"), m)[0] == {2}  # the victims opaque, the pressure still named
    assert T.touched(m, M.Answer(1, pid, (999, [1])), m)[0] == {2}  # a victim never issued, one unhashable
    assert T.touched(m, PlanTx(1, (5, (), ([1], 2), (2, 1))), m)[0] == {2}  # ill-typed needs and one good one


def test_touched_names_a_transactions_bundle_only_while_it_exists() -> None:
    import attrs
    from spec import manager_actions as M
    m, _ = _touching()
    tx = next(iter(m.txs))
    assert T.touched(m, M.CommitTx(tx), m)[2] == {m.txs[tx].bundle}
    gone = attrs.evolve(m, bundles={})
    assert T.touched(gone, M.CommitTx(tx), gone) == ({1, 2}, set(), set())


def test_touched_names_every_allocation_created_or_charged_but_none_only_restated() -> None:
    """Allocations an action does not name are touched when it created them or moved their charge (a grant's, a
    transaction's, a try-reserve's: issue #21 item 4); one whose record changed at the same charge, or that is gone
    after it, is not (a released lease is no longer held)."""
    from spec import manager_actions as M
    from spec.records import evolve
    from spec.types import AllocState
    m, _ = _touching()
    allocs = m.ledger.allocations
    r1, r2 = allocs[1], allocs[2]
    moved = (allocs.set(2, evolve(r2, charge=r2.charge + 2)).set(3, evolve(r1, id=3))
             .set(1, evolve(r1, state=AllocState.QUARANTINED)))
    nxt = evolve(m, ledger=evolve(m.ledger, allocations=moved))
    assert T.touched(m, M.OpenBundle(), nxt)[1] == {2, 3}
    assert T.touched(m, M.OpenBundle(), evolve(m, ledger=evolve(m.ledger, allocations=allocs.delete(2))))[1] == set()
    assert T.touched(m, M.OpenBundle(), m)[1] == set()
