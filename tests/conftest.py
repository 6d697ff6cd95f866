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

import pytest
from hypothesis import HealthCheck, settings

from invariants import contracts

settings.register_profile("ci", max_examples=50, stateful_step_count=30, deadline=None, derandomize=True,
                          database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=20, stateful_step_count=20, deadline=None)
# benchmarks/mutation.py: small and derandomized, so each mutant's verdict is reproducible and affordable.
settings.register_profile("mutation", max_examples=15, stateful_step_count=20, deadline=None, derandomize=True,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.getenv("HYPOTHESIS_PROFILE", "ci" if os.getenv("CI") else "dev"))


@pytest.fixture
def where() -> Iterator[str]:
    """A fresh directory for a process hierarchy's sockets and journal, short: Unix socket paths are limited to
    108 bytes."""
    d = tempfile.mkdtemp(prefix="h-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


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
    "slow": {"test_cli.py::test_ctrl_c_stops_verify_within_seconds_without_stray_processes",
             "test_cli_progress.py::test_verify_into_a_log_writes_a_line_at_least_every_ten_seconds",
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
    # Only the tests that need a device: the CPU-build path of test_ort_cuda.py runs everywhere.
    "gpu": {"ort/test_ort_governed.py::test_cuda_session_really_on_cuda",
            "ort/test_ort_cuda.py::test_cuda_generation_runs_on_cuda"},
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            rel = Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()
        except ValueError:
            continue
        node = rel + "::" + item.name
        marks = {"ort"} if rel.startswith("ort/") else set()
        marks |= {m for m, files in MARKED_FILES.items() if rel in files}
        marks |= {m for m, tests in MARKED_TESTS.items() if any(node.startswith(t) for t in tests)}
        for m in sorted(marks):
            item.add_marker(getattr(pytest.mark, m))
