"""The leases part's traced and contract-checked paths, pinned deterministically (mutation survivors of
`refimpl/manager/leases.py`).

Each single-pool operation emits one `ortmem-pool/1` event naming the action's own fields and the ledger
it touched; a cancel posted by `drop` emits `drained_cancel` when applied. These tests fix that content on
a two-ledger manager (so "the only ledger" fallback cannot stand in for the right one), the drain's own
delivery and sink-failure outcome, the contract run over a drained cancel, and the refusals' typed errors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from invariants._violation import InvariantViolation
from invariants.contracts import contracts
from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from spec.errors import (
    GovernorError,
    InvalidArgument,
    InvalidTransition,
    MailboxFull,
    PinnedVictim,
    StaleAnswer,
    TraceSinkFailed,
    UnknownTicket,
)
from spec.guards import GuardSet
from spec.tickets import PressureState
from spec.types import Origin, Role, Tier

_SKIP = ("register_holder", "register_authority")


def _proj(ev: dict[str, Any]) -> tuple[Any, ...]:
    pl = dict(ev["payload"])
    obs = pl.pop("observed")
    return (ev["kind"], ev["ids"], pl, None if obs is None else (obs["free"], obs["generation"]))


def _ok(result: Any, **fields: Any) -> dict[str, Any]:
    return {**fields, "outcome": "accepted", "error": None, "result": result}


def _workload(events: list[dict[str, Any]]) -> ProcessMemoryManager:
    p = ProcessMemoryManager(trace=events.append)
    h = p.register_holder("kv")
    p.register_authority("pool", Tier.DEVICE, 64)
    b = p.register_authority("other", Tier.DEVICE, 64)  # every operation below names ledger 2, not the first
    t1 = p.pool_try_reserve(h, b, 8, 3)
    t2 = p.pool_submit(h, b, 4, 2)
    p.pool_claim(h, t2)
    p.pool_set_use(h, t1, True, False)
    p.pool_release(h, t2)
    t3 = p.pool_try_reserve(h, b, 50)
    t4, t5 = p.pool_submit(h, b, 10, 1), p.pool_submit(h, b, 10, 1)  # both pending: 6 B free
    assert p.pool_cancel(h, t4) == 0 and p.pool_timeout(h, t5) == 0
    t6 = p.pool_submit(h, b, 10, 1)
    p.drop(h, t6)
    p.drain()
    pid = p.pool_press(h, b, 16, 1, 5)
    assert p.pool_answer(h, pid, (t3,), 4) == 50
    pid2 = p.pool_press(h, b, 8, 0, 3)
    p.pool_expire_pressure(pid2, 4)
    pid3 = p.pool_press(h, b, 8, 0, 3)
    p.pool_cancel_pressure(pid3)
    p.pool_submit(h, b, 60, 0)
    p.pool_reconfigure(b)
    return p


H, B = {"holder": 1}, {"authority": 2}
EXPECTED = [
    ("pool_try_reserve", {**H, **B}, _ok(1, nbytes=8, priority=3, role="staging"), (56, 0)),
    ("pool_submit", {**H, **B}, _ok(2, nbytes=4, priority=2), (52, 0)),
    ("pool_claim", {**H, "ticket": 2, **B}, _ok(2), (52, 0)),
    ("pool_set_use", {**H, "ticket": 1, **B}, _ok(None, pinned=True, in_flight=False), (52, 0)),
    ("pool_release", {**H, "ticket": 2, **B}, _ok(None), (56, 0)),
    ("pool_try_reserve", {**H, **B}, _ok(3, nbytes=50, priority=0, role="staging"), (6, 0)),
    ("pool_submit", {**H, **B}, _ok(4, nbytes=10, priority=1), (6, 0)),
    ("pool_submit", {**H, **B}, _ok(5, nbytes=10, priority=1), (6, 0)),
    ("pool_cancel", {**H, "ticket": 4, **B}, _ok(0), (6, 0)),
    ("pool_timeout", {**H, "ticket": 5, **B}, _ok(0), (6, 0)),
    ("pool_submit", {**H, **B}, _ok(6, nbytes=10, priority=1), (6, 0)),
    ("drained_cancel", {**H, "ticket": 6, **B}, _ok(0), (6, 0)),
    ("pool_press", {**H, **B}, _ok(1, target=16, priority=1, deadline=5), (6, 0)),
    ("pool_answer", {**H, "pressure": 1, **B}, _ok(50, victims=[3], now=4), (56, 0)),
    ("pool_press", {**H, **B}, _ok(2, target=8, priority=0, deadline=3), (56, 0)),
    ("pool_expire_pressure", {"pressure": 2, **B}, _ok(None, now=4), (56, 0)),
    ("pool_press", {**H, **B}, _ok(3, target=8, priority=0, deadline=3), (56, 0)),
    ("pool_cancel_pressure", {"pressure": 3, **B}, _ok(None), (56, 0)),
    ("pool_submit", {**H, **B}, _ok(7, nbytes=60, priority=0), (56, 0)),
    ("pool_reconfigure", B, _ok(None), (56, 1)),
]


@pytest.mark.parametrize("on", [True, False])
def test_every_pool_event_names_its_action_and_the_ledger_it_touched(on: bool) -> None:
    events: list[dict[str, Any]] = []
    with contracts(on=on):
        _workload(events)
    pool = [e for e in events if e["kind"] not in _SKIP]
    assert [_proj(e) for e in pool] == EXPECTED
    assert [e["source_sequence"] for e in events] == list(range(1, len(events) + 1))
    r = replay_manager_lines([json.dumps(e).encode() + b"\n" for e in events])
    assert r.ok, r.describe()


def _two_ledgers(events: list[dict[str, Any]] | None = None) -> tuple[ProcessMemoryManager, int, int, int]:
    p = ProcessMemoryManager(trace=events.append if events is not None else None)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.DEVICE, 64)
    b = p.register_authority("other", Tier.DEVICE, 64)
    return p, h, a, b


def test_drain_delivers_its_drained_cancels_before_it_returns() -> None:
    events: list[dict[str, Any]] = []
    p, h, _, b = _two_ledgers(events)
    p.pool_try_reserve(h, b, 60)
    t = p.pool_submit(h, b, 10)  # pending
    p.drop(h, t)
    n = len(events)
    p.drain()  # the last operation: nothing after it would flush the queue
    assert [_proj(e) for e in events[n:]] == [("drained_cancel", {**H, "ticket": t, **B}, _ok(0), (4, 0))]
    assert t not in p.abstract_pool(b).tickets


def test_drain_with_a_failing_sink_applies_the_cancel_and_says_drain() -> None:
    def sink(ev: dict[str, Any]) -> None:
        if ev["kind"] == "drained_cancel":
            raise OSError("disk full")

    p = ProcessMemoryManager(trace=sink)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.DEVICE, 16)
    p.pool_try_reserve(h, a, 12)
    t = p.pool_submit(h, a, 8)
    p.drop(h, t)
    with pytest.raises(TraceSinkFailed, match=r"^drain was applied \(result None\)"):
        p.drain()
    assert t not in p.abstract_pool(a).tickets


def test_drain_with_nothing_recorded_calls_no_sink() -> None:
    events: list[dict[str, Any]] = []
    p, h, _, b = _two_ledgers(events)
    n = len(events)
    p.drain()
    assert events[n:] == []


def _tampered(p: ProcessMemoryManager, authority: int) -> None:
    """The drained cancel's body also credits 5 B nobody gave back (free grows with no retirement)."""
    real, auth = p._pool_abandon, p._auths[authority]

    def bad(holder: int, ticket: int) -> int:
        out = real(holder, ticket)
        auth.used -= 5
        return out

    p._pool_abandon = bad  # type: ignore[method-assign]


