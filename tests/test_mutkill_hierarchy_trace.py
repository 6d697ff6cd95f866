"""Survivors of invariants/hierarchy_trace.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from invariants import hierarchy_trace as HT
from invariants._violation import InvariantViolation
from invariants.hierarchy_machine import Crash, Lose, SpawnHeld, campaign_step
from invariants.hierarchy_scope import SCRIPT_CONFIG
from invariants.replay import MAX_LINE_BYTES, ReplayResult
from spec import hierarchy as H
from spec.errors import GovernorError

#: A run with a lost reply, a held spawn, a crash and a refused call (line 8): every way an event is written.
_RUN = (H.Spawn(), H.Request(1, 1, 1, 6), Lose(H.Request(1, 1, 2, 2)), SpawnHeld(), H.Hello(2),
        Crash(H.Request(2, 1, 1, 3), H.MESSAGE_LOST), H.Return(1, 1, 1, 2), H.Arbitrate(), H.Kill(1))
_CLEAN = ReplayResult(True, 10, None, None, None, "no violation")


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    """The run's trace written from the spec's own steps and figures (no processes: mutmut runs these tests;
    tests/test_hierarchy_trace.py replays a real coordinator's)."""
    out = [HT.configure_event("coordinator", SCRIPT_CONFIG)]
    s = H.new_hierarchy(*SCRIPT_CONFIG)
    for seq, act in enumerate(_RUN, 2):
        err, result = None, None
        try:
            s, result = campaign_step(s, act)
        except GovernorError as e:
            err = e
        out.append(HT.encode_event("coordinator", seq, act, err, result, HT.observed(s)))
    return out


def _lines(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e).encode() for e in events]


def _replay(events: list[dict[str, Any]], i: int, **change: Any) -> ReplayResult:
    """The trace with event i's top-level fields changed (None-valued `drop=` removes a key)."""
    evs = json.loads(json.dumps(events))
    for k in change.pop("drop", ()):
        del evs[i][k]
    evs[i].update(change)
    return HT.replay_hierarchy(_lines(evs))


def _bad(line: int, failure: str, message: str, id: str | None = None, events: int | None = None) -> ReplayResult:
    return ReplayResult(False, line - 1 if events is None else events, line, failure, id, message)


def test_the_run_is_written_whole_and_replays_clean(events) -> None:
    assert events[0] == HT.configure_event("coordinator", SCRIPT_CONFIG) == {
        "contract_revision": "ortmem-hierarchy/2", "source": "coordinator", "source_sequence": 1, "kind": "configure",
        "args": {"serving_quota": 10, "machine": 16, "aging_cap": 2}, "outcome": "accepted", "error": None,
        "result": None, "observed": {"free": 10, "quota": {}, "epoch": {}, "state": {}}}
    assert [e["kind"] for e in events] == ["configure", "spawn", "request", "lose", "spawn_held", "hello", "crash",
                                           "return", "arbitrate", "kill"]
    assert events[2]["result"] == ["granted", 6]
    assert events[3]["args"] == {"act": {"kind": "request", "args": {"worker": 1, "epoch": 1, "seq": 2, "nbytes": 2,
                                                                      "priority": 0, "authentic": True,
                                                                      "fate": "delivered"}}, "fate": "reply-lost"}
    assert (events[7]["outcome"], events[7]["error"], events[7]["result"]) == ("rejected", "ReplayedMessage", None)
    assert events[9]["observed"] == {"free": 10, "quota": {"1": 0, "2": 0}, "epoch": {"1": 2, "2": 1},
                                     "state": {"1": "exited", "2": "active"}}
    assert HT.replay_hierarchy(_lines(events)) == _CLEAN


def test_line_size_bound_is_exact(events) -> None:
    lines = _lines(events)
    pad = MAX_LINE_BYTES + 1 - len(lines[2])  # a trailing newline's worth over the bound still parses
    assert HT.replay_hierarchy(lines[:2] + [lines[2] + b" " * pad] + lines[3:]) == _CLEAN
    over = lines[:2] + [lines[2] + b" " * (pad + 1)] + lines[3:]
    assert HT.replay_hierarchy(over) == _bad(3, "oversize", f"line longer than {MAX_LINE_BYTES} bytes")
    assert HT.replay_hierarchy(lines[:1] + [b"{"]) == _bad(
        2, "bad-json", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)")
    deep = b"[" * 30_000  # within the size bound, past the parser's depth: refused typed, not raised
    assert HT.replay_hierarchy(lines[:1] + [deep]) == _bad(
        2, "bad-json", "maximum recursion depth exceeded while decoding a JSON array from a unicode string")


