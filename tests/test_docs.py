"""The reviewer docs stay in step with the catalog and the simulation (both ways).

- every catalog ID is linked from docs/review.md as `spec.md#<id>`, and every link
  into spec.md lands on a heading there;
- every ID-shaped name in docs/ (C<n>, I<n>[abc]) exists in the catalog;
- docs/harms.md is what `ortmem simulate --write-docs` renders now, and every image
  it embeds is one of the plots `write_plots` writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from invariants.drift import ROOT
from refimpl.simulate import run_all
from refimpl.simulate_docs import render_markdown
from refimpl.simulate_plots import PLOT_FILES
from spec.catalog import IDS

DOCS = ROOT / "docs"
_ID = re.compile(r"\b[CI][0-9]+[a-z]?\b")
_SPEC_LINK = re.compile(r"\]\(spec\.md#([A-Za-z0-9-]+)\)")


def id_problems(texts: dict[str, str], narrative: str) -> list[str]:
    """ID drift between docs and catalog, both ways; empty when in step."""
    problems = [f"{name} names {m}, which is not in the catalog"
                for name, text in texts.items() for m in sorted(set(_ID.findall(text)) - set(IDS))]
    linked = set(_SPEC_LINK.findall(texts[narrative]))
    problems += [f"{narrative} does not link {i} (spec.md#{i.lower()})" for i in IDS if i.lower() not in linked]
    return problems


def _docs() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(DOCS.glob("*.md"))}


def test_docs_and_catalog_ids_in_step_both_ways() -> None:
    assert id_problems(_docs(), "review.md") == []


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t + "\nSee I14 for the rest.\n", "names I14, which is not in the catalog"),
    (lambda t: t.replace("[I9](spec.md#i9)", "I9"), "does not link I9"),
])
def test_id_drift_is_detected(edit, expected: str) -> None:
    texts = _docs()
    texts["review.md"] = edit(texts["review.md"])
    assert any(expected in p for p in id_problems(texts, "review.md"))


def test_every_spec_link_lands_on_a_heading() -> None:
    spec = (DOCS / "spec.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", spec, flags=re.M)}
    for name, text in _docs().items():
        for anchor in _SPEC_LINK.findall(text):
            assert anchor in anchors, f"{name}: spec.md#{anchor}"


def test_harms_page_is_generated_from_the_simulation() -> None:
    assert (DOCS / "harms.md").read_text() == render_markdown(run_all()), \
        "docs/harms.md is stale: run `ortmem simulate --write-docs`"


def test_docs_embed_only_plots_the_simulation_writes() -> None:
    embedded = set()
    for name, text in _docs().items():
        for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            assert (DOCS / path).is_file(), f"{name} embeds missing {path}"
            embedded.add(Path(path).name)
    assert embedded == set(PLOT_FILES.values())
