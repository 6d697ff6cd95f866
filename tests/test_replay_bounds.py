"""No legal trace of our own governor is refused for its size: only a line's bytes bound an event (issue #21).

A paged KV cache holds thousands of leases, so an answer gives back hundreds
of pages, a limit change presses hundreds of holders and a device loss
reports the charge of thousands of allocations. Each trace here is written
by refimpl itself and must replay clean through `ortmem replay`; the same
trace with one list made wrong by hand must not (the lists are still read,
element by element). The old caps (64 per list, 4096 figures) refused all three.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from invariants.manager_trace import TUPLE_FIELDS
from invariants.trace_format import MAX_LINE_BYTES
from refimpl.cli import main
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from spec.types import Tier
from refimpl_manager_harness import lease

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "trace-schema.json").read_text())
PAGES = 300  # past the 64 a list once held
LEASES = 4200  # past the 4096 figures an event once held


def _pages(pmm: ProcessMemoryManager, holder: int, authority: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        x = lease(pmm, holder, authority, 64)
        out.append(x)
    return out


def _answer_victims(pmm: ProcessMemoryManager) -> None:
    """A KV cache answers pressure by giving back all its pages."""
    a, h = pmm.register_authority("hbm0", Tier.DEVICE, 1 << 30), pmm.register_holder("kv")
    pages = _pages(pmm, h, a, PAGES)
    p = pmm.open_pressure(h, a, 64 * PAGES)
    assert pmm.answer(h, p, tuple(pages), now=0) == 64 * PAGES


def _limit_holders(pmm: ProcessMemoryManager) -> None:
    """A limit lowered under an authority with a lease per holder: one pressure per holder (nobody answers)."""
    a = pmm.register_authority("hbm0", Tier.DEVICE, 1 << 20)
    for i in range(PAGES):
        _pages(pmm, pmm.register_holder(f"s{i}"), a, 1)
    pmm.lower_limit(a, 64 * PAGES - 1)


def _lose_leases(pmm: ProcessMemoryManager) -> None:
    """A device lost under thousands of leases: its event reports each one's charge."""
    a, h = pmm.register_authority("hbm0", Tier.DEVICE, 1 << 30), pmm.register_holder("kv")
    _pages(pmm, h, a, LEASES)
    pmm.lose_device(a)


def _victims_wrong(e: dict) -> bool:
    if e["kind"] != "answer":
        return False
    e["payload"]["victims"][-1] = "7"
    return True


def _result_short(e: dict) -> bool:
    if e["kind"] != "prepare_limit":
        return False
    e["payload"]["result"].pop()
    return True


def _charge_wrong(e: dict) -> bool:
    if e["kind"] != "lose_device":
        return False
    charges = e["payload"]["charges"]
    charges[max(charges, key=int)] += 1
    return True


#: name -> (workload, the list it writes and its least length, a hand edit of that list, what replay says then)
CASES = {
    "answer-victims": (_answer_victims, ("answer", "victims", PAGES), _victims_wrong,
                       "(malformed): victims elements must be integers"),
    "limit-holders": (_limit_holders, ("prepare_limit", "result", PAGES), _result_short,
                      f"(refinement): PrepareLimit(authority=1, limit={64 * PAGES - 1}) returned {PAGES - 1} "
                      f"pressure id(s), the spec opens {PAGES}"),
    "lost-leases": (_lose_leases, ("lose_device", "charges", LEASES), _charge_wrong,
                    "(violation) [I1]: I1: LoseDevice(authority=1): authority 1 used moved 0 B, charges moved 1 B"),
}


def _list(e: dict, field: str) -> object:
    p = e["payload"]
    return p[field]


@pytest.mark.parametrize("case", CASES)
def test_own_trace_of_long_lists_replays_clean_and_a_wrong_list_fails(case, tmp_path, capsys) -> None:
    workload, (kind, field, least), edit, refusal = CASES[case]
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    with open(good, "w") as f:
        workload(ProcessMemoryManager(trace=JsonlSink(f)))
    lines = good.read_text().splitlines()
    events = [json.loads(x) for x in lines]
    (ev,) = [e for e in events if e["kind"] == kind]
    assert len(_list(ev, field)) >= least
    assert field not in TUPLE_FIELDS or all(type(x) is int for x in _list(ev, field)), "written opaque"
    assert max(len(x.encode()) for x in lines) <= MAX_LINE_BYTES
    jsonschema.Draft202012Validator(SCHEMA).validate(ev)  # the schema holds no count either
    assert main(["replay", str(good)]) == 0
    assert f"OK: {len(lines)} events replayed clean" in capsys.readouterr().out
    assert sum(edit(e) for e in events) == 1
    bad.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["replay", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "REJECTED at line" in out and refusal in out, out


def test_own_event_past_the_old_line_bound_replays_clean(tmp_path, capsys) -> None:
    """A device lost under 7,000 leases lists each one's charge on one line of about 100 KB: past the 64 KiB a line
    once held (replay called it NOT JUDGED), within MAX_LINE_BYTES, and judged like any other. A line past
    MAX_LINE_BYTES is not judged (exit 2), never rejected: tests/test_cli_conventions.py, tests/test_replay.py."""
    path = tmp_path / "t.jsonl"
    with open(path, "w") as f:
        pmm = ProcessMemoryManager(trace=JsonlSink(f))
        a, h = pmm.register_authority("hbm0", Tier.DEVICE, 1 << 30), pmm.register_holder("kv")
        _pages(pmm, h, a, 7000)
        pmm.lose_device(a)
    lines = path.read_bytes().splitlines()
    assert 64 * 1024 < len(lines[-1]) <= MAX_LINE_BYTES
    assert main(["replay", str(path)]) == 0
    assert f"OK: {len(lines)} events replayed clean" in capsys.readouterr().out
