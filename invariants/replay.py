"""Reading a JSONL trace for `ortmem replay` (`invariants.manager_replay`, the one replay engine).

What every replayed line goes through before the spec sees it, and the
verdict's parts:

  1. size: at most MAX_LINE_BYTES per line and MAX_SOURCES sources (`read_event`,
     `next_in_sequence`, `bounded_lines`); the line's bytes bound every list and object in it;
  2. JSON: one object, no NaN/Infinity, no duplicate keys, integers of at most 20 digits;
  3. the event's shape, `ortmem-manager/2` only (`invariants.manager_replay`);
  4. sequence: per source 1, 2, 3, ... (a jump is a lost or reordered event,
     a repeat a duplicate);
  5. the outcome: the spec enabled the action exactly as the trace says
     (`check_outcome`, `other_refusal`: the design orders no checks), ids
     mapped through `invariants.replay_ids` (`spec_action`, `bind_result`,
     `spec_figures`).

Traces are untrusted: nothing is evaluated, only parsed and bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import IO, Any

import attrs

from invariants._violation import InvariantViolation
from invariants.replay_ids import IdMap, UnknownObservedId
from invariants.trace_format import MAX_LINE_BYTES, MAX_SOURCES, MAX_TEXT
from spec import errors as E

__all__ = ["ReplayResult", "bounded_lines", "read_event", "next_in_sequence", "figures", "check_outcome", "ERROR_IDS",
           "FAILURE_KINDS"]

#: When a governor accepted what the spec refuses, the ID whose guard refused it.
ERROR_IDS: dict[type, str] = {
    E.IdentityMismatch: "C1", E.TierMismatch: "C2", E.InvalidBytes: "C2", E.CapacityDenied: "I2",
    E.InvalidTransition: "I4a", E.AllowanceExceeded: "I4b", E.ForeignHolder: "I6", E.DeviceLost: "C3",
    E.GrantOutOfOrder: "I13",
}
#: Refusal sites whose ID is not their error class's: a grant past the tier's process quota (`spec.quota`) is I1's.
SITE_IDS: dict[str, str] = {"quota": "I1"}
#: Every way a replay can fail (the `failure` field).
FAILURE_KINDS = ("oversize", "too-many-sources", "bad-json", "malformed", "unknown-revision",
                 "sequence-gap", "duplicate-sequence", "unknown-id", "violation", "refinement", "leftover",
                 "unconfigured")


@attrs.frozen
class ReplayResult:
    ok: bool
    events: int  # events replayed clean
    line: int | None  # the smallest bad prefix: lines 1..line
    failure: str | None  # one of FAILURE_KINDS
    id: str | None  # the catalog ID a violation names
    message: str

    def describe(self) -> str:
        if self.ok:
            return f"OK: {self.events} events replayed clean"
        where = f"line {self.line}" if self.line else "end of trace"
        named = f" [{self.id}]" if self.id else ""
        return f"REJECTED at {where} ({self.failure}){named}: {self.message}"


class _Bad(Exception):
    def __init__(self, failure: str, message: str, id: str | None = None) -> None:
        super().__init__(message)
        self.failure, self.id = failure, id


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 20:
        raise ValueError(f"integer with {len(text)} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError(f"duplicate key in {sorted(k for k, _ in pairs)}")
    return obj


#: Built once (`json.loads` with arguments builds a decoder per call). `_BOUNDED` checks every integer's
#: length; a line with no run of 21 digits (`_DIGIT_RUN`, all digits read as 0) holds no such integer, so
#: it takes `_UNBOUNDED`, which leaves integers to the C scanner.
_BOUNDED = json.JSONDecoder(parse_int=_int, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
_UNBOUNDED = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_unique_keys)
_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_DIGIT_RUN = b"0" * 21
_JSON_SPACE = " \t\n\r"  # JSON's whitespace (RFC 8259), all `decode` skips around a value


def _parse(raw: bytes) -> dict[str, Any]:
    decoder = _BOUNDED if _DIGIT_RUN in raw.translate(_AS_ZERO) else _UNBOUNDED
    try:
        text = raw.decode("utf-8")
        # The decoder's own C scanner, without `decode` / `raw_decode`'s two Python frames and whitespace regexes:
        # a line that does not start with a value or ends in more than JSON whitespace takes `decode`, so every
        # error is `decode`'s own.
        try:
            obj, end = decoder.scan_once(text, 0)
        except StopIteration:
            end = -1
        if end != len(text) and (end < 0 or text[end:].strip(_JSON_SPACE)):
            obj = decoder.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _Bad("bad-json", f"not a JSON object: {e}") from None
    if type(obj) is not dict:
        raise _Bad("bad-json", f"a line must hold one JSON object, got {type(obj).__name__}")
    return obj


def read_event(raw: bytes) -> dict[str, Any]:
    """One line as one bounded JSON object (checks 1 and 2 of the module docstring)."""
    if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES or (len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n")):
        raise _Bad("oversize", f"line longer than {MAX_LINE_BYTES} bytes")
    return _parse(raw)


def next_in_sequence(ev: dict[str, Any], last: dict[str, int]) -> None:
    """Check 4: the event is its source's next (`last`: source -> last sequence number, updated)."""
    source, seq = ev["source"], ev["source_sequence"]
    if type(source) is not str or not 0 < len(source) <= MAX_TEXT:
        raise _Bad("malformed", "source must be a non-empty string")
    if type(seq) is not int or seq < 1:
        raise _Bad("malformed", "source_sequence must be a positive integer")
    if source not in last and len(last) >= MAX_SOURCES:
        raise _Bad("too-many-sources", f"more than {MAX_SOURCES} sources")
    expected = last.get(source, 0) + 1
    if seq > expected:
        raise _Bad("sequence-gap", f"source {source!r}: sequence {seq} after {expected - 1}: "
                                   f"{seq - expected} event(s) lost or reordered")
    if seq < expected:
        raise _Bad("duplicate-sequence", f"source {source!r}: sequence {seq} again after {expected - 1} "
                                         "(duplicate or reordered event)")
    last[source] = seq


