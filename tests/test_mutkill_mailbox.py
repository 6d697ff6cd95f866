"""What a holder loses when the cancellation mailbox (`refimpl/manager/mailbox.py`) goes wrong: each test is one
harm, written from the mutation survivors of `drop`, `drain`, `_drain` and `wait`. A post whose ticket another
thread retired after the post (its operation had applied the mailbox already) is applied as a no-op: no error,
nothing credited twice, no event."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl import tracing
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_manager, ledger_lock, trace_recorder
from spec.errors import ForeignHolder, MailboxFull, TraceSinkFailed, UnknownTicket
from spec.types import Role, Tier


def _full() -> tuple[ProcessMemoryManager, int, int, int, int]:
    """A 100 B ledger filled by holder `w`'s lease; holder `kv` has a pending 60 B ticket."""
    pmm = ProcessMemoryManager(aging_bound=2)
    w, kv = pmm.register_holder("w"), pmm.register_holder("kv")
    a = pmm.register_authority("hbm", Tier.DEVICE, 100)
    lease = pmm.reserve(w, a, Tier.DEVICE, 100, Role.WEIGHTS)
    pmm.commit(w, lease, 100)
    return pmm, w, kv, a, pmm.submit(kv, a, 60)


def _waiting(pmm: ProcessMemoryManager, ticket: int) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(pmm.wait(ticket, 20.0)), daemon=True)
    t.start()
    while not (pmm._tickets[ticket].event is not None):  # parked on the ticket's own event
        threading.Event().wait(0.001)
    return t, got


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_waiter_on_a_dropped_ticket_wakes_when_the_drop_is_drained(on: bool) -> None:
    with contracts.contracts(on):
        pmm, _, kv, a, ticket = _full()
        waiter, got = _waiting(pmm, ticket)
        pmm.drop(kv, ticket)
        pmm.drain()
        waiter.join(10)  # well before the waiter's own 20 s deadline
        assert not waiter.is_alive() and got == [True]
        assert not abstract_manager(pmm).tickets


def _behind_the_mailbox(pmm: ProcessMemoryManager, op: Any) -> Any:
    """`op()` as another thread's operation that applied the mailbox before this thread's posts landed (the
    drain is skipped for that one operation): with a cancel, a post stays naming a retired ticket."""
    pmm.drain = lambda: None  # type: ignore[method-assign]
    try:
        return op()
    finally:
        del pmm.drain


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("traced", [True, False], ids=["traced", "untraced"])
def test_a_post_whose_ticket_was_retired_meanwhile_is_applied_as_nothing(on: bool, traced: bool) -> None:
    buf = io.StringIO()
    with contracts.contracts(on):
        pmm, w, kv, a, ticket = _full()
        if traced:
            tracing.attach(pmm, JsonlSink(buf))
        pmm.drop(kv, ticket)
        _behind_the_mailbox(pmm, lambda: pmm.cancel_ticket(kv, ticket))
        before = abstract_manager(pmm)
        n = len(buf.getvalue().splitlines())
        pmm.drain()
        assert abstract_manager(pmm) == before and not pmm._mailbox
        assert len(buf.getvalue().splitlines()) == n, "a post that applied nothing was traced"


class _RacyMailbox(dict):
    """The mailbox as `drain` sees it when a lock-free `drop` inserts while it reads: the first read raises
    RuntimeError (CPython's 'dictionary changed size during iteration')."""

    raised = False

    def __iter__(self) -> Any:
        if not self.raised:
            self.raised = True
            raise RuntimeError("dictionary changed size during iteration")
        return super().__iter__()


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_post_that_lands_while_drain_reads_the_mailbox_is_applied_by_that_drain(on: bool) -> None:
    with contracts.contracts(on):
        pmm, w, kv, a, ticket = _full()
        pmm._mailbox = _RacyMailbox()
        pmm.drop(kv, ticket)
        pmm.drain()
        assert pmm._mailbox.raised and not pmm._mailbox and not abstract_manager(pmm).tickets


def test_a_drained_cancel_is_traced_with_contracts_off_and_the_trace_replays_clean() -> None:
    buf = io.StringIO()
    with contracts.contracts(False):
        pmm, w, kv, a, ticket = _full()
        tracing.attach(pmm, JsonlSink(buf))  # attached after the submit: the cancel is its first composed event
        pmm.drop(kv, ticket)
        pmm.drain()
    events = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [(e["kind"], e["payload"].get("aging_bound")) for e in events] == [("configure", 2), ("cancel_ticket", None)]
    assert (events[1]["ids"], events[1]["payload"]["result"]) == ({"holder": kv, "ticket": ticket}, 0)


