"""What a foreign governor's trace can get wrong, and exactly how `ortmem replay` answers it.

Each case is a small hand-written JSONL trace a weakened checker would accept or would answer
with the wrong failure class, line, catalog ID or message; the expected answer is the whole
`describe()` line, stated here by hand (not derived from the checker). Each family has near
misses that must replay clean: the guard is no wider than the harm it names.
"""

from __future__ import annotations

import io
import json
from typing import Any

import attrs
import pytest
from trace_harness import epoched, ledger_payload, replay_epoched, traced

from invariants.manager_replay import replay
from invariants import replay as R
from invariants.replay_ids import IdMap
from invariants.manager_trace import MANAGER_REVISION
from invariants.trace_format import MAX_SOURCES, MAX_TEXT
from spec import errors as E
from spec import ledger_actions as A
from spec.ledger import refusals, step
from spec.ledger_state import State
from spec.types import Role, Tier


def _raw(seq: int, kind: str, ids: Any, payload: Any, source: Any = "g", **envelope: Any) -> bytes:
    ev = {"contract_revision": MANAGER_REVISION, "source": source, "source_sequence": seq, "kind": kind,
          "ids": ids, "payload": payload}
    ev.update(envelope)
    return json.dumps(ev).encode()


def _ev(seq: int, kind: str, ids: dict[str, Any], used: dict[str, Any] | None = None,
        charges: dict[str, Any] | None = None, error: str | None = None, **payload: Any) -> bytes:
    return _raw(seq, kind, *ledger_payload(ids, used, charges, error, kind, **payload))


#: Holder 1 and authority 1 (64 B) registered, allocation 1 (10 B) reserved and committed.
SETUP = [
    _ev(1, "register_holder", {"result": 1}, name="w"),
    _ev(2, "register_authority", {"result": 1}, pool="gpu0", tier="device", capacity=64),
    _ev(3, "reserve", {"holder": 1, "authority": 1, "result": 1}, {"1": 10}, {"1": 10}, tier="device", nbytes=10,
        role="weights"),
    _ev(4, "commit", {"holder": 1, "allocation": 1}, {"1": 10}, {"1": 10}, nbytes=10),
]
_COMMIT = {"nbytes": 10, "outcome": "accepted", "error": None, "result": None, "used": {"1": 10}, "charges": {"1": 10},
           "bundles": {}}
_RELEASE = {"outcome": "accepted", "error": None, "result": None, "used": {"1": 0}, "charges": {}, "bundles": {}}
_REL_IDS = {"holder": 1, "allocation": 1}
_RES = "Reserve(holder=1, authority=1, tier=Tier.DEVICE, nbytes=4, role=Role.WEIGHTS)"


def _reserve4(seq: int, used: dict[str, int], charges: dict[str, int]) -> bytes:
    return _ev(seq, "reserve", {"holder": 1, "authority": 1, "result": 2}, used, charges, tier="device", nbytes=4,
               role="weights")


def _release(**payload: Any) -> bytes:
    return _raw(5, "release", _REL_IDS, {**_RELEASE, **payload})


#: Allowance 1 (20 B) opened on authority 1.
_OPEN = _ev(5, "open_allowance", {"holder": 1, "authority": 1, "result": 1}, {"1": 10}, limit=20)