def test_envelope_refusals_name_their_whole_message(events) -> None:
    keys = "an event has exactly the keys ['contract_revision', 'source', 'source_sequence', 'kind', 'args', " \
           "'outcome', 'error', 'result', 'observed']"
    assert HT.replay_hierarchy(_lines(events[:1]) + [b"[]"]) == _bad(2, "malformed", keys)
    assert _replay(events, 1, drop=["observed"]) == _bad(2, "malformed", keys)
    assert _replay(events, 1, extra=1) == _bad(2, "malformed", keys)
    assert _replay(events, 0, contract_revision="ortmem-hierarchy/1") == _bad(
        1, "unknown-revision", "unknown contract revision 'ortmem-hierarchy/1'")
    assert _replay(events, 1, contract_revision="r" * 100) == _bad(
        2, "unknown-revision", f"unknown contract revision {'r' * 64!r}")
    assert _replay(events, 1, args=[]) == _bad(2, "malformed", "args must be an object")
    assert _replay(events, 0, args=[]) == _bad(1, "malformed", "args must be an object")
    assert _replay(events, 1, kind="zzz") == _bad(2, "malformed", "unknown event kind 'zzz'")
    assert _replay(events, 1, kind=5) == _bad(2, "malformed", "unknown event kind '5'")
    assert _replay(events, 1, kind=[]) == _bad(2, "malformed", "unknown event kind '[]'")  # unhashable: not looked up
    assert _replay(events, 1, kind="k" * 100) == _bad(2, "malformed", f"unknown event kind {'k' * 64!r}")
    assert _replay(events, 1, args={"x": 1}) == _bad(2, "malformed", "spawn args must be exactly []")
    hello = "hello args must be exactly ['worker', 'authentic', 'fate']"
    assert _replay(events, 5, args={"worker": 2, "authentic": True}) == _bad(6, "malformed", hello)
    outcome = "outcome is accepted (error null) or rejected (error named)"
    assert _replay(events, 1, outcome="maybe") == _bad(2, "malformed", outcome)
    assert _replay(events, 1, error="ReplayedMessage") == _bad(2, "malformed", outcome)
    assert _replay(events, 7, error=None) == _bad(8, "malformed", outcome)
    assert _replay(events, 7, error="Nope") == _bad(8, "malformed", "unknown error class 'Nope'")
    assert _replay(events, 7, error="E" * 100) == _bad(8, "malformed", f"unknown error class {'E' * 64!r}")


def test_a_faults_inner_action_is_checked_whole(events) -> None:
    shape = "lose's act is {kind, args} of one of ['answer', 'arbitrate', 'free', 'hello', 'request', 'return']"
    inner = events[3]["args"]["act"]
    for act in ([], {"kind": "request"}, {**inner, "x": 0}, {**inner, "kind": "spawn"}, {**inner, "kind": 3},
                {**inner, "args": []}):
        assert _replay(events, 3, args={**events[3]["args"], "act": act}) == _bad(4, "malformed", shape), act
    narrow = {**inner, "args": {k: v for k, v in inner["args"].items() if k != "priority"}}
    assert _replay(events, 3, args={**events[3]["args"], "act": narrow}) == _bad(
        4, "malformed", "lose's request args must be exactly "
                        "['worker', 'epoch', 'seq', 'nbytes', 'priority', 'authentic', 'fate']")
    # the fault's own fate is read: a lost message was never applied, so the figures of an applied one differ
    r = _replay(events, 3, args={**events[3]["args"], "fate": "message-lost"})
    assert (r.ok, r.line, r.failure) == (False, 4, "refinement")
    assert r.message.startswith("Lose(act=Request(worker=1, epoch=1, seq=2, nbytes=2, priority=0, authentic=True, "
                                "fate='delivered'), fate='message-lost'): observed "), r.message
    crash = {**events[6]["args"], "act": {"kind": "kill", "args": {"worker": 1}}}
    assert _replay(events, 6, args=crash) == _bad(7, "malformed", shape.replace("lose", "crash"))