@pytest.mark.parametrize("traced", [True, False])
def test_contract_checks_a_drained_cancel_on_its_ledger(traced: bool) -> None:
    with contracts(on=True):
        p, h, _, b = _two_ledgers([] if traced else None)
        p.pool_try_reserve(h, b, 60)
        t = p.pool_submit(h, b, 10)
        p.drop(h, t)
        _tampered(p, b)
        with pytest.raises(InvariantViolation, match="I7: conservation"):
            p.drain()


def test_contracts_off_checks_no_drained_cancel() -> None:
    with contracts(on=False):
        p, h, _, b = _two_ledgers([])
        p.pool_try_reserve(h, b, 60)
        t = p.pool_submit(h, b, 10)
        p.drop(h, t)
        _tampered(p, b)
        p.drain()  # nothing checks the (broken) body: contracts off costs nothing
    assert t not in p.abstract_pool(b).tickets and p.abstract_pool(b).free == 9  # the broken credit stands


class _OnceRacing(dict):  # type: ignore[type-arg]
    """A mailbox whose first iteration fails as if a lock-free drop() had inserted meanwhile."""

    raced = False

    def __iter__(self):  # type: ignore[no-untyped-def]
        if not self.raced:
            self.raced = True
            raise RuntimeError("dictionary changed size during iteration")
        return super().__iter__()


