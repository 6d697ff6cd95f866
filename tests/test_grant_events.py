"""Grant events (`ortmem-manager/2`, issue #21): a grant is its own action, legal at any later event while enabled.

refimpl writes each grant as a `grant` event right after the operation that made room; the replay steps
`spec.grants.GrantTicket` for it. These tests edit a recorded trace as another governor could have written it
(a grant later, ids renumbered) or as a broken one would (a grant too early, out of order, owed bytes given
away, a fitting waiter never granted, a figure missing), and read the verdict, its line and its clause.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from invariants.manager_replay import replay_manager_lines
from refimpl.tracing import boundary
from spec import manager as S
from spec import manager_actions as M
from spec.errors import CapacityDenied, GrantOutOfOrder, InvalidTransition, UnknownTicket
from spec.grants import GrantTicket, enabled_grants
from spec.guards import ALL_ON
from spec.types import Role, Tier

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
from conformance_ids import offset, rename_event  # noqa: E402
from trace_harness import traced

_D = Tier.DEVICE
Event = dict[str, Any]


def _record(script: Any) -> list[Event]:
    pmm, buf = traced()
    script(pmm)
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def _replay(events: list[Event]) -> Any:
    for n, e in enumerate(events, 1):
        e["source_sequence"] = n
    return replay_manager_lines([json.dumps(e).encode() for e in events])


def _two_waiters(pmm: Any) -> None:
    """Tickets 2 and 3 (20 B each) wait behind a 90 B lease on a 100 B ledger; its release grants both."""
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 100)
    big = pmm.claim(h, pmm.submit(h, a, 90, 0, Role.KV))
    t2, t3 = pmm.submit(h, a, 20, 0, Role.KV), pmm.submit(h, a, 20, 0, Role.KV)
    pmm.release(h, big)
    r2 = pmm.claim(h, t2)
    pmm.register_holder("late")  # an event naming neither ticket nor ledger
    r3 = pmm.claim(h, t3)
    pmm.release(h, r2)
    pmm.release(h, r3)


def _at(events: list[Event], kind: str, nth: int = 0, **ids: int) -> int:
    return [i for i, e in enumerate(events) if e["kind"] == kind and all(e["ids"].get(k) == v for k, v in ids.items())][nth]


def _used(e: Event) -> dict[str, int]:
    return e["payload"]["used"]


def _move(events: list[Event], i: int, j: int, charge: int) -> list[Event]:
    """Grant event `i` moved to just after event `j` (j > i) or just before it (j < i), as a governor that granted
    then would have written it: the events it passes report `used` without (or with) its `charge`."""
    events = copy.deepcopy(events)
    g = events[i]
    aid = next(iter(g["payload"]["used"]))
    lo, hi, sign = (i + 1, j + 1, -1) if j > i else (j, i, +1)
    for e in events[lo:hi]:
        if aid in _used(e):
            _used(e)[aid] += sign * charge
    out = events[:i] + events[i + 1:j + 1] + [g] + events[j + 1:] if j > i else events[:j] + [g] + events[j:i] + \
        events[i + 1:]
    k = out.index(g)
    g["payload"]["used"][aid] = next((_used(e)[aid] for e in reversed(out[:k]) if aid in _used(e)), 0) + charge
    return out


@pytest.fixture(scope="module")
def trace() -> list[Event]:
    return _record(_two_waiters)


def test_refimpl_writes_a_grant_event_after_the_operation_that_made_room(trace: list[Event]) -> None:
    rel = _at(trace, "release")
    assert [e["kind"] for e in trace[rel:rel + 3]] == ["release", "grant", "grant"]
    assert [e["ids"] for e in trace[rel + 1:rel + 3]] == [{"ticket": 2}, {"ticket": 3}]
    # The release's own figure leaves out what its grants charged; each grant's includes its own.
    assert [_used(e)["1"] for e in trace[rel:rel + 3]] == [0, 20, 40]
    assert {e["contract_revision"] for e in trace if e["kind"] == "grant"} == {"ortmem-manager/2"}
    assert _replay(copy.deepcopy(trace)).ok


@pytest.mark.parametrize("later", [1, 2])
def test_grant_moved_later_while_still_enabled_replays_clean(trace: list[Event], later: int) -> None:
    g = _at(trace, "grant", ticket=3)
    moved = _move(trace, g, g + later, 20)
    assert moved[g + later]["kind"] == "grant"
    r = _replay(moved)
    assert r.ok, r.describe()


def test_grant_moved_past_its_claim_is_rejected_at_the_claim(trace: list[Event]) -> None:
    """Control for the test above: one event further, the claim names a ticket still pending."""
    g = _at(trace, "grant", ticket=3)
    claim = _at(trace, "claim", ticket=3)
    r = _replay(_move(trace, g, claim, 20))
    assert not r.ok and r.line == claim and r.failure == "violation", r.describe()


@pytest.mark.parametrize(("dropped", "named"), [((3,), "ticket 53"), ((2, 3), "tickets 52, 53")])
def test_a_dropped_grant_event_is_named_where_its_bytes_show(trace: list[Event], dropped: tuple[int, ...],
                                                            named: str) -> None:
    """The governor granted the tickets but wrote no grant event: the next figure of their ledger has the bytes (the
    claim of ticket 2; with both dropped, the release's own figure, as a governor granting inside it writes), and
    the message says which grants are missing, in the trace's numbering, not only that the figures differ."""
    renamed = [rename_event(e, offset({"ticket": 50})) for e in trace]
    gone = [_at(trace, "grant", ticket=t) for t in dropped]
    at = _at(trace, "claim", ticket=2) if len(dropped) == 1 else _at(trace, "release")
    _used(renamed[at])["1"] = 40
    kept = [e for i, e in enumerate(renamed) if i not in gone]
    line = at + 1 - sum(g < at for g in gone)
    r = _replay(kept)
    assert (r.ok, r.line, r.failure) == (False, line, "refinement"), r.describe()
    assert r.message.endswith(f"the spec's figure with {named} granted is 40 B: a grant event is missing (each "
                              "grant is its own event)"), r.message
    # Control: a figure the missing grants do not explain is named as a figure, not as a missing grant.
    _used(kept[line - 1])["1"] = 39
    r = _replay(kept)
    assert r.message.endswith("the governor observed 39 B used on authority 1, the spec has "
                              f"{40 - 20 * len(dropped)} B"), r.message


def test_grant_before_the_event_that_made_room_is_an_over_grant(trace: list[Event]) -> None:
    rel, g = _at(trace, "release"), _at(trace, "grant", ticket=2)
    r = _replay(_move(trace, g, rel, 20))
    assert (r.ok, r.line, r.failure, r.id) == (False, rel + 1, "violation", "I2"), r.describe()
    assert "CapacityDenied" in r.message and "ticket 2" in r.message


def test_grant_out_of_arbitration_order_is_rejected(trace: list[Event]) -> None:
    g2, g3 = _at(trace, "grant", ticket=2), _at(trace, "grant", ticket=3)
    bad = copy.deepcopy(trace)
    bad[g2]["ids"], bad[g3]["ids"] = bad[g3]["ids"], bad[g2]["ids"]  # same figures: only the order differs
    bad[g2]["payload"]["result"], bad[g3]["payload"]["result"] = trace[g3]["payload"]["result"], \
        trace[g2]["payload"]["result"]
    r = _replay(bad)
    assert (r.ok, r.line, r.failure, r.id) == (False, g2 + 1, "violation", "I13"), r.describe()
    assert "GrantOutOfOrder" in r.message and "ticket 2 fits and comes first" in r.message


def test_out_of_order_grant_with_the_rule_broken_is_still_caught_by_grant_order(trace: list[Event]) -> None:
    """Two checks: `GrantTicket`'s order rule, and the step clause `grant_order` (invariants.manager_order),
    which judges the grant from the tickets' own fields. With the rule broken by hand, the clause still fails."""
    from invariants.mutation import Mutant, applied
    from spec.guards import Layer
    g2, g3 = _at(trace, "grant", ticket=2), _at(trace, "grant", ticket=3)
    bad = copy.deepcopy(trace)
    bad[g2]["ids"], bad[g3]["ids"] = bad[g3]["ids"], bad[g2]["ids"]
    for k in ("result", "charges"):  # each grant observes the allocation it creates
        bad[g2]["payload"][k], bad[g3]["payload"][k] = trace[g3]["payload"][k], trace[g2]["payload"][k]
    broken = Mutant("grant_rule_ignores_order", ("I13",), "manager", Layer.REFIMPL, "spec.grants",
                    "    if first is not t:\n", "    if first is None:\n", "only the matured-misfit stop is checked")
    with applied(broken):
        r = _replay(copy.deepcopy(bad))
    assert (r.ok, r.line, r.failure, r.id) == (False, g2 + 1, "violation", "I13"), r.describe()
    assert "GrantOutOfOrder" not in r.message and "grant order" in r.message, r.message


def test_renumbered_grant_allocations_replay_clean(trace: list[Event]) -> None:
    renamed = [rename_event(e, offset({"allocation": 1000, "ticket": 50})) for e in trace]
    assert {e["payload"]["result"] for e in renamed if e["kind"] == "grant"} == {1001, 1002, 1003}
    r = _replay(renamed)
    assert r.ok, r.describe()


def test_grant_result_naming_another_allocation_is_rejected(trace: list[Event]) -> None:
    """Control: the claim must name the allocation the grant event bound, not any other."""
    bad = copy.deepcopy(trace)
    p = bad[_at(trace, "grant", ticket=2)]["payload"]
    p["charges"] = {"77": p["charges"].pop(str(p["result"]))}  # the grant observes the allocation it names
    p["result"] = 77
    r = _replay(bad)
    assert not r.ok and r.line == _at(trace, "claim", ticket=2) + 1 and r.failure == "refinement", r.describe()


def test_missing_used_figure_of_a_grant_is_rejected(trace: list[Event]) -> None:
    bad = copy.deepcopy(trace)
    g = _at(trace, "grant", ticket=2)
    bad[g]["payload"]["used"] = {}
    r = _replay(bad)
    assert (r.ok, r.line, r.failure) == (False, g + 1, "refinement"), r.describe()
    assert "changed used of authority 1 but the event does not say so" in r.message


def test_wrong_used_figure_of_a_grant_is_rejected(trace: list[Event]) -> None:
    bad = copy.deepcopy(trace)
    g = _at(trace, "grant", ticket=3)
    bad[g]["payload"]["used"] = {"1": 20}  # as if the second grant charged nothing
    r = _replay(bad)
    assert (r.ok, r.line, r.failure) == (False, g + 1, "refinement"), r.describe()
    assert r.message.endswith("the spec has 40 B"), r.message  # no grant owed explains it: nothing added


def test_fitting_waiter_never_granted_is_a_leftover(trace: list[Event]) -> None:
    rel = _at(trace, "release")
    r = _replay(copy.deepcopy(trace[:rel + 1]))  # the trace ends right after the release: no grant followed
    assert (r.ok, r.line, r.failure) == (False, None, "leftover"), r.describe()
    assert "ticket 2 fits on authority 1" in r.message and "never granted" in r.message


def test_fitting_waiter_at_a_declared_boundary_is_no_leftover(trace: list[Event]) -> None:
    """Control: the same prefix ending at a boundary (the grant in flight) replays clean."""
    rel = _at(trace, "release")
    events = copy.deepcopy(trace[:rel + 1])
    events.append({"contract_revision": "ortmem-manager/2", "topology_epoch": events[-1]["topology_epoch"],
                   "source": events[0]["source"], "source_sequence": 0, "kind": "boundary", "ids": {}, "payload": {}})
    r = _replay(events)
    assert r.ok, r.describe()


def _owed_then(pmm: Any) -> None:
    """Ticket 2 (50 B) waits behind 90 B; the release grants it; then a direct reservation and a newcomer."""
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 100)
    big = pmm.claim(h, pmm.submit(h, a, 90, 0, Role.KV))
    pmm.submit(h, a, 50, 0, Role.KV)
    pmm.release(h, big)
    pmm.reserve(h, a, _D, 10, Role.STAGING)
    pmm.submit(h, a, 30, 5, Role.KV)  # a newcomer of higher priority: granted at once
    boundary(pmm)


