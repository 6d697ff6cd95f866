"""The mutation ratchet: benchmarks/mutation-results.json never falls below benchmarks/mutation-ratchet.json.

No mutation run here (that is benchmarks/mutation.py, tens of minutes): this
reads the two committed files. Every module in the ratchet has a result at or
above its floor, every module that was run has a floor, and every result's
counts add up to its mutants and give its stated rate. The checker is shown
able to fail: a lowered rate, a module run without a floor, and counts that
do not give the stated rate are each reported.

A result whose module changed since its run (its recorded source_sha256 is
not today's) is stale: named as a warning in the CI log and flagged next to
its rate in `benchmarks/mutation.py --report`, not failed (failing would
force a mutation run per edit).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("benchmarks_mutation", ROOT / "benchmarks" / "mutation.py")
assert _spec is not None and _spec.loader is not None
mutation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutation)


@pytest.fixture(scope="module")
def results() -> dict:
    return json.loads(mutation.RESULTS.read_text())["modules"]


@pytest.fixture(scope="module")
def ratchet() -> dict:
    return json.loads(mutation.RATCHET.read_text())["floors"]


def test_results_meet_the_ratchet(results, ratchet) -> None:
    assert mutation.check_ratchet(results, ratchet) == []


def test_ratchet_is_not_empty_and_is_a_rate(ratchet) -> None:
    assert ratchet
    assert all(0.0 <= floor <= 1.0 for floor in ratchet.values())


def test_every_module_run_is_in_the_ratchet(results, ratchet) -> None:
    assert set(results) <= set(ratchet)


def test_equivalent_entries_are_reviewed() -> None:
    entries = mutation.load_equivalent()
    assert all(e["reason"].strip() and e["line"].startswith("+") for e in entries)
    assert len({e["mutant"] for e in entries}) == len(entries)


def test_equivalent_entries_name_code_that_still_exists() -> None:
    entries = mutation.load_equivalent()
    assert mutation.orphaned_equivalents(entries) == []
    # Negative controls: an entry of a deleted module, and one whose function was renamed away.
    gone = {**entries[0], "module": "refimpl/manager/leases.py",
            "mutant": "refimpl.manager.leases.x\u01c1Leases\u01c1_drain__mutmut_9"}
    method = next(e for e in entries if "\u01c1" in e["mutant"])  # a method's mutant: "x\u01c1Class\u01c1name"
    renamed = {**method, "mutant": method["mutant"].rsplit("\u01c1", 1)[0] + "\u01c1no_such_function__mutmut_1"}
    found = mutation.orphaned_equivalents([gone, renamed])
    assert len(found) == 2 and "not a mutation target" in found[0]
    assert "defines no function no_such_function" in found[1]


def test_check_ratchet_rejects_a_lowered_rate(results, ratchet) -> None:
    # Negative control: one killed mutant turned into a survivor, rate recomputed honestly.
    module = max(ratchet, key=lambda m: (ratchet[m], m))
    lowered = copy.deepcopy(results)
    r = lowered[module]
    r["killed"] -= 1
    r["survived"] += 1
    r["kill_rate"] = mutation.kill_rate(r)
    assert r["kill_rate"] < ratchet[module]
    problems = mutation.check_ratchet(lowered, ratchet)
    assert problems == [f"{module}: kill rate {r['kill_rate']} below the ratchet floor {ratchet[module]}"]


def test_check_ratchet_rejects_a_module_without_floor(results, ratchet) -> None:
    module = sorted(ratchet)[0]
    floors = {m: f for m, f in ratchet.items() if m != module}
    assert mutation.check_ratchet(results, floors) == [f"{module}: run, but has no ratchet floor"]


def test_check_ratchet_rejects_a_rate_its_counts_do_not_give(results, ratchet) -> None:
    module = sorted(ratchet)[0]
    forged = copy.deepcopy(results)
    forged[module]["survived"] += 1
    forged[module]["mutants"] += 1  # counts still add up; the stated rate is now too high
    problems = mutation.check_ratchet(forged, ratchet)
    assert any(p.startswith(f"{module}: kill rate {forged[module]['kill_rate']} is not what its counts give") for p in problems)


def test_check_ratchet_rejects_a_missing_result(results, ratchet) -> None:
    module = sorted(ratchet)[0]
    partial = {m: r for m, r in results.items() if m != module}
    assert mutation.check_ratchet(partial, ratchet) == [f"{module}: in the ratchet but not in the results"]


def test_kill_rate_excludes_equivalent_and_counts_timeouts() -> None:
    c = {"mutants": 12, "killed": 7, "timeout": 1, "survived": 2, "no_tests": 0, "other": 0, "equivalent": 2}
    assert mutation.kill_rate(c) == 0.8


def _result(rate_killed: int, mutants: int = 10, incomplete: bool = False) -> dict:
    c = {"mutants": mutants, "killed": rate_killed, "timeout": 0, "survived": mutants - rate_killed,
         "no_tests": 0, "other": 0, "equivalent": 0, "incomplete": incomplete}
    c["kill_rate"] = mutation.kill_rate(c)
    return c


@pytest.mark.parametrize(("floors", "results", "allow_lower", "want"), [
    ({"a.py": 0.8}, {"a.py": _result(9), "b.py": _result(7)}, False, ({"a.py": 0.9, "b.py": 0.7}, [])),
    ({"a.py": 0.9}, {"a.py": _result(8)}, False, ({"a.py": 0.9}, ["a.py: 0.8 < floor 0.9"])),
    ({"a.py": 0.9}, {"a.py": _result(8)}, True, ({"a.py": 0.8}, [])),
    ({"a.py": 0.9}, {"a.py": _result(2, incomplete=True)}, True, ({"a.py": 0.9}, [])),
], ids=["raises_a_floor_and_adds_a_new_module", "refuses_to_lower_a_floor", "lowers_only_when_asked",
        "keeps_the_floor_of_an_unfinished_run"])
def test_next_ratchet(floors: dict, results: dict, allow_lower: bool, want: tuple) -> None:
    assert mutation.next_ratchet(floors, results, sorted(results), allow_lower=allow_lower) == want


def test_check_ratchet_rejects_a_result_without_its_source_hash(results, ratchet) -> None:
    module = sorted(ratchet)[0]
    unhashed = copy.deepcopy(results)
    del unhashed[module]["source_sha256"]
    assert mutation.check_ratchet(unhashed, ratchet) == [
        f"{module}: no source_sha256, so whether its module changed since cannot be told"]


def test_stale_results_are_named_not_failed(results) -> None:
    for module, why in mutation.stale(results).items():
        warnings.warn(f"mutation ratchet: {module}: {why}", UserWarning, stacklevel=1)


def test_stale_flags_a_module_changed_by_one_byte_and_no_other(results, tmp_path) -> None:
    # Negative control on copies: the same bytes are fresh; one byte changed, or the module gone, is stale.
    module = sorted(results)[0]
    data = (ROOT / module).read_bytes()
    (tmp_path / module).parent.mkdir(parents=True)
    (tmp_path / module).write_bytes(data)
    recorded = {module: {**results[module], "commit": "abc1234", "source_sha256": mutation.source_hash(data)}}
    assert mutation.stale(recorded, tmp_path) == {}
    assert "stale" not in mutation._table(recorded, [module], tmp_path)
    (tmp_path / module).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    flag = "stale: changed since its recorded run at abc1234"
    assert mutation.stale(recorded, tmp_path) == {module: flag}
    assert mutation._table(recorded, [module], tmp_path).splitlines()[-1].endswith(f"({flag})")
    (tmp_path / module).unlink()
    assert mutation.stale(recorded, tmp_path) == {module: flag}
