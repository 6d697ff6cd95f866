"""Catalog, predicates, tests and generated docs stay in step."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from invariants.drift import ROOT, drift_problems
from spec.catalog import CATALOG, IDS, Status, entry

EXPECTED_IDS = ("C1 C2 C3 C4 C5 C6 C7 C8 C9 C10 I1 I2 I3 I4a I4b I5 I6 I7 I8 I8b I8c I9 I10 I11 I12 I13").split()


def test_catalog_has_all_26_ids_in_order() -> None:
    assert list(IDS) == EXPECTED_IDS


def test_no_drift() -> None:
    assert drift_problems() == []


def test_not_yet_implemented_entries_name_their_plan() -> None:
    for e in CATALOG:
        if e.status is Status.NOT_YET_IMPLEMENTED:
            assert e.planned and not e.predicates and not e.tests, e.id


def test_entry_lookup_is_case_insensitive() -> None:
    assert entry("i8c").id == "I8c"
    with pytest.raises(KeyError, match="no catalog entry"):
        entry("I99")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for part in ("docs", "tests"):
        shutil.copytree(ROOT / part, tmp_path / part)
    return tmp_path


def test_stale_docs_detected(tree: Path) -> None:
    (tree / "docs" / "spec.md").write_text((tree / "docs" / "spec.md").read_text() + "\nedited by hand\n")
    assert any("stale" in p for p in drift_problems(tree))


def test_missing_test_detected(tree: Path) -> None:
    (tree / "tests" / "test_authorities.py").unlink()
    assert any("test_authorities.py" in p and "does not exist" in p for p in drift_problems(tree))