def test_sources_and_sequences(events) -> None:
    src = "source is a non-empty string, source_sequence an integer"
    for change in ({"source": ""}, {"source": 1}, {"source_sequence": "2"}, {"source_sequence": 2.0}):
        assert _replay(events, 1, **change) == _bad(2, "malformed", src), change
    assert _replay(events, 2, source_sequence=4) == _bad(
        3, "sequence-gap", "source 'coordinator': sequence 4, expected 3")
    assert _replay(events, 2, source_sequence=2) == _bad(
        3, "duplicate-sequence", "source 'coordinator': sequence 2, expected 3")
    assert _replay(events, 0, source_sequence=2) == _bad(
        1, "sequence-gap", "source 'coordinator': sequence 2, expected 1")
    lines = _lines(events)
    twice = _lines([dict(events[0], source_sequence=11)])
    assert HT.replay_hierarchy(lines + twice) == _bad(11, "malformed", "configure appears twice")
    assert HT.replay_hierarchy(lines[1:]) == _bad(1, "sequence-gap", "source 'coordinator': sequence 2, expected 1")
    first = [dict(events[1], source_sequence=1)]
    assert HT.replay_hierarchy(_lines(first)) == _bad(1, "malformed", "the first event must be configure")


def test_each_refinement_difference_is_named(events) -> None:
    ret = "Return(worker=1, epoch=1, seq=1, nbytes=2, authentic=True, fate='delivered')"
    req = "Request(worker=1, epoch=1, seq=1, nbytes=6, priority=0, authentic=True, fate='delivered')"
    r = _replay(events, 7, outcome="accepted", error=None)
    assert (r.ok, r.events, r.line, r.failure, r.id) == (False, 7, 8, "refinement", "C10")
    assert r.message.startswith(f"{ret}: the spec refuses (ReplayedMessage: ")
    assert r.message.endswith(") what the governor accepted")
    assert _replay(events, 7, error="CapacityDenied") == _bad(
        8, "refinement", f"{ret}: the spec refuses with ReplayedMessage, the trace says CapacityDenied")
    assert _replay(events, 2, outcome="rejected", error="ReplayedMessage", result=None) == _bad(
        3, "refinement", f"{req}: the spec accepts what the governor refused (ReplayedMessage)")
    assert _replay(events, 2, result=["granted", 5]) == _bad(
        3, "refinement", f"{req}: result ['granted', 5], the spec's ['granted', 6]")
    seen = dict(events[2]["observed"], free=5)
    assert _replay(events, 2, observed=seen) == _bad(
        3, "refinement", f"{req}: observed {seen!r}, the spec's {events[2]['observed']!r}")


@pytest.mark.parametrize("where", ["check_step", "check_state"])
def test_a_clause_the_spec_step_breaks_is_a_violation(events, monkeypatch, where) -> None:
    def broken(*args: Any) -> None:
        raise InvariantViolation("I11", "a clause broken by hand")
    monkeypatch.setattr(HT, where, broken)
    assert HT.replay_hierarchy(_lines(events)) == _bad(2, "violation", "I11: a clause broken by hand", "I11")


def test_each_step_is_judged_on_the_states_it_joins(events, monkeypatch) -> None:
    steps: list[tuple[Any, Any, Any]] = []
    states: list[Any] = []
    real_step, real_state = HT.check_step, HT.check_state
    monkeypatch.setattr(HT, "check_step", lambda s, a, n: (steps.append((s, a, n)), real_step(s, a, n))[1])
    monkeypatch.setattr(HT, "check_state", lambda n: (states.append(n), real_state(n))[1])
    assert HT.replay_hierarchy(_lines(events)) == _CLEAN
    s, want = H.new_hierarchy(*SCRIPT_CONFIG), []  # the configured machine and aging cap, not their defaults
    for act in _RUN:
        try:
            n, _ = campaign_step(s, act)
        except GovernorError:
            continue  # a refusal both sides agree on is not judged
        want.append((s, act, n))
        s = n
    assert len(want) == len(_RUN) - 1 and steps == want and states == [n for _, _, n in want]
