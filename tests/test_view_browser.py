"""The `ortmem view` page in headless Debian chromium (Playwright, no browser download).

For a composed trace (`ortmem trace`), a short one of another seed and a
transaction trace: the page loads without console errors, uncaught exceptions or any
request; its in-page model equals `refimpl.view_model` on the same trace;
it draws one chart per
authority with the holders' series stacked, the limit, hover detail; the
file picker opens a second trace, an empty or bad file shows its message;
wheel zooms and drag pans. A screenshot per trace kind goes to
build/view-screenshots/. Expected holder names, limits and final `used` are
read from the trace here, not from `refimpl.view`. Outside CI, a missing
chromium or Playwright skips with the reason; with CI=true it fails.
"""

from __future__ import annotations

import json
import re
import os
import time
from pathlib import Path

import pytest

from refimpl.cli import main
from refimpl.view import timeline_data
from spec.types import Tier
from trace_harness import traced

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = Path(__file__).resolve().parents[1] / "build" / "view-screenshots"


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (it is in the [test] extra)")
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} missing: run tools/install-browser-deps.sh")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def tx_trace() -> str:
    """Two holders' transactions on two authorities: reserve, publish, execute, commit, release, a miss, an abort."""
    from spec.errors import CapacityDenied

    pmm, out = traced()
    enc, dec = pmm.register_holder("encoder"), pmm.register_holder("decoder")
    hbm, host = pmm.register_authority("hbm0", Tier.DEVICE, 64 << 20), pmm.register_authority("host", Tier.DEVICE, 96 << 20)
    a = pmm.plan_tx(enc, ((hbm, 24 << 20), (host, 30 << 20)))
    pmm.reserve_all(a)
    b = pmm.plan_tx(dec, ((hbm, 30 << 20),))
    pmm.reserve_all(b)
    with pytest.raises(CapacityDenied):  # a miss (54 MiB of 64 are held): reserve_all aborts it
        pmm.reserve_all(pmm.plan_tx(dec, ((hbm, 40 << 20),)))
    pmm.execute_view(a, pmm.publish_view(a), 1)
    pmm.commit_tx(a)
    view = pmm.publish_view(b)
    pmm.execute_view(b, view, 1)
    leases = pmm.commit_tx(b)
    pmm.drop_view(view)  # the lease under its view is pinned until then (C6)
    for lease in leases:
        pmm.release(dec, lease)
    pmm.abort_tx(pmm.plan_tx(enc, ((host, 8 << 20),)))
    return out.getvalue()


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    out = {}
    for name, extra in (("composed", ["--seed", "1"]), ("short", ["--seed", "2", "--operations", "40"])):
        out[name] = d / f"{name}.jsonl"
        assert main(["trace", str(out[name]), *extra]) == 0
    out["tx"] = d / "tx.jsonl"
    out["tx"].write_text(tx_trace())
    out["empty"] = d / "empty.jsonl"
    out["empty"].write_text("")
    out["bad"] = d / "bad.jsonl"
    out["bad"].write_text('{"kind": "reserve"}\n{oops\n')
    return out


def _expected(trace: Path) -> tuple[set[str], dict[int, int], dict[int, int]]:
    """From the trace alone: holder names, each authority's first limit and its last reported used."""
    names, cap, used = set(), {}, {}
    for line in trace.read_text().splitlines():
        e = json.loads(line)
        ids, p = e["ids"], e["payload"]
        if p.get("outcome") == "accepted" and e["kind"] == "register_holder":
            names.add(p["name"])
        elif p.get("outcome") == "accepted" and e["kind"] == "register_authority":
            cap[p["result"]] = p["capacity"]
        for a, u in p.get("used", {}).items():
            used[int(a)] = u
    return names, cap, used


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.2f} {unit}" if n < 10 else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def _at(authorities: list[dict], a: int, i: int) -> int:
    """The ledger's used at event i, from the model's step series."""
    [rec] = [r for r in authorities if r["id"] == a]
    return next((v for j, v in reversed(rec["used"]) if j <= i), 0)


