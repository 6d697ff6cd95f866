"""Grant events in the replay of `ortmem-manager/2`: when a governor may grant, and what may happen before it does.

The revision traces every grant as its own `grant` event (`spec.grants.GrantTicket`).
The replay steps the spec with rounds that age but never grant (`spec.manager.step(eager=False)`),
and each `grant` event steps `GrantTicket`, whose refusal rejects the trace at that line:
a ticket that is not pending, a grant that does not fit (an over-grant, I2), or one out of
arbitration order (I13: a ticket ahead fits, or is a matured misfit). So a governor is free
to grant at the spec's instant (right after the operation that made room, as refimpl does)
or at any later event while the grant is still enabled.

What may happen in between (the harm this module states): a grant that is enabled is *owed*.
An event that leaves an owed ticket pending and took its room (it no longer fits: a Reserve,
a reservation of a transaction, a lowered limit) or put a newcomer ahead of it (a ticket the
event submitted now comes first), gave the owed bytes to someone else, which the design's
rounds never allow: at the instant the room was made the waiter would have been granted
(I13). So is an event that retires the owed ticket (a cancel, a timeout, a reconfigure):
it saw a waiter the design would have granted already (a lazy grant must not be observable
to the ticket's holder). Each is rejected there, naming I13. Not such a harm: device loss
(the environment ends the ticket, granted or not), more room (a release) or a round's
ageing putting a ticket that waited longer ahead of it: the arbitration order then decides
again, as a round would, and the grants follow it (`GrantTicket`). At the end of a
trace with no final `boundary`, an owed grant is a leftover: a fitting waiter never granted.

The whole-state predicates describe states at rest, where no grant is owed; between an
event and its grants the replay checks them on the state with the owed grants applied.

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.replay import _Bad
from spec import ledger_actions as A
from invariants.replay_ids import IdMap
from spec.grants import enabled_grants, grant_all
from spec.guards import ALL_ON
from spec.manager_actions import Manager
from spec.tickets import TicketState

__all__ = ["owed_after", "at_rest", "never_granted", "unwritten_grants"]

_NONE: dict[int, int] = {}


def owed_after(act: Any, before: Manager, owed: dict[int, int], nxt: Manager, ids: IdMap) -> dict[int, int]:
    """The grants owed after the event `act` led from `before` to `nxt` (authority -> ticket), given those `owed`.

    Raises _Bad (I13) when an owed ticket still waits after the event and its room was taken (it no longer
    fits) or a ticket the event submitted now comes first: the design's round would have granted it first."""
    now = enabled_grants(nxt, ALL_ON) if nxt.tickets else _NONE
    for aid, tid in owed.items():
        t, first = nxt.tickets.get(tid), now.get(aid)
        if first == tid or (t is not None and t.state is TicketState.GRANTED) or isinstance(act, A.LoseDevice):
            continue  # still owed, granted, or gone with its device (the environment, C3)
        if t is None or t.state is not TicketState.PENDING:
            raise _Bad("violation", f"{act!r} retired ticket {ids.observed_id('ticket', tid)} while its grant was "
                                    f"owed (it fit on authority {ids.observed_id('authority', aid)} and was first in "
                                    "arbitration order): the design grants a fitting waiter before any later event "
                                    "can see it waiting (I13)", "I13")
        a = nxt.ledger.authorities.get(aid)
        free = a.limit - a.used if a is not None else 0
        newcomer = first is not None and first >= before.next_ticket
        if t.nbytes > free or newcomer:
            how = (f"took its room ({free} B free, it needs {t.nbytes} B)" if t.nbytes > free else
                   f"put newcomer ticket {ids.observed_id('ticket', first)} ahead of it")
            raise _Bad("violation", f"{act!r} {how}: ticket {ids.observed_id('ticket', tid)} fit on authority "
                                    f"{ids.observed_id('authority', aid)} and was first in arbitration order, so its "
                                    "grant was owed before any newcomer or other reservation (I13)", "I13")
    return now


def at_rest(m: Manager, owed: dict[int, int]) -> Manager:
    """`m` with every owed grant applied: the state the whole-state predicates describe."""
    for aid in sorted(owed):
        m = grant_all(m, aid, ALL_ON)
    return m


def never_granted(owed: dict[int, int], ids: IdMap) -> list[str]:
    """Leftovers at the end of a trace: each owed grant (a fitting waiter the governor never granted, I13)."""
    return [f"ticket {ids.observed_id('ticket', tid)} fits on authority {ids.observed_id('authority', aid)} and is "
            "first in arbitration order, but was never granted (a fitting waiter left waiting, I13)"
            for aid, tid in sorted(owed.items())]


def unwritten_grants(m: Manager, aid: int, used: int, ids: IdMap) -> str:
    """Cold path, for a message: when `used`, observed on authority `aid` where the spec has less, is the spec's
    figure with the grants owed there made, say which tickets the governor granted without a `grant` event."""
    granted = grant_all(m, aid, ALL_ON)
    if granted is m or granted.ledger.authorities[aid].used != used:
        return ""
    tickets = sorted(t for t, r in granted.tickets.items()
                     if r.state is TicketState.GRANTED and m.tickets[t].state is not TicketState.GRANTED)
    return (f"; the spec's figure with ticket{'s' if len(tickets) > 1 else ''} "
            f"{', '.join(str(ids.observed_id('ticket', t)) for t in tickets)} granted is {used} B: a grant event is "
            "missing (each grant is its own event)")
