"""The pool protocol's state and actions (`spec.pressure`'s vocabulary): records only, no transition code."""

from __future__ import annotations

import attrs
import immutables

from spec.tickets import PressureState, TicketState

_T = TicketState

__all__ = [
    "Ticket", "Pressure", "Pool", "initial", "buckets", "Submit", "TryReserve", "Claim", "Release", "Cancel",
    "Timeout", "Reconfigure", "SetUse", "Press", "Answer", "CancelPressure", "ExpirePressure",
    "PressureAction",
]

# --- state -------------------------------------------------------------------


@attrs.frozen
class Ticket:
    id: int  # also the submit sequence: ids are issued in submit order
    holder: int
    nbytes: int
    priority: int
    generation: int  # Invariant: a pending ticket carries the pool's current generation
    state: TicketState
    age: int  # arbitration rounds waited, capped at the aging bound
    grant: int | None  # fresh id minted at grant, before the waiter is woken
    pinned: bool = False
    in_flight: bool = False


@attrs.frozen
class Pressure:
    id: int
    holder: int
    target: int
    priority: int
    deadline: int
    generation: int
    state: PressureState
    released: int  # bytes the answer credited (>= 0)


@attrs.frozen
class Pool:
    capacity: int
    fixed: int
    free: int  # Invariant: fixed + free + reclaimable + granted + claimed == capacity
    holders: int  # holders are 1 .. holders
    aging_bound: int
    mailbox: int  # cancellation-mailbox slots: live (pending or granted) tickets <= mailbox
    generation: int = 0
    tickets: immutables.Map = immutables.Map()
    pressures: immutables.Map = immutables.Map()
    next_ticket: int = 1
    next_grant: int = 1
    next_pressure: int = 1


def initial(capacity: int, fixed: int, holders: int, aging_bound: int, mailbox: int) -> Pool:
    """A fresh pool: everything outside `fixed` is free."""
    return Pool(capacity, fixed, capacity - fixed, holders, aging_bound, mailbox)


def buckets(p: Pool) -> dict[str, int]:
    """Bytes per bucket, recomputed from the entries (never from `free`'s bookkeeping alone)."""
    out = {"fixed": p.fixed, "free": p.free, "reclaimable": 0, "granted": 0, "claimed": 0}
    for t in p.tickets.values():
        if t.state is _T.GRANTED:
            out["granted"] += t.nbytes
        elif t.state is _T.CLAIMED:
            out["claimed" if (t.pinned or t.in_flight) else "reclaimable"] += t.nbytes
    return out


# --- actions -----------------------------------------------------------------


@attrs.frozen
class Submit:
    """Ask for `nbytes`; the ticket waits (pending) until arbitration grants it."""

    holder: int
    nbytes: int
    priority: int


@attrs.frozen
class TryReserve:
    """The allocator path: granted and claimed now, or refused now; never pending (I7)."""

    holder: int
    nbytes: int
    priority: int


@attrs.frozen
class Claim:
    holder: int
    ticket: int


@attrs.frozen
class Release:
    holder: int
    ticket: int


@attrs.frozen
class Cancel:
    """Pending -> cancelled; granted -> cancelled with exact credit; otherwise a no-op (result 0)."""

    holder: int
    ticket: int


@attrs.frozen
class Timeout:
    """The caller's deadline passed: pending -> failed; granted -> failed with credit; otherwise a no-op."""

    holder: int
    ticket: int


@attrs.frozen
class Reconfigure:
    """Bump the generation; every older pending ticket fails."""


@attrs.frozen
class SetUse:
    """The holder flags its claimed lease pinned and/or in flight."""

    holder: int
    ticket: int
    pinned: bool
    in_flight: bool


@attrs.frozen
class Press:
    """The governor asks `holder` to give back up to `target` bytes by `deadline` (C5)."""

    holder: int
    target: int
    priority: int
    deadline: int


@attrs.frozen
class Answer:
    """The holder gives back the claimed leases `victims` (possibly none) at time `now`."""

    holder: int
    pressure: int
    victims: tuple[int, ...]
    now: int


@attrs.frozen
class CancelPressure:
    pressure: int


@attrs.frozen
class ExpirePressure:
    pressure: int
    now: int


PressureAction = (Submit | TryReserve | Claim | Release | Cancel | Timeout | Reconfigure | SetUse | Press
                  | Answer | CancelPressure | ExpirePressure)
