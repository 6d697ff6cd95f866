"""Fused step verdicts: a memoized step that passed its step checks once passes them again, unjudged.

With successor memoization (`invariants.explore_memo`), a step's outcome (the
written parts, the result) is a function of its memo key: the action and the
parts of the state its footprint reads. The step predicates' verdicts are
functions of their projections (`invariants.explore_checks.READS`). Where a
projection reads only parts in the footprint's reads, its value is a
function of the memo key too (a part outside the writes is the before-state's,
and the writes are among the reads); a part it reads outside the footprint
(the bundles, for most actions) is unchanged by the step, so the projections
are functions of (memo key, those extra parts' values). `FusedSteps` records,
in the memo entry, the extra parts' values on which the key's step passed
every projected step predicate, and on a repeat skips building, hashing and
looking up the projection keys. Undeclared predicates (`always`) still run.

The "read only those parts" premise is checked, not trusted: each time a
key's step is judged for real and passes, the projections are evaluated
again on tracing stand-ins for the before- and after-states that record
every part read, and must give the real projections' values. The parts read
outside the footprint become the extra parts; where the stand-ins are used
as a whole (hashed, compared), read a non-field or give other values, the
proof fails, and that action type records no more fused verdicts: its steps
run the incremental checks (`refuted`; a verdict recorded before stays, as
each was proven on its own trace).
Re-tracing at every real judgement, not once per key, keeps this sound for
a projection whose reads depend on the values it read.

Sound as far as the footprints are (their successors are compared with the
plain step's in tests/test_explore_memo.py) and the projections are
(tests/test_explore_fast.py); tests/test_explore_fused.py compares the fused
explorer's verdicts and counterexamples with the full checks' explorer.
Clause counting and collecting run the full registries (`counting()`).

Measured (benchmarks/bench_explorer.py, composed scope at depth 4): 86,481
of the 130,624 accepted steps reuse a verdict, but the proof's trace (about
3 us at each of the 44,143 real judgements) costs about what the reuse
saves (about 3 us a step: the incremental skip path builds and hashes three
projection keys; a fused repeat costs under 1 us), so end to end it is
neutral within the noise (CPU 2.91 s vs 2.96 s memo alone in one run, 3.28 s
vs 3.02 s in another). It stays opt-in (`manager_model(fused=True)`).

Pure; one record per memo entry, so per model.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any

import attrs

from invariants.clauses import counting
from invariants.explore_checks import IncrementalChecks
from invariants.explore_memo import MemoStep
from spec import manager_actions as M

__all__ = ["FusedSteps", "ProofFailed"]


class ProofFailed(Exception):
    """A projection used a traced state as a whole, or gave another value on it: its reads are not known."""


class _TracedBase:
    """Stands in for a state; sets a bit in `mask` for each part (field) read from it (`_tracer`)."""

    __slots__ = ("_real", "mask")

    def __init__(self, real: Any) -> None:
        self._real = real
        self.mask = 0

    def __getattr__(self, name: str) -> Any:  # not a field: a read the mask cannot name
        raise ProofFailed(f"a projection read {name!r}, which is not a part of the state")

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() sees the real state's type
        return type(self._real)

    def __hash__(self) -> int:
        raise ProofFailed("a projection hashed the whole state")

    def __eq__(self, other: object) -> bool:
        raise ProofFailed("a projection compared the whole state")


def _tracer(cls: type) -> tuple[type, tuple[str, ...]]:
    """A `_TracedBase` subclass with one property per field of attrs class `cls` (bit i: field i), and the names."""
    names = tuple(f.name for f in attrs.fields(cls))
    src = "".join(f"    @property\n    def {n}(self):\n        self.mask |= {1 << i}\n        return self._real.{n}\n"
                  for i, n in enumerate(names))
    scope: dict[str, Any] = {"_TracedBase": _TracedBase}
    exec(compile(f"class Traced(_TracedBase):\n    __slots__ = ()\n{src}", f"<tracer {cls.__qualname__}>", "exec"),
         scope)  # noqa: S102 - fixed template over attrs field names
    return scope["Traced"], names


def _nothing(_: Any) -> tuple[()]:
    return ()


class FusedSteps:
    """`check_step(entry, before, act, after, result)`: `checks.check_step`'s verdict, skipped on a proven repeat.

    `entry` is `memo.entry` right after `memo` took this very step (None: not memoized, judged normally).
    """

    def __init__(self, checks: IncrementalChecks, memo: MemoStep) -> None:
        self._judge = checks.check_step
        self._judge_keys = checks.check_step_keys
        self._projections = checks.step_projections
        self._always = checks.step_always
        self._traced, names = _tracer(M.Manager)
        bit = {n: 1 << i for i, n in enumerate(names)}
        self._names = names
        #: action type -> the mask of the parts its footprint reads
        self._reads = {kind: sum(bit[f] for f in fp.reads) for kind, fp in memo.footprints.items()}
        self._outside_of: dict[tuple[type, int], tuple[str, ...]] = {}  # (kind, parts read) -> those outside
        self._getters: dict[tuple[str, ...], Callable[[Any], Hashable]] = {}  # outside parts -> their values' getter
        #: action type -> the parts its projections read outside its footprint (where proven on some key)
        self.extra: dict[type, tuple[str, ...]] = {}
        self.refuted: dict[type, str] = {}  # action type -> why its proof failed (it runs the incremental checks)
        self.fused = self.judged = 0  # steps whose verdict was reused / computed

    def check_step(self, entry: list[Any] | None, before: Any, act: Any, after: Any, result: Any) -> None:
        record = entry[3] if entry is not None else None
        if record and not counting():
            extra, passed, _ = record
            if extra(before) in passed:
                self.fused += 1
                for p in self._always:
                    p(before, act, after, result)
                return
        self.judged += 1
        if entry is None or record is False or counting():
            self._judge(before, act, after, result)
            return
        keys = [proj(before, act, after, result) for proj in self._projections]
        self._judge_keys(keys, before, act, after, result)  # raises on a violation: a failure is never recorded
        kind = act.__class__
        if kind in self.refuted:
            entry[3] = False
            return
        try:
            outside = self._outside(kind, keys, before, act, after, result)
        except ProofFailed as e:
            self.refuted[kind] = str(e)
            entry[3] = False
            return
        if record is None:
            getter = self._getters.get(outside)
            if getter is None:
                getter = self._getters[outside] = operator.attrgetter(*outside) if outside else _nothing
            record = entry[3] = (getter, set(), outside)
            self.extra.setdefault(kind, outside)
        elif record[2] != outside:  # this state's projections read other parts than the key's first one did
            self.refuted[kind] = f"the projections read {outside} here, {record[2]} on an earlier state"
            entry[3] = False
            return
        record[1].add(record[0](before))

    def _outside(self, kind: type, keys: list[Hashable], before: Any, act: Any, after: Any,
                 result: Any) -> tuple[str, ...]:
        """The parts the step projections read outside `kind`'s footprint; ProofFailed where that is not known.

        `keys`: the projections' values on the real states."""
        b, a = self._traced(before), self._traced(after)
        for proj, key in zip(self._projections, keys):
            if not _same(proj(b, act, a, result), key):
                raise ProofFailed(f"{proj.__name__} gave another value on the traced states")
        # An after-part outside the footprint is the before-state's (the writes are among the reads).
        read = b.mask | a.mask
        out = self._outside_of.get((kind, read))
        if out is None:
            out = self._outside_of[kind, read] = tuple(
                n for i, n in enumerate(self._names) if read >> i & 1 and not self._reads[kind] >> i & 1)
        return out


def _same(traced: Hashable, real: Hashable) -> bool:
    return traced == real  # a traced state inside `traced` raises ProofFailed from its __eq__