def test_newcomer_put_ahead_of_an_owed_grant_is_rejected() -> None:
    events = _record(_owed_then)
    g, sub = _at(events, "grant", ticket=2), _at(events, "submit", 2)
    r0 = _replay(copy.deepcopy(events))
    assert r0.ok, r0.describe()
    r = _replay(_move(events, g, sub, 50))  # ticket 2's grant written after the newcomer's submit
    assert (r.ok, r.line, r.failure, r.id) == (False, sub, "violation", "I13"), r.describe()
    assert "newcomer ticket 3" in r.message and "ticket 2 fit" in r.message


def test_reservation_taking_owed_bytes_is_rejected() -> None:
    events = _record(_owed_then)
    g, res = _at(events, "grant", ticket=2), _at(events, "reserve")
    bad = _move(events, g, res, 50)  # ticket 2's grant written after the direct reservation...
    res -= 1
    bad[res]["payload"]["nbytes"] = 60  # ...which took 60 of the 100 B free: ticket 2's 50 B no longer fit
    rid = str(bad[res]["payload"]["result"])
    bad[res]["payload"]["used"]["1"] += 50
    bad[res]["payload"]["charges"][rid] = 60
    r = _replay(bad)
    assert (r.ok, r.line, r.failure, r.id) == (False, res + 1, "violation", "I13"), r.describe()
    assert "took its room (40 B free, it needs 50 B)" in r.message


