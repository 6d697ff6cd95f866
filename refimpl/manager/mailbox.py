"""The cancellation mailbox and waiting on a ticket: `drop`, `drain`, `wait` of `ProcessMemoryManager`.

A dropped handle (a finaliser, another thread) may not take the ledger lock, so `drop` only posts a
cancel; every operation applies the posts first (`drain`, called by the runners in
`refimpl.manager.views`), each as the composed `CancelTicket` it stands for: checked against
`spec.manager`'s predicates with contracts on and traced as an `ortmem-manager/2` `cancel_ticket` event.
The mailbox is no state of the spec (`spec.manager_actions`): a post is a cancel not yet applied.
`wait` parks on the ticket's own event, never on the lock (I7).
"""

from __future__ import annotations

import threading

from invariants.contracts import SWITCH as _SWITCH
from invariants.manager_trace import encode_manager_event
from refimpl.pressure_args import check_timeout
from spec import manager_actions as M
from spec.errors import ForeignHolder, GovernorError, MailboxFull, UnknownTicket
from spec.tickets import TicketState

__all__ = ["Mailbox"]

_PENDING = TicketState.PENDING


class Mailbox:
    """Posted cancels of dropped tickets and waiting on a ticket; needs the ledger and arbitration parts."""

    def _init_mailbox(self) -> None:
        self._mailbox: dict[tuple[int, int], None] = {}  # posted cancels of dropped tickets, in post order

    def wait(self, ticket: int, timeout: float | None) -> bool:
        """Park on the ticket's own event (never on the lock) until granted or retired; False on timeout."""
        timeout = check_timeout(timeout)
        with self._lock:
            if type(ticket) is not int or not 1 <= ticket < self._next_ticket:
                raise UnknownTicket(f"ticket {ticket!r} was never issued")
            t = self._tickets.get(ticket)
            if t is None or t.state is not _PENDING:
                return True  # resolved already
            if t.event is None:
                t.event = threading.Event()
            ev = t.event
        self._outside_lock("waiting on a ticket")
        return ev.wait(timeout)

    def drop(self, holder: int, ticket: int) -> None:
        """Post a cancel of a live ticket without taking the lock (a dropped handle, a finaliser).

        Applied under the lock by `drain`, which every operation calls first when a post waits, before its own
        effect: a dropped pending ticket is never granted by a later round, and a dropped granted ticket's bytes
        are credited (once) before anything else runs (issue #21). Each applied post is its own checked step
        (the composed CancelTicket) with its own `cancel_ticket` event. At most `mailbox` distinct posts: beyond
        that MailboxFull. A post naming an unknown holder or ticket, or another holder's ticket, is refused with
        a typed error, so bogus posts cannot fill the slots a real drop needs; a repeat, or a drop of a claimed
        or retired ticket, is a no-op."""
        self._holder(holder)  # one dict read
        t = self._tickets.get(ticket) if type(ticket) is int else None  # one atomic dict read, no lock
        if t is None:
            if type(ticket) is int and 0 < ticket < self._next_ticket:
                return  # retired or claimed already: nothing to cancel
            raise UnknownTicket(f"ticket {ticket!r} was never issued")
        if t.holder != holder:
            raise ForeignHolder(f"ticket {t.id} is holder {t.holder}'s, not {holder}'s")
        key = (holder, t.id)
        if key in self._mailbox:
            return
        if len(self._mailbox) >= self._slots:
            raise MailboxFull(f"cancellation mailbox full ({self._slots} posts); call drain() or retry")
        self._mailbox[key] = None

    def drain(self) -> None:
        """Apply the posted cancels now."""
        rec = self._recorder
        try:
            with self._lock:
                seq = self._drain()
        finally:
            with self._lock:
                wake, self._wake = self._wake, []
            self._wake_up(wake)
        if rec is not None and seq:
            rec.settle(seq, "CancelTicket", None, None)  # a sink failure on a drained cancel is TraceSinkFailed

    def _drain(self) -> int:
        """Apply the posted cancels; the number of the last event recorded for them (0: none)."""
        rec, seq = self._recorder, 0
        while self._mailbox:
            try:
                key = next(iter(self._mailbox))  # oldest post first
            except RuntimeError:
                continue  # a lock-free drop() inserted meanwhile: look again
            self._mailbox.pop(key, None)
            holder, ticket = key
            t = self._tickets.get(ticket)
            act = M.CancelTicket(holder, ticket)
            scope = self._closed((t.auth.id,)) if t is not None and (_SWITCH.on or rec is not None) else None
            before = self._manager_view(scope, ()) if scope is not None and _SWITCH.on else None
            self._books.forget()  # this path keeps no contract books: a checked operation counts them again
            try:
                credited = self._abandon(holder, ticket)
            except GovernorError:
                continue  # it names no live ticket of that holder any more
            if before is not None:
                self._check_manager(before, act, self._manager_view(scope, ()), credited)
            if rec is not None and scope is not None:
                # A cancel names no bundle and leaves no charge (a granted ticket's reservation is cancelled, a
                # pending one held none).
                used = rec.take_grants({i: self._auths[i].used for i in scope if i in self._auths})
                seq = rec.record(lambda s, e, a=act, c=credited, u=used:
                                 encode_manager_event(rec.source, s, e, a, c, None, u))
        return seq
