"""The project's own fuzzers (issue #14): hostile values interleaved with valid operations.

`run_fuzz` draws a sequence of public operations of one governor part; each
argument is a valid value drawn from the live world (ids it issued, small
byte counts, enum members) or, with probability `HOSTILE_RATE`, a hostile
one (`HOSTILE`: wrong types, numpy scalars, bool, float, NaN, inf, huge and
negative ints, int subclasses, unknown ids, non-callables). After each call:
success, or a `GovernorError` with a message and the WHOLE abstract
snapshot unchanged; any other exception fails the run (`InvariantViolation`
propagates as the bug it is). Counts of calls, acceptances and rejections
per error class are accumulated in a `Counter` and reported by `report`.
Derandomized: a failure reproduces from the printed example.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from invariants._violation import InvariantViolation
from invariants.manager_replay import replay_manager_lines
from refimpl.tracing import boundary
from spec.errors import CalloutFailed, GovernorError
from spec.types import Role, Tier
from trace_harness import lines_of

__all__ = ["HOSTILE", "HOSTILE_RATE", "FUZZ_SETTINGS", "IntSub", "run_fuzz", "report", "replayed"]


class IntSub(int):
    """An int subclass: equal to an int, but not `type(...) is int`."""

    def __repr__(self) -> str:
        return f"IntSub({int(self)})"


HOSTILE_RATE = 1 / 8
#: One hostile argument in eight (sampled_from favours its first entries, so "valid" comes first).
_HOSTILE_NOW = st.sampled_from([False] * 7 + [True])

HOSTILE = st.one_of(
    st.none(), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63, 2**64, 10**30, 10**9]),
    st.sampled_from([np.int64(1), np.int32(2), np.uint8(3), np.float64(1.0), np.bool_(True), Decimal(1),
                     Decimal("NaN"), Fraction(1, 2), b"1", bytearray(b"2"), "1", "", "x" * 300, IntSub(1),
                     IntSub(2), object(), [], {}, (), (1,), Tier.HOST, Role.KV, print, 1j]),
    st.text(max_size=4),
)

FUZZ_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Op = tuple[str, tuple[str, ...]]


def run_fuzz(data: Any, gov: Any, ops: Sequence[Op], valid: Callable[[str, Any], Any],
             snapshot: Callable[[Any], Any], counts: Counter, steps: int,
             noted: Callable[[str, tuple[Any, ...], Any], None] = lambda name, args, result: None,
             check: Callable[[Any], None] = lambda gov: None) -> None:
    """`steps` operations on `gov`; `valid(kind, data)` draws a valid argument of that kind."""
    for _ in range(steps):
        name, kinds = data.draw(st.sampled_from(list(ops)), label="op")
        args = tuple(data.draw(HOSTILE, label=k) if data.draw(_HOSTILE_NOW) else valid(k, data) for k in kinds)
        before = snapshot(gov)
        counts["calls"] += 1
        try:
            result = getattr(gov, name)(*args)
        except CalloutFailed as e:  # the call completed; the call-out's failure is reported, typed
            counts[f"completed, call-out failed: {type(e).__name__}"] += 1
            check(gov)
            continue
        except GovernorError as e:
            counts["rejected"] += 1
            counts[f"rejected: {type(e).__name__}"] += 1
            assert str(e), f"{name}{args!r}: {type(e).__name__} without a message"
            after = snapshot(gov)
            assert after == before, f"{name}{args!r} was refused ({e!r}) but changed the snapshot"
            continue
        except InvariantViolation:
            raise
        except Exception as e:
            raise AssertionError(f"{name}{args!r} raised untyped {type(e).__name__}: {e}") from e
        counts["accepted"] += 1
        noted(name, args, result)
        check(gov)


def report(part: str, counts: Counter, capsys: Any) -> None:
    """Print the counts and append them to $ORTMEM_FUZZ_COUNTS (default: a file in the temp dir)."""
    path = os.environ.get("ORTMEM_FUZZ_COUNTS", os.path.join(tempfile.gettempdir(), "ortmem-fuzz-counts.jsonl"))
    line = {"part": part, "calls": counts["calls"], "accepted": counts["accepted"], "rejected": counts["rejected"],
            "by_error": {k.split(": ", 1)[1]: v for k, v in sorted(counts.items()) if ": " in k}}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
    with capsys.disabled():
        print(f"\n[fuzz {part}] {counts['calls']} calls, {counts['accepted']} accepted, "
              f"{counts['rejected']} rejected with typed errors and an unchanged snapshot")


def replayed(pmm: Any, buf: Any) -> tuple[Any, list[bytes]]:
    """`pmm`'s own trace, written to `buf`, closed at a boundary and replayed against `spec.manager`."""
    boundary(pmm)
    lines = lines_of(buf)
    return replay_manager_lines(lines), lines
