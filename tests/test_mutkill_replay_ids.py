"""Observed ids to the spec's (`invariants.replay_ids.IdMap`), judged exactly on small maps built by hand: the mapped
id, the binding kept, the error raised and its whole message. Written from the mutation survivors of
`invariants/replay_ids.py`."""

from __future__ import annotations

import io

import pytest
from trace_harness import epoched, ledger_event

from invariants.manager_replay import replay
from invariants import InvariantViolation
from invariants import replay as R
from invariants import replay_ids
from invariants.replay_ids import IdMap, UnknownObservedId, _plan
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.types import Role, Tier

#: -(10 ** 21): where the spec's ids for observed ids never issued start (below every id the spec issues).
UNBOUND = -(10 ** 21)


def _map(*live: tuple[str, int], bound: tuple[tuple[str, int, int], ...] = ()) -> IdMap:
    """A map whose spec still holds `live` (kind, spec id), with each (kind, observed id, spec id) in `bound` bound."""
    ids = IdMap(lambda kind, spec: (kind, spec) in live)
    for kind, observed, spec in bound:
        ids.bind(kind, observed, spec)
    return ids


HOLDER_AND_PRESSURE = (("holder", 31, 1), ("pressure", 51, 1))


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """No action class's plan cached yet (as in a fresh process: the cache is filled on first use)."""
    monkeypatch.setattr(replay_ids, "_PLANS", {})


# --- which fields hold ids -----------------------------------------------------------------------------------


def test_the_id_fields_of_each_action_class() -> None:
    assert _plan(A.Reserve) == (("holder", "holder"), ("authority", "authority"))
    assert _plan(A.TransferAllowance) == (("holder", "holder"), ("source", "allowance"), ("target", "allowance"))
    assert _plan(M.Press) == (("holder", "holder"), ("authority", "authority"))  # its target is bytes
    assert _plan(M.Answer) == (("holder", "holder"), ("pressure", "pressure"), ("victims", "victims"))
    assert _plan(M.PlanTx) == (("holder", "holder"), ("needs", "needs"), ("retry", "tx"))


def test_an_action_is_mapped_on_first_use_of_its_class(cold: None) -> None:
    ids = _map(bound=(("holder", 31, 1), ("allowance", 41, 1), ("allowance", 42, 2)))
    assert ids.action(A.TransferAllowance(31, 41, 42, 8), strict=True) == A.TransferAllowance(1, 1, 2, 8)


# --- the ids inside victims and needs, ill-typed ids, ids never issued -----------------------------------------------


def test_victims_and_needs_are_mapped_id_by_id() -> None:
    ids = _map(bound=(*HOLDER_AND_PRESSURE, ("allocation", 61, 1), ("allocation", 62, 2), ("authority", 501, 1),
                      ("authority", 502, 2)))
    assert ids.action(M.Answer(31, 51, (62, 61)), strict=True) == M.Answer(1, 1, (2, 1))
    assert ids.action(M.PlanTx(31, ((501, 4), (502, 8))), strict=True) == M.PlanTx(1, ((1, 4), (2, 8)))


def test_ill_typed_victims_and_needs_pass_through_for_the_spec_to_refuse() -> None:
    ids = _map(bound=HOLDER_AND_PRESSURE)
    assert ids.action(M.Answer(31, 51, "61"), strict=True) == M.Answer(1, 1, "61")
    assert ids.action(M.PlanTx(31, "501"), strict=True) == M.PlanTx(1, "501")
    assert ids.action(M.PlanTx(31, ((), 501, "x")), strict=True) == M.PlanTx(1, ((), 501, "x"))


def test_an_accepted_event_naming_a_victim_or_a_need_never_issued_fails_naming_it() -> None:
    ids = _map(bound=HOLDER_AND_PRESSURE)
    with pytest.raises(UnknownObservedId, match=r"^allocation 61, which no event of this trace issued: "
                                                r"an event is missing$"):
        ids.action(M.Answer(31, 51, (61,)), strict=True)
    with pytest.raises(UnknownObservedId, match=r"^authority 501, which no event of this trace issued: "
                                                r"an event is missing$"):
        ids.action(M.PlanTx(31, ((501, 4),)), strict=True)
    # rejected: handed to the spec as ids it never issued either
    assert ids.action(M.Answer(31, 51, (61,)), strict=False) == M.Answer(1, 1, (UNBOUND - 61,))
    assert ids.action(M.PlanTx(31, ((501, 4),)), strict=False) == M.PlanTx(1, ((UNBOUND - 501, 4),))


def test_a_bool_or_float_id_is_not_taken_for_the_int_it_equals() -> None:
    ids = _map(bound=(("holder", 1, 7), ("authority", 1, 8)))
    act = A.Reserve(True, 1.0, Tier.DEVICE, 8, Role.KV)
    assert ids.action(act, strict=True) == act  # nothing mapped: the spec refuses them as ill-typed
    ids.bind("ticket", 107, 1)
    assert (ids.observed_id("ticket", True), ids.observed_id("ticket", 1)) == (True, 107)
    assert type(ids.observed_id("ticket", True)) is bool  # a message names what the spec was handed


