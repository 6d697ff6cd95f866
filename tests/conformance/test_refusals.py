"""Refusal precedence (issue #21, D11): any refusal whose precondition holds is legal.

`spec.ledger.refusals` / `spec.manager.refusals` list every applicable refusal from `step`'s own
checks; replay accepts an observed refusal iff it is in that set and nothing observed changed.
"""

from __future__ import annotations

import json

import pytest
from refimpl_manager_harness import published
from trace_harness import ledger_event, replay_epoched

from spec import errors as E
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.ledger import refusals, step
from spec.manager import refusals as manager_refusals
from spec.manager import step as manager_step
from spec.manager_actions import initial
from spec.types import Role, Tier


def _lost_ledger():
    s = step(step(step(step(step(
        __import__("spec.ledger_state", fromlist=["State"]).State(),
        A.RegisterAuthority("device:0", Tier.DEVICE, 64))[0],
        A.RegisterHolder("kv"))[0],
        A.Reserve(1, 1, Tier.DEVICE, 16, Role.KV))[0],
        A.Commit(1, 1, 16))[0],
        A.LoseDevice(1))[0]
    return s


def _names(errs) -> list[str]:
    return [type(e).__name__ for e in errs]


@pytest.mark.parametrize("act,want", [
    (A.Reserve(1, 1, Tier.DEVICE, 0, Role.KV), ["InvalidBytes", "DeviceLost"]),
    (A.Reserve(9, 1, Tier.DEVICE, 8, Role.KV), ["UnknownHolder", "DeviceLost"]),
    (A.Reserve(9, 1, Tier.HOST, 0, Role.KV), ["InvalidBytes", "UnknownHolder", "DeviceLost", "TierMismatch"]),
    (A.Release(9, 1), ["UnknownHolder", "ForeignHolder", "DeviceLost", "InvalidTransition"]),
    (A.Reserve(1, 5, Tier.DEVICE, 0, Role.KV), ["InvalidBytes", "UnknownAuthority"]),
    (A.Reserve(9, 1, Tier.HOST, 0, Role.KV, 3), ["InvalidBytes", "UnknownHolder", "DeviceLost", "TierMismatch",
                                                 "InvalidArgument"]),  # D13: a bad alignment, after the tier
    (A.RecordCommitted(1, 1, Tier.DEVICE, 0, Role.KV), ["InvalidBytes", "DeviceLost"]),
])
def test_refusals_lists_every_applicable_refusal_first_the_steps_own(act, want) -> None:
    s = _lost_ledger()
    with pytest.raises(E.GovernorError) as first:
        step(s, act)
    got = refusals(s, act)
    assert _names(got) == want
    assert type(got[0]) is type(first.value)


def test_refusals_of_an_accepted_action_is_empty() -> None:
    s = step(step(_lost_ledger(), A.RegisterAuthority("host", Tier.HOST, 64))[0], A.RegisterHolder("w"))[0]
    act = A.Reserve(2, 2, Tier.HOST, 8, Role.KV)
    step(s, act)
    assert refusals(s, act) == ()


def test_manager_refusals_of_a_submit_on_a_lost_device() -> None:
    m = initial()
    for a in (A.RegisterAuthority("device:0", Tier.DEVICE, 64), A.RegisterHolder("kv"), A.LoseDevice(1)):
        m = manager_step(m, a)[0]
    assert _names(manager_refusals(m, M.Submit(1, 1, 0, 0, Role.KV))) == ["InvalidBytes", "DeviceLost"]
    for cls in (M.Submit, M.TryReserve):  # D13: each refusal listed once, the alignment's after the context's
        assert _names(manager_refusals(m, cls(1, 1, 0, 0, Role.KV, 6))) == ["InvalidBytes", "DeviceLost",
                                                                             "InvalidArgument"], cls



