"""Traces and the independent replay checker (`ortmem replay`).

Refimpl traces (the stateful campaign, settled) replay clean;
each failure class of the checker has a self-test naming the smallest bad
prefix; hand-written traces of buggy governors are rejected naming the ID
they break.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from trace_harness import ledger_payload, replay_epoched
from hypothesis.stateful import run_state_machine_as_test

from invariants.manager_replay import replay
from invariants import replay as R
from invariants.campaign import campaign_settings
from invariants.manager_ledger_machine import LedgerMachine
from invariants.manager_trace import MANAGER_REVISION
from invariants.trace_format import KINDS, MAX_LINE_BYTES
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.cli import main
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink, boundary
from refimpl.manager_workload import run_manager_workload, settle
from spec import manager_actions as M
from spec.types import Role, Tier

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "trace-schema.json"


def _trace(seed: int = 0, operations: int = 300) -> list[bytes]:
    buf = io.StringIO()
    run_manager_workload(ProcessMemoryManager(trace=JsonlSink(buf)), seed=seed, operations=operations)
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


@pytest.fixture(scope="module")
def clean() -> list[bytes]:
    return _trace()


def _first(lines: list[bytes], kind: str, outcome: str = "accepted") -> int:
    return next(i for i, l in enumerate(lines) if json.loads(l)["kind"] == kind
                and json.loads(l)["payload"].get("outcome") == outcome)


def _edit(line: bytes, fn) -> bytes:
    ev = json.loads(line)
    fn(ev)
    return json.dumps(ev).encode() + b"\n"


# --- refimpl traces replay clean (the workload's: tests/test_manager_trace.py) ---


class _TracedAdapter(ManagerAdapter):
    traces: list[list[bytes]] = []

    def __init__(self) -> None:
        self.buf = io.StringIO()
        self.pmm, self.delivered = ProcessMemoryManager(trace=JsonlSink(self.buf)), []
        self.corrupted = False
        _TracedAdapter.traces.append(self)  # type: ignore[arg-type]

    def execute(self, action: Any) -> Any:
        # The campaign's CorruptLedger is a test hook (`corrupt_ledger`), no governor verb: the trace has no event
        # for it, so the ManagerPoisoned refusals after it cannot replay. Such a run is left out below.
        self.corrupted |= isinstance(action, M.CorruptLedger)
        return super().execute(action)


class _TracedMachine(LedgerMachine):
    adapter_factory = _TracedAdapter

    def teardown(self) -> None:
        super().teardown()
        settle(self.gov.pmm)  # the trace ends clean: nothing in flight is left for the replay to find


def test_campaign_traces_always_replay_clean() -> None:
    _TracedAdapter.traces = []
    run_state_machine_as_test(_TracedMachine, settings=campaign_settings(60, 30, shrink=False))
    replayable = [a for a in _TracedAdapter.traces if not a.corrupted]  # type: ignore[attr-defined]
    assert len(replayable) >= 50
    for adapter in replayable:
        lines = [l.encode() + b"\n" for l in adapter.buf.getvalue().splitlines()]  # type: ignore[attr-defined]
        r = replay_epoched(lines)
        assert r.ok, r.describe()


def test_trace_off_path_adds_no_wrapper() -> None:
    p = ProcessMemoryManager()
    assert "reserve" not in vars(p)
    traced = ProcessMemoryManager(trace=lambda e: None)
    assert "reserve" in vars(traced) and set(KINDS) <= set(vars(traced))


# --- self-tests: each failure class, with the smallest bad prefix ------------


def _drop(lines, i):
    return lines[:i] + lines[i + 1:]


def _corruptions(lines: list[bytes]) -> dict[str, tuple[list[bytes], int, str]]:
    k = _first(lines, "commit")
    bad_rev = _edit(lines[k], lambda e: e.update(contract_revision="ortmem-ledger/99"))
    extra_key = _edit(lines[k], lambda e: e.update(extra=1))
    bad_tier = _edit(lines[_first(lines, "reserve")], lambda e: e["payload"].update(tier="gpu"))
    int_tier = _edit(lines[_first(lines, "reserve")], lambda e: e["payload"].update(tier=1))  # an enum is a value
    unknown_id = _edit(lines[k], lambda e: e["ids"].update(allocation=9999))
    r = _first(lines, "reserve")
    list_bytes = _edit(lines[r], lambda e: e["payload"].update(nbytes=[1]))  # a plain field holds a scalar only
    dict_bytes = _edit(lines[r], lambda e: e["payload"].update(nbytes={"n": 1}))  # or an opaque marker
    flipped = _edit(lines[k], lambda e: e["payload"].update(outcome="rejected", error="CapacityDenied"))
    other_seq = _edit(lines[3], lambda e: e.update(source_sequence=3))
    return {
        # name: (trace, smallest bad prefix, failure)
        "gap": (_drop(lines, 5), 6, "sequence-gap"),
        "duplicate": (lines[:6] + [lines[5]] + lines[6:], 7, "duplicate-sequence"),
        "reordered": (lines[:5] + [lines[6], lines[5]] + lines[7:], 6, "sequence-gap"),
        "renumbered-duplicate": (lines[:3] + [other_seq] + lines[4:], 4, "duplicate-sequence"),
        "unknown-revision": (lines[:k] + [bad_rev] + lines[k + 1:], k + 1, "unknown-revision"),
        "malformed-envelope": (lines[:k] + [extra_key] + lines[k + 1:], k + 1, "malformed"),
        "malformed-enum": (lines[:_first(lines, "reserve")] + [bad_tier] + lines[_first(lines, "reserve") + 1:],
                           _first(lines, "reserve") + 1, "malformed"),
        "malformed-enum-int": (lines[:_first(lines, "reserve")] + [int_tier] + lines[_first(lines, "reserve") + 1:],
                               _first(lines, "reserve") + 1, "malformed"),
        "malformed-list-value": (lines[:r] + [list_bytes] + lines[r + 1:], r + 1, "malformed"),
        "malformed-object-value": (lines[:r] + [dict_bytes] + lines[r + 1:], r + 1, "malformed"),
        "unknown-id": (lines[:k] + [unknown_id] + lines[k + 1:], k + 1, "unknown-id"),
        "refinement": (lines[:k] + [flipped] + lines[k + 1:], k + 1, "refinement"),
        "bad-json": (lines[:4] + [lines[4][:20] + b"\n"] + lines[5:], 5, "bad-json"),
        "not-an-object": (lines[:4] + [b"[1, 2]\n"] + lines[5:], 5, "bad-json"),
        "nan": (lines[:4] + [lines[4].replace(b'"source_sequence":5', b'"source_sequence":NaN')] + lines[5:], 5,
                "bad-json"),
        "huge-int": (lines[:4] + [lines[4].replace(b'"source_sequence":5', b'"source_sequence":' + b"9" * 40)]
                     + lines[5:], 5, "bad-json"),
        "duplicate-key": (lines[:4] + [lines[4].replace(b'{"contract_revision"', b'{"kind":"x","contract_revision"', 1)]
                          + lines[5:], 5, "bad-json"),
        "oversize": (lines[:4] + [b'{"x": "' + b"a" * MAX_LINE_BYTES + b'"}\n'] + lines[5:], 5, "oversize"),
    }


CASES = sorted(_corruptions(_trace()))


@pytest.mark.parametrize("case", CASES)
def test_replay_rejects_corrupted_trace_with_smallest_bad_prefix(clean, case: str) -> None:
    lines, line, failure = _corruptions(clean)[case]
    r = replay_epoched(lines)
    assert not r.ok and (r.failure, r.line) == (failure, line), r.describe()
    # The prefix before the bad line replays up to it.
    assert r.events == line - 1
    assert replay_epoched(lines[:line - 1]).failure in (None, "leftover")


_RUN = '"s": "123456789012345678901"'  # 21 digits inside a string: the line takes the integer-checking decoder


@pytest.mark.parametrize("raw, want", [
    (b'{"a": 99999999999999999999}', {"a": 10 ** 20 - 1}),  # 20 digits: the bound itself
    (b'{"a": -99999999999999999999}', {"a": 1 - 10 ** 20}),
    (b'{"a": 999999999999999999999}', None),  # 21 digits
    (b'{"a": -999999999999999999999}', None),
    (("{" + _RUN + ', "a": 99999999999999999999}').encode(), {"s": "123456789012345678901", "a": 10 ** 20 - 1}),
    (("{" + _RUN + ', "a": 999999999999999999999}').encode(), None),
    (b'{"a": 1, "a": 2}', None),
    (("{" + _RUN + ', "a": 1, "a": 2}').encode(), None),
    (b'{"a": NaN}', None),
    (("{" + _RUN + ', "a": Infinity}').encode(), None),
])
def test_json_bounds_hold_on_either_decoder(raw: bytes, want: Any) -> None:
    """Integers of at most 20 digits, no duplicate key, no NaN / Infinity: on a line with a 21-digit run
    (integers checked one by one) and on one without (integers left to the C scanner) alike."""
    if want is None:
        with pytest.raises(R._Bad) as e:
            R.read_event(raw)
        assert e.value.failure == "bad-json"
    else:
        assert R.read_event(raw) == want


@pytest.mark.parametrize("raw", [
    b'{"a": 1}', b'{"a": 1}\n', b'{"a": 1}\r\n', b' \t{"a": 1}', b'{"a": 1} \t\r\n', b'\n{"a": 1}',
    b'{"a": 1}x', b'{"a": 1}X', b'{"a": 1} x\n', b'{"a": 1}{}', b'{"a": 1}\x0c', b'{"a": 1}\xc2\xa0', b'',
    b'\n', b' ', b'{"a": ', b'[1]', b'"s"\n', b'{"a": 1, "a": 2}\n', b'{"a": 1} {"a": 1, "a": 2}',
])
def test_c_scanner_path_answers_as_decode(raw: bytes) -> None:
    """`read_event` reads a line with the decoder's C scanner directly: every line, well formed or not, gets
    `decode`'s own object or error (JSON whitespace only around the value; anything else after it is extra data)."""
    try:
        value = R._UNBOUNDED.decode(raw.decode("utf-8"))
        want: Any = value if type(value) is dict else ("bad-json", "a line must hold one JSON object, got "
                                                       f"{type(value).__name__}")
    except ValueError as e:
        want = ("bad-json", f"not a JSON object: {e}")
    try:
        got: Any = R.read_event(raw)
    except R._Bad as e:
        got = (e.failure, str(e))
    assert got == want