def test_reservation_leaving_room_for_the_owed_grant_is_legal() -> None:
    """Control: the same reservation of 10 B leaves 60 B: ticket 2 still fits, nothing owed was taken."""
    events = _record(_owed_then)
    g, res = _at(events, "grant", ticket=2), _at(events, "reserve")
    r = _replay(_move(events, g, res, 50))
    assert r.ok, r.describe()


def test_a_revision_1_trace_is_refused_as_an_unknown_revision(trace: list[Event]) -> None:
    """`ortmem-manager/1` (no grant event, each grant implied in the step that made room) is retired: its first
    event is refused, naming the one revision replay reads."""
    old = [{**e, "contract_revision": "ortmem-manager/1"} for e in trace if e["kind"] != "grant"]
    r = _replay(old)
    assert r.describe() == ("REJECTED at line 1 (unknown-revision): replay reads 'ortmem-manager/2' only, got "
                            "'ortmem-manager/1'")
    assert _replay(trace).ok  # control: the same trace in /2


# --- the spec's GrantTicket on its own --------------------------------------------------------------------


def _waiting() -> M.Manager:
    """Tickets 2 and 3 (20 B each) pending on a 100 B ledger with 90 B free (rounds not granting)."""
    from spec import ledger_actions as A
    m = M.initial()
    for act in (A.RegisterHolder("h"), A.RegisterAuthority("gpu0", _D, 100)):
        m = S.step(m, act)[0]
    m, t1 = S.step(m, M.Submit(1, 1, 90, 0, Role.KV))
    m = S.step(m, M.Claim(1, t1))[0]
    for _ in range(2):
        m = S.step(m, M.Submit(1, 1, 20, 0, Role.KV), eager=False)[0]
    return m