def test_manager_refusals_on_a_poisoned_manager_go_on_past_the_poisoning() -> None:
    """I5's refusal is one check among the others (its order is not the design's): a bad argument on a poisoned
    manager may be refused either way, and refimpl, which checks arguments first, refuses with one of them."""
    from refimpl.verify.manager_adapter import ManagerAdapter
    m, impl = initial(), ManagerAdapter()
    for a in (A.RegisterHolder("w"), A.RegisterAuthority("hbm0", Tier.DEVICE, 12), M.CorruptLedger(),
              A.OpenAllowance(1, 1, 1)):
        m = manager_step(m, a)[0]
        impl.execute(a)
    act = A.ReserveGrowth(1, 1, 0)
    assert _names(manager_refusals(m, act)) == ["ManagerPoisoned", "InvalidBytes"]
    with pytest.raises(E.GovernorError) as got:
        impl.execute(act)
    assert type(got.value).__name__ in _names(manager_refusals(m, act))

# --- replay ------------------------------------------------------------------------------


def _ev(seq: int, kind: str, ids: dict, payload: dict, used: dict, charges: dict, error: str | None = None) -> bytes:
    return ledger_event(seq, kind, ids, used, charges, error, **payload)


def _lost_trace(error: str, nbytes: int = 0, used_after: int = 16) -> list[bytes]:
    return [
        _ev(1, "register_authority", {"result": 1}, {"pool": "device:0", "tier": "device", "capacity": 64}, {}, {}),
        _ev(2, "register_holder", {"result": 1}, {"name": "kv"}, {}, {}),
        _ev(3, "reserve", {"holder": 1, "authority": 1, "result": 1},
            {"tier": "device", "nbytes": 16, "role": "kv"}, {"1": 16}, {"1": 16}),
        _ev(4, "commit", {"holder": 1, "allocation": 1}, {"nbytes": 16}, {"1": 16}, {"1": 16}),
        _ev(5, "lose_device", {"authority": 1}, {}, {"1": 16}, {"1": 16}),
        _ev(6, "reserve", {"holder": 1, "authority": 1}, {"tier": "device", "nbytes": nbytes, "role": "kv"},
            {"1": used_after}, {}, error=error),
        json.dumps({"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": 7, "kind": "boundary",
                    "ids": {}, "payload": {}}).encode() + b"\n",
    ]


@pytest.mark.parametrize("error", ["InvalidBytes", "DeviceLost"])
def test_a_refusal_permuted_to_another_applicable_error_replays_clean(error: str) -> None:
    r = replay_epoched(_lost_trace(error))
    assert r.ok, r.describe()


@pytest.mark.parametrize("error", ["CapacityDenied", "TierMismatch", "UnknownHolder", "ForeignHolder"])
def test_a_refusal_whose_precondition_does_not_hold_is_rejected(error: str) -> None:
    r = replay_epoched(_lost_trace(error))
    assert not r.ok and r.line == 6 and r.failure == "refinement", r.describe()
    assert f"rejected with {error}" in r.message
    assert r.message.endswith("(the refusals that apply: DeviceLost, InvalidBytes)"), r.message  # D11: all of them


def test_a_legal_refusal_that_changed_observed_state_is_rejected() -> None:
    r = replay_epoched(_lost_trace("DeviceLost", used_after=24))
    assert not r.ok and r.line == 6 and r.failure == "violation" and r.id == "G4", r.describe()


def _composed(error: str, used_after: int = 16) -> list[bytes]:
    lines = _lost_trace(error)[:5]
    lines.append(json.dumps({"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": 6,
                             "kind": "configure", "ids": {}, "payload": {"aging_bound": 4}}).encode() + b"\n")
    lines.append(json.dumps({"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": 7,
                             "kind": "submit", "ids": {"holder": 1, "authority": 1},
                             "payload": {"nbytes": 0, "priority": 0, "role": "kv", "outcome": "rejected",
                                         "error": error, "result": None, "used": {"1": used_after},
                                         "charges": {}, "bundles": {}}}).encode() + b"\n")
    return lines


@pytest.mark.parametrize("error,ok", [("InvalidBytes", True), ("DeviceLost", True), ("CapacityDenied", False),
                                      ("UnknownHolder", False)])
