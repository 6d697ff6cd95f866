"""What a requester loses when `acquire` parks wrongly or a submit drops a wake-up (refimpl/manager/arbitration.py).

The mutation survivors of `Arbitration._park`, `acquire` and `submit`'s hot path, each written from its harm:
  * a waiter whose ticket was granted or retired while its wake-up was lost (the waker interrupted before it
    set the event) returns at its next recheck; it does not sleep on until its deadline, or forever;
  * an `acquire` whose bytes fit at once never parks (a park sleeps up to `RECHECK_S`);
  * a submit made by a thread that already holds the ledger lock (the trace recorder's protocol: the lock held
    across operations, `wake_waiters` after) keeps the waiters an earlier operation granted, and raises nothing.
A fake `Event` stands for the waiter's event so the lost wake-up and the parking are deterministic: its `set`
is the lost wake-up (it does nothing) and its `wait` counts the waiter's sleeps.
"""

from __future__ import annotations

import io
import json
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refimpl_manager_harness import lease, make, parked

from invariants.contracts import contracts
from refimpl.manager import arbitration as _arbitration
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_manager, ledger_lock, wake_waiters
from spec.errors import CapacityDenied, GovernorError, InvalidArgument, InvalidBytes
from spec.types import Origin, Role, Tier
from trace_harness import traced


class _LostWakeUp:
    """A waiter's event whose wake-up never lands; `during` runs in the waiter's first sleep (another party's
    operation meanwhile). After three sleeps it reports a wake-up, so a waiter that sleeps on still ends."""

    made: list[_LostWakeUp] = []

    def __init__(self, during: Callable[[], None] | None) -> None:
        self.during, self.sleeps = during, 0
        _LostWakeUp.made.append(self)

    def set(self) -> None:
        """The waker was interrupted before it set this event: the wake-up is lost."""

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        self.sleeps += 1
        if self.sleeps == 1 and self.during is not None:
            self.during()
        return self.sleeps >= 3


