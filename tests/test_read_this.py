"""docs/read-this.md (issue #22 item 4): the reading path names stretches that exist, about 800 lines in all.

Each row of its table names a file and a stretch ("whole file", "from the top to `MARK`", "from `MARK` to
`MARK`" or "from `MARK` to the end"); the stretch is cut from the file as it is now and counted, so the
document's "about 800 lines" cannot drift. A marker that is missing, or a stretch that is empty, fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "read-this.md"
LIMIT = 900  # "about 860 lines" (800 before the process quota, D6)
_ROW = re.compile(r"^\| \d+ \| `([^`]+)` \| ([^|]+) \|", re.M)


def stretch(text: str, spec: str) -> list[str]:
    """The lines of `text` that `spec` names."""
    lines = text.splitlines()
    marks = re.findall(r"`([^`]+)`", spec)

    def at(mark: str) -> int:
        hits = [i for i, line in enumerate(lines) if line.startswith(mark)]
        if len(hits) != 1:
            raise AssertionError(f"marker {mark!r} found {len(hits)} times (want exactly one line starting with it)")
        return hits[0]
    spec = spec.strip()
    if spec == "whole file":
        return lines
    if spec.startswith("from the top to") and len(marks) == 1:
        return lines[:at(marks[0])]
    if spec.endswith("to the end") and len(marks) == 1:
        return lines[at(marks[0]):]
    if len(marks) == 2:
        a, b = at(marks[0]), at(marks[1])
        if b <= a:
            raise AssertionError(f"{marks[1]!r} comes before {marks[0]!r}")
        return lines[a:b]
    raise AssertionError(f"cannot read the stretch {spec!r}")


def path_lines(doc: str) -> list[tuple[str, int]]:
    rows = _ROW.findall(doc)
    assert rows, "docs/read-this.md lists no stretch"
    out = []
    for path, spec in rows:
        n = len(stretch((ROOT / path).read_text(), spec))
        assert n > 0, (path, spec)
        out.append((path, n))
    return out


def test_the_reading_path_is_about_860_lines() -> None:
    counted = path_lines(DOC.read_text())
    total = sum(n for _, n in counted)
    assert 400 <= total <= LIMIT, counted


@pytest.mark.parametrize("edit, problem", [
    (lambda d: d.replace("`# --- requester tickets`", "`# --- no such section`"), "found 0 times"),
    (lambda d: d.replace("| 5 | `spec/manager_parts.py` | from `# --- requester tickets` to `# --- limits` |",
                         "| 5 | `spec/manager_parts.py` | whole file |\n| 7 | `spec/ledger.py` | whole file |"),
     "assert"),
])
def test_a_wrong_or_too_long_path_fails(edit, problem: str) -> None:
    """Negative controls: a stretch that no longer exists, and a path that grew past the limit."""
    with pytest.raises(AssertionError, match=problem):
        counted = path_lines(edit(DOC.read_text()))
        assert sum(n for _, n in counted) <= LIMIT, counted