def test_oversize_line_is_not_read_whole() -> None:
    stream = io.BytesIO(b'{"a": "' + b"x" * (2 * MAX_LINE_BYTES) + b'"}\n')
    r = replay(stream)
    assert r.failure == "oversize" and r.line == 1
    assert stream.tell() <= MAX_LINE_BYTES + 2


def test_replay_rejects_too_many_sources() -> None:
    lines = [json.dumps({"contract_revision": MANAGER_REVISION, "source": f"s{i}", "source_sequence": 1,
                         "kind": "boundary", "ids": {}, "payload": {}}).encode() for i in range(R.MAX_SOURCES + 1)]
    r = replay_epoched(lines)
    assert (r.failure, r.line) == ("too-many-sources", R.MAX_SOURCES + 1)


def test_replay_rejects_leftover_reservation_unless_boundary() -> None:
    buf = io.StringIO()
    p = ProcessMemoryManager(trace=JsonlSink(buf))
    h, a = p.register_holder("w"), p.register_authority("gpu0", Tier.DEVICE, 64)
    p.reserve(h, a, Tier.DEVICE, 8, Role.WEIGHTS)
    lines = buf.getvalue().encode().splitlines()
    r = replay_epoched(lines)
    assert not r.ok and r.failure == "leftover" and "allocation 1 still provisional" in r.message
    boundary(p)
    assert replay_epoched(buf.getvalue().encode().splitlines()).ok


