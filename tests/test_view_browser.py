"""The `ortmem view` page in headless Debian chromium (Playwright, no browser download).

The page must load without console errors or uncaught exceptions, draw exactly
the (holder, role) series the trace implies per authority, stack them to the
ledger's own observed `used`, draw each limit, and show event details on hover.
Expected values are computed here from the trace, not from `refimpl.view`.
Outside CI, a missing chromium or Playwright skips with the reason; with
CI=true it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from refimpl.cli import main

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def _expected(trace: Path) -> tuple[dict[int, set[str]], dict[int, int], dict[int, int]]:
    """From the trace alone: series keys per canonical authority, final observed used, capacity."""
    holders, canon, keys, used, cap = {}, {}, {}, {}, {}
    for line in trace.read_text().splitlines():
        e = json.loads(line)
        ids, p = e["ids"], e["payload"]
        if p.get("outcome") != "accepted":
            continue
        if e["kind"] == "register_holder":
            holders[ids["result"]] = p["name"]
        elif e["kind"] == "register_authority":
            canon[ids["result"]] = ids["result"]
            cap[ids["result"]] = p["capacity"]
        elif e["kind"] == "register_alias":
            canon[ids["result"]] = canon[ids["of"]]
        elif e["kind"] in ("reserve", "record_committed"):
            keys.setdefault(canon[ids["authority"]], set()).add(f"{holders[ids['holder']]} / {p['role']}")
        for a, u in p["observed"]["used"].items():
            used[int(a)] = u
    return keys, used, cap


def _extra_events(trace: Path) -> None:
    """Append one ticket, pressure and transaction event (kinds the ledger emitter does not produce yet)."""
    lines = trace.read_text().splitlines()
    seq = json.loads(lines[-1])["source_sequence"]
    for n, kind in enumerate(("submit", "pressure", "plan"), 1):
        lines.append(json.dumps({"contract_revision": "ortmem-ledger/1", "source": "pmm-1",
                                 "source_sequence": seq + n, "kind": kind, "ids": {"authority": 2},
                                 "payload": {"target": 8, "outcome": "accepted", "error": None,
                                             "observed": {"used": {}, "charges": {}}}}))
    trace.write_text("\n".join(lines) + "\n")


def test_timeline_page_in_headless_chromium(browser, tmp_path: Path) -> None:
    trace, page_file = tmp_path / "t.jsonl", tmp_path / "timeline.html"
    assert main(["trace", str(trace), "--seed", "1", "--ledger"]) == 0
    keys, used, cap = _expected(trace)
    _extra_events(trace)
    assert main(["view", str(trace), "-o", str(page_file)]) == 0
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_file.as_uri())
    page.wait_for_function("window.ortmemTimeline && window.ortmemTimeline.rendered", timeout=10_000)
    assert errors == []
    assert requests == [page_file.as_uri()]  # nothing but the page itself: no network
    drawn = page.eval_on_selector_all("path[data-series]", "ps => ps.map(p => [p.dataset.authority, p.dataset.series])")
    got: dict[int, set[str]] = {}
    for a, k in drawn:
        got.setdefault(int(a), set()).add(k)
    assert got == keys and len(drawn) == sum(len(v) for v in keys.values())
    n = page.evaluate("window.ortmemTimeline.data.events")
    for a in keys:
        stack = page.evaluate(f"Object.values(window.ortmemTimeline.stackAt({a}, {n - 1})).reduce((s, v) => s + v, 0)")
        assert stack == used[a], a  # the stack ends where the ledger's own figure ends
        assert page.locator(f"line[data-limit='{a}']").count() == 1
        assert f"limit {cap[a]:,} B" in page.inner_text(f"div.panel[data-authority='{a}'] h2")
    for category, kind in (("device loss", "lose_device"), ("ticket", "submit"), ("pressure", "pressure"),
                           ("transaction", "plan")):
        marker = page.locator(f"rect.marker[data-category='{category}'][data-kind='{kind}']").first
        marker.hover()
        assert page.locator("#tip").is_visible()
        assert f"{kind} ({category})" in page.inner_text("#tip")
    assert errors == []
    page.close()
