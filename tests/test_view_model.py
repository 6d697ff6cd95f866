"""`refimpl.view_model` on small hand-written traces: exact series, limits, oversubscription."""

from __future__ import annotations

from typing import Any

from refimpl.view_model import UNATTRIBUTED, build_model


def ev(event_kind: str, ids: dict[str, Any], **payload: Any) -> dict[str, Any]:
    payload.setdefault("outcome", "accepted")
    payload.setdefault("error", None)
    return {"contract_revision": "ortmem-manager/2", "source": "pmm-1", "source_sequence": 1, "kind": event_kind,
            "ids": ids, "payload": payload}


def holders_and_gpu(capacity: int = 100) -> list[dict[str, Any]]:
    return [ev("register_holder", {}, result=1, name="w", used={}),
            ev("register_holder", {}, result=2, name="kv", used={}),
            ev("register_authority", {}, result=1, pool="gpu0", tier="device", capacity=capacity,
               used={})]


def test_composed_trace_attributes_used_to_the_named_holders() -> None:
    """Submit (granted at once), a transaction's reservation, an answer releasing a victim, a limit cut below
    used (oversubscribed until a release), and a grant no event names (unattributed)."""
    events = holders_and_gpu() + [
        ev("configure", {}, aging_bound=4),  # 3
        ev("submit", {"holder": 2, "authority": 1}, nbytes=30, role="kv", result=1, used={"1": 30}),
        ev("claim", {"holder": 2, "ticket": 1}, result=7, used={"1": 30}),  # 5: allocation 7 is kv's
        ev("plan_tx", {"holder": 1}, needs=[[1, 50]], result=1, used={"1": 30}),
        ev("reserve_tx", {"tx": 1}, result=8, used={"1": 80}),  # 7: 50 B to w / state
        ev("commit_limit", {"authority": 1}, result={"committed": True, "limit": 60, "completed": []},
           used={"1": 80}),  # 8: oversubscribed
        ev("answer", {"holder": 2, "pressure": 1}, victims=[7], result=20, used={"1": 60}),  # 9
        ev("cancel_pressure", {"pressure": 1}, used={"1": 70}),  # 10: a grant nobody named: +10
        ev("abort_tx", {"tx": 1}, used={"1": 5}),  # 11: w / state 50 -> 0, then kv (ties by name)
    ]
    m = build_model(events)
    [gpu] = m["authorities"]
    assert gpu["limit"] == [[2, 100], [8, 60]]
    assert gpu["used"] == [[4, 30], [7, 80], [9, 60], [10, 70], [11, 5]]
    assert gpu["series"] == {"kv / kv": [[4, 30], [9, 10], [11, 0]], "w / state": [[7, 50], [11, 0]],
                             UNATTRIBUTED: [[10, 10], [11, 5]]}
    assert gpu["over"] == [[8, 9], [10, 11]]
    assert [(x["i"], x["category"]) for x in m["markers"]] == [
        (4, "ticket"), (5, "grant"), (6, "transaction"), (7, "grant"), (8, "limit"), (9, "pressure"), (10, "pressure"),
        (11, "transaction")]
    assert m["markers"][1]["holder"] == "kv"
    # the ledger each marker is drawn on: named (4, 8), its ticket's (5), the one whose used moved (7, 9-11)
    assert [x["authority"] for x in m["markers"]] == [1, 1, None, 1, 1, 1, 1, 1]


def test_transaction_trace_registers_authorities_and_charges_state() -> None:
    """A transaction's reservation on a ledger then lost (device loss markers), and a refused plan."""
    events = [
        ev("register_holder", {}, result=1, name="engine", used={}),
        ev("register_authority", {}, result=1, pool="hbm0", tier="device", capacity=64,
           used={"1": 0}),
        ev("configure", {}, aging_bound=4),  # 2
        ev("plan_tx", {"holder": 1, "retry": None}, needs=[[1, 40]], priority=0, result=1, used={"1": 0}),
        ev("reserve_tx", {"tx": 1}, result=1, used={"1": 40}),  # 4: 40 B to engine / state
        ev("lose_device", {"authority": 1}, used={"1": 40}),
        ev("confirm_termination", {"authority": 1}, used={"1": 0}),  # 6: the stranded charge refunded
        ev("plan_tx", {"holder": 1, "retry": None}, needs=[], priority=0, outcome="rejected",
           error="InvalidArgument", result=None, used={}),
    ]
    m = build_model(events)
    [hbm] = m["authorities"]
    assert (hbm["pool"], hbm["tier"], hbm["limit"]) == ("hbm0", "device", [[1, 64]])
    assert hbm["series"] == {"engine / state": [[4, 40], [6, 0]]}
    assert [(x["i"], x["category"]) for x in m["markers"]] == [
        (3, "transaction"), (4, "grant"), (5, "device loss"), (6, "device loss"), (7, "rejected")]


def test_empty_trace_is_an_empty_model() -> None:
    assert build_model([]) == {"events": 0, "holders": {}, "authorities": [], "markers": []}