def test_settle_leaves_nothing_for_the_replay_to_find() -> None:
    """`settle` (the end of the workload and of the traced campaign) cancels a reservation and closes an allowance
    that still reserves growth (unmapping it first): the trace left over before it replays clean after it."""
    buf = io.StringIO()
    p = ProcessMemoryManager(trace=JsonlSink(buf))
    h, a = p.register_holder("w"), p.register_authority("gpu0", Tier.DEVICE, 64)
    p.reserve(h, a, Tier.DEVICE, 8, Role.WEIGHTS)
    w = p.open_allowance(h, a, 8)
    p.reserve_growth(h, w, 4)
    p.map_allowance(h, w, 2)
    r = replay_epoched(buf.getvalue().encode().splitlines())
    assert r.failure == "leftover" and "allocation 1 still provisional; allowance 1 still reserves 2 B" in r.message
    settle(p)
    r = replay_epoched(buf.getvalue().encode().splitlines())
    assert r.ok and r.events == 10, r.describe()  # and its three events: unmap, close, cancel


def test_empty_trace_replays_clean() -> None:
    assert replay_epoched([]).ok


# --- hand-written traces of buggy governors ----------------------------------


def _ev(seq: int, kind: str, ids: dict[str, Any], observed: dict[str, dict[str, int]] | None = None,
        error: str | None = None, **payload: Any) -> bytes:
    observed = observed or {}
    ids, payload = ledger_payload(ids, observed.get("used"), observed.get("charges"), error, kind, **payload)
    return json.dumps({"contract_revision": MANAGER_REVISION, "source": "buggy", "source_sequence": seq,
                       "kind": kind, "ids": ids, "payload": payload}).encode()


def _setup() -> list[bytes]:
    return [
        _ev(1, "register_holder", {"result": 1}, name="w"),
        _ev(2, "register_authority", {"result": 1}, pool="gpu0", tier="device", capacity=64),
        _ev(3, "reserve", {"holder": 1, "authority": 1, "result": 1}, {"used": {"1": 10}, "charges": {"1": 10}},
            tier="device", nbytes=10, role="weights"),
        _ev(4, "commit", {"holder": 1, "allocation": 1}, {"used": {"1": 10}, "charges": {"1": 10}}, nbytes=10),
    ]