def test_an_id_of_a_kind_nothing_was_bound_for() -> None:
    ids = _map()
    assert ids.action(A.Reserve(7, 9, Tier.DEVICE, 8, Role.KV), strict=False) == A.Reserve(
        UNBOUND - 7, UNBOUND - 9, Tier.DEVICE, 8, Role.KV)
    assert ids.spec_id("holder", -7, strict=False) == UNBOUND - 7
    with pytest.raises(UnknownObservedId, match=r"^holder 7, which no event of this trace issued"):
        ids.spec_id("holder", 7, strict=True)
    assert ids.observed_id("ticket", 7) == 7  # unbound: named by the spec's own number (messages only)
    ids.bind("ticket", 107, 1)
    assert (ids.observed_id("ticket", 1), ids.observed_id("ticket", 7)) == (107, 7)


def test_a_rejected_event_naming_an_id_never_issued_reads_the_id_the_spec_was_handed() -> None:
    trace = b"".join(epoched([ledger_event(1, "register_holder", {"result": 1}, name="w"),
                              ledger_event(2, "release", {"holder": 1, "allocation": 7}, error="ForeignHolder")]))
    assert replay(io.BytesIO(trace)).describe() == (
        "REJECTED at line 2 (refinement): Release(holder=1, allocation=7) was rejected with ForeignHolder, the spec "
        "raises UnknownAllocation: allocation 7 was never issued")


# --- an allocation no event issued: unknown, even where the spec holds one of that number --------------------------


def test_an_allocation_no_event_issued_is_unknown_though_the_spec_holds_that_number() -> None:
    ids = _map(("allocation", 3))  # the spec holds allocation 3, but no event of the trace named it
    with pytest.raises(UnknownObservedId, match=r"^allocation 3, which no event of this trace issued"):
        ids.spec_id("allocation", 3, strict=True)
    with pytest.raises(UnknownObservedId, match=r"^observed allocation 3, which no event of this trace issued$"):
        ids.figures("allocation", {3: 8})
    assert ids.to_spec == {} and ids.to_obs == {}  # nothing bound


def test_figures_never_issued_raise() -> None:
    ids = _map(bound=(("authority", 501, 1),))
    with pytest.raises(UnknownObservedId, match=r"^observed authority 9, which no event of this trace issued$"):
        ids.figures("authority", {9: 1, 501: 4})
    assert ids.figures("authority", {501: 4}) == {1: 4}


# --- bind's refusals -----------------------------------------------------------------------------------------------


def test_bind_refuses_an_id_that_is_not_an_integer() -> None:
    with pytest.raises(ValueError) as e:
        _map().bind("ticket", "7", 1)
    assert str(e.value) == "the governor issued ticket id '7', not an integer"


def test_a_retired_allocation_id_is_never_reused_but_another_kind_may_be() -> None:
    ids = _map(("ticket", 2), ("allocation", 2))
    ids.bind("allocation", 7, 1)  # allocation 1 is retired (not live)
    with pytest.raises(InvariantViolation) as e:
        ids.bind("allocation", 7, 2)
    assert str(e.value) == ("I4a: the governor issued allocation id 7 for a new object, but 7 already names another "
                            "allocation (retired (allocation ids are never reused)): two objects aliased onto one id")
    ids.bind("ticket", 7, 1)  # ticket 1 retired: 7 may name ticket 2
    ids.bind("ticket", 7, 2)
    assert ids.spec_id("ticket", 7, strict=True) == 2
    assert (ids.observed_id("ticket", 2), ids.observed_id("ticket", 1)) == (7, 1)  # 1 keeps no id: a bijection


def test_a_live_id_reused_for_another_object_of_another_kind_is_refused_naming_it() -> None:
    ids = _map(("ticket", 1), ("ticket", 2))
    ids.bind("ticket", 7, 1)
    with pytest.raises(ValueError) as e:
        ids.bind("ticket", 7, 2)
    assert str(e.value) == ("the governor issued ticket id 7 for a new object, but 7 already names another ticket "
                            "(still live): two objects aliased onto one id")


def test_one_object_under_two_ids() -> None:
    ids = _map(("ticket", 1), ("authority", 1))
    ids.bind("ticket", 7, 1)
    with pytest.raises(ValueError) as e:
        ids.bind("ticket", 8, 1)
    assert str(e.value) == "the governor issued ticket id 8 for the object it already calls ticket 7: one object under two ids"
    ids.bind("authority", 501, 1)
    with pytest.raises(InvariantViolation) as v:
        ids.bind("authority", 502, 1)
    assert (v.value.id, str(v.value)) == ("C1", "C1: the governor issued authority id 502 for the object it already "
                                                "calls authority 501: one object under two ids (two grantable "
                                                "ledgers over one pool)")