@pytest.mark.parametrize("tid, error, match", [
    (3, CapacityDenied, r"20 B asked, 10 B free"),
    (1, InvalidTransition, r"not pending"),
    (9, UnknownTicket, r"never issued"),
])
def test_GrantTicket_rejects_and_changes_nothing(tid: int, error: type, match: str) -> None:
    m = _waiting()
    with pytest.raises(error, match=match):
        S.step(m, GrantTicket(tid), eager=False)


def test_GrantTicket_rejects_out_of_order_and_changes_nothing() -> None:
    from spec import ledger_actions as A
    m = _waiting()
    m = S.step(m, A.Release(1, 1), eager=False)[0]  # 100 B free: both fit, ticket 2 first
    assert enabled_grants(m, ALL_ON) == {1: 2}
    with pytest.raises(GrantOutOfOrder, match=r"ticket 2 fits and comes first"):
        S.step(m, GrantTicket(3), eager=False)
    m2, alloc = S.step(m, GrantTicket(2), eager=False)
    assert m2.tickets[2].allocation == alloc and m2.ledger.authorities[1].used == 20
    assert enabled_grants(m2, ALL_ON) == {1: 3}


def test_eager_round_and_explicit_grants_reach_the_same_state() -> None:
    """One rule: the eager round's grants equal GrantTicket applied to each enabled ticket in turn."""
    from spec import ledger_actions as A
    m = _waiting()
    eager = S.step(m, A.Release(1, 1))[0]
    lazy = S.step(m, A.Release(1, 1), eager=False)[0]
    while (owed := enabled_grants(lazy, ALL_ON)):
        lazy = S.step(lazy, GrantTicket(owed[1]), eager=False)[0]
    assert lazy == eager
    assert not enabled_grants(eager, ALL_ON)