def test_composed_replay_accepts_exactly_the_applicable_refusals(error: str, ok: bool) -> None:
    r = replay_epoched(_composed(error))
    assert r.ok is ok, r.describe()
    if not ok:
        assert r.line == 7 and r.failure == "refinement", r.describe()


def test_composed_legal_refusal_that_changed_used_is_rejected() -> None:
    r = replay_epoched(_composed("DeviceLost", used_after=20))
    assert not r.ok and r.line == 7, r.describe()


# --- every composed action (issue #21 item 3; audit21 items 2, 6) -----------------------------------------------


def _refimpl_trace(body) -> tuple[list[dict], str]:
    """refimpl's own trace of `body` (a refused call last, after two authorities, two holders and a lease of h1's)
    and the error refimpl refused it with."""
    from refimpl.manager import ProcessMemoryManager
    from refimpl.tracing import boundary
    events: list[dict] = []
    pmm = ProcessMemoryManager(trace=events.append)
    a = pmm.register_authority("hbm0", Tier.DEVICE, 100)
    b = pmm.register_authority("hbm1", Tier.DEVICE, 100)
    h1, h2 = pmm.register_holder("kv"), pmm.register_holder("w")
    lease = pmm.reserve(h1, a, Tier.DEVICE, 10, Role.KV)
    pmm.commit(h1, lease, 10)
    with pytest.raises(E.GovernorError) as refused:
        body(pmm, a, b, h1, h2, lease)
    boundary(pmm)
    return events, type(refused.value).__name__


def _replay_with(events: list[dict], error: str):
    """The trace with its last refusal's recorded error replaced by `error`, replayed."""
    events = json.loads(json.dumps(events))
    [e for e in events if e["payload"].get("outcome") == "rejected"][-1]["payload"]["error"] = error
    return replay_epoched([json.dumps(e).encode() + b"\n" for e in events])


_PERMUTED = {  # the call, then every refusal whose precondition holds; then one whose precondition does not
    "plan_tx(lost, 0 B)": (lambda p, a, b, h1, h2, l: (p.lose_device(b), p.plan_tx(h1, ((b, 0),))),
                           {"InvalidBytes", "DeviceLost"}, "CapacityDenied"),
    "plan_tx(unknown holder, alias-free lost, 0 B)": (
        lambda p, a, b, h1, h2, l: (p.lose_device(b), p.plan_tx(99, ((a, 1), (b, 0)))),
        {"InvalidBytes", "UnknownHolder", "DeviceLost"}, "InvalidArgument"),
    "lower_limit(lost, 101 B > capacity)": (lambda p, a, b, h1, h2, l: (p.lose_device(b), p.lower_limit(b, 101)),
                                           {"InvalidBytes", "DeviceLost"}, "InvalidTransition"),
    "set_use(foreign holder, quarantined lease)": (
        lambda p, a, b, h1, h2, l: (p.quarantine(h1, l, 4), p.set_use(h2, l, True, False)),
        {"ForeignHolder", "InvalidTransition"}, "UnknownHolder"),
    "shrink_lease(foreign holder, in-flight lease, all of it)": (
        lambda p, a, b, h1, h2, l: (p.set_use(h1, l, False, True), p.shrink_lease(h2, l, 10)),
        {"ForeignHolder", "PinnedVictim", "InvalidBytes"}, "DeviceLost"),
    # A retired lease's record is gone from the ledger (spec and refimpl alike): its owner is not known, so
    # ForeignHolder's precondition cannot be established; the lookup's InvalidTransition is the only refusal.
    "set_use(foreign holder, released lease)": (
        lambda p, a, b, h1, h2, l: (p.release(h1, l), p.set_use(h2, l, True, False)),
        {"InvalidTransition"}, "ForeignHolder"),
}


