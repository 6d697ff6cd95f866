"""invariants/checked.py pinned (its mutation run, benchmarks/mutation.py): the checked step every stateful checker
shares, on a toy protocol whose governor can be made to go wrong one way at a time. Each refinement mismatch is
reported at the step it is planted on, with its whole message; the counters, the coverage, the failure's script and
the state diff are pinned whole."""

from __future__ import annotations

from typing import Any

import attrs
import immutables
import pytest
from hypothesis.stateful import rule

from invariants._violation import ErrorTypeDivergence, InvariantViolation, RefinementViolation
from invariants.adapter import OwnIds, script
from invariants.checked import CheckedMachine, diff
from invariants.clauses import Clause, Coverage, conjunction
from spec.errors import CapacityDenied, InvalidArgument, UnknownHolder


@attrs.frozen
class Inner:
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0


@attrs.frozen
class S:
    n: int = 0
    m: immutables.Map = immutables.Map()
    inner: Inner = Inner()


@attrs.frozen
class Add:
    k: int


@attrs.frozen
class Bad:
    pass


def toy_step(s: S, a: Any) -> tuple[S, Any]:
    if isinstance(a, Bad) or a.k < 0:
        raise InvalidArgument("bad")
    return S(s.n + 1, s.m.set(a.k, s.n), s.inner), a.k


# Not registered in invariants.clauses.CLAUSES: a toy's clauses must not join the catalog.
POSITIVE = Clause("T", "state_T", "small", "n stays below 3")
GROWS = Clause("T", "step_T", "grows", "an accepted step grows n")


def state_T(s: S) -> None:
    if POSITIVE.case(s.n > 0) and s.n >= 3:
        POSITIVE.fail(f"n is {s.n}")


def step_T(prev: S, a: Any, now: S) -> None:
    if GROWS.case(isinstance(a, Add) and now.n != prev.n) and now.n != prev.n + 1:
        GROWS.fail(f"{prev.n} -> {now.n}")


class Gov:
    """The spec's step, with one planted fault at a time (`fault(state, action, (state, result))`)."""

    def __init__(self, fault: Any = None) -> None:
        self.state, self.fault, self.closed = S(), fault, 0

    def execute(self, a: Any) -> Any:
        out = toy_step(self.state, a) if self.fault is None else self.fault(self.state, a)
        self.state, result = out
        return result

    def abstract(self) -> S:
        return self.state

    def close(self) -> None:
        self.closed += 1


class Toy(CheckedMachine):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    @rule()
    def nothing(self) -> None:
        pass

    def spec_step(self, state: Any, action: Any) -> tuple[Any, Any]:
        return toy_step(state, action)

    def situations(self, prev: Any, action: Any, now: Any) -> tuple[str, ...]:
        self.calls.append("situations")
        self.seen = (prev, action, now)
        return ("grew", "any")

    def check_state(self, state: Any) -> None:
        self.calls.append("state")
        conjunction({"T": (state_T,)}, state)

    def check_step(self, prev: Any, action: Any, now: Any) -> None:
        self.calls.append("step")
        self.seen_step = (prev, action, now)
        conjunction({"T": (step_T,)}, prev, action, now)


def machine(fault: Any = None, stats: dict | None = None, **flags: Any) -> Toy:
    m = type("T2", (Toy,), {"stats": stats, **flags})()
    m.start(Gov(fault), S())
    return m


def raised(m: Toy, action: Any) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as e:
        m.act(action)
    return e.value


# --- diff ---------------------------------------------------------------------------