# name: (events after SETUP, the whole describe() line)
HARMS: dict[str, tuple[list[bytes], str]] = {
    # --- the envelope and payload shape (check 3): a malformed event names what is wrong with it
    "unknown-revision": ([_raw(5, "release", _REL_IDS, _RELEASE, contract_revision="ortmem-ledger/99")],
                         "REJECTED at line 5 (unknown-revision): replay reads 'ortmem-manager/2' only, got "
                         "'ortmem-ledger/99'"),
    "revision-not-a-string": ([_raw(5, "release", _REL_IDS, _RELEASE, contract_revision=["ortmem-ledger/1"])],
                              "REJECTED at line 5 (unknown-revision): replay reads 'ortmem-manager/2' only, got "
                              "\"['ortmem-ledger/1']\""),
    "envelope-extra-key": ([_raw(5, "boundary", {}, {}, trace_id=1)],
                           "REJECTED at line 5 (malformed): envelope keys must be exactly ['contract_revision', "
                           "'topology_epoch', 'source', 'source_sequence', 'kind', 'ids', 'payload'], got "
                           "['contract_revision', 'ids', 'kind', 'payload', 'source', 'source_sequence', "
                           "'topology_epoch', 'trace_id']"),
    "unknown-kind": ([_raw(5, "explode", {}, {})], "REJECTED at line 5 (malformed): unknown event kind 'explode'"),
    "ids-not-an-object": ([_raw(5, "release", [1], _RELEASE)],
                          "REJECTED at line 5 (malformed): ids and payload must be objects"),
    "payload-not-an-object": ([_raw(5, "release", _REL_IDS, [])],
                              "REJECTED at line 5 (malformed): ids and payload must be objects"),
    "boundary-with-ids": ([_raw(5, "boundary", {"allocation": 1}, {})],
                          "REJECTED at line 5 (malformed): a boundary event carries no ids and no payload"),
    "boundary-with-payload": ([_raw(5, "boundary", {}, {"outcome": "accepted"})],
                              "REJECTED at line 5 (malformed): a boundary event carries no ids and no payload"),
    "outcome-neither": ([_release(outcome="maybe")],
                        "REJECTED at line 5 (malformed): payload.outcome must be 'accepted' or 'rejected', got 'maybe'"),
    "extra-id": ([_raw(5, "commit", {"holder": 1, "allocation": 1, "authority": 1}, _COMMIT)],
                 "REJECTED at line 5 (malformed): commit ids must be exactly ['allocation', 'holder'], "
                 "got ['allocation', 'authority', 'holder']"),
    "extra-payload-key": ([_raw(5, "commit", _REL_IDS, {**_COMMIT, "tier": "device"})],
                          "REJECTED at line 5 (malformed): commit payload keys must be exactly "
                          "['bundles', 'charges', 'error', 'nbytes', 'outcome', 'result', 'used'], got ['bundles', "
                          "'charges', 'error', 'nbytes', 'outcome', 'result', 'tier', 'used']"),
    "accepted-with-error": ([_release(error="CapacityDenied")],
                            "REJECTED at line 5 (malformed): an accepted event carries no error"),
    "rejected-unknown-class": ([_release(outcome="rejected", error="Oops", used={"1": 10}, charges={"1": 10})],
                               "REJECTED at line 5 (malformed): a rejected event must name a spec error class, "
                               "got 'Oops'"),
    "rejected-class-not-a-name": ([_release(outcome="rejected", error=7, used={"1": 10}, charges={"1": 10})],
                                  "REJECTED at line 5 (malformed): a rejected event must name a spec error class, "
                                  "got 7"),
    "result-not-an-int": ([_ev(5, "register_holder", {"result": "2"}, name="v")],
                          "REJECTED at line 5 (malformed): result '2' is not an id, a byte count, a list of ids or "
                          "a limit outcome"),
    # --- sequence numbers (check 4): a lost, repeated or nameless event
    "empty-source": ([_raw(5, "boundary", {}, {}, source="")],
                     "REJECTED at line 5 (malformed): source must be a non-empty string"),
    "source-too-long": ([_raw(1, "boundary", {}, {}, source="s" * (MAX_TEXT + 1))],
                        "REJECTED at line 5 (malformed): source must be a non-empty string"),
    "sequence-zero": ([_raw(0, "boundary", {}, {}, source="h")],
                      "REJECTED at line 5 (malformed): source_sequence must be a positive integer"),
    "sequence-not-an-int": ([_raw("5", "boundary", {}, {})],
                            "REJECTED at line 5 (malformed): source_sequence must be a positive integer"),
    "lost-events": ([_raw(7, "boundary", {}, {})],
                    "REJECTED at line 5 (sequence-gap): source 'g': sequence 7 after 4: 2 event(s) lost or reordered"),
    "duplicate": ([_raw(3, "boundary", {}, {})],
                  "REJECTED at line 5 (duplicate-sequence): source 'g': sequence 3 again after 4 "
                  "(duplicate or reordered event)"),
    # --- the observed figures (steps 5-6): a figure left out, a charge on nothing, a wrong charge
    "used-not-observed": ([_reserve4(5, {}, {"2": 4})],
                          f"REJECTED at line 5 (refinement): {_RES} changed used of authority 1 but the event does not "
                          "say so"),
    "charge-not-observed": ([_reserve4(5, {"1": 14}, {})],
                            f"REJECTED at line 5 (refinement): {_RES} charged allocation 2 but the event does not say "
                            "so"),
    "commit-charge-not-observed": ([_ev(5, "reserve", {"holder": 1, "authority": 1, "result": 7}, {"1": 14}, {"7": 4},
                                        tier="device", nbytes=4, role="weights"),
                                    _ev(6, "commit", {"holder": 1, "allocation": 7}, {"1": 13}, nbytes=3)],
                                   "REJECTED at line 6 (refinement): Commit(holder=1, allocation=7, nbytes=3) charged "
                                   "allocation 7 but the event does not say so"),  # the governor's 7 is the spec's 2
    "charge-after-release": ([_release(used={"1": 0}, charges={"1": 10})],
                             "REJECTED at line 5 (refinement): Release(holder=1, allocation=1): the governor observed a "
                             "charge of 10 B on allocation 1, the spec has no such allocation"),
    "over-charge": ([_reserve4(5, {"1": 14}, {"2": 5})],
                    f"REJECTED at line 5 (violation) [I2]: I2: {_RES} was granted but charged 5 B (ledger moved 4 B): "
                    "bytes granted without being charged"),
    "used-of-unissued-authority": ([_release(used={"1": 0, "9": 0}, charges={})],
                                   "REJECTED at line 5 (unknown-id): observed authority 9, which no event of this "
                                   "trace issued"),
    "charge-of-unissued-allocation": ([_release(used={"1": 0}, charges={"8": 0})],
                                      "REJECTED at line 5 (unknown-id): observed allocation 8, which no event of this "
                                      "trace issued"),
    # --- the outcome (step 5): an over-grant, a refusal the spec does not make, a wrong error class
    "over-grant": ([_ev(5, "reserve", {"holder": 1, "authority": 1, "result": 2}, {"1": 110}, {"2": 100},
                        tier="device", nbytes=100, role="weights")],
                   "REJECTED at line 5 (violation) [I2]: Reserve(holder=1, authority=1, tier=Tier.DEVICE, nbytes=100, "
                   "role=Role.WEIGHTS) was accepted but the spec refuses it: CapacityDenied: authority 1: 100 B "
                   "requested, 54 B available"),
    "released-by-a-stranger": ([_ev(5, "register_holder", {"result": 2}, name="v"),
                                _ev(6, "release", {"holder": 2, "allocation": 1}, {"1": 0})],
                               "REJECTED at line 6 (violation) [I6]: Release(holder=2, allocation=1) was accepted but "
                               "the spec refuses it: ForeignHolder: allocation 1 belongs to holder 1, not holder 2"),
    "refused-what-the-spec-grants": ([_release(outcome="rejected", error="CapacityDenied", used={"1": 10}, charges={"1": 10})],
                                     "REJECTED at line 5 (refinement): Release(holder=1, allocation=1) was rejected "
                                     "with CapacityDenied but the spec accepts it"),
    "refused-with-the-wrong-class": ([_ev(5, "reserve", {"holder": 1, "authority": 1}, error="ForeignHolder",
                                          tier="device", nbytes=100, role="weights")],
                                     "REJECTED at line 5 (refinement): Reserve(holder=1, authority=1, tier=Tier.DEVICE, "
                                     "nbytes=100, role=Role.WEIGHTS) was rejected with ForeignHolder, the spec raises "
                                     "CapacityDenied: authority 1: 100 B requested, 54 B available"),
    "accepted-names-unissued": ([_ev(5, "release", {"holder": 1, "allocation": 7}, {"1": 0})],
                                "REJECTED at line 5 (unknown-id): Release(holder=1, allocation=7) was accepted but "
                                "names allocation 7, which no event of this trace issued: an event is missing"),
    "refusal-with-side-effect": ([_ev(5, "reserve", {"holder": 1, "authority": 1}, {"1": 74}, error="CapacityDenied",
                                      tier="device", nbytes=64, role="weights")],
                                 "REJECTED at line 5 (violation) [G4]: G4: Reserve(holder=1, authority=1, "
                                 "tier=Tier.DEVICE, nbytes=64, role=Role.WEIGHTS) was rejected but the governor "
                                 "observed a change"),
    # --- ids (step 5): an alias answered with another live authority's id
    "alias-onto-another-authority": ([_ev(5, "register_authority", {"result": 2}, pool="gpu1", tier="device",
                                          capacity=64),
                                      _ev(6, "register_alias", {"of": 1, "result": 2}, view="gpu0b")],
                                     "REJECTED at line 6 (refinement): the governor issued authority id 2 for a new "
                                     "object, but 2 already names another authority (still live): two objects aliased "
                                     "onto one id"),
    "allowance-id-reused-while-live": ([_OPEN, _ev(6, "open_allowance", {"holder": 1, "authority": 1, "result": 1},
                                                   limit=20)],
                                       "REJECTED at line 6 (refinement): the governor issued allowance id 1 for a new "
                                       "object, but 1 already names another allowance (still live): two objects "
                                       "aliased onto one id"),
    # --- a map fused with its growth reservation (D8): allowed within the limit, still checked
    "fused-map-moves-used": ([_OPEN, _ev(6, "map_allowance", {"holder": 1, "allowance": 1}, {"1": 18}, nbytes=8)],
                             "REJECTED at line 6 (violation) [I1]: I1: MapAllowance(holder=1, allowance=1, nbytes=8): "
                             "authority 1 used moved 8 B, charges moved 0 B"),
    "fused-map-past-the-limit": ([_OPEN, _ev(6, "map_allowance", {"holder": 1, "allowance": 1}, {"1": 10}, nbytes=28)],
                                 "REJECTED at line 6 (violation) [I4b]: MapAllowance(holder=1, allowance=1, nbytes=28) "
                                 "was accepted but the spec refuses it: AllowanceExceeded: allowance 1: mapping 28 B, "
                                 "only 0 B reserved"),
    # --- the end of the trace: reservations left over name at most five, and the line is none
    "growth-left-over": ([_OPEN, _ev(6, "reserve_growth", {"holder": 1, "allowance": 1}, {"1": 10}, nbytes=8)],
                         "REJECTED at end of trace (leftover): trace ended with active items and no declared "
                         "boundary: allowance 1 still reserves 8 B of growth"),
    "six-left-over": ([_ev(4 + i, "reserve", {"holder": 1, "authority": 1, "result": 1 + i}, {"1": 10 + i},
                           {str(1 + i): 1}, tier="device", nbytes=1, role="weights") for i in range(1, 7)],
                      "REJECTED at end of trace (leftover): trace ended with active items and no declared boundary: "
                      + "; ".join(f"allocation {i} still provisional" for i in range(2, 7))),
}


