"""Waiting and dropped handles for `refimpl.pressure.PressureGovernor` (a mixin: one governor, one lock).

`wait` parks on the ticket's own event, never on the ledger lock (I7);
`acquire` is submit + wait + claim, and retires its ticket with exact credit
on any exception, BaseException included, so an interrupted or timed-out
waiter never leaves a grant behind (issue #14, finding 1). `drop` posts a
cancel without the lock to a bounded mailbox of distinct live tickets,
drained by the next operation after its arguments were checked.
"""

from __future__ import annotations

import threading
from typing import Any

from refimpl.pressure_args import check_timeout
from spec.errors import ForeignHolder, GovernorError, InvalidTransition, MailboxFull, UnknownTicket
from spec.tickets import TicketState as _T

__all__ = ["WaitingMixin"]


class WaitingMixin:
    """Needs the governor's `_lock`, `_tickets`, `_mailbox`, `_slots`, `_next_ticket` and its operations."""

    _lock: Any
    _tickets: dict[int, Any]
    _mailbox: dict[tuple[int, int], None]
    _slots: int
    _next_ticket: int


    def wait(self, ticket: int, timeout: float | None) -> bool:
        """Park on the ticket's own event until granted or retired; False on timeout."""
        timeout = check_timeout(timeout)
        with self._lock:
            t = self._ticket(ticket)  # UnknownTicket for an id never issued
            if t is None or t.state is not _T.PENDING:
                return True  # resolved already
            if t.event is None:
                t.event = threading.Event()
            ev = t.event
        self._outside_lock("waiting on a ticket")
        return ev.wait(timeout)

    def acquire(self, holder: int, nbytes: int, priority: int = 0, timeout: float | None = None) -> int | None:
        """Submit, wait off the lock, then claim; on timeout the ticket fails and any grant is credited once.

        Returns the claimed ticket id, or None (timed out, or failed by a reconfigure). Any exception
        while parked or claiming, BaseException included (Ctrl-C), retires the ticket with exact credit
        before it propagates: a grant is never left behind unclaimed."""
        timeout = check_timeout(timeout)  # before submit: a bad timeout opens no ticket
        tid = self.submit(holder, nbytes, priority)
        try:
            if self.wait(tid, timeout):
                try:
                    self.claim(holder, tid)
                    return tid
                except InvalidTransition:
                    return None  # failed by a reconfigure
            self.timeout(holder, tid)
            return None
        except BaseException:
            with self._lock:
                t = self._tickets.get(tid)
                claimed = t is not None and t.state is _T.CLAIMED
            if claimed:
                self.release(holder, tid)  # claimed, but the caller never received the lease
            else:
                self.timeout(holder, tid)  # pending or granted -> failed, granted bytes credited once
            raise

    def drop(self, holder: int, ticket: int) -> None:
        """Post a cancel without taking the lock (a dropped handle); the next operation drains it.

        The mailbox holds at most `mailbox` posts (one slot per live ticket, reserved at submit);
        posting beyond that is refused with MailboxFull. Only a live (pending or granted) ticket of
        `holder` is posted, once: a repeat or a drop of a claimed or retired ticket is a no-op, and
        a post naming an unknown holder or ticket, or another holder's ticket, is refused with a
        typed error, so bogus posts cannot fill the slots a legitimate drop needs."""
        h = self._holder(holder)  # reads immutable configuration only
        t = self._tickets.get(ticket) if type(ticket) is int else None  # one atomic dict read, no lock
        if t is None:
            if type(ticket) is int and 0 < ticket < self._next_ticket:
                return  # retired already: nothing to cancel
            raise UnknownTicket(f"ticket {ticket!r} was never issued")
        if t.holder != h:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {h}'s")
        key = (h, t.id)
        if t.state not in (_T.PENDING, _T.GRANTED) or key in self._mailbox:
            return  # claimed (the owner releases it) or already posted
        if len(self._mailbox) >= self._slots:
            raise MailboxFull(f"cancellation mailbox full ({self._slots} posts); call drain() or retry")
        self._mailbox[key] = None

    def drain(self) -> None:
        """Process posted cancels now."""
        self._run(None, lambda: None)

    def _drain(self) -> None:
        while self._mailbox:
            try:
                key = next(iter(self._mailbox))  # oldest post first
            except RuntimeError:
                continue  # a lock-free drop() inserted between iter() and next(): look again
            self._mailbox.pop(key, None)
            holder, ticket = key
            try:
                self._abandon(holder, ticket)
            except GovernorError:
                pass  # a bogus post is dropped; it names no live ticket of that holder