@pytest.mark.parametrize("fault", [ValueError("disk full"), OSError("pipe closed")], ids=["ValueError", "OSError"])
def test_a_sink_failing_on_a_drained_cancel_is_a_trace_sink_failure_that_names_it(fault: Exception) -> None:
    def sink(event: dict[str, Any]) -> None:
        if event["kind"] == "cancel_ticket":
            raise fault

    pmm, w, kv, a, ticket = _full()
    tracing.attach(pmm, sink)
    pmm.drop(kv, ticket)
    with pytest.raises(TraceSinkFailed, match=rf"CancelTicket was applied \(result None\) but the trace sink raised "
                                              rf"{type(fault).__name__} on event 2: {fault}"):
        pmm.drain()
    assert not abstract_manager(pmm).tickets  # the cancel stands


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_drain_over_two_ledgers_checks_the_one_it_touched(on: bool) -> None:
    with contracts.contracts(on):
        pmm, w, kv, a, ticket = _full()
        b = pmm.register_authority("host", Tier.HOST, 50)
        other = pmm.submit(w, b, 20)  # a grant on another ledger
        pmm.drop(kv, ticket)
        pmm.drain()
        m = abstract_manager(pmm)
        assert set(m.tickets) == {other} and m.ledger.authorities[b].used == 20


def test_bad_drops_and_waits_are_typed_errors_naming_the_ticket_and_post_nothing() -> None:
    pmm, w, kv, a, ticket = _full()
    nxt = ticket + 1  # not issued yet
    for bad in (0, nxt, float(ticket), [ticket]):
        with pytest.raises(UnknownTicket, match=rf"ticket {bad!r} was never issued".replace("[", r"\[")):
            pmm.drop(kv, bad)
        with pytest.raises(UnknownTicket, match=rf"ticket {bad!r} was never issued".replace("[", r"\[")):
            pmm.wait(bad, 0.0)
    with pytest.raises(ForeignHolder, match=rf"ticket {ticket} is holder {kv}'s, not {w}'s"):
        pmm.drop(w, ticket)
    assert not pmm._mailbox and abstract_manager(pmm).tickets[ticket].state.name == "PENDING"


def test_the_mailbox_holds_at_most_its_slots_when_drops_race_with_retires() -> None:
    pmm = ProcessMemoryManager(mailbox=2)
    h = pmm.register_holder("kv")
    a = pmm.register_authority("dev", Tier.DEVICE, 100)
    for t in (pmm.submit(h, a, 10), pmm.submit(h, a, 10)):
        pmm.drop(h, t)
        _behind_the_mailbox(pmm, lambda: pmm.cancel_ticket(h, t))  # two stale posts: no live ticket left
    live = _behind_the_mailbox(pmm, lambda: pmm.submit(h, a, 10))  # its drain ran before the posts landed
    with pytest.raises(MailboxFull, match=r"cancellation mailbox full \(2 posts\); call drain\(\) or retry"):
        pmm.drop(h, live)
    assert len(pmm._mailbox) == 2
    pmm.drain()  # the stale posts apply as nothing; the live ticket stays
    assert not pmm._mailbox and set(abstract_manager(pmm).tickets) == {live}


def test_wait_returns_false_at_its_deadline_on_a_pending_ticket() -> None:
    pmm, w, kv, a, ticket = _full()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pmm.wait(ticket, 0.05)), daemon=True)
    waiter.start()
    waiter.join(10)
    assert not waiter.is_alive() and got == [False]
    assert abstract_manager(pmm).tickets[ticket].state.name == "PENDING"


def test_waiting_with_the_ledger_lock_held_is_an_i7_violation_naming_the_site() -> None:
    pmm, w, kv, a, ticket = _full()
    with contracts.contracts(True), ledger_lock(pmm):
        with pytest.raises(InvariantViolation, match="waiting on a ticket with the ledger lock held"):
            pmm.wait(ticket, 0.0)


@pytest.mark.parametrize("posted", [False, True], ids=["nothing-posted", "a-stale-post"])
def test_a_drain_that_applied_nothing_leaves_another_threads_event_to_that_thread(posted: bool) -> None:
    def sink(event: dict[str, Any]) -> None:
        if event["kind"] == "boundary":
            raise OSError("pipe closed")

    pmm, w, kv, a, ticket = _full()
    tracing.attach(pmm, sink)
    if posted:
        pmm.drop(kv, ticket)
        _behind_the_mailbox(pmm, lambda: pmm.cancel_ticket(kv, ticket))
    rec = trace_recorder(pmm)
    with ledger_lock(pmm):  # another thread's event, numbered and queued, not yet delivered by that thread
        seq = rec.record(lambda s, e: {"contract_revision": "ortmem-manager/2", "topology_epoch": e,
                                       "source": rec.source, "source_sequence": s, "kind": "boundary", "ids": {},
                                       "payload": {}})
    pmm.drain()  # applies nothing
    with pytest.raises(TraceSinkFailed, match=rf"boundary was applied \(result None\) but the trace sink raised "
                                              rf"OSError on event {seq}: pipe closed"):
        rec.settle(seq, "boundary", None, None)  # that thread settles its own event