def _fake_events(monkeypatch: pytest.MonkeyPatch, during: Callable[[], None] | None) -> list[_LostWakeUp]:
    _LostWakeUp.made = []
    monkeypatch.setattr(_arbitration, "threading", types.SimpleNamespace(Event=lambda: _LostWakeUp(during)))
    return _LostWakeUp.made


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_granted_while_its_wake_up_was_lost_claims_at_its_next_recheck(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        blocker = lease(pmm, w.h2, w.a, 100)
        events = _fake_events(monkeypatch, lambda: pmm.release(w.h2, blocker))  # grants the parked 40 B
        got = pmm.acquire(w.h1, w.a, 40, timeout=None)
        assert [e.sleeps for e in events] == [1], "the waiter slept on past its granted ticket"
        m = abstract_manager(pmm)
        assert m.ledger.allocations[got].nbytes == 40 and m.ledger.authorities[w.a].used == 40
        assert not m.tickets


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_retired_while_its_wake_up_was_lost_returns_at_its_next_recheck(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        lease(pmm, w.h2, w.a, 100)
        events = _fake_events(monkeypatch, lambda: pmm.reconfigure(w.a))  # the pending ticket fails
        assert pmm.acquire(w.h1, w.a, 40, timeout=None) is None
        assert [e.sleeps for e in events] == [1], "the waiter slept on past its retired ticket"
        m = abstract_manager(pmm)
        assert not m.tickets and m.ledger.authorities[w.a].used == 100


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_an_acquire_that_fits_at_once_never_parks(monkeypatch, on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        events = _fake_events(monkeypatch, None)
        got = pmm.acquire(w.h1, w.a, 40, timeout=None)
        assert events == [], "a ticket granted at its submit was parked on"
        assert abstract_manager(pmm).ledger.allocations[got].nbytes == 40


def test_a_submit_under_the_held_ledger_lock_keeps_the_wake_ups_of_earlier_grants() -> None:
    # Contracts off, no recorder: submit and release take their hot paths.
    with contracts(on=False):
        pmm, w = make()
        blocker = lease(pmm, w.h2, w.a, 100)
        waiter, got = parked(pmm, w.h1, w.a, 40)
        with ledger_lock(pmm):  # as the trace recorder's wrapper holds it across operations
            pmm.release(w.h2, blocker)  # grants the parked ticket: its wake-up waits for the lock's release
            tid = pmm.submit(w.h2, w.b, 8)  # another ledger's lone ticket, granted at once
        wake_waiters(pmm)
        waiter.join(10)
        assert not waiter.is_alive() and len(got) == 1 and got[0] is not None
        m = abstract_manager(pmm)
        assert m.ledger.allocations[got[0]].nbytes == 40 and m.tickets[tid].allocation is not None


# --- arbitration rounds (I13, D10): who is granted, who ages ------------------------------------------------


def _ages(pmm: Any) -> dict[int, int]:
    return {i: t.age for i, t in abstract_manager(pmm).tickets.items()}


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_ticket_that_fits_is_granted_past_a_misfit_that_has_not_matured(on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()  # aging bound 4
        lease(pmm, w.h2, w.a, 50)
        big = pmm.submit(w.h1, w.a, 90)  # pending: 90 B never fit the 50 B left
        small = pmm.submit(w.h1, w.a, 30)  # the round: the big one (age 2 of 4) does not end it
        m = abstract_manager(pmm)
        assert m.tickets[big].state.name == "PENDING" and m.tickets[small].state.name == "GRANTED"
        assert m.ledger.authorities[w.a].used == 80


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_retiring_a_pending_ticket_ages_nobody_and_crediting_a_grant_is_a_round(on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        lease(pmm, w.h2, w.a, 50)
        granted = pmm.submit(w.h1, w.a, 20)  # fits at once: 70 B used
        waiting = pmm.submit(w.h1, w.a, 60)  # pending, age 1
        other = pmm.submit(w.h2, w.a, 70)  # pending; the round ages the first: 2
        assert _ages(pmm)[waiting] == 2
        pmm.cancel_ticket(w.h2, other)  # a pending ticket retired (D10): not a round
        assert _ages(pmm)[waiting] == 2, "retiring a pending ticket aged the others"
        pmm.cancel_ticket(w.h1, granted)  # 20 B credited: headroom, a round (60 B still do not fit the 50 B)
        assert _ages(pmm) == {waiting: 3}, "a granted ticket's credit ran no round"


@pytest.mark.parametrize("lone", [True, False], ids=["one-waiter", "two-waiters"])
def test_an_age_stops_at_the_aging_bound(lone: bool) -> None:
    # spec.manager caps a ticket's age at the bound: a mapping past it is a state the spec never reaches.
    pmm, w = make(aging_bound=2)
    small = [lease(pmm, w.h2, w.a, 10) for _ in range(4)]
    lease(pmm, w.h2, w.a, 50)
    waiting = [pmm.submit(w.h1, w.a, 70)] + ([] if lone else [pmm.submit(w.h1, w.a, 80)])
    for r in small:  # each release is a round on the ledger (its headroom rose); 70 B never fit
        pmm.release(w.h2, r)
    assert set(_ages(pmm)) == set(waiting) and set(_ages(pmm).values()) == {2}


_SUBMIT = st.tuples(st.just("submit"), st.integers(0, 1), st.integers(0, 1), st.integers(1, 110), st.integers(-1, 2))
_OPS = st.one_of(  # submits and settlements weighted up: rounds with waiters on both device ledgers
    _SUBMIT, _SUBMIT, _SUBMIT, st.tuples(st.just("lease"), st.integers(0, 1), st.integers(0, 1), st.integers(1, 60)),
    *[st.tuples(st.just(op), st.integers(0, 9)) for op in ("release", "release", "cancel", "claim", "shrink")],
    st.tuples(st.just("limit"), st.integers(0, 1), st.integers(40, 100)),
    st.tuples(st.just("quota"), st.sampled_from((None, 60, 120, 200))),
    st.tuples(st.just("reconfigure"), st.integers(0, 1)))


@settings(max_examples=150, stateful_step_count=40)
@given(ops=st.lists(_OPS, min_size=20, max_size=60), aging_bound=st.integers(1, 3))
def test_a_submit_grants_no_ticket_but_its_own(ops: list[tuple[Any, ...]], aging_bound: int) -> None:
    # Why `submit` wakes nobody (its hot path has no wake-up): the round it runs, at the headroom the last round
    # left, grants only the ticket it opens, whatever came before (limits, quotas, leases, rounds, generations).
    with contracts(on=False):
        pmm, w = make(aging_bound=aging_bound)
        pmm.register_authority("gpu1", Tier.DEVICE, 100)  # the second device ledger: a quota spans both
        hs, auths = (w.h1, w.h2), (w.a, 3)
        leases: list[tuple[int, int]] = []
        for op, *args in ops:
            m = abstract_manager(pmm)
            live = sorted(m.tickets)
            granted = [i for i in live if m.tickets[i].state.name == "GRANTED"]
            pick = (lambda xs: xs[args[0] % len(xs)] if xs else None)
            try:
                if op == "submit":
                    tid = pmm.submit(hs[args[0]], auths[args[1]], args[2], args[3])
                    after = abstract_manager(pmm).tickets
                    assert {i: after[i].state for i in live if i in after} == {i: m.tickets[i].state for i in live}, \
                        f"submit {tid} changed another ticket's state"
                elif op == "lease":
                    leases.append((hs[args[0]], lease(pmm, hs[args[0]], auths[args[1]], args[2])))
                elif op in ("cancel", "claim") and live:
                    t = m.tickets[pick(live if op == "cancel" else granted) or live[0]]
                    if op == "cancel":
                        pmm.cancel_ticket(t.holder, t.id)
                    else:
                        leases.append((t.holder, pmm.claim(t.holder, t.id)))
                elif op in ("release", "shrink") and leases:
                    h, i = pick(leases)
                    if op == "release":
                        pmm.release(h, i)
                        leases.remove((h, i))
                    else:
                        pmm.shrink_lease(h, i, 1)
                elif op == "limit":
                    pmm.lower_limit(auths[args[0]], args[1])
                elif op == "quota":
                    pmm.set_process_quota(Tier.DEVICE, args[0])
                elif op == "reconfigure":
                    pmm.reconfigure(auths[args[0]])
            except GovernorError:
                pass  # refused (it changes nothing): the next operation


# --- acquire: an interrupt after the claim took effect, and the default priority ------------------------------


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_an_interrupt_after_the_claim_took_effect_releases_the_unreturned_lease(on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        real = pmm._claim

        def claim_then_interrupted(*args: Any) -> int:
            real(*args)  # the lease is made ...
            raise KeyboardInterrupt  # ... and the interrupt lands before the claim returns it

        pmm._claim = claim_then_interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            pmm.acquire(w.h1, w.a, 40, timeout=None)
        m = abstract_manager(pmm)
        assert not m.tickets and not m.ledger.allocations and m.ledger.authorities[w.a].used == 0


def test_an_acquire_with_no_priority_does_not_overtake_an_earlier_ticket_of_priority_zero() -> None:
    pmm, w = make()
    blocker = lease(pmm, w.h2, w.a, 100)
    first = pmm.submit(w.h2, w.a, 60)  # pending, priority 0
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pmm.acquire(w.h1, w.a, 60, timeout=None)), daemon=True)
    waiter.start()
    while len(abstract_manager(pmm).tickets) < 2:  # the acquire's ticket is pending
        threading.Event().wait(0.001)
    (second,) = set(abstract_manager(pmm).tickets) - {first}
    assert abstract_manager(pmm).tickets[second].priority == 0
    pmm.release(w.h2, blocker)  # room for one of them: the earlier, at equal priority
    m = abstract_manager(pmm)
    assert m.tickets[first].state.name == "GRANTED" and m.tickets[second].state.name == "PENDING"
    pmm.cancel_ticket(w.h1, second)
    waiter.join(10)
    assert not waiter.is_alive() and got == [None]


# --- try_reserve: a lease now or a typed refusal now, never past the limit (I7, I13) -----------------------


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("used, asked, error, match", [
    (0, "5", InvalidBytes, r"nbytes must be an int, got str"),
    (0, 0, InvalidBytes, r"nbytes must be in \[1, 2\*\*63-1\], got 0"),
    (0, 101, CapacityDenied, r"authority 1: 101 B can never fit its 100 B limit"),
    (60, 50, CapacityDenied, r"try-only: 50 B asked, 40 B free, 0 waiting"),
    (100, 10, CapacityDenied, r"try-only: 10 B asked, 0 B free, 0 waiting"),
], ids=["not-an-int", "zero", "over-the-limit", "past-the-free-bytes", "none-free"])
def test_invalid_try_reserve_is_refused_typed_and_changes_nothing(on: bool, used: int, asked: Any,
                                                                  error: type, match: str) -> None:
    with contracts(on=on):
        pmm, w = make()
        if used:
            lease(pmm, w.h2, w.a, used)
        before = abstract_manager(pmm)
        with pytest.raises(error, match=match):
            pmm.try_reserve(w.h1, w.a, asked)
        assert abstract_manager(pmm) == before


def test_try_reserve_with_a_role_that_is_no_role_is_refused_unchanged() -> None:
    pmm, w = make()
    before = abstract_manager(pmm)
    with pytest.raises(InvalidArgument, match="role must be a Role, got 'kv'"):
        pmm.try_reserve(w.h1, w.a, 5, role="kv")  # type: ignore[arg-type]
    assert abstract_manager(pmm) == before


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_try_reserve_of_exactly_the_free_bytes_is_a_granted_lease_of_its_role(on: bool) -> None:
    with contracts(on=on):
        pmm, w = make()
        whole = pmm.try_reserve(w.h1, w.a, 100, role=Role.KV)  # the whole limit of an empty ledger fits
        r = abstract_manager(pmm).ledger.allocations[whole]
        assert (r.nbytes, r.charge, r.role, r.origin, r.state.name) == (100, 100, Role.KV, Origin.GRANTED, "LIVE")


# --- the trace says what the caller did ---------------------------------------------------------------------


def _traced() -> tuple[Any, Any, io.StringIO]:
    buf = io.StringIO()
    pmm, w = make(trace=JsonlSink(buf))
    return pmm, w, buf


def _events(buf: io.StringIO, kind: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, buf.getvalue().splitlines()) if e["kind"] == kind]


def test_a_claim_on_a_traced_manager_is_traced() -> None:
    with contracts(on=False):  # the hot path is taken only when nothing needs the event
        pmm, w, buf = _traced()
        lease_id = pmm.claim(w.h1, pmm.submit(w.h1, w.a, 10))
    (claim,) = _events(buf, "claim")
    assert claim["payload"]["result"] == lease_id and claim["payload"]["used"] == {str(w.a): 10}


def test_a_try_reserve_with_no_priority_is_traced_at_priority_zero() -> None:
    pmm, w, buf = _traced()
    pmm.try_reserve(w.h1, w.a, 5)
    (event,) = _events(buf, "try_reserve")
    assert event["payload"]["priority"] == 0


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_each_reconfigure_starts_the_next_generation(on: bool) -> None:
    # C5: generations order the ledger's configurations; an older one's pending tickets fail, its answers are stale.
    with contracts(on=on):
        pmm, w = make()
        lease(pmm, w.h2, w.a, 100)
        older = pmm.submit(w.h1, w.a, 10)  # pending in generation 0
        pmm.reconfigure(w.a)
        pmm.reconfigure(w.a)
        newer = pmm.submit(w.h1, w.a, 10)
        m = abstract_manager(pmm)
        assert dict(m.generations) == {w.a: 2} and older not in m.tickets and m.tickets[newer].generation == 2


@pytest.mark.parametrize("charges", [True, False], ids=["grant-charges", "grant-charges-off"])
def test_a_traced_round_grant_names_its_allocation_and_the_used_before_it(charges: bool) -> None:
    """A waiter granted by a release's round (`_grant`, not the lone ticket's fast path) is traced as its own
    `grant` event naming the allocation it booked and the ledger's used after it, and the release's own event
    reads used as it stood before that grant (after minus the bytes it charged). With grant_charges_ledger off
    (negative control) a grant books nothing: no allocation, and 0 B taken off the used the events read."""
    from refimpl.manager import ProcessMemoryManager
    from spec.guards import GuardSet
    from spec.types import Tier

    with contracts(False):
        pmm, buf = traced(**({} if charges else {"guards": GuardSet.without("grant_charges_ledger")}))
        h = pmm.register_holder("kv")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
        big = pmm.claim(h, pmm.submit(h, a, 90, 0, Role.KV))
        pmm.submit(h, a, 20, 0, Role.KV)
        pmm.release(h, big)
    events = [json.loads(line) for line in buf.getvalue().splitlines()][3:]
    seen = [(e["kind"], e["ids"], e["payload"].get("result"),
             e["payload"]["used"]) for e in events]
    booked = [1, 2] if charges else [None, None]
    assert seen == [("submit", {"holder": h, "authority": a}, 1, {"1": 0}),
                    ("grant", {"ticket": 1}, booked[0], {"1": 90 if charges else 0}),
                    ("claim", {"holder": h, "ticket": 1}, 1, {"1": 90}),
                    ("submit", {"holder": h, "authority": a}, 2, {"1": 90}),
                    ("release", {"holder": h, "allocation": 1}, None, {"1": 0}),
                    ("grant", {"ticket": 2}, booked[1], {"1": 20 if charges else 0})]


def test_a_recorder_attached_before_the_first_grant_traces_it() -> None:
    """The grants list exists from the start: a trace attached after registration, whose first traced operation is
    a submit granted at once (the lone ticket's fast path), records that grant (before any traced operation has
    taken the grants)."""
    from refimpl import tracing
    from refimpl.manager import ProcessMemoryManager
    from spec.types import Tier

    buf = io.StringIO()
    with contracts(False):
        pmm = ProcessMemoryManager()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
        tracing.attach(pmm, JsonlSink(buf))
        t = pmm.submit(h, a, 10, 0, Role.KV)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [(e["kind"], e["ids"], e["payload"].get("result"), e["payload"].get("used")) for e in events] == [
        ("configure", {}, None, None), ("submit", {"holder": h, "authority": a}, t, {"1": 0}),
        ("grant", {"ticket": t}, 1, {"1": 10})]
