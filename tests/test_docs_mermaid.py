"""Every Mermaid block in docs/ renders with mermaid-cli on Debian's chromium; a syntax error fails.

The tools come from `tools/install-browser-deps.sh` (apt chromium, `npm ci`).
Outside CI, missing tools skip with the reason; with CI=true they fail, so a
CI run cannot pass without rendering. SVGs go to build/diagrams/ (gitignored).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from invariants.drift import ROOT

MMDC = ROOT / "node_modules" / ".bin" / "mmdc"
CHROMIUM = Path("/usr/bin/chromium")
CONFIG = ROOT / "tools" / "puppeteer-config.json"
OUT = ROOT / "build" / "diagrams"
_BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.M | re.S)


def _require_tools() -> None:
    missing = [str(p) for p in (MMDC, CHROMIUM) if not p.exists()]
    if missing:
        why = f"{', '.join(missing)} missing: run tools/install-browser-deps.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def render(markdown: Path, out_dir: Path) -> subprocess.CompletedProcess:
    """mmdc over one markdown file: one SVG per Mermaid block, `<stem>-<n>.svg` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(MMDC), "-p", str(CONFIG), "-q", "-i", str(markdown), "-o",
                           str(out_dir / markdown.name)], capture_output=True, text=True, timeout=180)


def _docs_with_diagrams() -> list[Path]:
    return [p for p in sorted((ROOT / "docs").glob("*.md")) if _BLOCK.search(p.read_text())]


def test_docs_have_the_diagrams_we_promise() -> None:
    names = [p.name for p in _docs_with_diagrams()]
    assert "spec.md" in names and "review.md" in names  # lifecycles (generated) and the architecture


@pytest.mark.parametrize("doc", _docs_with_diagrams(), ids=lambda p: p.name)
def test_every_mermaid_block_renders(doc: Path) -> None:
    _require_tools()
    blocks = len(_BLOCK.findall(doc.read_text()))
    for old in OUT.glob(f"{doc.stem}-*.svg"):
        old.unlink()
    r = render(doc, OUT)
    assert r.returncode == 0, f"{doc.name}: mermaid-cli failed:\n{r.stderr[-3000:]}"
    svgs = sorted(OUT.glob(f"{doc.stem}-*.svg"))
    assert len(svgs) == blocks, (doc.name, blocks, [s.name for s in svgs])
    for svg in svgs:
        text = svg.read_text()
        assert text.lstrip().startswith("<svg") and "Syntax error" not in text, svg.name


def test_a_broken_block_fails_rendering(tmp_path: Path) -> None:
    _require_tools()
    doc = tmp_path / "broken.md"
    doc.write_text("# broken\n\n```mermaid\nflowchart LR\n  A -->|plan| \n```\n")
    r = render(doc, tmp_path / "out")
    assert r.returncode != 0 and "Parse error" in r.stderr, r.stderr[-2000:]
