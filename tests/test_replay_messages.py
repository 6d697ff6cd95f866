"""Replay's rejection messages name every id in the trace's own numbering (issue #21), spec text included.

A foreign governor may issue any fresh ids; the replay maps them to the spec's. Where a message quotes the
spec (a refusal, a predicate's violation with the spec's action in it), the spec's ids are rewritten to the
trace's (`invariants.replay_ids.IdMap.observed_text`): the implementer reads "ticket 502" where the trace says
502, never the spec's 2. Each fault is planted in a composed trace refimpl writes, then the trace is renumbered
per kind (`conformance_ids`); the same fault in the trace as written gives the same message in the spec's
numbers, and the same verdict either way.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from invariants import manager_replay as MR
from invariants._violation import InvariantViolation
from invariants.manager_replay import replay_manager_lines
from invariants.replay_ids import IdMap
from spec import errors as E
from spec import ledger_actions as A
from spec.types import Role, Tier

sys.path.insert(0, str(Path(__file__).parent / "conformance"))
from conformance_ids import offset, renamed  # noqa: E402
from trace_harness import lines_of, traced

#: Each kind moved by its own offset, so an id rewritten as the wrong kind shows.
_OFFSETS = {"authority": 100, "holder": 200, "allocation": 300, "ticket": 500}
_IDENTITY: dict[str, int] = {}


def _trace() -> list[bytes]:
    """Holders 1, 2; authority 1 (64 B); leases 1, 2, 3; a refused foreign release; tickets 1, 2 granted, 3 waits."""
    p, buf = traced()
    h1, h2 = p.register_holder("weights"), p.register_holder("kv")
    a = p.register_authority("hbm", Tier.DEVICE, 64)
    big, small = p.reserve(h1, a, Tier.DEVICE, 32, Role.STAGING), p.reserve(h1, a, Tier.DEVICE, 16, Role.STAGING)
    p.commit(h1, big, 32)
    p.commit(h1, small, 16)
    p.release(h1, small)  # line 9
    p.commit(h1, p.reserve(h1, a, Tier.DEVICE, 32, Role.STAGING), 32)
    with pytest.raises(E.ForeignHolder):
        p.release(h2, big)  # line 12
    t1, t2, t3 = p.submit(h2, a, 16), p.submit(h2, a, 16), p.submit(h2, a, 48)
    p.release(h1, big)  # line 16; the grants of tickets 1 and 2 follow (lines 17, 18)
    p.claim(h2, t1)
    p.claim(h2, t2)
    p.cancel_ticket(h2, t3)
    return lines_of(buf)


def _event(lines: list[bytes], line: int) -> dict[str, Any]:
    return json.loads(lines[line - 1])


def _planted(line: int, change: Callable[[dict[str, Any]], None]) -> list[bytes]:
    """The trace up to `line`, that event changed by `change` (in the spec's numbers, as refimpl wrote it)."""
    lines = _trace()
    ev = _event(lines, line)
    change(ev)
    return [*lines[:line - 1], json.dumps(ev).encode() + b"\n"]


def test_the_trace_replays_clean_as_written_and_renumbered() -> None:
    lines = _trace()
    assert [_event(lines, n)["kind"] for n in (9, 12, 17, 18)] == ["release", "release", "grant", "grant"]
    assert _event(lines, 12)["payload"]["error"] == "ForeignHolder"
    for offsets in (_IDENTITY, _OFFSETS):
        r = replay_manager_lines(renamed(lines, offset(offsets)))
        assert r.ok and r.events == len(lines), r.describe()


#: name -> (line, the fault, failure, ID, the whole message given each kind's offset `o`).
_FAULTS: dict[str, tuple[int, Callable[[dict[str, Any]], None], str, str | None, Callable[[Any], str]]] = {
    # A grant out of arbitration order: the spec's GrantTicket refusal names both tickets.
    "out-of-order-grant": (17, lambda ev: ev["ids"].update(ticket=2), "violation", "I13", lambda o: (
        f"GrantTicket(ticket={o('ticket', 2)}) was accepted but the spec refuses it: GrantOutOfOrder: grant of "
        f"ticket {o('ticket', 2)} out of arbitration order: ticket {o('ticket', 1)} fits and comes first (I13)")),
    # An over-grant: 48 B granted with 32 B free; the refusal names the ticket and its authority.
    "over-grant": (17, lambda ev: ev["ids"].update(ticket=3), "violation", "I2", lambda o: (
        f"GrantTicket(ticket={o('ticket', 3)}) was accepted but the spec refuses it: CapacityDenied: grant of "
        f"ticket {o('ticket', 3)}: 48 B asked, 32 B free on authority {o('authority', 1)} (I2; with the tier's "
        "quota, I1)")),
    # A refusal whose class differs from the spec's (whose precondition fails): the spec's refusal is quoted.
    "other-refusal": (12, lambda ev: ev["payload"].update(error="CapacityDenied"), "refinement", None, lambda o: (
        f"Release(holder={o('holder', 2)}, allocation={o('allocation', 1)}) was rejected with CapacityDenied, the "
        f"spec raises ForeignHolder: allocation {o('allocation', 1)} belongs to holder {o('holder', 1)}, not "
        f"holder {o('holder', 2)}")),
    # A foreign release accepted: the spec's refusal names the lease and both holders.
    "accepted-refusal": (12, lambda ev: ev["payload"].update(outcome="accepted", error=None), "violation", "I6",
                         lambda o: (
        f"Release(holder={o('holder', 2)}, allocation={o('allocation', 1)}) was accepted but the spec refuses it: "
        f"ForeignHolder: allocation {o('allocation', 1)} belongs to holder {o('holder', 1)}, not holder "
        f"{o('holder', 2)}")),
    # A double credit (a 16 B release observed as 48 B off): the predicate names the spec's action and authority.
    "double-credit": (9, lambda ev: ev["payload"].update(used={"1": 0}), "violation", "I1", lambda o: (
        f"I1: Release(holder={o('holder', 1)}, allocation={o('allocation', 2)}): authority {o('authority', 1)} used "
        "moved -48 B, charges moved -16 B")),
}


@pytest.mark.parametrize("offsets", [_IDENTITY, _OFFSETS], ids=["as-written", "renumbered"])
@pytest.mark.parametrize("fault", _FAULTS)
def test_a_planted_fault_is_named_in_the_traces_numbering(fault: str, offsets: dict[str, int]) -> None:
    line, change, failure, clause, message = _FAULTS[fault]
    o = offset(offsets)
    r = replay_manager_lines(renamed(_planted(line, change), o))
    assert (r.ok, r.line, r.failure, r.id) == (False, line, failure, clause), r.describe()
    assert r.message == message(o)


@pytest.mark.parametrize("fault", _FAULTS)
def test_a_renumbered_message_names_no_spec_id(fault: str) -> None:
    """Every id the message names after a kind word is one the renumbered trace issued (offset, so above 100)."""
    line, change, *_ = _FAULTS[fault]
    r = replay_manager_lines(renamed(_planted(line, change), offset(_OFFSETS)))
    named = re.findall(r"\b(?:authority|holder|allocation|ticket)[ =](\d+)", r.message)
    assert named and all(int(i) > 100 for i in named), r.message


def test_an_id_the_trace_never_issued_is_named_as_the_trace_wrote_it() -> None:
    """The renumbered trace's ticket 2 was never issued; the spec's ticket 2 is the trace's 502: not confused."""
    lines = renamed(_trace(), offset(_OFFSETS))
    ev = {**_event(lines, len(lines)), "source_sequence": len(lines) + 1, "kind": "cancel_ticket",
          "ids": {"holder": 202, "ticket": 2}}
    ev["payload"] = {**ev["payload"], "outcome": "rejected", "error": "ForeignHolder", "result": None}
    r = replay_manager_lines([*lines, json.dumps(ev).encode() + b"\n"])
    assert (r.line, r.failure) == (len(lines) + 1, "refinement"), r.describe()
    assert r.message == ("CancelTicket(holder=202, ticket=2) was rejected with ForeignHolder, the spec raises "
                         "UnknownTicket: ticket 2 was never issued")


def _ids() -> IdMap:
    """Authority 1 -> 101, allocation 3 -> 303, tickets 1, 2 -> 501, 502 (ticket 4 unbound)."""
    ids = IdMap(lambda kind, i: True)
    for kind, spec in (("authority", 1), ("allocation", 3), ("ticket", 1), ("ticket", 2)):
        ids.bind(kind, spec + _OFFSETS[kind], spec)
    return ids


@pytest.mark.parametrize(("text", "shown"), [
    ("tickets [1, 2, 4] wait on authority 1", "tickets [501, 502, 4] wait on authority 101"),
    ("later ticket(s) [2] were granted", "later ticket(s) [502] were granted"),
    ("reissued allocation id 3", "reissued allocation id 303"),
    ("allocation 3: lease 3 B not covered by reservation 3 B", "allocation 303: lease 3 B not covered by reservation "
                                                              "3 B"),  # "lease": bytes follow
    ("ticket 12 and authority 11", "ticket 12 and authority 11"),  # unbound: as is, never a prefix of 1
    ("reticket 1, ticket 1x", "reticket 1, ticket 1x"),  # whole words and numbers only
])
def test_observed_text_rewrites_each_id_after_a_kind_word(text: str, shown: str) -> None:
    assert _ids().observed_text(text) == shown


#: Every kind of id, each spec id 3 bound to its own observed id.
_EVERY_KIND = {"authority": 13, "holder": 23, "allocation": 33, "allowance": 43, "ticket": 53, "pressure": 63,
               "tx": 73, "bundle": 83, "view": 93}


@pytest.mark.parametrize(("word", "kind"), [
    ("authority", "authority"), ("alias", "authority"), ("holder", "holder"), ("allocation", "allocation"),
    ("allowance", "allowance"), ("ticket", "ticket"), ("pressure", "pressure"), ("transaction", "tx"), ("tx", "tx"),
    ("intent", "tx"), ("bundle", "bundle"), ("view", "view")])
def test_each_kind_word_names_its_kind(word: str, kind: str) -> None:
    ids = IdMap(lambda kind, i: True)
    for k, obs in _EVERY_KIND.items():
        ids.bind(k, obs, 3)
    obs = _EVERY_KIND[kind]
    assert ids.observed_text(f"{word} 3 and {word}s [3]") == f"{word} {obs} and {word}s [{obs}]"


def test_observed_text_writes_the_spec_action_as_the_trace_wrote_it_and_never_rewrites_it() -> None:
    """The trace's action names a pool "ticket 1": left as written, while the spec's text around it is rewritten."""
    ids = _ids()
    act = A.RegisterAuthority("ticket 1", Tier.DEVICE, 64)
    assert ids.observed_text(f"{act!r}: ticket 1", act, act) == f"{act!r}: ticket 501"
    sact, obs = A.Release(1, 3), A.Release(201, 303)
    assert ids.observed_text(f"I1: {sact!r}: authority 1", obs, sact) == f"I1: {obs!r}: authority 101"


def _fake_step_violation(m: Any, act: Any, nxt: Any, result: Any) -> None:
    if isinstance(act, A.Release) and act.holder == 1:  # the lease's release (line 9): name it as a predicate would
        raise InvariantViolation("I1", f"{act!r}: authority {nxt.ledger.allocations[1].authority} credited twice")


def _fake_state_violation(m: Any) -> None:
    if m.tickets:
        raise InvariantViolation("I13", f"ticket {min(m.tickets)} left waiting")


@pytest.mark.parametrize(("site", "fake", "message"), [
    ("check_step", _fake_step_violation, "I1: Release(holder=201, allocation=302): authority 101 credited twice"),
    ("check_all", _fake_state_violation, "I13: ticket 503 left waiting"),  # checked at line 20
])
def test_a_step_or_state_predicates_violation_is_named_in_the_traces_numbering(
        monkeypatch: pytest.MonkeyPatch, site: str, fake: Callable[..., None], message: str) -> None:
    """The spec's own steps keep the cross-cutting predicates, so a stand-in predicate fails here, in spec ids."""
    monkeypatch.setattr(MR, site, fake)
    r = replay_manager_lines(renamed(_trace(), offset(_OFFSETS)))
    assert (r.ok, r.failure, r.message) == (False, "violation", message), r.describe()