BUGGY = {
    # A release refunds the lease twice: the ledger drops 20 B for a 10 B lease.
    "double-credit": ([_ev(5, "release", {"holder": 1, "allocation": 1}, {"used": {"1": -10}, "charges": {}})], "I1"),
    # A release accepted twice for one lease: the lifecycle allows one.
    "double-release": ([_ev(5, "release", {"holder": 1, "allocation": 1}, {"used": {"1": 0}, "charges": {}}),
                        _ev(6, "release", {"holder": 1, "allocation": 1}, {"used": {"1": 0}, "charges": {}})], "I4a",
                       6),
    # A reservation granted without charging the ledger.
    "grant-without-charge": ([_ev(5, "reserve", {"holder": 1, "authority": 1, "result": 2},
                                  {"used": {"1": 10}, "charges": {"2": 0}}, tier="device", nbytes=4, role="weights"),
                              _ev(6, "cancel", {"holder": 1, "allocation": 2}, {"used": {"1": 10}, "charges": {}})],
                             "I2"),
    # Device loss refunds the lease at once, before termination is confirmed.
    "refund-before-termination": ([_ev(5, "lose_device", {"authority": 1}, {"used": {"1": 0}, "charges": {"1": 0}})],
                                  "I6"),
    # A refused reservation that still moved the ledger (lease rule G4: a refusal changes nothing).
    "refusal-with-side-effect": ([_ev(5, "reserve", {"holder": 1, "authority": 1}, {"used": {"1": 74}, "charges": {}},
                                      "CapacityDenied", tier="device", nbytes=64, role="weights")], "G4"),
    # A grant past the limit.
    "grant-past-limit": ([_ev(5, "reserve", {"holder": 1, "authority": 1, "result": 2},
                              {"used": {"1": 110}, "charges": {"2": 100}}, tier="device", nbytes=100, role="weights")],
                         "I2"),
}


@pytest.mark.parametrize("case", sorted(BUGGY))
def test_replay_rejects_buggy_governor_trace_naming_id(case: str) -> None:
    tail, id = BUGGY[case][:2]
    lines = _setup() + tail
    r = replay_epoched(lines)
    assert not r.ok and r.failure == "violation" and r.id == id, r.describe()
    assert r.line == (BUGGY[case][2] if len(BUGGY[case]) > 2 else 5)  # the first buggy event
    assert replay_epoched(_setup() + [_ev(5, "release", {"holder": 1, "allocation": 1},
                                          {"used": {"1": 0}, "charges": {}})]).ok


# --- the CLI ---------------------------------------------------------------


def test_cli_replay_accepts_refimpl_trace_and_rejects_corrupted_copy(tmp_path, capsys) -> None:
    good, bad = tmp_path / "t.jsonl", tmp_path / "bad.jsonl"
    assert main(["trace", str(good), "--seed", "3"]) == 0
    assert main(["replay", str(good)]) == 0
    assert "replayed clean" in capsys.readouterr().out
    lines = good.read_bytes().splitlines(keepends=True)
    bad.write_bytes(b"".join(lines[:9] + lines[10:]))
    assert main(["replay", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "line 10" in out and "sequence-gap" in out


def test_concurrent_trace_is_a_linearisation() -> None:
    import threading

    buf = io.StringIO()
    p = ProcessMemoryManager(trace=JsonlSink(buf))
    a = p.register_authority("gpu0", Tier.DEVICE, 64)
    holders = [p.register_holder(f"t{i}") for i in range(4)]

    def work(h: int) -> None:
        for _ in range(200):
            try:
                r = p.reserve(h, a, Tier.DEVICE, 8, Role.KV)
            except Exception:
                continue
            p.commit(h, r, 4)
            p.release(h, r)

    threads = [threading.Thread(target=work, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r = replay_epoched(buf.getvalue().encode().splitlines())
    assert r.ok and r.events >= 4 * 200, r.describe()


@pytest.mark.parametrize("module", ["invariants/replay.py", "invariants/trace_format.py",
                                    "invariants/replay_predicates.py", "invariants/explore.py",
                                    "invariants/ledger_scope.py"])
def test_checker_is_independent_of_refimpl(module: str) -> None:
    import ast

    tree = ast.parse((SCHEMA.parent.parent / module).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.split(".")[0] == "refimpl" for m in imported), imported


def test_cli_replay_rejects_missing_file(tmp_path, capsys) -> None:
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