def figures(m: Any, what: str) -> dict[int, int]:
    """An event's observed figures `m` (id -> bytes), keys as ints; malformed otherwise."""
    if type(m) is not dict:
        raise _Bad("malformed", f"{what} must be an object")
    try:
        out = {int(k): v for k, v in m.items()}
    except ValueError:
        raise _Bad("malformed", f"{what} keys must be integer ids") from None
    if not all(type(v) is int for v in out.values()):
        raise _Bad("malformed", f"{what} values must be integers")
    return out


def check_outcome(ids: IdMap, act: Any, err: E.GovernorError | None, outcome: dict[str, Any],
                  unknown: tuple[type, ...], excused: bool = False,
                  legal: Callable[[], Iterable[BaseException]] = tuple) -> None:
    """Check 5: the spec enabled `act` exactly as the trace says (accepted, or rejected with the same class).

    `unknown`: the error classes that mean the trace lost the event issuing an id; `excused`: a differing
    refusal class the caller knows to be no disagreement; `legal`: every refusal that applies (named when the
    trace's is none of them). The spec's refusal is quoted in `ids`' numbering."""
    accepted = outcome["outcome"] == "accepted"
    if accepted and err is not None:
        if isinstance(err, unknown):
            raise _Bad("unknown-id", f"{act!r} was accepted but names an id never issued in this trace "
                                     f"({ids.observed_text(str(err))}): an event is missing")
        raise _Bad("violation", f"{act!r} was accepted but the spec refuses it: {type(err).__name__}: "
                                f"{ids.observed_text(str(err))}",
                   SITE_IDS.get(getattr(err, "site", None) or "") or ERROR_IDS.get(type(err), "refinement"))
    if not accepted and err is None:
        raise _Bad("refinement", f"{act!r} was rejected with {outcome['error']} but the spec accepts it")
    if not accepted and type(err).__name__ != outcome["error"] and not excused:
        names = sorted({type(e).__name__ for e in legal()} | {type(err).__name__})
        also = f" (the refusals that apply: {', '.join(names)})" if len(names) > 1 else ""
        raise _Bad("refinement", f"{act!r} was rejected with {outcome['error']}, the spec raises "
                                 f"{type(err).__name__}: {ids.observed_text(str(err))}{also}")


def bind_result(ids: IdMap, kind: str, obs: Any, spec: Any, canonical: int | None = None) -> None:
    """`ids.bind`, its refusals as the replay's failures."""
    try:
        ids.bind(kind, obs, spec, canonical)
    except InvariantViolation as e:
        raise _Bad("violation", str(e), e.id) from None
    except ValueError as e:
        raise _Bad("refinement", str(e)) from None


def spec_action(ids: IdMap, act: Any, accepted: bool) -> Any:
    """`act` in the spec's ids; an accepted event naming an id never issued fails as "unknown-id"."""
    try:
        return ids.action(act, strict=accepted)
    except UnknownObservedId as e:
        raise _Bad("unknown-id", f"{act!r} was accepted but names {e}") from None


def spec_figures(ids: IdMap, kind: str, observed: dict[int, Any]) -> dict[int, Any]:
    try:
        return ids.figures(kind, observed)
    except UnknownObservedId as e:
        raise _Bad("unknown-id", str(e)) from None


def other_refusal(refusals: Any, state: Any, act: Any, err: E.GovernorError | None, outcome: dict[str, Any]) -> bool:
    """True iff the trace refused `act` with an error other than the spec's first, whose precondition holds too.

    The design orders none of the spec's checks (issue #21, D11): any refusal that applies is legal."""
    if err is None or outcome["outcome"] == "accepted" or type(err).__name__ == outcome["error"]:
        return False
    return outcome["error"] in {type(e).__name__ for e in refusals(state, act)}


def bounded_lines(stream: IO[bytes]) -> Iterable[bytes]:
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 2)
        if not raw:
            return
        yield raw
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            return  # the caller rejects it; never read the rest of an unbounded line
