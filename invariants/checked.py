"""The checked step every stateful checker shares, and a readable state diff.

`CheckedMachine` is the base of each protocol's Hypothesis machine (ledger,
pressure, transactions, admission, real ORT sessions). A subclass supplies
the rules, `spec_step` and the predicates; the base performs one checked
step for every action:

  (a) the state predicates on the new abstraction, and the step predicates
      on accepted steps;
  (b) refinement: the implementation's result and next abstraction equal
      the spec's step on the previous abstraction, error type for error type
      (or a refusal `refusals` names: the design leaves their order free);
  (c) a rejection leaves the whole abstraction unchanged (lease rule G4).

`adapter_factory` is set by `invariants.campaign.configure`; the subclass
calls it (with whatever configuration it drew) and hands the adapter to
`start`. With `check_refinement` off the adapter is the spec itself with a
guard switched off, and only the predicates can detect (spec-layer controls).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from hypothesis.stateful import RuleBasedStateMachine, invariant

from invariants._violation import ErrorTypeDivergence, InvariantViolation, RefinementViolation
from invariants.clauses import Coverage, collecting, recording
from spec.errors import GovernorError

__all__ = ["CheckedMachine", "diff"]


def diff(a: Any, b: Any, limit: int = 4) -> str:
    """Where two abstract states differ: field by field, map entry by map entry (the first `limit` places)."""
    return "; ".join(_places(a, b)[:limit]) or "no difference"


def _places(a: Any, b: Any) -> list[str]:
    if not (attrs.has(type(a)) and type(a) is type(b)):
        return [f"{a!r} != {b!r}"]
    out = []
    for f in attrs.fields(type(a)):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x == y:
            continue
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out += [f"{f.name}[{k!r}]: {x.get(k)!r} != {y.get(k)!r}"
                    for k in sorted(set(x) | set(y), key=repr) if x.get(k) != y.get(k)]
        elif attrs.has(type(x)) and type(x) is type(y):  # a component (the manager's ledger): where inside it
            out += [f"{f.name}.{d}" for d in _places(x, y)]
        else:
            out.append(f"{f.name}: {x!r} != {y!r}")
    return out


class CheckedMachine(RuleBasedStateMachine):
    """Base machine: subclasses define rules, `spec_step`, `check_state` and `check_step`."""

    adapter_factory: Callable[..., Any]
    check_refinement: bool = True
    #: Controls search on past two refusals that differ only in error type (not a harm; counted in
    #: stats["error_type_divergences"]); a campaign fails on them.
    tolerate_error_type: bool = False
    #: The adapter issues ids of its own (any fresh ids): `invariants.adapter.OwnIds` maps them to the spec's.
    own_ids: bool = False
    #: A violation's note is the example's actions as a script (`invariants.adapter.script`): for machines whose
    #: rules draw with `st.data()`, where Hypothesis' own printout does not run.
    script_note: bool = False
    #: Shared counters a campaign reads: examples, steps, accepted, accepted:<Action>,
    #: rejected:<Error>, event:<situation>, coverage (an `invariants.clauses.Coverage`), last_trace.
    stats: dict[str, Any] | None = None

    def spec_step(self, state: Any, action: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def situations(self, prev: Any, action: Any, now: Any) -> tuple[str, ...]:
        """The cases of interest an accepted step met, read from the two abstractions (counted as the
        campaign's events, so a rare case that never occurs is visible); none by default."""
        return ()

    def own_steps(self, expected: tuple[Any, Any], action: Any, raw: Any) -> tuple[Any, Any]:
        """The spec's (state, result) once the steps the governor took on its own after `action` (`raw`: its
        result, in its ids) are applied; `expected` by default: a governor takes no step it is not asked to."""
        return expected

    def refusals(self, state: Any, action: Any) -> tuple[Exception, ...]:
        """Every refusal the spec allows for `action` in `state` where the design does not order the checks (a
        governor may raise any of them); none but the spec's own by default."""
        return ()

    def check_state(self, state: Any) -> None:
        raise NotImplementedError

    def check_step(self, prev: Any, action: Any, now: Any) -> None:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.gov: Any = None
        self.abs: Any = None
        self.trace: list[Any] = []
        self.last_result: Any = None
        self.changed: list[Any] = []  # the accepted actions that changed the state (`script_note`)
        self._count("examples")

    def _count(self, key: str) -> None:
        if self.stats is not None:
            self.stats[key] = self.stats.get(key, 0) + 1

    @property
    def coverage(self) -> Coverage | None:
        """Where this machine's own predicate evaluations are counted (None: not counted)."""
        if self.stats is None:
            return None
        cov = self.stats.get("coverage")
        if cov is None:
            cov = self.stats["coverage"] = Coverage()
        return cov

    def start(self, gov: Any, initial: Any) -> None:
        """Adopt the adapter; its first abstraction must be the spec's initial state. With `own_ids` and
        refinement on, the adapter's ids are its own (`invariants.adapter.OwnIds` matches them to the spec's)."""
        if self.own_ids and self.check_refinement:
            from invariants.adapter import OwnIds
            gov = OwnIds(gov, initial)
        self.gov = gov
        self.abs = gov.abstract()
        if self.check_refinement and self.abs != initial:
            raise RefinementViolation(f"initial state is not the spec's: {diff(self.abs, initial)}")
        with recording(self.coverage):
            self.check_state(self.abs)

    def teardown(self) -> None:
        close = getattr(self.gov, "close", None)
        if close is not None:
            close()
        if self.stats is not None:
            self.stats["last_trace"] = list(self.trace)

    def act(self, action: Any) -> None:
        """One checked step (what a failure's printed script calls, `script_note`)."""
        self._do(action)

    def _do(self, action: Any) -> None:
        if not self.script_note:
            return self._step(action)
        prev = self.abs
        try:
            self._step(action)
        except InvariantViolation as e:
            from invariants.adapter import script
            e.add_note(script(type(self).__name__, [*self.changed, action]))
            raise
        if self.abs != prev:
            self.changed.append(action)  # the script leaves out the steps that changed nothing (refusals)

    def _step(self, action: Any) -> None:
        prev = self.abs
        self.trace.append(action)
        expected: tuple[Any, Any] | None = None
        expected_err: GovernorError | None = None
        try:
            expected = self.spec_step(prev, action)
        except GovernorError as e:
            expected_err = e
        result: Any = None
        err: GovernorError | None = None
        try:
            result = self.gov.execute(action)
        except GovernorError as e:
            err = e
        if expected is not None and err is None:
            expected = self.own_steps(expected, action, result)
        if self.own_ids and self.check_refinement:  # the governor's ids, named by the spec's (OwnIds)
            result, now = self.gov.match(result, action, *(expected or (prev, None)))
        else:
            now = self.gov.abstract()
        self.last_result = result  # what a step predicate that judges results reads (the manager's credits)
        self._count("steps")
        self._count(f"rejected:{type(err).__name__}" if err else "accepted")
        if err is None:
            self._count(f"accepted:{type(action).__name__}")
            for case in self.situations(prev, action, now) if self.stats is not None else ():
                self._count(f"event:{case}")
        if self.check_refinement:
            if expected_err is not None and err is None:
                raise RefinementViolation(f"{action!r}: spec rejects ({type(expected_err).__name__}: "
                                          f"{expected_err}) but the implementation accepted")
            if expected_err is None and err is not None:
                raise RefinementViolation(f"{action!r}: spec accepts but the implementation raised "
                                          f"{type(err).__name__}: {err}")
            legal = expected_err is None or type(err) is type(expected_err) or type(err) in {
                type(e) for e in self.refusals(prev, action)}
            if not legal and self.tolerate_error_type:
                self._count("error_type_divergences")
            elif not legal:
                raise ErrorTypeDivergence(f"{action!r}: spec raises {type(expected_err).__name__}, "
                                          f"implementation {type(err).__name__}: {err}")
            if expected is not None and (result != expected[1] or now != expected[0]):
                raise RefinementViolation(f"{action!r}: result {result!r} vs spec {expected[1]!r}; "
                                          f"{diff(now, expected[0])}")
        if err is not None:
            # Verify a rejection changed nothing: the whole snapshot (lease rule G4).
            if now != prev:
                raise InvariantViolation("G4", f"{action!r} was rejected but changed {diff(prev, now)}",
                                         clause="G4.rejection_changes_nothing")
        if self.stats is not None:  # what a control re-checks, every clause at once, after a violation
            self.stats["last_step"] = (self, prev, action, now, err is None)
        with recording(self.coverage):
            if err is None:
                self.check_step(prev, action, now)
            self.check_state(now)
        self.abs = now

    def failing_clauses(self, prev: Any, action: Any, now: Any, accepted: bool) -> list[str]:
        """Every clause (one per predicate) the step breaks, not only the first (rule R3 credit)."""
        with collecting() as found, recording(None):
            try:  # checks that are not registry conjunctions still raise
                if accepted:
                    self.check_step(prev, action, now)
                self.check_state(now)
            except InvariantViolation as e:
                found.append(e.clause or e.id)
        return found

    @invariant()
    def abstraction_is_stable(self) -> None:
        # Reading the abstraction twice without a step must give the same state.
        if self.gov is not None and self.gov.abstract() != self.abs:
            raise RefinementViolation("abstraction changed without a step")