def test_diff_names_each_field_each_map_key_and_inside_components() -> None:
    assert diff(1, 2) == "1 != 2"
    assert diff(S(), Inner()) == \
        "S(n=0, m=immutables.Map({}), inner=Inner(a=0, b=0, c=0, d=0, e=0)) != Inner(a=0, b=0, c=0, d=0, e=0)"
    assert diff(S(), S()) == "no difference"
    a = S(1, immutables.Map({2: "x", 10: "y", 3: "z"}), Inner(a=1))
    b = S(2, immutables.Map({2: "x", 10: "w", 4: "v"}), Inner(a=2))
    assert diff(a, b) == "n: 1 != 2; m[10]: 'y' != 'w'; m[3]: 'z' != None; m[4]: None != 'v'"
    assert diff(a, b, limit=6) == ("n: 1 != 2; m[10]: 'y' != 'w'; m[3]: 'z' != None; m[4]: None != 'v'; "
                                   "inner.a: 1 != 2")
    assert diff(a, b, limit=1) == "n: 1 != 2"


def test_diff_limit_reaches_inside_a_component_and_mismatched_kinds_print_whole() -> None:
    five = Inner(1, 1, 1, 1, 1)
    assert diff(S(inner=Inner()), S(inner=five), limit=5) == \
        "inner.a: 0 != 1; inner.b: 0 != 1; inner.c: 0 != 1; inner.d: 0 != 1; inner.e: 0 != 1"
    assert diff(S(inner=Inner()), S(inner=five), limit=2) == "inner.a: 0 != 1; inner.b: 0 != 1"
    assert diff(S(m=immutables.Map({1: 1})), S(m=None)) == "m: immutables.Map({1: 1}) != None"
    assert diff(S(m=None), S(m=immutables.Map({1: 1}))) == "m: None != immutables.Map({1: 1})"
    assert diff(S(inner=Inner()), S(inner=None)) == "inner: Inner(a=0, b=0, c=0, d=0, e=0) != None"
    assert diff(S(inner=None), S(inner=Inner())) == "inner: None != Inner(a=0, b=0, c=0, d=0, e=0)"
    # a value whose repr holds the separator stays one place, inside a component too
    assert diff(S(inner=Inner(a="p; q")), S(inner=Inner())) == "inner.a: 'p; q' != 0"
    assert diff(S(inner=Inner()), S(inner=S())) == \
        "inner: Inner(a=0, b=0, c=0, d=0, e=0) != S(n=0, m=immutables.Map({}), inner=Inner(a=0, b=0, c=0, d=0, e=0))"


# --- start, counters, coverage ------------------------------------------------------------


def test_a_machine_before_its_start_has_no_governor_and_no_abstraction() -> None:
    m = Toy()
    assert (m.gov, m.abs, m.trace, m.last_result, m.changed) == (None, None, [], None, [])


def test_a_clean_run_counts_every_step_and_case() -> None:
    stats: dict[str, Any] = {}
    m = machine(stats=stats)
    assert m.calls == ["state"] and m.abs == S() and m.trace == [] and m.last_result is None
    m.act(Add(5))
    assert m.calls == ["state", "situations", "step", "state"]
    assert m.seen == m.seen_step == (S(), Add(5), S(1, immutables.Map({5: 0})))
    m.act(Bad())
    m.act(Add(-1))
    m.act(Add(6))
    assert m.calls[4:] == ["state", "state", "situations", "step", "state"]
    assert m.abs == S(2, immutables.Map({5: 0, 6: 1})) and m.last_result == 6
    assert m.trace == [Add(5), Bad(), Add(-1), Add(6)]
    assert m.coverage is stats["coverage"] and m.coverage is m.coverage
    cov = stats.pop("coverage")
    assert type(cov) is Coverage and cov.counts == {"state_T.small": [5, 4], "step_T.grows": [2, 2]}
    last = stats.pop("last_step")
    assert last == (m, S(1, immutables.Map({5: 0})), Add(6), m.abs, True)
    assert stats == {"examples": 1, "steps": 4, "accepted": 2, "accepted:Add": 2, "event:grew": 2, "event:any": 2,
                     "rejected:InvalidArgument": 2}
    m.act(Bad())
    assert stats["last_step"] == (m, m.abs, Bad(), m.abs, False) and stats["steps"] == 5
    assert m.last_result is None  # a refusal's result is None
    m.teardown()
    assert stats["last_trace"] == m.trace and stats["last_trace"] is not m.trace and m.gov.closed == 1