def test_drain_looks_again_after_a_racing_drop() -> None:
    p, h, _, b = _two_ledgers()
    p.pool_try_reserve(h, b, 60)
    t = p.pool_submit(h, b, 10)
    p.drop(h, t)
    p._mailbox = _OnceRacing(p._mailbox)
    p.drain()
    assert p._mailbox.raced and t not in p.abstract_pool(b).tickets


# --- refusals: which ledger a refused event names, and their typed errors -------------------------------------


def _last(events: list[dict[str, Any]]) -> dict[str, Any]:
    return events[-1]


def test_refusal_naming_no_live_ticket_is_viewed_on_the_only_ledger() -> None:
    events: list[dict[str, Any]] = []
    p = ProcessMemoryManager(trace=events.append)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.DEVICE, 64)
    t = p.pool_try_reserve(h, a, 8)
    p.pool_release(h, t)
    with pytest.raises(InvalidTransition):
        p.pool_claim(h, t)
    assert _last(events)["ids"]["authority"] == a and _last(events)["payload"]["error"] == "InvalidTransition"


def test_refusal_naming_no_live_ticket_with_two_ledgers_names_none() -> None:
    events: list[dict[str, Any]] = []
    p, h, _, b = _two_ledgers(events)
    t = p.pool_try_reserve(h, b, 8)
    p.pool_release(h, t)
    with pytest.raises(InvalidTransition):
        p.pool_claim(h, t)
    assert _last(events)["ids"]["authority"] is None
    pid = p.pool_press(h, b, 8, 0, 5)
    p.pool_cancel_pressure(pid)
    with pytest.raises(InvalidTransition):
        p.pool_cancel_pressure(pid)
    assert _last(events)["ids"]["authority"] == b  # a closed pressure ticket still names its ledger


@pytest.mark.parametrize("on", [True, False])
def test_unhashable_ids_are_typed_errors_on_every_path(on: bool) -> None:
    with contracts(on=on):
        p, h, a, _ = _two_ledgers([])
        for call in (lambda: p.pool_claim(h, [1]), lambda: p.pool_set_use(h, [1], True, True),
                     lambda: p.expire_pressure([1], 3), lambda: p.pool_answer(h, [1], (), 3),
                     lambda: p.pool_cancel_pressure([1]), lambda: p.drop(h, [1])):
            with pytest.raises(UnknownTicket):
                call()
        with pytest.raises(GovernorError):
            p.pool_try_reserve(h, [2], 8)
        with pytest.raises(GovernorError):
            p.pool_try_reserve(h, 99, 8)  # never registered: typed, under contracts and trace too


def test_expire_pressure_refusals() -> None:
    p, h, _, b = _two_ledgers()
    pid = p.pool_press(h, b, 8, 0, 3)
    for now in ("4", -1):
        with pytest.raises(InvalidArgument, match="now must be an int >= 0"):
            p.expire_pressure(pid, now)  # type: ignore[arg-type]
    p.expire_pressure(pid, 4)
    with pytest.raises(InvalidTransition, match="already"):
        p.expire_pressure(pid, 5)
    with pytest.raises(UnknownTicket, match=r"pressure ticket 2 was never issued"):
        p.expire_pressure(2, 5)


def test_answer_refusals_and_victims_of_other_holders_or_ledgers() -> None:
    p, h, a, b = _two_ledgers()
    g = p.register_holder("other")
    on_a, foreign = p.pool_try_reserve(h, a, 8), p.pool_try_reserve(g, b, 8)
    pinned, busy = p.pool_try_reserve(h, b, 4), p.pool_try_reserve(h, b, 4)
    p.pool_set_use(h, pinned, True, False)
    p.pool_set_use(h, busy, False, True)
    pid = p.pool_press(h, b, 8, 0, 9)
    before = p.abstract_pool(b)
    for victims, what in (((on_a,), "not a claimed lease"), ((foreign,), "not a claimed lease"),
                          ((pinned,), "is pinned"), ((busy,), "is in flight")):
        with pytest.raises(PinnedVictim, match=what):
            p.pool_answer(h, pid, victims, 1)
        assert p.abstract_pool(b) == before
    free_a, free_b = p.abstract_pool(a).free, before.free
    t1, t2 = p.pool_try_reserve(h, b, 3), p.pool_try_reserve(h, b, 5)
    assert p.pool_answer(h, pid, (t1, t2), 1) == 8  # the bytes of both victims
    assert p.abstract_pool(b).free == free_b and p.abstract_pool(a).free == free_a
    with pytest.raises(StaleAnswer):
        p.pool_answer(h, pid, (), 2)