@pytest.mark.parametrize("case", list(_PERMUTED))
def test_composed_refusals_replay_clean_with_any_applicable_error(case: str) -> None:
    body, legal, illegal = _PERMUTED[case]
    events, raised = _refimpl_trace(body)
    assert raised in legal
    for error in sorted(legal):
        r = _replay_with(events, error)
        assert r.ok, (error, r.describe())
    r = _replay_with(events, illegal)
    assert not r.ok and r.failure == "refinement" and f"rejected with {illegal}" in r.message, r.describe()


@pytest.mark.parametrize("nbytes", [7.0, "8", True, 2**64])
def test_an_ill_typed_need_on_a_lost_device_is_refused_as_such_and_replays_clean(nbytes: object) -> None:
    """audit21 item 6 (scratch/planlost.py): refimpl refused plan_tx by the device, the trace could not say why."""
    events, raised = _refimpl_trace(lambda p, a, b, h1, h2, l: (p.lose_device(b), p.plan_tx(h1, ((b, nbytes),))))
    assert raised == ("InvalidBytes" if nbytes == 2**64 else "InvalidArgument")
    r = replay_epoched([json.dumps(e).encode() + b"\n" for e in events])
    assert r.ok, r.describe()


def _view_world():
    """A manager (refimpl's, abstracted) with a committed view bound by a running transaction, then its device lost;
    and a transaction holding half its needs."""
    from refimpl.manager import ProcessMemoryManager
    from refimpl.verify.manager_hooks import abstract_manager
    pmm = ProcessMemoryManager()
    a, b = pmm.register_authority("hbm0", Tier.DEVICE, 100), pmm.register_authority("hbm1", Tier.DEVICE, 100)
    h1, h2 = pmm.register_holder("kv"), pmm.register_holder("w")
    tx, view = published(pmm, h1, ((a, 5),))
    pmm.commit_tx(tx)
    runner, own = published(pmm, h1, ((a, 5),))
    pmm.execute_view(runner, view, 1)
    pmm.execute_view(runner, own, 1)
    half = pmm.plan_tx(h2, ((a, 5), (b, 200)))
    return pmm, abstract_manager, dict(a=a, b=b, h1=h1, h2=h2, view=view, runner=runner, own=own, half=half)


def test_spec_lists_every_refusal_of_the_view_transaction_and_pressure_actions() -> None:
    pmm, abstract, w = _view_world()
    m = abstract(pmm)
    half, runner, view, own = w["half"], w["runner"], w["view"], w["own"]
    # the runner already binds `view` at generation 1; it is the provisional view of nobody (committed)
    assert _names(manager_refusals(m, M.ExecuteView(runner, view, 3))) == ["InvalidTransition", "StaleGeneration"]
    assert _names(manager_refusals(m, M.ExecuteView(half, own, 3))) == [
        "InvalidTransition", "InvalidArgument", "StaleGeneration"]
    assert _names(manager_refusals(m, M.DropView(own))) == ["InvalidTransition", "ViewInUse"]
    assert _names(manager_refusals(m, M.RemapView(own))) == ["ViewInUse"]
    m1 = manager_step(m, M.ReserveTx(half))[0]
    assert _names(manager_refusals(m1, M.CommitTx(half))) == ["InvalidTransition"]
    assert _names(manager_refusals(m1, M.PublishView(half))) == ["InvalidTransition"]
    assert _names(manager_refusals(m1, M.ReserveTx(half))) == ["CapacityDenied"]
    lost = manager_step(m1, A.LoseDevice(w["a"]))[0]  # every transaction aborted, the view invalid, bound by none
    assert _names(manager_refusals(lost, M.RemapView(view))) == ["DeviceLost"]
    assert _names(manager_refusals(lost, M.PrepareLimit(w["a"], 101))) == ["DeviceLost", "InvalidBytes"]
    assert _names(manager_refusals(lost, M.PlanTx(99, ((w["a"], 0), (w["b"], 1)), 2**63))) == [
        "InvalidArgument", "InvalidBytes", "UnknownHolder", "DeviceLost"]
    assert _names(manager_refusals(lost, M.Press(w["h1"], w["a"], 0, 2**63))) == [
        "InvalidBytes", "InvalidArgument", "DeviceLost"]
