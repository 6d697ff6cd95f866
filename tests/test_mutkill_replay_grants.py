"""The owed-grant rule of `ortmem-manager/2` replay (`invariants.replay_grants`) judged exactly, in observed ids.

A foreign governor numbers its tickets and authorities its own way; the replay's messages must name them in the
governor's numbers (its ticket 103 on its authority 501, never the spec's 3 on 1), with the figures that make
the harm plain. Each row steps the spec lazily (`eager=False`, as the replay does), or breaks a step by hand, and
reads the whole message. Written from the mutation survivors of `invariants/replay_grants.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, HOST, lease, run, start

from invariants.replay import _Bad
from invariants.replay_grants import never_granted, owed_after
from invariants.replay_ids import IdMap
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.grants import enabled_grants
from spec.guards import ALL_ON
from spec.tickets import TicketState
from spec.types import Role, Tier

OBS = {"authority": {DEV: 501, HOST: 502}}


def _ids(m: M.Manager) -> IdMap:
    """Observed ids: authority 1 -> 501, 2 -> 502; ticket t -> 100 + t."""
    ids = IdMap(lambda kind, spec: True)
    for spec, obs in OBS["authority"].items():
        ids.bind("authority", obs, spec)
    for t in range(1, m.next_ticket + 3):
        ids.bind("ticket", 100 + t, t)
    return ids


def _lazy(m: M.Manager, act: Any) -> M.Manager:
    return MG.step(m, act, ALL_ON, eager=False)[0]


def _owed() -> tuple[M.Manager, int, int]:
    """DEV (4 B) full with H1's 3 B and 1 B leases, ticket t (3 B) waits; the 3 B lease returns lazily: t is owed."""
    m, big = lease(start(), H1, DEV, 3)
    m, _ = lease(m, H1, DEV, 1)
    m, t = run(m, M.Submit(H2, DEV, 3))
    m = _lazy(m, A.Release(H1, big))
    assert enabled_grants(m, ALL_ON) == {DEV: t} and m.tickets[t].state is TicketState.PENDING
    return m, big, t


def _bad(act: Any, before: M.Manager, owed: dict[int, int], nxt: M.Manager) -> str:
    with pytest.raises(_Bad) as e:
        owed_after(act, before, owed, nxt, _ids(before))
    assert (e.value.failure, e.value.id) == ("violation", "I13")
    return str(e.value)


def test_an_event_that_retires_an_owed_ticket_is_named_in_observed_ids() -> None:
    m, _, t = _owed()
    act = M.CancelTicket(H2, t)
    assert _bad(act, m, {DEV: t}, _lazy(m, act)) == (
        f"{act!r} retired ticket {100 + t} while its grant was owed (it fit on authority 501 and was first in "
        "arbitration order): the design grants a fitting waiter before any later event can see it waiting (I13)")


def test_an_event_that_takes_the_room_says_how_much_was_left() -> None:
    m, _, t = _owed()
    act = A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING)
    assert _bad(act, m, {DEV: t}, _lazy(m, act)) == (
        f"{act!r} took its room (2 B free, it needs 3 B): ticket {100 + t} fit on authority 501 and was first in "
        "arbitration order, so its grant was owed before any newcomer or other reservation (I13)")


def test_an_owed_ticket_that_still_fits_exactly_is_still_owed() -> None:
    m, _, t = _owed()
    act = A.RegisterHolder("late")  # takes nothing: 3 B free, the ticket needs 3 B
    nxt = _lazy(m, act)
    assert owed_after(act, m, {DEV: t}, nxt, _ids(m)) == {DEV: t}


def test_an_owed_ticket_whose_ledger_is_gone_has_no_room() -> None:
    m, _, t = _owed()
    act = A.RegisterHolder("late")
    gone = evolve(m, ledger=evolve(m.ledger, authorities=m.ledger.authorities.delete(DEV)))
    one = evolve(gone, tickets=gone.tickets.set(t, evolve(gone.tickets[t], nbytes=1)))
    assert _bad(act, m, {DEV: t}, one).startswith(f"{act!r} took its room (0 B free, it needs 1 B)")


def test_a_newcomer_put_ahead_of_an_owed_ticket_is_named() -> None:
    m, _, t = _owed()
    act = M.Submit(H2, DEV, 1, 5)  # a higher priority newcomer now comes first
    nxt = _lazy(m, act)
    first = enabled_grants(nxt, ALL_ON)[DEV]
    assert first != t
    assert _bad(act, m, {DEV: t}, nxt) == (
        f"{act!r} put newcomer ticket {100 + first} ahead of it: ticket {100 + t} fit on authority 501 and was "
        "first in arbitration order, so its grant was owed before any newcomer or other reservation (I13)")


def test_a_still_owed_grant_does_not_hide_a_retired_one_behind_it() -> None:
    m, host_lease = lease(start(), H1, HOST, 4)
    m, big = lease(m, H1, DEV, 3)
    m, _ = lease(m, H1, DEV, 1)
    m, u = run(m, M.Submit(H2, HOST, 2))
    m, t = run(m, M.Submit(H2, DEV, 3))
    m = _lazy(_lazy(m, A.Release(H1, host_lease)), A.Release(H1, big))
    assert enabled_grants(m, ALL_ON) == {DEV: t, HOST: u}
    act = M.CancelTicket(H2, u)
    message = _bad(act, m, {DEV: t, HOST: u}, _lazy(m, act))  # DEV's stays owed; HOST's ticket retired
    assert message.startswith(f"{act!r} retired ticket {100 + u} while its grant was owed (it fit on authority 502")


def test_a_fitting_waiter_never_granted_is_a_leftover_in_observed_ids() -> None:
    m, _, t = _owed()
    assert never_granted({DEV: t}, _ids(m)) == [
        f"ticket {100 + t} fits on authority 501 and is first in arbitration order, but was never granted (a "
        "fitting waiter left waiting, I13)"]


def test_an_owed_ticket_behind_a_matured_misfit_is_no_longer_owed_and_no_harm() -> None:
    # A ticket that waited longer matured ahead of t (the round's ageing) and does not fit: the round stops there
    # (I13), so t is no longer owed; t still fits exactly in the 3 B free, so nothing took its room.
    m, _, t = _owed()
    act = A.RegisterHolder("late")
    u = M.Ticket(t + 1, H2, DEV, 4, 0, Role.STAGING, m.aging_bound, TicketState.PENDING, None)
    nxt = _lazy(m, act)
    nxt = evolve(nxt, tickets=nxt.tickets.set(u.id, u))
    assert enabled_grants(nxt, ALL_ON) == {}
    assert owed_after(act, m, {DEV: t}, nxt, _ids(m)) == {}
