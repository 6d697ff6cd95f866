"""The per-ID rules of `refimpl.verify.verdict_rules` (issue #9): each rule, unmet, makes the ID partial with its reason."""

from __future__ import annotations

import pytest

from invariants.campaign import ControlResult
from invariants.clauses import CLAUSES, Coverage, clause, clauses_of, recording
from invariants.explore import ExploreResult
from invariants import ledger as predicates  # noqa: F401  (declares the ledger clauses)
from invariants import manager as _manager_predicates  # noqa: F401  (declares I2's manager clauses: KEYS below
#                                                      must list every I2 clause whichever tests ran before)
from invariants import replay_predicates as _observed  # noqa: F401  (and I2's observed grant charge)
from refimpl.verify.verdict_rules import THRESHOLDS, judge
from spec.guards import Layer

ID = "I2"
GUARD = "limit_check"
KEYS = [c.key for c in clauses_of(ID)]


def _control(layer: Layer, found: bool = True, clause: str | None = None, guard: str = GUARD) -> ControlResult:
    return ControlResult(guard, layer, (ID,), found, ID if found else None, 3 if found else None, 0.1, (),
                         "msg", clause if found else None)


def _inputs() -> dict:
    cov = Coverage({k: [100, THRESHOLDS["quick"]] for k in KEYS})
    controls = [_control(Layer.SPEC, clause=KEYS[0]), _control(Layer.REFIMPL, clause="refinement")]
    mutants = [ControlResult(f"m{i}", Layer.REFIMPL, (ID,), True, ID, 5, 0.1, (), "msg", k)
               for i, k in enumerate(KEYS)]
    explored = {GUARD: ExploreResult("ledger", 9, 9, 0, 3, False, 0.1, ID, "msg", (), KEYS[0])}
    return dict(id=ID, profile="quick", coverage=cov, guards=(GUARD,), controls=controls, mutants=mutants,
                explorer_controls=explored, crosshair_ok=True, crosshair_why="")


def test_judge_verifies_when_every_rule_holds() -> None:
    j = judge(**_inputs())
    assert (j.status, j.reasons) == ("verified", ())
    assert [c.antecedent_held for c in j.coverage] == [THRESHOLDS["quick"]] * len(KEYS)


def _thin(x: dict) -> None:
    x["coverage"].counts[KEYS[1]] = [100, THRESHOLDS["quick"] - 1]


def _no_harm(x: dict) -> None:
    x["controls"][1] = _control(Layer.REFIMPL, found=False)


def _unkilled(x: dict) -> None:
    x["mutants"] = x["mutants"][:-1]


def _no_explorer(x: dict) -> None:
    x["explorer_controls"] = {}


def _explorer_nothing(x: dict) -> None:
    x["explorer_controls"] = {GUARD: ExploreResult("ledger", 9, 9, 0, 3, True, 0.1, None, "none", ())}


def _missing_layer(x: dict) -> None:
    x["controls"] = x["controls"][:1]


def _crosshair(x: dict) -> None:
    x["crosshair_ok"], x["crosshair_why"] = False, "CrossHair: not installed"


@pytest.mark.parametrize("breaks, rule", [
    (_thin, "R1"), (_no_harm, "R2"), (_missing_layer, "R2"), (_unkilled, "R3"), (_no_explorer, "R4"),
    (_explorer_nothing, "R4"), (_crosshair, "R5"),
])
def test_judge_is_partial_with_the_reason(breaks, rule: str) -> None:
    x = _inputs()
    breaks(x)
    j = judge(**x)
    assert j.status == "partial"
    assert j.reasons and all(r.startswith(rule) for r in j.reasons), j.reasons


def test_a_control_on_another_ids_clause_does_not_make_a_clause_falsifiable() -> None:
    x = _inputs()
    x["mutants"] = [ControlResult("m", Layer.REFIMPL, ("I1",), True, "I1", 5, 0.1, (), "msg", KEYS[0])]
    x["controls"] = [_control(Layer.SPEC, clause="refinement"), _control(Layer.REFIMPL, clause="refinement")]
    x["explorer_controls"] = {GUARD: ExploreResult("ledger", 9, 9, 0, 3, False, 0.1, ID, "msg", (), "refinement")}
    j = judge(**x)
    assert sum(r.startswith("R3") for r in j.reasons) == len(KEYS)


