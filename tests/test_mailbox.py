"""The cancellation mailbox and waiting (`refimpl.manager.mailbox`): `drop`, `drain`, `wait` on composed tickets.

A post is applied as the composed CancelTicket it stands for: credited once, checked with contracts on (a
broken cancel is caught on the drained step), traced as a `cancel_ticket` event that replays clean. Bad
posts are typed errors that post nothing; a full mailbox refuses with MailboxFull.
"""

from __future__ import annotations

import io
import json

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.manager_replay import replay_manager_lines
from refimpl import tracing
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import ForeignHolder, InvalidArgument, MailboxFull, UnknownTicket
from spec.types import Tier


def _start(**kw: object) -> tuple[ProcessMemoryManager, int, int, int]:
    pmm = ProcessMemoryManager(aging_bound=2, **kw)  # type: ignore[arg-type]
    h, other = pmm.register_holder("kv"), pmm.register_holder("w")
    return pmm, pmm.register_authority("dev", Tier.DEVICE, 100), h, other


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_drain_applies_each_post_once_and_credits_a_grant(on: bool) -> None:
    pmm, a, h, _ = _start()
    with contracts.contracts(on):
        granted = pmm.submit(h, a, 60)  # granted at once: 60 B charged
        waiting = pmm.submit(h, a, 60)  # pending
        pmm.drop(h, granted)
        pmm.drop(h, waiting)
        pmm.drop(h, granted)  # a repeat posts nothing more
        pmm.drain()
        pmm.drain()  # nothing left: a no-op
    m = abstract_manager(pmm)
    assert not m.tickets and m.ledger.authorities[a].used == 0 and not pmm._mailbox


def test_a_call_refused_for_its_arguments_still_applies_the_posts_first() -> None:
    """Every verb applies the posts before anything else, so a refused one too: acquire refused for its timeout
    (before it opens a ticket) leaves no dropped ticket's bytes charged."""
    pmm, a, h, _ = _start()
    pmm.drop(h, pmm.submit(h, a, 60))  # granted at once, then dropped: 60 B charged until the post is applied
    with pytest.raises(InvalidArgument, match="timeout"):
        pmm.acquire(h, a, 10, timeout=-1.0)
    m = abstract_manager(pmm)
    assert not pmm._mailbox and not m.tickets and m.ledger.authorities[a].used == 0

def test_a_drained_cancel_is_a_cancel_ticket_event_that_replays_clean() -> None:
    buf = io.StringIO()
    pmm, a, h, _ = _start(trace=JsonlSink(buf))
    t = pmm.submit(h, a, 60)
    pmm.drop(h, t)
    pmm.drain()
    lines = buf.getvalue().splitlines()
    last = json.loads(lines[-1])
    assert (last["kind"], last["ids"], last["payload"]["result"], last["payload"]["used"]) == (
        "cancel_ticket", {"holder": h, "ticket": t}, 60, {str(a): 0})
    r = replay_manager_lines([x.encode() + b"\n" for x in lines])
    assert r.ok, r.describe()


class _CreditsTwice(ProcessMemoryManager):
    """A cancel that credits a granted ticket's bytes a second time (the harm the drained step is checked for)."""

    def _abandon(self, holder: int, ticket: int) -> int:
        t = self._tickets.get(ticket)
        credit = super()._abandon(holder, ticket)
        if t is not None and credit:
            t.auth.used -= credit
        return credit


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_contracts_check_the_drained_cancel_and_catch_a_double_credit(on: bool) -> None:
    # Off means no check runs (nearly free in a release build), even traced: the broken cancel passes.
    with contracts.contracts(on):
        pmm = _CreditsTwice()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("dev", Tier.DEVICE, 100)
        if not on:
            tracing.attach(pmm, JsonlSink(io.StringIO()))
        pmm.claim(h, pmm.submit(h, a, 30))  # a lease stays: used must not fall below it
        pmm.drop(h, pmm.submit(h, a, 60))
        if on:
            with pytest.raises(InvariantViolation, match="I1"):
                pmm.drain()
            return
        pmm.drain()
    assert abstract_manager(pmm).ledger.authorities[a].used == -30  # the harm went unchecked, as documented


def test_bad_drops_are_refused_typed_and_post_nothing() -> None:
    pmm, a, h, other = _start(mailbox=2)
    t = pmm.submit(h, a, 10)
    with pytest.raises(UnknownTicket):
        pmm.drop(h, 99)
    with pytest.raises(ForeignHolder):
        pmm.drop(other, t)
    assert not pmm._mailbox
    pmm.drop(h, t)
    pmm.drop(h, t)  # a repeat: still one post
    assert list(pmm._mailbox) == [(h, t)]
    t2 = pmm.submit(h, a, 10)  # the post is applied first: t is cancelled
    assert t not in abstract_manager(pmm).tickets and not pmm._mailbox
    pmm.drop(h, t)  # retired already: nothing to post
    assert not pmm._mailbox
    pmm.submit(h, a, 10)  # two live tickets: as many as the mailbox has slots
    with pytest.raises(MailboxFull):
        pmm.submit(h, a, 10)  # back-pressure: a third live ticket could not be dropped
    assert set(abstract_manager(pmm).tickets) == {t2, t2 + 1}


def test_wait_checks_its_arguments_and_answers_at_once_for_a_resolved_ticket() -> None:
    pmm, a, h, _ = _start()
    t = pmm.submit(h, a, 10)  # granted at once
    assert pmm.wait(t, 0.0) is True
    with pytest.raises(UnknownTicket):
        pmm.wait(99, 0.0)
    with pytest.raises(InvalidArgument):
        pmm.wait(t, -1.0)
    pmm.cancel_ticket(h, t)
    assert pmm.wait(t, 0.0) is True  # retired: resolved
