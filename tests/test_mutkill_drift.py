"""invariants/drift.py pinned (its mutation run, benchmarks/mutation.py): the drift check on a catalog, predicate
tables, guards, docs and tests of its own, each kind of problem planted one at a time and its whole message pinned,
in the order drift_problems lists them; what an installed copy (no docs/ or no tests/) leaves unchecked."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from invariants import drift
from spec.catalog import Entry, Status
from spec.guards import Guard

PRED = "invariants._mutkill_preds"
DOC = "# the catalog\n"


def p_one(s):
    return True


def p_two(s, a, t):
    return True


def p_obs(o):
    return True


def p_reused(s):
    return True


p_reused.__wrapped__ = p_one


def entry(id: str, status: Status = Status.IMPLEMENTED, predicates=(), tests=(), checked_by="") -> Entry:
    return Entry(id=id, kind="invariant", title="t", statement="s", rationale="r", evidence=(), status=status,
                 predicates=tuple(predicates), tests=tuple(tests), checked_by=checked_by)


GOOD = (entry("A1", predicates=[f"{PRED}.p_one"], tests=["tests/test_a.py::test_one"]),
        entry("A2", predicates=[f"{PRED}.p_two", f"{PRED}.p_obs"], tests=["tests/test_a.py", "tests/test_a.py::Case",
                                                                          "tests/test_a.py::CASES[x-1]"]),
        entry("A3", checked_by="by hand", tests=["tests/test_a.py::test_one[p]"]),
        entry("N1", status=Status.NOT_YET_IMPLEMENTED))
TEST_A = "def test_one():\n    pass\n\n\nclass Case:\n    pass\n\n\nCASES = []\n"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A checkout (docs/spec.md, tests/test_a.py) and a catalog, predicate module and guards in step with it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text(DOC)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(TEST_A)
    mod = ModuleType(PRED)
    mod.STATE_PREDICATES = {"A1": (p_one, p_reused)}
    mod.STEP_PREDICATES = {"A2": (p_two,)}
    mod.OBSERVATION_PREDICATES = {"A2": (p_obs,)}
    monkeypatch.setitem(sys.modules, PRED, mod)
    monkeypatch.setattr(drift, "PREDICATE_MODULES", (PRED,))
    monkeypatch.setattr(drift, "render_markdown", lambda: DOC)
    monkeypatch.setattr(drift, "CATALOG", GOOD)
    monkeypatch.setattr(drift, "IDS", tuple(e.id for e in GOOD))
    monkeypatch.setattr(drift, "GUARDS", (Guard("g", ("A1", "A2"), "d", "h"),))
    return tmp_path, mod, monkeypatch


def test_the_project_tables():
    assert drift.PREDICATE_MODULES == ("invariants.ledger", "invariants.replay_predicates", "invariants.admission",
                                       "invariants.sessions", "invariants.hierarchy", "invariants.manager")
    assert drift._TABLES == ("STATE_PREDICATES", "STEP_PREDICATES", "TRACE_PREDICATES", "OBSERVATION_PREDICATES")
    assert drift.ROOT == Path(__file__).resolve().parent.parent and drift.in_checkout() and drift.unchecked() == []
    assert drift.drift_problems() == []


def test_a_world_in_step_has_no_problems(world):
    root, mod, _ = world
    assert drift._registered() == {f"{PRED}.p_one", f"{PRED}.p_two", f"{PRED}.p_obs"}
    assert drift._tables() == [(PRED, mod.STATE_PREDICATES), (PRED, mod.STEP_PREDICATES),
                               (PRED, mod.OBSERVATION_PREDICATES)]
    assert drift.drift_problems(root) == [] and drift.in_checkout(root) is True and drift.unchecked(root) == []


def test_every_problem_is_named_whole_in_order(world):
    root, mod, mp = world
    (root / "docs" / "spec.md").write_text(DOC + "edited\n")
    mod.TRACE_PREDICATES = {"Z9": (p_one,), "A1": (p_extra,)}
    mp.setattr(drift, "CATALOG", (
        entry("A1", predicates=[f"{PRED}.p_one", f"{PRED}.p_gone"], tests=["tests/test_a.py::test_two",
                                                                          "tests/test_b.py", "tests/test_b.py::x"]),
        entry("A2", predicates=[f"{PRED}.p_two", f"{PRED}.p_obs"]),
        entry("A3"),
        entry("N1", status=Status.NOT_YET_IMPLEMENTED, tests=["tests/test_a.py"]),
        entry("N2", status=Status.NOT_YET_IMPLEMENTED, predicates=[f"{PRED}.p_one"])))
    mp.setattr(drift, "GUARDS", (Guard("g", ("A1", "N1"), "d", "h"), Guard("h", ("Q7",), "d", "h")))
    assert drift.drift_problems(root) == [
        "docs/spec.md is stale: run `ortmem spec --write-docs`",
        f"A1 lists predicate {PRED}.p_gone, which is not registered in invariants",
        "A1 lists test tests/test_a.py::test_two, which does not exist",
        "A1 lists test tests/test_b.py, which does not exist",
        "A1 lists test tests/test_b.py::x, which does not exist",
        "A2 lists no test",
        "A3 has no predicate and no reasoned 'checked by' entry",
        "A3 lists no test",
        "N1 is not yet implemented but lists predicates or tests",
        "N2 is not yet implemented but lists predicates or tests",
        f"predicate {PRED}.p_extra is registered but no catalog entry lists it",
        "predicates registered for unknown ID Z9",
        "guard g protects N1, which is not implemented",
        "guard h protects Q7, which is not implemented",
    ]


def p_extra(s):
    return True


def test_missing_docs_file_is_stale(world):
    root, _, _ = world
    (root / "docs" / "spec.md").unlink()
    assert drift.drift_problems(root) == ["docs/spec.md is stale: run `ortmem spec --write-docs`"]


def test_a_test_path_that_is_a_folder_does_not_exist(world):
    root, _, mp = world
    (root / "tests" / "sub").mkdir()
    mp.setattr(drift, "CATALOG", (entry("A1", predicates=[f"{PRED}.p_one", f"{PRED}.p_two", f"{PRED}.p_obs"],
                                        tests=["tests/sub", "tests/test_a.py::test_one_more"]),))
    assert drift.drift_problems(root) == ["A1 lists test tests/sub, which does not exist",
                                          "A1 lists test tests/test_a.py::test_one_more, which does not exist",
                                          "guard g protects A2, which is not implemented"]


@pytest.mark.parametrize("gone", ["docs", "tests", "tests as a file"])
def test_an_installed_copy_skips_docs_and_tests_and_says_so(world, gone):
    root, _, mp = world
    (root / "docs" / "spec.md").write_text("stale\n")
    (root / gone.split()[0]).rename(root / "elsewhere")
    if gone == "tests as a file":
        (root / "tests").write_text("a file, not a folder")
    mp.setattr(drift, "CATALOG", GOOD + (entry("A4", predicates=[f"{PRED}.p_one"], tests=["tests/nowhere.py"]),))
    assert drift.in_checkout(root) is False
    assert drift.unchecked(root) == [
        f"docs/spec.md against the catalog: no docs/ in {root} (an installed copy, not a checkout)",
        f"the catalog's tests exist: no tests/ in {root}"]
    assert drift.drift_problems(root) == []
