"""I7's `unlock_before_callback`: its deterministic control is a fixed refimpl script (rule R4), named a script.

The spec has no lock, so the explorer has nothing to exhaust for this guard;
`refimpl.verify.pressure_scripts` runs a fixed script on the real manager
(through the composed adapter) instead. These tests pin that the script is clean with every guard on, harms
with the guard off, is refused as a control when it is wrong, and that the
verdict credits it as a script (never as the explorer) while R2's spec layer
stays unmet for a guard the spec cannot express.
"""

from __future__ import annotations

import pytest

from invariants import manager as _manager_clauses  # noqa: F401  (declares the composed clauses)
from invariants.campaign import ControlResult
from invariants.clauses import Coverage, clauses_of
from refimpl.verify import pressure_scripts as PS
from refimpl.verify.checkers import CHECKERS
from refimpl.verify.job import PROFILES
from refimpl.verify.verdict_rules import THRESHOLDS, judge
from spec.guards import ALL_ON, GUARDS, GuardSet, Layer

G = next(g for g in GUARDS if g.name == "unlock_before_callback")
CLAUSE = "observed_I7_manager.callback_without_ledger_lock"


def test_script_is_clean_with_every_guard_on() -> None:
    accepted, rejected, violation, steps = PS._run(G, ALL_ON)
    assert violation is None and accepted == steps == len(PS.SCRIPTS[G.name][0]) and rejected == 0


def test_script_finds_the_callback_under_the_lock_with_the_guard_off() -> None:
    _, _, violation, _ = PS._run(G, GuardSet.without(G.name))
    assert violation is not None and violation.id == "I7" and violation.clause == CLAUSE


def test_the_pressure_checker_gives_the_script_as_the_guards_deterministic_control() -> None:
    r = CHECKERS["pressure"].explore(G, PROFILES["quick"])
    assert r.found and r.violated == "I7" and r.clause == CLAUSE, r.message
    assert r.model.endswith(PS.SCRIPT_SUFFIX) and not r.complete  # a fixed script, not a searched fixpoint
    assert r.counterexample[-1] == "Press(holder=1, authority=1, target=4, priority=0, deadline=5)"


def test_a_script_that_fails_with_every_guard_on_is_not_a_control(monkeypatch: pytest.MonkeyPatch) -> None:
    actions, _ = PS.SCRIPTS[G.name]

    def always(ad: object) -> None:
        raise PS.InvariantViolation("I7", "broken observation", clause=CLAUSE)

    monkeypatch.setitem(PS.SCRIPTS, G.name, (actions, always))
    r = PS.run_script(G)
    assert not r.found and "not a control" in r.message


def test_a_script_that_presses_nobody_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    actions, observe = PS.SCRIPTS[G.name]
    monkeypatch.setitem(PS.SCRIPTS, G.name, (actions[:-1], observe))  # no Press: no callback runs
    r = PS.run_script(G)
    assert not r.found and "no counterexample found" in r.message


# --- the verdict: a script is named a script, and R2's spec layer is not waived -------------------------


def _judge(script_found: bool) -> object:
    keys = [c.key for c in clauses_of("I7")]
    cov = Coverage({k: [100, THRESHOLDS["quick"]] for k in keys})
    guards = tuple(g.name for g in GUARDS if "I7" in g.ids)
    controls = [ControlResult(g, layer, ("I7",), True, "I7", 2, 0.1, (), "msg", CLAUSE)
                for g in guards for layer in Layer if (g, layer) != (G.name, Layer.SPEC)]
    controls.append(ControlResult(G.name, Layer.SPEC, ("I7",), False, None, None, 0.0, (),
                                  "not expressible in the spec: the spec has no lock"))
    explored = {g: CHECKERS["pressure"].explore(G, PROFILES["quick"]) if g == G.name else
                PS.ExploreResult("pressure", 9, 9, 0, 3, True, 0.1, "I7", "msg", (), CLAUSE) for g in guards}
    if not script_found:
        explored[G.name] = PS.ExploreResult("pressure-script", 2, 1, 0, 1, True, 0.1, None, "none", ())
    mutants = [ControlResult(f"m{i}", Layer.REFIMPL, ("I7",), True, "I7", 5, 0.1, (), "msg", k)
               for i, k in enumerate(keys)]
    return judge("I7", "quick", cov, guards, controls, mutants, explored, True, "")


def test_verdict_credits_the_script_as_a_script_and_keeps_R2s_spec_layer() -> None:
    j = _judge(script_found=True)
    row = next(r for r in j.coverage if f"{r.predicate}.{r.clause}" == CLAUSE)
    assert f"script:{G.name}" in row.failed_by and f"explorer:{G.name}" not in row.failed_by
    assert not any(r.startswith("R4") for r in j.reasons), j.reasons
    # The spec cannot express the guard: R2's spec layer stays unmet, with the reason the control gave.
    assert j.status == "partial"
    assert j.reasons == (f"R2: guard {G.name} off in spec produced no harm (nothing found: not expressible in the "
                         "spec: the spec has no lock)",)


def test_verdict_R4_names_a_script_that_found_nothing() -> None:
    j = _judge(script_found=False)
    assert f"R4: the fixed script found nothing with guard {G.name} off" in j.reasons