def test_answers_accumulate_on_a_pressure_with_answer_open_only_off() -> None:
    with contracts(on=False):
        p = ProcessMemoryManager(guards=GuardSet.without("answer_open_only"))
        h = p.register_holder("kv")
        a = p.register_authority("pool", Tier.DEVICE, 64)
        t1, t2 = p.pool_try_reserve(h, a, 3), p.pool_try_reserve(h, a, 5)
        pid = p.pool_press(h, a, 8, 0, 9)
        p.pool_answer(h, pid, (t1,), 1)
        p.pool_answer(h, pid, (t2,), 2)
        assert p.abstract_pool(a).pressures[pid].released == 8


def test_pool_press_sink_failure_cancels_the_undelivered_pressure_with_a_note() -> None:
    for exc in (OSError("disk full"), KeyboardInterrupt()):
        def sink(ev: dict[str, Any], exc: BaseException = exc) -> None:
            if ev["kind"] == "pool_press":
                raise exc

        p = ProcessMemoryManager(trace=sink)
        h = p.register_holder("weights")
        a = p.register_authority("pool", Tier.DEVICE, 64)
        called: list[int] = []
        p.register_callback(h, lambda mgr, pid, target: called.append(pid))
        with pytest.raises((TraceSinkFailed, KeyboardInterrupt)) as info:
            p.pool_press(h, a, 8, 0, 10)
        assert called == []
        assert p.abstract_pool(a).pressures[1].state is PressureState.CANCELLED
        assert "ortmem: pool_press cancelled its undelivered pressure ticket 1" in info.value.__notes__


def test_pool_press_delivered_under_the_lock_is_not_cancelled_by_a_sink_failure() -> None:
    """unlock_before_callback off (a negative control): the callback already ran, so the open stands."""
    def sink(ev: dict[str, Any]) -> None:
        if ev["kind"] == "pool_press":
            raise OSError("disk full")

    with contracts(on=False):
        p = ProcessMemoryManager(guards=GuardSet.without("unlock_before_callback"), trace=sink)
        h = p.register_holder("weights")
        a = p.register_authority("pool", Tier.DEVICE, 64)
        called: list[int] = []
        p.register_callback(h, lambda mgr, pid, target: called.append(pid))
        with pytest.raises(TraceSinkFailed) as info:
            p.pool_press(h, a, 8, 0, 10)
    assert called == [1] and p.abstract_pool(a).pressures[1].state is PressureState.OPEN
    assert not any("cancelled its undelivered" in n for n in getattr(info.value, "__notes__", []))


def test_try_reserve_books_a_granted_lease_of_its_role_and_bytes() -> None:
    p, h, _, b = _two_ledgers()
    t = p.pool_try_reserve(h, b, 8, 2, Role.WEIGHTS)
    (alloc,) = p.abstract_manager().ledger.allocations.values()
    assert (alloc.holder, alloc.authority, alloc.role, alloc.origin, alloc.nbytes) == (h, b, Role.WEIGHTS,
                                                                                      Origin.GRANTED, 8)
    tk = p.abstract_pool(b).tickets[t]
    assert (tk.nbytes, tk.priority, tk.grant) == (8, 2, alloc.id)


def test_pool_submit_priority_defaults_to_zero() -> None:
    p, h, _, b = _two_ledgers()
    t = p.pool_submit(h, b, 8)
    assert p.abstract_pool(b).tickets[t].priority == 0


@pytest.mark.parametrize("on", [True, False])
def test_waiting_with_the_ledger_lock_held_is_an_i7_violation(on: bool) -> None:
    with contracts(on=on):
        p, h, _, b = _two_ledgers()
        p.pool_try_reserve(h, b, 60)
        t = p.pool_submit(h, b, 10)  # pending
        with p._lock:
            if on:
                with pytest.raises(InvariantViolation, match="waiting on a ticket with the ledger lock held"):
                    p.wait(t, 0)
            else:
                assert p.wait(t, 0) is False  # contracts off: not checked, and the ticket is still pending


def test_an_open_pool_pressure_is_no_limit_change() -> None:
    p, h, _, b = _two_ledgers()
    pid = p.pool_press(h, b, 8, 0, 5)
    assert p.abstract_manager().pressures[pid].change is False