def test_a_grant_past_the_process_quota_is_named_i1_by_its_refusal_site() -> None:
    """The trace's quota is 8 B; its reserve of 16 B was accepted. The spec refuses it with CapacityDenied at its
    "quota" site, which is I1's (process quota used = live leases), not I2's as CapacityDenied alone would say."""
    p, buf = traced()
    h, a = p.register_holder("kv"), p.register_authority("hbm", Tier.DEVICE, 64)
    p.set_process_quota(Tier.DEVICE, 64)
    p.reserve(h, a, Tier.DEVICE, 16, Role.KV)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    events[3]["payload"]["nbytes"] = 8
    assert replay_epoched([json.dumps(e).encode() for e in events]).describe() == (
        "REJECTED at line 5 (violation) [I1]: Reserve(holder=1, authority=1, tier=Tier.DEVICE, nbytes=16, "
        "role=Role.KV) was accepted but the spec refuses it: CapacityDenied: tier device: 16 B asked, 8 B left of its "
        "8 B process quota (I1)")


@pytest.mark.parametrize("case", sorted(HARMS))
def test_harm_is_rejected_at_its_line_with_its_class_id_and_message(case: str) -> None:
    tail, want = HARMS[case]
    r = replay_epoched(SETUP + tail)
    assert r.describe() == want
    assert not r.ok and r.failure in R.FAILURE_KINDS
    assert r.events == (len(SETUP) + len(tail) if r.line is None else r.line - 1)