def _granted_then_cancelled(pmm: Any) -> None:
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 100)
    big = pmm.claim(h, pmm.submit(h, a, 90, 0, Role.KV))
    t2 = pmm.submit(h, a, 20, 0, Role.KV)
    pmm.release(h, big)
    pmm.cancel_ticket(h, t2)


def test_cancel_of_a_ticket_whose_grant_is_owed_is_rejected() -> None:
    """A lazy grant must not be visible to the ticket's holder: its cancel found it waiting although it fit."""
    events = _record(_granted_then_cancelled)
    g = _at(events, "grant", ticket=2)
    bad = copy.deepcopy(events[:g] + events[g + 1:])  # never granted; the cancel retires a pending ticket
    cancel = _at(bad, "cancel_ticket")
    bad[cancel]["payload"]["result"] = 0
    r = _replay(bad)
    assert (r.ok, r.line, r.failure, r.id) == (False, cancel + 1, "violation", "I13"), r.describe()
    assert "while its grant was owed" in r.message
    assert _replay(copy.deepcopy(events)).ok  # control: granted first, then cancelled (20 B credited)


def test_unwritten_grants_names_the_owed_tickets_only() -> None:
    """The message helper names the tickets its grants would make, not a ticket that still waits (95 B does not fit
    once tickets 2 and 3 took 40 of 100 B), and nothing where no grant is owed or the figure is another."""
    from invariants.replay_grants import unwritten_grants
    from invariants.replay_ids import IdMap
    from spec import ledger_actions as A
    ids = IdMap(lambda kind, i: False)  # nothing bound: spec ids quoted as they are
    m = S.step(_waiting(), M.Submit(1, 1, 95, 0, Role.KV), eager=False)[0]
    m = S.step(m, A.Release(1, 1), eager=False)[0]
    assert unwritten_grants(m, 1, 40, ids) == ("; the spec's figure with tickets 2, 3 granted is 40 B: a grant event "
                                               "is missing (each grant is its own event)")
    assert unwritten_grants(m, 1, 39, ids) == ""
    assert unwritten_grants(_waiting(), 1, 90, ids) == ""  # nothing fits: no grant owed