def test_without_stats_nothing_is_counted_and_situations_are_not_asked() -> None:
    m = machine()
    m.act(Add(1))
    m.act(Bad())
    assert m.coverage is None and m.stats is None and m.calls == ["state", "step", "state", "state"]
    m.teardown()
    m.gov = object()  # no close: teardown asks for none
    m.teardown()


def test_the_initial_state_must_be_the_specs_unless_refinement_is_off() -> None:
    gov = Gov()
    gov.state = S(1)
    with pytest.raises(RefinementViolation) as e:
        type("T3", (Toy,), {})().start(gov, S())
    assert str(e.value) == "refinement: initial state is not the spec's: n: 1 != 0"
    m = type("T4", (Toy,), {"check_refinement": False, "stats": {}})()
    m.start(gov, S())
    assert m.abs == S(1) and m.gov is gov and m.stats["coverage"].counts == {"state_T.small": [1, 1]}


def test_own_ids_wraps_the_governor_only_when_refinement_is_checked() -> None:
    m = machine(own_ids=True)
    assert type(m.gov) is OwnIds and type(m.gov.gov) is Gov
    for a in (Add(1), Bad(), Add(-3), Add(2)):
        m.act(a)
    assert m.abs == S(2, immutables.Map({1: 0, 2: 1})) and m.last_result == 2
    assert m.gov.want == m.abs
    off = machine(own_ids=True, check_refinement=False)
    assert type(off.gov) is Gov and type(machine().gov) is Gov
    off.act(Add(1))
    off.act(Bad())
    assert off.abs == S(1, immutables.Map({1: 0}))


class Matcher:
    """Records what the machine hands `OwnIds.match`, and answers with the spec's own outcome."""

    def __init__(self, gov: Gov) -> None:
        self.gov, self.asked = gov, []

    def execute(self, a: Any) -> Any:
        return self.gov.execute(a)

    def abstract(self) -> S:
        return self.gov.abstract()

    def match(self, raw: Any, action: Any, want: Any, want_result: Any) -> tuple[Any, Any]:
        self.asked.append((raw, action, want, want_result))
        return raw, self.gov.abstract()


def test_own_ids_starts_from_the_specs_initial_state_and_matches_each_step_against_the_specs_outcome() -> None:
    m = type("T6", (Toy,), {"own_ids": True})()
    m.start(Gov(), S())
    assert m.gov.want == S() and m.gov.identity
    m.gov = Matcher(m.gov.gov)
    m.act(Add(1))
    m.act(Bad())
    one = S(1, immutables.Map({1: 0}))
    assert m.gov.asked == [(1, Add(1), one, 1), (None, Bad(), one, None)] and m.last_result is None


# --- refinement: each mismatch at the step it is planted on ---------------------------------


def fails_on(k: int, how: Any) -> Any:
    """The spec's step, except on Add(k) (and Bad(), when k is None)."""
    def fault(s: S, a: Any) -> tuple[S, Any]:
        if (a == Add(k)) or (k is None and isinstance(a, Bad)):
            return how(s, a)
        return toy_step(s, a)
    return fault


def refuse(err: Exception) -> Any:
    def how(s: S, a: Any) -> Any:
        raise err
    return how


INNER_C4 = fails_on(2, lambda s, a: (attrs.evolve(toy_step(s, a)[0], inner=Inner(c=4)), 2))


