"""docs/trace-format.md cannot drift from the code (issue #21 item 4).

- every event kind of every revision has a row in a section naming that revision, and no row names a kind
  the code lacks; each row's ids and arguments are the kind's fields (read from the generated schema, so
  the page, the schema and the event types agree);
- the ten-line example replays clean through `ortmem replay`;
- observed figures: leaving out a figure the operation moved, or one it only named, is refused with the reason
  the page quotes (tests/test_observed_figures.py: every kind of figure, and refimpl's own traces).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from invariants.manager_replay import replay_manager_lines
from invariants.trace_schema import REVISION_KINDS, json_schema
from refimpl.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "trace-format.md"
_ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$")


def _rows() -> list[tuple[set[str], str, list[str], list[str], str]]:
    """(revisions its section names, kind, ids, arguments, meaning) of every row under `## Events`."""
    events = DOC.read_text().split("\n## Events\n", 1)[1].split("\n## ", 1)[0]
    out, revisions = [], set()
    for line in events.splitlines():
        if line.startswith("### "):
            revisions = set(re.findall(r"`(ortmem-[a-z]+/\d+)`", line))
            assert revisions, f"section {line!r} names no revision"
        elif m := _ROW.match(line):
            def names(cell: str) -> list[str]:
                return [] if cell.strip() == "-" else [x.strip() for x in cell.split(",")]
            out.append((revisions, m[1], names(m[2]), names(m[3]), m[4].strip()))
    return out


def _short(revision: str) -> str:
    return revision.removeprefix("ortmem-").split("/")[0]


def test_every_event_kind_has_a_row_and_no_row_names_a_kind_the_code_lacks() -> None:
    rows = _rows()
    documented = {(r, kind) for revisions, kind, *_ in rows for r in revisions}
    for revision, kinds in REVISION_KINDS.items():
        missing = [k for k in kinds if (revision, k) not in documented]
        assert not missing, f"docs/trace-format.md has no row for these {revision} kinds: {missing}"
    for revisions, kind, *_ in rows:
        assert any(kind in REVISION_KINDS.get(r, ()) for r in revisions), \
            f"docs/trace-format.md documents {kind!r} under {sorted(revisions)}, which the code does not have"
    kinds = [kind for _, kind, *_ in rows]
    assert len(kinds) == len(set(kinds)), "a kind has two rows"


def test_each_rows_ids_and_arguments_are_the_kinds_fields() -> None:
    defs = json_schema()["$defs"]
    for revisions, kind, ids, args, meaning in _rows():
        assert len(meaning) > 20, f"{kind}: say what it means"
        for r in revisions:
            if kind not in REVISION_KINDS.get(r, ()):
                continue
            entry = defs["boundary" if kind == "boundary" else f"{_short(r)}.{kind}"]["properties"]
            want_ids = list(entry["ids"].get("properties", {}))
            want_args = list(entry["payload"].get("properties", {}))
            assert (ids, args) == (want_ids, want_args), f"{r} {kind}: the page says {ids} / {args}"


def _example() -> list[str]:
    return DOC.read_text().split("```jsonl\n", 1)[1].split("```", 1)[0].splitlines()


def test_the_example_is_ten_lines_and_replays_clean(tmp_path: Path) -> None:
    lines = _example()
    assert len(lines) == 10
    trace, out = tmp_path / "example.jsonl", tmp_path / "verdict.json"
    trace.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(trace), "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["ok"] and got["events"] == 10, got


def _without_used(i: int) -> list[bytes]:
    lines = _example()
    ev = json.loads(lines[i])
    ev["payload"]["used"] = {}
    lines[i] = json.dumps(ev)
    return [x.encode() + b"\n" for x in lines]


@pytest.mark.parametrize("i", [3, 6, 7, 9])  # reserve 0 -> 16, release 16 -> 0, grant 0 -> 64, release 64 -> 0
def test_a_moved_figure_left_out_is_refused_naming_it(i: int) -> None:
    r = replay_manager_lines(_without_used(i))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    assert "changed used of authority 7 but the event does not say so" in r.message
    assert re.search(r"\(refinement\): \w+\(\.\.\.\)\s+changed used of authority 7 but the event does not say so",
                     DOC.read_text()), "the page quotes the refusal"


@pytest.mark.parametrize("i", [4, 5, 8])  # commit, the pending submit, the claim: each names authority 7, moves nothing
def test_a_named_but_unmoved_figure_left_out_is_refused_naming_it(i: int) -> None:
    r = replay_manager_lines(_without_used(i))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    assert "names authority 7 but the event does not observe its used" in r.message
    assert re.search(r"at line 6 \(refinement\): Submit\(\.\.\.\)\s+names authority 7 but the event does not "
                     r"observe its used", DOC.read_text()), "the page quotes the refusal"
