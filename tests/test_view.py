"""`ortmem view`: the timeline's data from a known trace, and hostile traces refused (no browser here)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from invariants.trace_format import MAX_LINE_BYTES
from refimpl.cli import main
from refimpl.view import TraceError, read_events, render_html, timeline_data
from spec.errors import GovernorError
from spec.types import Role, Tier
from trace_harness import traced


def known_trace() -> str:
    """Two holders on one device pool of 100 B: weights 40 -> 30, KV 20, a refusal, release, device loss.

    Events are numbered from 0 in trace order, as on the page's x axis.
    """
    pmm, out = traced()
    w, k = pmm.register_holder("<b>weights</b>"), pmm.register_holder("kv")
    gpu = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    a = pmm.reserve(w, gpu, Tier.DEVICE, 40, Role.WEIGHTS)  # event 3
    pmm.commit(w, a, 30)  # event 4: the unused 10 B are refunded
    b = pmm.reserve(k, gpu, Tier.DEVICE, 20, Role.KV)  # event 5
    with pytest.raises(GovernorError):
        pmm.reserve(k, gpu, Tier.DEVICE, 80, Role.KV)  # event 6: refused, over the limit
    pmm.commit(k, b, 20)  # event 7
    pmm.release(k, b)  # event 8
    pmm.lose_device(gpu)  # event 9: nothing refunded
    pmm.confirm_termination(gpu)  # event 10: refunded once
    return out.getvalue()


def test_known_trace_series_limit_and_markers() -> None:
    d = timeline_data(io.BytesIO(known_trace().encode()))
    assert d["events"] == 12  # the configure event first
    [gpu] = d["authorities"]
    assert (gpu["pool"], gpu["limit"]) == ("gpu0", [[3, 100]])
    assert gpu["series"] == {"<b>weights</b> / weights": [[4, 40], [5, 30], [11, 0]],
                             "kv / kv": [[6, 20], [9, 0]]}
    assert gpu["used"] == [[4, 40], [5, 30], [6, 50], [9, 30], [11, 0]]
    assert gpu["over"] == []
    cats = [(m["i"], m["category"], m["kind"]) for m in d["markers"]]
    assert cats == [(7, "rejected", "reserve"), (10, "device loss", "lose_device"),
                    (11, "device loss", "confirm_termination")]
    assert d["markers"][0]["holder"] == "kv"


def test_html_is_self_contained_and_escapes_the_trace() -> None:
    page = render_html(read_events(io.BytesIO(known_trace().encode())), "t <x>")
    assert "<b>weights</b>" not in page and "\\u003cb\\u003eweights" in page
    assert "<title>t &lt;x&gt;</title>" in page
    named = render_html(read_events(io.BytesIO(known_trace().encode())), "__DATA__")
    assert "<title>__DATA__</title>" in named  # the title is not filled with the data, the data is embedded once
    data = named.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert len(json.loads(data)) == 12
    for needle in ("http://", "https://", "src=", "<link"):
        assert needle not in page.replace('"http://www.w3.org/2000/svg"', ""), needle


@pytest.mark.parametrize("lines, match", [
    ([b"{not json"], "not JSON"),
    ([b'{"kind": "<script>"}'], "no valid 'kind'"),
    ([b'{"kind": "reserve", "ids": []}'], "'ids' is not an object"),
    ([b'{"kind": "reserve", "pad": "' + b"x" * MAX_LINE_BYTES + b'"}'], "longer than"),
    ([b'{"kind": "reserve", "payload": {"nbytes": NaN}}'], "not JSON"),  # JSON.parse refuses it too
    ([b"[" * 30_000 + b"]" * 30_000], "not JSON"),  # nested past the parser's depth, within the line bound
])
def test_invalid_trace_is_refused(lines: list[bytes], match: str) -> None:
    with pytest.raises(TraceError, match=match):
        timeline_data(lines)


def test_cli_view_writes_the_page(tmp_path: Path) -> None:
    trace, page = tmp_path / "t.jsonl", tmp_path / "timeline.html"
    assert main(["trace", str(trace), "--seed", "1"]) == 0
    assert main(["view", str(trace), "-o", str(page)]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")  # a bad trace: test_cli_conventions.py


def test_composed_trace_stacks_charges_and_marks_every_part(tmp_path: Path) -> None:
    """A composed trace (every part of the manager): per-holder series that sum to each ledger's used."""
    trace = tmp_path / "t.jsonl"
    assert main(["trace", str(trace), "--seed", "2"]) == 0
    d = timeline_data(trace.read_bytes().splitlines())
    cats = {m["category"] for m in d["markers"]}
    assert {"ticket", "grant", "pressure", "transaction", "limit", "device loss"} <= cats, cats
    assert sum(len(a["series"]) for a in d["authorities"]) >= 3
    for a in d["authorities"]:
        for i in range(d["events"]):
            assert sum(_at(s, i) for s in a["series"].values()) == _at(a["used"], i), (a["id"], i)
    configure = [i for i, raw in enumerate(trace.read_bytes().splitlines()) if json.loads(raw)["kind"] == "configure"]
    assert len(configure) == 1 and not [m for m in d["markers"] if m["i"] in configure]  # no outcome, no marker


def _at(steps: list[list[int]], i: int) -> int:
    v = 0
    for j, u in steps:
        if j > i:
            break
        v = u
    return v