def test_coverage_counts_evaluations_and_cases_only_while_recording() -> None:
    c = CLAUSES[KEYS[0]]
    cov = Coverage()
    c.case(True)  # not recording: nothing counted
    with recording(cov):
        c.case(True)
        c.case(False)
        c.case(True)
    c.case(True)
    assert cov.of(c.key) == (3, 2)


def test_clause_fail_names_id_and_clause() -> None:
    c = CLAUSES[KEYS[0]]
    with pytest.raises(AssertionError, match=f"^{ID}: boom") as e:
        c.fail("boom")
    assert e.value.clause == c.key


def test_a_clause_cannot_be_declared_twice() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        clause(ID, CLAUSES[KEYS[0]].predicate, CLAUSES[KEYS[0]].name, "again")


def test_collecting_reports_every_failing_predicate_clause() -> None:
    """A state that breaks two predicates: raising stops at the first, collecting names both (rule R3 credit)."""
    import immutables

    from invariants.clauses import collecting
    from invariants.ledger import STATE_PREDICATES, check_all
    from spec.ledger_state import Authority, State
    from spec.types import ContextState, Tier

    a = Authority(1, "gpu", Tier.DEVICE, 8, 8, None, None, ContextState.ACTIVE, 5)  # used 5, nothing charged
    b = Authority(2, "gpu", Tier.DEVICE, 8, 8, None, None, ContextState.ACTIVE, 0)  # a second ledger on "gpu"
    s = State(authorities=immutables.Map({1: a, 2: b}), next_authority=3)
    with pytest.raises(AssertionError, match="^C1"):
        check_all(s)
    with collecting() as found:
        check_all(s)
    assert "state_C1.one_ledger_per_pool" in found and "state_I1.used_is_sum_of_charges" in found
    assert len(found) <= sum(len(v) for v in STATE_PREDICATES.values())


# --- the clause machinery itself (issue #26 item 4: mutmut's survivors in invariants/clauses.py) ----------


def test_declaring_a_clause_registers_exactly_what_was_declared() -> None:
    from invariants.clauses import CLAUSES as registry

    c = clause("I2", "test_predicate", "declared_here", "no test clause is registered other than as declared")
    try:
        assert registry[c.key] is c and c.key == "test_predicate.declared_here"
        assert (c.id, c.predicate, c.name, c.statement) == (
            "I2", "test_predicate", "declared_here", "no test clause is registered other than as declared")
        assert c in clauses_of("I2")
    finally:
        del registry[c.key]


def _failing(name: str, exc: BaseException) -> object:
    def p(*args: object) -> None:
        raise exc
    p.__name__ = name
    return p


def _passing(*args: object) -> None:
    pass


def test_conjunction_evaluates_every_predicate_of_an_id_in_turn() -> None:
    """Each ID's predicates all run: a passing first one never hides a failing second one."""
    from invariants.clauses import conjunction

    c = CLAUSES[KEYS[0]]

    def second(*args: object) -> None:
        c.fail("second")
    with pytest.raises(AssertionError, match=f"^{ID}: second"):
        conjunction({ID: (_passing, second)}, None)


def test_collecting_names_a_predicate_that_crashed_and_goes_on() -> None:
    from invariants.clauses import collecting, conjunction

    c = CLAUSES[KEYS[0]]
    def breaks(*args: object) -> None:
        c.fail("boom")
    with collecting() as found:
        conjunction({"X": (_failing("reads_a_missing_field", KeyError("k")), breaks)}, None)  # type: ignore[dict-item]
    assert found == ["reads_a_missing_field:crashed:KeyError", c.key]


def test_counting_is_true_only_while_recording_or_collecting() -> None:
    from invariants.clauses import collecting, counting

    assert counting() is False
    with recording(Coverage()):
        assert counting() is True
    with collecting():
        assert counting() is True
    with recording(None):
        assert counting() is False


def test_coverage_adds_counts_from_a_coverage_and_from_a_dict_and_reads_zero_when_unseen() -> None:
    cov = Coverage({"a.x": [3, 1]})
    cov.add(Coverage({"a.x": [2, 2], "b.y": [5, 0]}))
    cov.add({"b.y": [1, 1], "c.z": [4, 3]})
    assert cov.counts == {"a.x": [5, 3], "b.y": [6, 1], "c.z": [4, 3]}
    assert cov.of("a.x") == (5, 3) and cov.of("never.seen") == (0, 0)