@pytest.mark.parametrize("fault, action, kind, message", [
    (fails_on(None, lambda s, a: (s, None)), Bad(), RefinementViolation,  # accepts what the spec refuses
     "refinement: Bad(): spec rejects (InvalidArgument: bad) but the implementation accepted"),
    (fails_on(2, refuse(CapacityDenied("full"))), Add(2), RefinementViolation,  # refuses what the spec accepts
     "refinement: Add(k=2): spec accepts but the implementation raised CapacityDenied: full"),
    (fails_on(None, refuse(CapacityDenied("full"))), Bad(), ErrorTypeDivergence,  # refuses for another reason
     "refinement: Bad(): spec raises InvalidArgument, implementation CapacityDenied: full"),
    (fails_on(2, lambda s, a: toy_step(s, a)[0:1] + (7,)), Add(2), RefinementViolation,  # a wrong result
     "refinement: Add(k=2): result 7 vs spec 2; no difference"),
    (INNER_C4, Add(2), RefinementViolation, "refinement: Add(k=2): result 2 vs spec 2; inner.c: 4 != 0"),  # next state
])
def test_each_refinement_mismatch_is_reported_at_its_step(fault: Any, action: Any, kind: type, message: str) -> None:
    m = machine(fault)
    m.act(Add(1))
    e = raised(m, action)
    assert type(e) is kind and str(e) == message
    assert e.clause == ("refinement.error_type" if kind is ErrorTypeDivergence else "refinement")
    assert m.abs == S(1, immutables.Map({1: 0}))  # the failing step is not adopted


def test_a_tolerated_error_type_is_counted_and_refinement_off_judges_only_the_predicates() -> None:
    stats: dict[str, Any] = {}
    m = machine(fails_on(None, refuse(CapacityDenied("full"))), stats=stats, tolerate_error_type=True)
    m.act(Bad())
    m.act(Bad())
    m.act(Add(-1))  # the same type: not a divergence
    assert stats["error_type_divergences"] == 2 and stats["rejected:CapacityDenied"] == 2
    m = machine(fails_on(None, refuse(CapacityDenied("full"))), check_refinement=False)
    m.act(Bad())  # refinement off: not judged
    m = machine(INNER_C4, check_refinement=False)
    m.act(Add(2))  # refinement off: only the predicates judge
    assert m.abs.inner == Inner(c=4)


def test_a_refusal_that_changes_the_state_is_G4() -> None:
    gov_state: dict[str, Gov] = {}

    def fault(s: S, a: Any) -> Any:
        if isinstance(a, Bad):
            gov_state["g"].state = attrs.evolve(s, n=9)
            raise InvalidArgument("bad")
        return toy_step(s, a)
    m = machine(fault)
    gov_state["g"] = m.gov
    m.act(Add(1))
    e = raised(m, Bad())
    assert type(e) is InvariantViolation and e.id == "G4" and e.clause == "G4.rejection_changes_nothing"
    assert str(e) == "G4: Bad() was rejected but changed n: 1 != 9"
    m = machine(fault, check_refinement=False)
    gov_state["g"] = m.gov
    assert str(raised(m, Bad())) == "G4: Bad() was rejected but changed n: 0 != 9"


def test_the_predicates_judge_the_step_and_the_state() -> None:
    m = machine(fails_on(2, lambda s, a: (attrs.evolve(s, n=s.n + 2), 2)), check_refinement=False)
    m.act(Add(1))
    e = raised(m, Add(2))
    assert e.clause == "step_T.grows" and str(e) == "T: 1 -> 3"
    assert m.abs == S(1, immutables.Map({1: 0}))
    m = machine()
    for k in range(2):
        m.act(Add(k))
    e = raised(m, Add(2))
    assert e.clause == "state_T.small" and str(e) == "T: n is 3"


def test_failing_clauses_lists_every_clause_the_step_breaks() -> None:
    m = machine(check_refinement=False)
    prev, now = S(2), S(4)
    assert m.failing_clauses(prev, Add(1), now, True) == ["step_T.grows", "state_T.small"]
    assert m.failing_clauses(prev, Add(1), now, False) == ["state_T.small"]
    assert m.failing_clauses(S(0), Add(1), S(1), True) == []
    assert m.seen_step == (S(0), Add(1), S(1))

    class Raw(Toy):
        def check_state(self, state: Any) -> None:
            raise InvariantViolation("X", "raw")
    r = type("R2", (Raw,), {"stats": {}})()
    r.gov = Gov()
    assert r.failing_clauses(prev, Add(1), now, True) == ["step_T.grows", "X"]
    assert r.stats == {"examples": 1}  # nothing counted while collecting