# Near misses: what the guards above must let through.
CLEAN: dict[str, list[bytes]] = {
    "source-at-the-bound": [_raw(1, "boundary", {}, {}, source="s" * MAX_TEXT)],
    "second-source-starts-at-one": [_raw(1, "boundary", {}, {}, source="h"), _raw(5, "boundary", {}, {})],
    "boundary-ends-with-a-reservation": [_reserve4(5, {"1": 14}, {"2": 4}), _raw(6, "boundary", {}, {})],
    "legal-other-refusal": [_ev(5, "reserve", {"holder": 1, "authority": 1}, {"1": 10}, error="CapacityDenied", tier="device",
                                nbytes=100, role="weights")],
    "unmoved-figures-need-no-observation": [_ev(5, "cancel", {"holder": 1, "allocation": 2}, error="UnknownAllocation")],
    "alias-answered-with-its-canonical-id": [_ev(5, "register_alias", {"of": 1, "result": 1}, {"1": 10}, view="gpu0b"),
                                             _reserve4(6, {"1": 14}, {"2": 4}),
                                             _ev(7, "cancel", {"holder": 1, "allocation": 2}, {"1": 10})],
    "alias-with-a-fresh-id": [_ev(5, "register_alias", {"of": 1, "result": 2}, {"1": 10}, view="gpu0b")],
    "release": [_release()],
    "new-authority-observes-its-own-figure": [_ev(5, "register_authority", {"result": 2}, {"2": 0}, pool="gpu1",
                                                  tier="device", capacity=64)],
    "observes-an-untouched-charge": [_reserve4(5, {"1": 14}, {"1": 10, "2": 4}),
                                     _ev(6, "cancel", {"holder": 1, "allocation": 2}, {"1": 10})],
    "map-fused-with-its-growth": [_OPEN, _ev(6, "map_allowance", {"holder": 1, "allowance": 1}, {"1": 10}, nbytes=8),
                                  _ev(7, "unmap_allowance", {"holder": 1, "allowance": 1}, {"1": 10}, nbytes=8)],
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_near_miss_replays_clean(case: str) -> None:
    lines = SETUP + CLEAN[case]
    r = replay_epoched(lines)
    assert (r.ok, r.events, r.line, r.failure, r.id, r.message) == (True, len(lines), None, None, None, "no violation")
    assert r.describe() == f"OK: {len(lines)} events replayed clean"


def test_observed_figures_have_no_count_bound() -> None:
    """5000 observed figures (past the 4096 once counted): the event gets past the shape check to the ids."""
    r = replay_epoched(SETUP + [_release(used={str(i): 0 for i in range(1, 5001)}, charges={})])
    assert (r.line, r.failure, r.message) == (5, "unknown-id", "observed authority 2, which no event of this trace "
                                                               "issued")


def test_too_many_sources_names_the_bound() -> None:
    lines = [_raw(1, "boundary", {}, {}, source=f"s{i}") for i in range(MAX_SOURCES + 1)]
    r = replay_epoched(lines)
    assert r.describe() == f"REJECTED at line {MAX_SOURCES + 1} (too-many-sources): more than {MAX_SOURCES} sources"


def _reserve_state() -> tuple[State, Any]:
    s, _ = step(State(), A.RegisterHolder(name="w"))
    s, a = step(s, A.RegisterAuthority(pool="gpu0", tier=Tier.DEVICE, capacity=64))
    # Refused three ways: an unknown holder, the wrong tier, too many bytes.
    return s, A.Reserve(holder=9, authority=a, tier=Tier.HOST, nbytes=100, role=Role.WEIGHTS)


def test_other_refusal_is_true_only_for_a_different_refusal_that_applies() -> None:
    s, act = _reserve_state()
    err = E.UnknownHolder("holder 9")
    other = {"outcome": "rejected", "error": "CapacityDenied"}
    assert R.other_refusal(refusals, s, act, err, other) is True
    for name in ("UnknownHolder", "ForeignHolder"):  # the spec's own class; a class whose precondition fails
        assert R.other_refusal(refusals, s, act, err, {"outcome": "rejected", "error": name}) is False
    assert R.other_refusal(refusals, s, act, err, {"outcome": "accepted", "error": "CapacityDenied"}) is False
    assert R.other_refusal(refusals, s, act, None, other) is False


#: No id bound: a spec message is quoted as it is.
_NO_IDS = IdMap(lambda kind, i: False)


def test_check_outcome_refuses_a_different_class_unless_excused() -> None:
    _, act = _reserve_state()
    outcome = {"outcome": "rejected", "error": "CapacityDenied"}
    with pytest.raises(R._Bad) as e:
        R.check_outcome(_NO_IDS, act, E.UnknownHolder("holder 9"), outcome, ())
    assert (e.value.failure, e.value.id) == ("refinement", None)
    assert str(e.value).endswith("was rejected with CapacityDenied, the spec raises UnknownHolder: holder 9")
    R.check_outcome(_NO_IDS, act, E.UnknownHolder("holder 9"), outcome, (), excused=True)


@pytest.mark.parametrize("holder", [9, 1], ids=["three-apply", "two-apply"])
def test_a_refusal_none_of_the_spec_allows_is_told_every_one_that_does(holder: int) -> None:
    """D11: the design orders no checks, so a wrong refusal is answered with every refusal that applies, not the
    spec's first alone; where one alone applies, the spec's refusal is the whole answer."""
    s, act = _reserve_state()
    act = attrs.evolve(act, holder=holder)
    first, *_ = refusals(s, act)
    with pytest.raises(R._Bad) as e:
        R.check_outcome(_NO_IDS, act, first, {"outcome": "rejected", "error": "ForeignHolder"}, (),
                        legal=lambda: refusals(s, act))
    want = {9: "CapacityDenied, TierMismatch, UnknownHolder", 1: "CapacityDenied, TierMismatch"}[holder]
    assert str(e.value).endswith(f"(the refusals that apply: {want})"), e.value
    with pytest.raises(R._Bad) as e:
        R.check_outcome(_NO_IDS, act, first, {"outcome": "rejected", "error": "ForeignHolder"}, (),
                        legal=lambda: (first,))
    assert str(e.value).endswith(f"the spec raises {type(first).__name__}: {first}"), e.value


def test_accepted_refusal_outside_the_catalog_names_refinement() -> None:
    """An accepted event whose spec refusal no catalog ID guards fails as a violation of "refinement"."""
    _, act = _reserve_state()
    with pytest.raises(R._Bad) as e:
        R.check_outcome(_NO_IDS, act, E.PolicyRefusal("no"), {"outcome": "accepted", "error": None}, ())
    assert (e.value.failure, e.value.id) == ("violation", "refinement")
    assert str(e.value).endswith("was accepted but the spec refuses it: PolicyRefusal: no")
    with pytest.raises(R._Bad) as e:
        R.check_outcome(_NO_IDS, act, E.UnknownHolder("holder 9"), {"outcome": "accepted", "error": None},
                        (E.UnknownHolder,))
    assert (e.value.failure, e.value.id) == ("unknown-id", None)
    assert str(e.value).endswith("was accepted but names an id never issued in this trace (holder 9): an event is "
                                 "missing")


def _padded(n: int, end: bytes) -> bytes:
    """A boundary event of exactly `n` bytes (JSON whitespace inside the object), then `end`."""
    text = _raw(5, "boundary", {}, {}, topology_epoch=1)  # SETUP's epoch after its registration
    return text[:1] + b" " * (n - len(text)) + text[1:] + end


@pytest.mark.parametrize("end", [b"", b"\n", b"\r\n"])
def test_line_of_max_bytes_is_read(end: bytes) -> None:
    assert R.read_event(_padded(R.MAX_LINE_BYTES, end))["kind"] == "boundary"


@pytest.mark.parametrize("raw", [_padded(R.MAX_LINE_BYTES + 1, b""), _padded(R.MAX_LINE_BYTES + 1, b"\n"),
                                 _padded(R.MAX_LINE_BYTES, b"\r")])
def test_longer_line_is_oversize(raw: bytes) -> None:
    with pytest.raises(R._Bad) as e:
        R.read_event(raw)
    assert (e.value.failure, str(e.value)) == ("oversize", f"line longer than {R.MAX_LINE_BYTES} bytes")


def test_stream_reads_on_past_a_line_of_max_bytes() -> None:
    """A line of MAX_LINE_BYTES and its newline is whole: the lines after it are still read."""
    stream = io.BytesIO(b"".join(line + b"\n" for line in epoched(SETUP)) + _padded(R.MAX_LINE_BYTES, b"\n")
                        + _raw(6, "boundary", {}, {}, topology_epoch=1) + b"\n")
    r = replay(stream)
    assert (r.ok, r.events) == (True, 6), r.describe()


_RUN21 = b'"s": "123456789012345678901", '  # a 21-digit run: the line takes the integer-checking decoder


@pytest.mark.parametrize("raw, message", [
    (b'{"a": NaN}', "not a JSON object: NaN is not allowed"),
    (b"{" + _RUN21 + b'"a": -Infinity}', "not a JSON object: -Infinity is not allowed"),
    (b"{" + _RUN21 + b'"a": 999999999999999999999}', "not a JSON object: integer with 21 digits"),
    (b"{" + _RUN21 + b'"a": -999999999999999999999}', "not a JSON object: integer with 22 digits"),
    (b'{"a": ', "not a JSON object: Expecting value: line 1 column 7 (char 6)"),
    (b'x{"a": 1}', "not a JSON object: Expecting value: line 1 column 1 (char 0)"),  # junk before the object
    (b'{"b": 1, "a": 2, "b": 3}', "not a JSON object: duplicate key in ['a', 'b', 'b']"),
    (b'[1]', "a line must hold one JSON object, got list"),
    (b'"s"', "a line must hold one JSON object, got str"),
])
def test_bad_json_names_the_problem(raw: bytes, message: str) -> None:
    with pytest.raises(R._Bad) as e:
        R.read_event(raw)
    assert (e.value.failure, str(e.value)) == ("bad-json", message)


def test_twenty_digits_are_read_on_the_checking_decoder() -> None:
    assert R.read_event(b"{" + _RUN21 + b'"a": -99999999999999999999}')["a"] == 1 - 10 ** 20


def test_bad_enum_value_names_it() -> None:
    r = replay_epoched(SETUP + [_ev(5, "reserve", {"holder": 1, "authority": 1, "result": 2}, {"1": 14}, {"2": 4},
                                    tier="gpu", nbytes=4, role="weights")])
    assert r.describe() == "REJECTED at line 5 (malformed): 'gpu' is not a valid Tier"




@pytest.mark.parametrize("ids, field, value, error", [
    # an id the trace could not carry: the governor's refusal of what it saw is excused (both caller errors)
    ({"holder": {"opaque": "int64"}, "authority": 1}, None, None, "InvalidArgument"),
    ({"holder": 1, "authority": 1}, "nbytes", {"opaque": "float"}, "InvalidBytes"),
    ({"holder": 1, "authority": 1}, "nbytes", "ten", "InvalidBytes"),  # a plain field's string decodes to itself
])
def test_a_ledger_argument_the_trace_could_not_carry_is_refused_as_ill_typed(ids, field, value, error) -> None:
    """An opaque marker in a ledger event decodes to `Opaque` (hashable, refused by every
    guard), never to the raw object, so a refusal of a hostile argument replays clean."""
    payload = {"tier": "device", "nbytes": 4, "role": "weights", "outcome": "rejected", "error": error,
               "result": None, "used": {"1": 10}, "charges": {}, "bundles": {}}
    if field is not None:
        payload[field] = value
    r = replay_epoched([*SETUP, _raw(5, "reserve", ids, payload)])
    assert r.ok, r.describe()
    payload["error"] = "CapacityDenied"  # control: a refusal whose precondition does not hold (no caller error)
    r = replay_epoched([*SETUP, _raw(5, "reserve", ids, payload)])
    assert (r.ok, r.line, r.failure) == (False, 5, "refinement"), r.describe()