def _wait(page, expr: str, timeout: float = 10.0) -> None:
    """Poll `expr` with evaluate: wait_for_function's string predicates are eval'd, which the page's CSP refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expr):
        assert time.monotonic() < deadline, f"timed out waiting for {expr}"
        page.wait_for_timeout(50)


def _open(browser, trace: Path, tmp_path: Path):
    """`ortmem view` of `trace`, opened: (the page, its console errors and uncaught exceptions, its requests)."""
    page_file = tmp_path / "timeline.html"
    assert main(["view", str(trace), "-o", str(page_file)]) == 0
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_file.as_uri())
    _wait(page, "window.ortmemTimeline && window.ortmemTimeline.rendered")
    return page, errors, requests


@pytest.mark.parametrize("kind", ["composed", "short", "tx"])
def test_page_stacks_every_trace_kind(browser, traces, tmp_path: Path, kind: str) -> None:
    trace = traces[kind]
    names, cap, used = _expected(trace)
    page, errors, requests = _open(browser, trace, tmp_path)
    assert errors == [] and requests == [(tmp_path / "timeline.html").as_uri()]  # the page alone: no network
    model = page.evaluate("window.ortmemTimeline.model")
    assert model == json.loads(json.dumps(timeline_data(trace.read_bytes().splitlines())))  # JS == Python
    assert page.locator("div.panel[data-authority]").count() == len(cap) == len(model["authorities"])
    drawn = page.eval_on_selector_all("path[data-series]", "ps => ps.map(p => [p.dataset.authority, p.dataset.series])")
    assert len({a for a, _ in drawn}) >= 2  # stacked series on several charts
    per_chart = {}
    for a, k in drawn:
        per_chart.setdefault(int(a), set()).add(k)
    assert max(len(v) for v in per_chart.values()) >= 2  # a stack, not one area
    drawn_holders = {k.split(" / ")[0] for _, k in drawn} - {"unattributed"}
    assert drawn_holders and drawn_holders <= names and len(drawn_holders) >= 2
    n = model["events"]
    for a, limit in cap.items():
        assert page.locator(f"path[data-limit='{a}']").count() == 1
        assert f"limit {_human(limit)}" in page.inner_text(f"div.panel[data-authority='{a}'] h2")
        stack = page.evaluate(f"Object.values(window.ortmemTimeline.stackAt({a}, {n - 1})).reduce((s, v) => s + v, 0)")
        assert stack == used.get(a, 0), a  # the stack ends where the ledger's own figure ends
    a = int(drawn[0][0])
    [rec] = [r for r in model["authorities"] if r["id"] == a]
    i = max(rec["used"], key=lambda p: p[1])[0]  # the event where this ledger's used peaks: a full stack
    box = page.locator(f"svg[data-authority='{a}']").bounding_box()
    vx = 78 + (1000 - 78 - 12) * (i + 0.5) / n  # the page's x axis: margins 78 and 12 of a 1000-wide viewBox
    page.mouse.move(box["x"] + vx / 1000 * box["width"], box["y"] + box["height"] * 0.4)
    tip = page.inner_text("#tip")
    # Over a few hundred events one event is narrower than a screen pixel: the pointer lands on i or a neighbour.
    m = re.match(r"event (\d+)\b", tip)
    assert page.locator("#tip").is_visible() and m and abs(int(m.group(1)) - i) <= (1 if n > box["width"] / 2 else 0), tip
    i = int(m.group(1))
    assert f"used {_human(_at(model['authorities'], a, i))} of limit " in tip
    stack = {key: v for key, v in page.evaluate(f"window.ortmemTimeline.stackAt({a}, {i})").items() if v}
    assert stack and sum(stack.values()) == _at(model["authorities"], a, i)
    for key, v in stack.items():
        assert f"{key}: {_human(v)}" in tip
    marker = page.locator("rect.marker").last  # drawn last: on top of any neighbour it overlaps
    marker.hover()
    assert f"({marker.get_attribute('data-category')})" in page.inner_text("#tip")
    page.mouse.move(0, 0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{kind}.png"), full_page=True)
    assert errors == []
    page.close()


@pytest.mark.parametrize("kind", ["composed", "short", "tx"])
def test_page_model_equals_python_model(browser, traces, tmp_path: Path, kind: str) -> None:
    """The page's parser and model (the file picker's path) against `refimpl.view` on the same text."""
    page, errors, _ = _open(browser, traces["empty"], tmp_path)
    text = traces[kind].read_text()
    got = page.evaluate("t => window.ortmemTimeline.build(window.ortmemTimeline.parse(t))", text)
    assert got == json.loads(json.dumps(timeline_data(text.splitlines(keepends=True))))
    assert errors == []
    page.close()


def test_file_picker_empty_and_rejected_traces(browser, traces, tmp_path: Path) -> None:
    page, errors, requests = _open(browser, traces["composed"], tmp_path)
    assert not page.locator("#message").is_visible()
    short = timeline_data(traces["short"].read_bytes().splitlines())
    page.set_input_files("#file", str(traces["short"]))
    _wait(page, "window.ortmemTimeline.loaded === 1")
    assert page.evaluate("window.ortmemTimeline.model.events") == short["events"]
    assert page.locator("div.panel[data-authority]").count() == len(short["authorities"])
    assert "short.jsonl: " in page.inner_text("#summary")
    page.set_input_files("#file", str(traces["empty"]))
    _wait(page, "window.ortmemTimeline.loaded === 2")
    assert page.locator("#message").is_visible()
    assert page.inner_text("#message") == "empty.jsonl: the trace has no events: nothing to draw."
    assert page.locator("div.panel[data-authority]").count() == 0
    page.set_input_files("#file", str(traces["bad"]))
    _wait(page, "window.ortmemTimeline.loaded === 3")
    assert page.inner_text("#message").startswith("bad.jsonl: rejected trace: line 2: not JSON")
    assert page.locator("div.panel[data-authority]").count() == 0
    assert errors == [] and requests == [(tmp_path / "timeline.html").as_uri()]
    page.close()


def test_wheel_zooms_and_drag_pans(browser, traces, tmp_path: Path) -> None:
    page, errors, _ = _open(browser, traces["composed"], tmp_path)
    n = page.evaluate("window.ortmemTimeline.model.events")
    assert page.evaluate("window.ortmemTimeline.view") == [0, n]
    box = page.locator("svg[data-authority]").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 3)
    for _ in range(5):
        page.mouse.wheel(0, -100)
    _wait(page, f"window.ortmemTimeline.view[1] - window.ortmemTimeline.view[0] < {n * 0.5}")
    lo, hi = page.evaluate("window.ortmemTimeline.view")
    assert 0 < lo and hi < n and "showing events" in page.inner_text("#window")
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 200, box["y"] + box["height"] / 3)
    page.mouse.up()
    lo2, hi2 = page.evaluate("window.ortmemTimeline.view")
    assert lo2 < lo and round(hi2 - lo2, 6) == round(hi - lo, 6)  # dragged right: earlier events, same span
    page.click("#reset")
    assert page.evaluate("window.ortmemTimeline.view") == [0, n]
    assert errors == []
    page.close()