# --- the failure's script, and the abstraction read twice ---------------------------------


def test_a_violation_carries_the_script_of_the_steps_that_changed_the_state() -> None:
    m = machine(fails_on(3, lambda s, a: (s, 3)), script_note=True)
    for a in (Add(1), Bad(), Add(2)):
        m.act(a)
    assert m.changed == [Add(1), Add(2)]
    e = raised(m, Add(3))
    assert e.__notes__ == [script("T2", [Add(1), Add(2), Add(3)])]
    assert e.__notes__[0].endswith("state = T2()\nstate.act(Add(k=1))\nstate.act(Add(k=2))\nstate.act(Add(k=3))")
    assert m.changed == [Add(1), Add(2)]
    plain = machine(fails_on(3, lambda s, a: (s, 3)))
    assert not hasattr(raised(plain, Add(3)), "__notes__") and plain.changed == []


def test_the_abstraction_read_twice_without_a_step_must_agree() -> None:
    m = type("T5", (Toy,), {})()
    m.abstraction_is_stable()  # no governor yet
    m.start(Gov(), S())
    m.abstraction_is_stable()
    m.gov.state = S(1)
    with pytest.raises(RefinementViolation) as e:
        m.abstraction_is_stable()
    assert str(e.value) == "refinement: abstraction changed without a step"


# --- the hooks: the governor's own steps (`own_steps`) and the refusals the spec allows (`refusals`) ---------------


def test_own_steps_sees_each_step_both_accepted_with_the_specs_outcome_and_the_governors_result() -> None:
    """`own_steps` is asked only where the spec and the governor both accepted, with the spec's (state, result), the
    action and the governor's raw result; what it returns is what the governor's state must equal."""
    seen: list[Any] = []

    def own(self: Toy, expected: tuple[Any, Any], action: Any, raw: Any) -> tuple[Any, Any]:
        seen.append((expected, action, raw))
        return (attrs.evolve(expected[0], inner=Inner(e=raw)) if raw == 3 else expected[0]), expected[1]

    m = machine(INNER_C4, own_steps=own)
    m.act(Add(1))
    m.act(Add(-1))  # refused by both: not asked
    assert seen == [((S(1, immutables.Map({1: 0})), 1), Add(1), 1)]
    e = raised(m, Add(2))  # the governor's state is not the spec's with its own steps: a refinement violation
    assert str(e) == "refinement: Add(k=2): result 2 vs spec 2; inner.c: 4 != 0"
    m = machine(fails_on(3, lambda s, a: (attrs.evolve(toy_step(s, a)[0], inner=Inner(e=3)), 3)), own_steps=own)
    m.act(Add(3))  # the governor's own step (inner.e = 3) is the one `own_steps` applied: refines
    assert m.abs.inner == Inner(e=3)
    m = machine(fails_on(None, lambda s, a: (s, None)), own_steps=own)
    seen.clear()
    with pytest.raises(RefinementViolation):
        m.act(Bad())  # the spec refused, the governor accepted: not asked
    assert seen == []


def test_a_refusal_the_spec_allows_is_no_divergence_and_refusals_is_asked_with_the_step() -> None:
    asked: list[Any] = []

    def allows(self: Toy, state: Any, action: Any) -> tuple[Exception, ...]:
        asked.append((state, action))
        return (InvalidArgument("bad"), CapacityDenied("full"))

    m = machine(fails_on(None, refuse(CapacityDenied("full"))), refusals=allows)
    m.act(Add(1))
    m.act(Bad())  # the spec's first refusal is InvalidArgument; CapacityDenied applies too: legal
    assert asked == [(S(1, immutables.Map({1: 0})), Bad())]
    assert m.abs == S(1, immutables.Map({1: 0}))
    m = machine(fails_on(None, refuse(UnknownHolder("who"))), refusals=allows)  # a refusal the spec does not allow
    e = raised(m, Bad())
    assert type(e) is ErrorTypeDivergence and str(e) == \
        "refinement: Bad(): spec raises InvalidArgument, implementation UnknownHolder: who"
