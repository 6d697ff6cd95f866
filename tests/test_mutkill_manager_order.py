"""I13's grant-order and aging clauses (`invariants.manager_order`) judged exactly.

Rounds built through the spec, then broken by hand in one way only: a waiter that fits exactly passed over, the
headroom a granted ticket ahead of a waiter takes, a violation after a granted ticket in the order; the whole
message each fails with; and each case counted exactly when its situation occurs (verify's coverage rule R1).
Written from the mutation survivors of `invariants/manager_order.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from clause_harness import judged
from manager_harness import DEV, H1, H2, HOST, lease, run, start

from invariants.manager_order import step_I13_order
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.tickets import TicketState

ORDER, AGING = "step_I13_order.grant_order", "step_I13_order.passed_over_ages"
_T = TicketState


def _judge(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> tuple[str | None, dict]:
    return judged(step_I13_order, before, act, after, result)


def _waiters(*sizes_priorities: tuple[int, int], held: int = 4) -> tuple[M.Manager, int, list[int]]:
    """DEV (4 B) full: a lease of `held` B of H1 (plus 4 - held B of another lease), then waiters of H2."""
    m, big = lease(start(), H1, DEV, held)
    if held < 4:
        m, _ = lease(m, H1, DEV, 4 - held)
    ids = []
    for n, p in sizes_priorities:
        m, t = run(m, M.Submit(H2, DEV, n, p))
        ids.append(t)
    return m, big, ids


def test_a_waiter_that_fits_exactly_at_its_turn_may_not_be_passed_over() -> None:
    # 3 B return; ticket a (3 B, priority 1) is first and fits exactly; b (1 B) is granted in its place.
    m, big, (a, b) = _waiters((3, 1), (1, 0), held=3)
    act = A.Release(H1, big)
    right = MG.step(m, act)[0]
    assert right.tickets[a].state is _T.GRANTED and right.tickets[b].state is _T.PENDING
    bad = MG.step(m, act)[0]
    bad = evolve(bad, tickets=bad.tickets.set(a, evolve(bad.tickets[a], state=_T.PENDING, allocation=None,
                                                              age=m.tickets[a].age + 1))
                 .set(b, evolve(bad.tickets[b], state=_T.GRANTED)))
    bad = evolve(bad, ledger=evolve(bad.ledger, authorities=bad.ledger.authorities.set(
        DEV, evolve(bad.ledger.authorities[DEV], used=2))))  # b's 1 B charged instead of a's 3 B
    t = bad.tickets[a]
    assert _judge(m, act, bad)[0] == (
        f"I13: {act!r}: ticket {a} (3 B, priority 1, age {t.age}) fit in the 3 B left at its turn on authority "
        f"{DEV} but waits, while ticket(s) [{b}] after it in grant order were granted")


def test_a_grant_ahead_takes_its_bytes_so_a_misfit_behind_it_is_no_harm() -> None:
    # 4 B return: a (2 B, priority 2) granted, b (3 B, priority 1) no longer fits in the 2 B left, c (2 B) granted.
    m, big, (a, b, c) = _waiters((2, 2), (3, 1), (2, 0))
    act = A.Release(H1, big)
    after = MG.step(m, act)[0]
    assert [after.tickets[t].state for t in (a, b, c)] == [_T.GRANTED, _T.PENDING, _T.GRANTED]
    assert _judge(m, act, after) == (None, {ORDER: (1, 1), AGING: (1, 1)})


def test_a_waiter_passed_over_behind_a_granted_ticket_is_still_found() -> None:
    # 4 B return: a (2 B, priority 2), b (1 B, priority 1), c (1 B) all fit; b is left waiting by hand.
    m, big, (a, b, c) = _waiters((2, 2), (1, 1), (1, 0))
    act = A.Release(H1, big)
    after = MG.step(m, act)[0]
    assert all(after.tickets[t].state is _T.GRANTED for t in (a, b, c))
    alloc = after.tickets[b].allocation
    bad = evolve(after, tickets=after.tickets.set(b, evolve(after.tickets[b], state=_T.PENDING, allocation=None,
                                                            age=m.tickets[b].age + 1)),
                 ledger=evolve(after.ledger, allocations=after.ledger.allocations.delete(alloc),
                               authorities=after.ledger.authorities.set(
                                   DEV, evolve(after.ledger.authorities[DEV], used=3))))
    message = _judge(m, act, bad)[0] or ""
    assert message.startswith(f"I13: {act!r}: ticket {b} (1 B, priority 1, age ") and f"ticket(s) [{c}]" in message


def _dev_round_passes_a_over(*host_waiters: int) -> tuple[Any, ...]:
    """HOST holds 4 B with waiters of `host_waiters` B (submitted first, so the lowest ticket ids); on DEV (3 + 1 B
    held) a (3 B, priority 1) and b (1 B) wait, and the release of DEV's 3 B grants a. Returns the state before, that
    release, the spec's step, HOST's lease, HOST's waiters, a, b, and the step's tickets and authorities with a
    passed over by hand: a still waits (aged by the round) and b is granted in its place (DEV's used 2 B)."""
    m, host_lease = lease(start(), H1, HOST, 4)
    ws = []
    for n in host_waiters:
        m, w = run(m, M.Submit(H2, HOST, n))
        ws.append(w)
    m, big = lease(m, H1, DEV, 3)
    m, _ = lease(m, H1, DEV, 1)
    m, a = run(m, M.Submit(H2, DEV, 3, 1))
    m, b = run(m, M.Submit(H2, DEV, 1, 0))
    act = A.Release(H1, big)
    right = MG.step(m, act)[0]
    waits = evolve(right.tickets[a], state=_T.PENDING, allocation=None, age=m.tickets[a].age + 1)
    tickets = right.tickets.set(a, waits).set(b, evolve(right.tickets[b], state=_T.GRANTED))
    auths = right.ledger.authorities.set(DEV, evolve(right.ledger.authorities[DEV], used=2))
    return m, act, right, host_lease, ws, a, b, tickets, auths


def test_an_authority_whose_round_granted_nothing_does_not_hide_another_s() -> None:
    # HOST's waiter (submitted first) is considered and granted nothing; DEV's round passes a waiter over.
    m, act, right, _, _, a, b, tickets, auths = _dev_round_passes_a_over(2)
    assert right.tickets[a].state is _T.GRANTED and right.tickets[b].state is _T.PENDING
    bad = evolve(right, tickets=tickets, ledger=evolve(right.ledger, authorities=auths))
    assert (_judge(m, act, bad)[0] or "").startswith(f"I13: {act!r}: ticket {a} (3 B")


def test_aging_messages_name_the_expected_age() -> None:
    m, _ = lease(start(aging_bound=3), H1, DEV, 3)
    m, big = run(m, M.Submit(H2, DEV, 3))
    act = M.Submit(H2, DEV, 1)
    right, small = MG.step(m, act)
    lagging = evolve(right, tickets=right.tickets.set(big, m.tickets[big]))
    was = m.tickets[big].age
    assert _judge(m, act, lagging, small)[0] == (
        f"I13: {act!r}: ticket {big} (age {was}) was passed over by a round on authority {DEV} that granted "
        f"ticket(s) [{small}], but is aged {was}, not {was + 1} (bound 3, {3 - was} round(s) from maturity)")
    press = M.Press(H1, DEV, 1)
    fell = evolve(m, tickets=m.tickets.set(big, evolve(m.tickets[big], age=0)))
    m2 = evolve(m, tickets=m.tickets.set(big, evolve(m.tickets[big], age=2)))
    assert _judge(m2, press, fell, 1)[0] == f"I13: {press!r}: waiting ticket {big}'s age fell 2 -> 0"


def test_cases_are_counted_only_in_their_situations() -> None:
    m = start()
    # an immediate grant: one ticket considered and granted: neither case
    act = M.Submit(H1, DEV, 1)
    assert _judge(m, act, *MG.step(m, act)) == (None, {ORDER: (1, 0), AGING: (1, 0)})
    # a second waiter that does not fit: two considered, none granted: no order case; one stayed waiting: aging
    m, _ = lease(m, H1, DEV, 4)
    m, _ = run(m, M.Submit(H2, DEV, 2))
    act = M.Submit(H2, DEV, 3)
    assert _judge(m, act, *MG.step(m, act)) == (None, {ORDER: (1, 0), AGING: (1, 1)})
    # a press while a ticket waits: no round, but a waiter stayed: aging only
    press = M.Press(H1, DEV, 1)
    assert _judge(m, press, *MG.step(m, press)) == (None, {ORDER: (1, 0), AGING: (1, 1)})
    # two considered, one granted: both cases
    m2, big, (a, b) = _waiters((3, 1), (1, 0), held=3)
    act = A.Release(H1, big)
    assert _judge(m2, act, *MG.step(m2, act)) == (None, {ORDER: (1, 1), AGING: (1, 1)})


def test_a_ticket_submitted_by_the_step_and_passed_over_by_its_round_ages_from_zero() -> None:
    # A step (broken by hand) that both submits ticket n and grants the waiter ahead of it: n was passed over by
    # a round that granted another, so it is aged 1 (from 0: it did not exist before).
    m, big, (a,) = _waiters((3, 0), held=3)
    act = M.Submit(H2, DEV, 2)
    granted = MG.step(m, A.Release(H1, big))[0]
    n = m.next_ticket
    new = M.Ticket(n, H2, DEV, 2, 0, granted.tickets[a].role, 1, _T.PENDING, None)
    after = evolve(granted, tickets=granted.tickets.set(n, new), next_ticket=n + 1)
    assert _judge(m, act, after, n) == (None, {ORDER: (1, 1), AGING: (1, 1)})
    unaged = evolve(after, tickets=after.tickets.set(n, evolve(new, age=0)))
    assert (_judge(m, act, unaged, n)[0] or "").startswith(f"I13: {act!r}: ticket {n} (age 0) was passed over")


@pytest.mark.parametrize("host_gone", [True, False], ids=["authority-gone", "nobody-left-waiting"])
def test_a_round_on_another_authority_does_not_hide_this_one_s(host_gone: bool) -> None:
    # HOST's waiter (the lowest ticket id) is granted by hand, and either HOST is gone from the after-state (it has
    # no headroom to judge) or nobody waits on it (its round passed nobody over); DEV's round passes a fitting
    # waiter over, and is still judged.
    m, act, right, host_lease, (w,), a, _, tickets, auths = _dev_round_passes_a_over(2)
    bad = evolve(right, tickets=tickets.set(w, evolve(right.tickets[w], state=_T.GRANTED, allocation=host_lease)),
                 ledger=evolve(right.ledger, authorities=auths.delete(HOST) if host_gone else auths))
    assert [t for t in bad.tickets][0] == w and (HOST in bad.ledger.authorities) is not host_gone
    assert (_judge(m, act, bad)[0] or "").startswith(f"I13: {act!r}: ticket {a} (3 B")


def test_the_headroom_counts_each_granted_allocation_s_charge() -> None:
    # 4 B return: a (2 B, priority 2) and b (2 B, priority 1) fit; b is left waiting by hand while c (1 B) is
    # granted b's 2 B allocation (charged 2 B for its 1 B): b fit in the room c's charge took.
    m, big, (a, b, c) = _waiters((2, 2), (2, 1), (1, 0))
    act = A.Release(H1, big)
    right = MG.step(m, act)[0]
    assert [right.tickets[t].state for t in (a, b, c)] == [_T.GRANTED, _T.GRANTED, _T.PENDING]
    tb, tc = right.tickets[b], right.tickets[c]
    waits = evolve(tb, state=_T.PENDING, allocation=None, age=m.tickets[b].age + 1)
    bad = evolve(right, tickets=right.tickets.set(b, waits)
                 .set(c, evolve(tc, state=_T.GRANTED, allocation=tb.allocation)))
    assert (_judge(m, act, bad)[0] or "").startswith(f"I13: {act!r}: ticket {b} (2 B, priority 1")


def test_a_grant_ahead_leaves_only_what_it_did_not_take() -> None:
    # 4 B return: a (3 B, priority 2) granted leaves 1 B; b (2 B) does not fit; c (1 B) is granted: no harm.
    m, big, (a, b, c) = _waiters((3, 2), (2, 1), (1, 0))
    act = A.Release(H1, big)
    after = MG.step(m, act)[0]
    assert [after.tickets[t].state for t in (a, b, c)] == [_T.GRANTED, _T.PENDING, _T.GRANTED]
    assert _judge(m, act, after)[0] is None


def test_a_granted_ticket_taken_back_to_pending_may_not_lose_its_age() -> None:
    # a (3 B) was granted at age 1; an illegal un-grant puts it back to pending at age 0: it would wait behind
    # tickets it had matured past. The aging clause judges every ticket pending after the step that existed before.
    m, big, (a, _) = _waiters((3, 1), (1, 0), held=3)
    act = A.Release(H1, big)
    granted = MG.step(m, act)[0]
    assert granted.tickets[a].state is _T.GRANTED
    before = evolve(granted, tickets=granted.tickets.set(a, evolve(granted.tickets[a], age=1)))
    act = A.Release(H1, granted.tickets[a].allocation)
    after = evolve(before, tickets=before.tickets.set(a, evolve(before.tickets[a], state=_T.PENDING,
                                                                allocation=None, age=0)))
    assert _judge(before, act, after)[0] == f"I13: {act!r}: waiting ticket {a}'s age fell 1 -> 0"


def _granted_then_waiting() -> tuple[M.Manager, int, int]:
    """a (3 B) granted, b (1 B) waiting at age 2; a comes first in the ticket map's order."""
    m, big, (a, b) = _waiters((3, 1), (1, 0), held=3)
    granted = MG.step(m, A.Release(H1, big))[0]
    assert granted.tickets[a].state is _T.GRANTED and granted.tickets[b].state is _T.PENDING
    granted = evolve(granted, tickets=granted.tickets.set(b, evolve(granted.tickets[b], age=2)))
    assert [t for t in granted.tickets] == [a, b]
    return granted, a, b


def test_a_ticket_that_stayed_granted_does_not_hide_a_waiter_after_it() -> None:
    before, a, b = _granted_then_waiting()
    act = M.Press(H1, DEV, 1)
    after = evolve(before, tickets=before.tickets.set(b, evolve(before.tickets[b], age=1)))
    assert _judge(before, act, after)[0] == f"I13: {act!r}: waiting ticket {b}'s age fell 2 -> 1"


def test_a_retired_id_back_in_the_tickets_does_not_hide_a_waiter_after_it() -> None:
    # a is retired before the step; the after-state holds it again (an id below next_ticket that no submit of this
    # step issued: no waiter of this step's rounds) ahead of b, whose age falls.
    granted, a, b = _granted_then_waiting()
    before = evolve(granted, tickets=granted.tickets.delete(a))
    act = M.Press(H1, DEV, 1)
    after = evolve(before, tickets=before.tickets.set(a, evolve(granted.tickets[a], state=_T.PENDING,
                                                                allocation=None))
                   .set(b, evolve(before.tickets[b], age=1)))
    assert [t for t in after.tickets] == [a, b]
    assert _judge(before, act, after)[0] == f"I13: {act!r}: waiting ticket {b}'s age fell 2 -> 1"


def test_a_gone_authority_s_round_with_a_waiter_does_not_hide_another_authority_s() -> None:
    # As above, with a second HOST waiter left waiting (aged by the round, as it must be): HOST's round is read up
    # to its missing authority; DEV's round is still judged.
    m, act, right, host_lease, (w, w2), a, _, tickets, auths = _dev_round_passes_a_over(2, 3)
    bad = evolve(right, tickets=tickets.set(w, evolve(right.tickets[w], state=_T.GRANTED, allocation=host_lease))
                 .set(w2, evolve(right.tickets[w2], age=m.tickets[w2].age + 1)),
                 ledger=evolve(right.ledger, authorities=auths.delete(HOST)))
    assert [t for t in bad.tickets][:2] == [w, w2]
    assert (_judge(m, act, bad)[0] or "").startswith(f"I13: {act!r}: ticket {a} (3 B")
