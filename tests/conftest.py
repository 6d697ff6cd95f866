# Suite-wide setup: the contract switch is the project's only module-level
# mutable state, so every test gets it back at its start value; Hypothesis
# profiles follow ORT-NOTES section 6 ("ci" when the CI env var is set;
# "mutation" for benchmarks/mutation.py). The markers registered in
# pyproject.toml (slow, ort, browser, gpu) are applied here from one table,
# by file and by test name, so `-m "not slow"` or `-m "not ort"` selects
# without every file repeating its own marks.

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from invariants import contracts
from refimpl.verify.job import import_every_module

settings.register_profile("ci", max_examples=50, stateful_step_count=30, deadline=None, derandomize=True,
                          database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=20, stateful_step_count=20, deadline=None)
# benchmarks/mutation.py: small and derandomized, so each mutant's verdict is reproducible and affordable.
settings.register_profile("mutation", max_examples=15, stateful_step_count=20, deadline=None, derandomize=True,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.getenv("HYPOTHESIS_PROFILE", "ci" if os.getenv("CI") else "dev"))
# A derandomized campaign searches the same in every worker, whatever tests ran in it before (Hypothesis draws
# constants from the local modules a process imported): `import_every_module`.
import_every_module()


@pytest.fixture
def where() -> Iterator[str]:
    """A fresh directory for a process hierarchy's sockets and journal, short: Unix socket paths are limited to
    108 bytes."""
    d = tempfile.mkdtemp(prefix="h-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hier(where: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A started process hierarchy of the test module's `Q` units, its options the test's indirect parameter (else
    the module's `HIER_OPTIONS`); no process of it outlives the test."""
    from refimpl.hierarchy.driver import Hierarchy, leftovers

    h = Hierarchy(where, request.module.Q, **getattr(request, "param", getattr(request.module, "HIER_OPTIONS", {})))
    yield h.start()
    h.close()
    assert leftovers(h.pids, h.starts) == [], "a hierarchy process outlived the test"


@pytest.fixture(autouse=True)
def _reset_contract_switch():
    yield
    contracts.reset()


_TESTS = Path(__file__).resolve().parent

#: Files (relative to tests/) whose every test gets the mark; tests/ort/ is all "ort".
MARKED_FILES = {
    "browser": {"test_view_browser.py", "test_docs_mermaid.py"},
    "ort": {"test_hierarchy_serve.py", "test_docs_ort_claims.py"},
    # Whole files of slow tests (a wheel build and install; campaigns searched to a failure, twice).
    "slow": {"test_install.py", "test_redis_database.py"},
}
#: Single tests (node id after the file, parametrized ids included by prefix) that get a mark.
MARKED_TESTS = {
    # Over 40 s each in a full run on this 2-core machine under other load (pytest --durations, 2026-12-02).
    "slow": {"test_cli.py::test_ctrl_c_stops_verify_without_stray_processes",
             "test_verify.py::test_verify_quick_writes_the_per_id_report",
             "ort/test_ort_depth.py::test_quick_campaign_reaches_depth",
             "test_records.py::test_manager_quick_scope_steps_are_the_same_with_attrs_evolve",
             "test_records.py::test_ledger_quick_scope_steps_are_the_same_with_attrs_evolve",
             "test_manager_tx_campaign.py::test_tx_campaign_reaches_views_and_bundles_and_rejects_bad_input",
             "test_docs_mermaid.py::test_every_mermaid_block_renders",
             "test_own_governor.py::test_planted_bug_fails_with_a_runnable_reproduction",
             "test_own_governor.py::test_guide_example_finds_a_planted_composed_bug",
             "test_pressure_tx_scopes.py::test_checkers_explore_every_guard_on_without_violation",
             "test_pressure_stateful.py::test_pressure_campaign_reaches_every_situation_and_rejects_bad_input"},
    # Only the tests that need a device: with these, every test that asks for the `cuda` fixture (test_ort_cuda.py's
    # device tests; its CPU-build path runs everywhere).
    "gpu": {"ort/test_ort_governed.py::test_cuda_session_really_on_cuda"},
}


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect: every collected test is seen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    files, used = set(), set()
    for item in items:
        try:
            rel = Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()
        except ValueError:
            continue
        files.add(rel)
        node = rel + "::" + item.name
        marks = {"ort"} if rel.startswith("ort/") else set()
        marks |= {m for m, names in MARKED_FILES.items() if rel in names}
        hit = {t for tests in MARKED_TESTS.values() for t in tests if node.startswith(t)}
        used |= hit
        marks |= {m for m, tests in MARKED_TESTS.items() if hit & tests}
        marks |= {"gpu"} if "cuda" in getattr(item, "fixturenames", ()) else set()
        for m in sorted(marks):
            item.add_marker(getattr(pytest.mark, m))
    # A mark that names no test marks nothing, silently (a renamed slow test would run in the fast pass). A file
    # the command line names test by test (`file.py::test_x`, as benchmarks/mutation.py selects) is not all there.
    picked = {Path(a.split("::")[0]).resolve() for a in config.args if "::" in a}
    stale = sorted(t for tests in MARKED_TESTS.values() for t in tests if t.split("::")[0] in files
                   and t not in used and _TESTS / t.split("::")[0] not in picked)
    stale += sorted(f for names in MARKED_FILES.values() for f in names if not (_TESTS / f).exists())
    if stale:
        raise pytest.UsageError(f"tests/conftest.py marks tests that do not exist: {', '.join(stale)}")