def test_claim_and_set_use_refusals_say_what_the_ticket_is() -> None:
    p, h, _, b = _two_ledgers()
    t = p.pool_try_reserve(h, b, 8)
    with pytest.raises(InvalidTransition, match=rf"^ticket {t} is claimed; only a granted ticket is claimed$"):
        p.pool_claim(h, t)
    g = p.pool_submit(h, b, 8)
    p.pool_claim(h, g)  # a ticket claimed after its grant (not pool_try_reserve's) is claimed too
    with pytest.raises(InvalidTransition, match=rf"^ticket {g} is claimed; only a granted ticket is claimed$"):
        p.pool_claim(h, g)
    p.pool_release(h, t)
    with pytest.raises(InvalidTransition, match=rf"^ticket {t} was already completed, cancelled or failed$"):
        p.pool_set_use(h, t, True, False)


def test_drop_bounds_and_ids() -> None:
    p = ProcessMemoryManager(mailbox=1)
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.HOST, 64)
    with pytest.raises(UnknownTicket, match="ticket 0 was never issued"):
        p.drop(h, 0)
    t1 = p.submit(h, a, 8)
    p.drop(h, t1)
    with pytest.raises(InvalidTransition, match="already claimed, cancelled"):
        p.claim(h, t1)  # the post is applied before the next operation of any front end: t1 is cancelled
    assert p.snapshot(a).used == 0 and t1 not in p.abstract_manager().tickets and not p._mailbox
    t2 = p.submit(h, a, 8)
    p._mailbox[(h, t1)] = None  # a post left behind by a drop that raced an operation retiring t1
    with pytest.raises(MailboxFull, match=r"cancellation mailbox full \(1 posts\); call drain\(\) or retry"):
        p.drop(h, t2)
    p.drain()
    p.drop(h, t2)  # the slot is free again
    p.drain()
    assert t2 not in p.abstract_pool(a).tickets


def test_wait_on_the_first_ticket_once_retired_is_resolved() -> None:
    p, h, _, b = _two_ledgers()
    t = p.pool_try_reserve(h, b, 8)
    assert t == 1 and p.wait(1, 0) is True
    with pytest.raises(UnknownTicket):
        p.wait(2, 0)


def test_a_composed_pressure_once_closed_is_closed_not_unknown() -> None:
    """A composed pressure ticket (no deadline) leaves the log when it closes; its id stays issued."""
    p = ProcessMemoryManager()
    h = p.register_holder("kv")
    a = p.register_authority("pool", Tier.HOST, 64)
    pid = p.open_pressure(h, a, 8)
    assert pid == 1
    p.cancel_pressure(pid)
    with pytest.raises(StaleAnswer, match="pressure ticket 1 is closed; the answer credits nothing"):
        p.pool_answer(h, pid, (), 0)
    with pytest.raises(InvalidTransition, match="pressure ticket 1 is already closed"):
        p.expire_pressure(pid, 5)


def test_pool_answer_to_a_limit_change_pressure_is_counted_by_the_change() -> None:
    """Outside the focused spec (its pool view has no limit change: contracts off), but the composed one counts it."""
    with contracts(on=False):
        p = ProcessMemoryManager()
        h = p.register_holder("kv")
        a = p.register_authority("pool", Tier.HOST, 64)
        t = p.pool_try_reserve(h, a, 16)
        (pid,) = p.prepare_limit(a, 8)
        assert p.pool_answer(h, pid, (t,), 0) == 16
        assert p.abstract_manager().changes[a].completed == ((pid, 16),)


def test_a_refusal_on_an_alias_names_no_ledger() -> None:
    """Tickets name the canonical ledger; a refused operation on a view is checked on the whole manager."""
    events: list[dict[str, Any]] = []
    p, h, a, _ = _two_ledgers(events)
    view = p.register_alias(a, "mirror")
    with pytest.raises(InvalidArgument, match="is a view of"):
        p.pool_try_reserve(h, view, 8)
    assert _last(events)["kind"] == "pool_try_reserve" and _last(events)["ids"]["authority"] is None


def test_contract_verdict_on_a_drained_cancel_names_that_cancel() -> None:
    """A drained cancel whose body also takes a claimed lease breaks I6; the verdict names the applied Cancel."""
    with contracts(on=True):
        p, h, _, b = _two_ledgers()
        lease = p.pool_try_reserve(h, b, 60)
        t = p.pool_submit(h, b, 10)
        p.drop(h, t)
        real = p._pool_abandon

        def bad(holder: int, ticket: int) -> int:
            out = real(holder, ticket)
            p._retire(p._leases[lease])  # exact credit, so only the step predicate can see it
            return out

        p._pool_abandon = bad  # type: ignore[method-assign]
        with pytest.raises(InvariantViolation, match=rf"Cancel\(holder={h}, ticket={t}\) took holder {h}'s lease "
                                                     rf"{lease}"):
            p.drain()
