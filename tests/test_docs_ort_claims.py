"""Every sentence about ORT's behaviour carries a claim of docs/ort-claims.md, and every claim has its evidence.

The rule (docs/ort-claims.md, "The rule"): a sentence in the scanned files
(`DOCS`, `CODE`: prose, comments and docstrings) is about ORT when it
matches one of `TRIGGERS` (ORT's API and option names, and ORT as the
subject of a verb of behaviour). Such a sentence carries at least one marker
`[ort:<key>]` (a link into ort-claims.md in Markdown). Checked both ways:

- a triggered sentence without a marker fails; a marker naming no claim fails;
- a claim whose `Where:` differs from the files its markers are in fails;
- a claim with no evidence fails; a `test` evidence whose function does not
  exist fails; a `cite` evidence without an API name in backticks and a
  version fails, and a claim cited from the C API or ORT's source says what
  the Python binding offers (`Binding:`).

The negative controls edit copies of the texts and of the registry.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "docs" / "ort-claims.md"
DOCS = ("docs/review.md", "docs/spec.md", "docs/harms.md", "docs/guide.md", "README.md")
CODE_GLOBS = ("refimpl/ort/*.py", "refimpl/verify/sessions_checker.py", "refimpl/simulate*.py", "spec/streaming.py",
              "spec/placement.py")

#: What makes a sentence one about ORT (kept verbatim in docs/ort-claims.md, "The rule").
TRIGGERS = (
    r"gpu_mem_limit", r"OrtArenaCfg", r"\bmax_mem\b", r"create_and_register_allocator", r"use_env_allocators",
    r"enable_memory_arena_shrinkage", r"arena_extend_strategy", r"kSameAsRequested", r"kNextPowerOfTwo",
    r"RegisterAllocator", r"RegisteredAllocator", r"SharedAllocator", r"\bprepack", r"\bmem[_ ]pattern",
    r"\bmem_(?:arena|bytes|in_use|requested)", r"RunOptions\.terminate|terminate flag", r"ortvalue_from_numpy",
    r"add_initializer", r"ScratchBuffer", r"(?i:\bcudnn)", r"\bBFC\b", r"CUDA context", r"get_providers",
    r"cpu_ep_fallback", r"enable_cpu_mem_arena", r"end_profiling", r"\bre-?cap", r"(?i:\bunregister(?!_holder))",
    r"env arenas? (?:is|are) process-wide|one env arena per process", r"ORT-enforced",
    r"\b(?:ORT|ORT's|onnxruntime)\s+(?:\w+\s+)?(?:cannot|can't|can|does|doesn't|never|always|has no|keeps|"
    r"registers|enforces|bounds|caps|copies|packs|reads|refuses|rejects|accepts|fails|falls back|logs|raises|"
    r"exposes|samples|allocates|shrinks|grows|wraps)\b",
)
_TRIGGERS = tuple(re.compile(t) for t in TRIGGERS)
_MARKER = re.compile(r"\[ort:([a-z0-9-]+)\](?:\(((?:docs/)?ort-claims\.md)#([a-z0-9-]+)\))?")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|vs|etc|cf|approx)\.$")


# --- reading the texts ----------------------------------------------------------------------------


def sentences(block: str) -> list[str]:
    """A block of prose cut into sentences (at . ! ? before a space; not after e.g., i.e., vs.)."""
    out, cur = [], ""
    for piece in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", block).strip()):
        cur = f"{cur} {piece}" if cur else piece
        if not _ABBREV.search(cur):
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])


def markdown_blocks(text: str) -> list[str]:
    """Paragraphs, list items, headings and table rows; code (fenced, or indented after a blank line) and HTML
    comments are not prose."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    blocks, cur, fenced, indented = [], [], False, False

    def flush() -> None:
        if cur:
            blocks.append(" ".join(cur))
            cur.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("    ") and (indented or not cur):
            indented = True  # an indented code block: it starts after a blank line and runs to the next one
            continue
        indented = False
        if not line.strip():
            flush()
        elif line.startswith(("#", "|")):
            flush()
            blocks.append(line)
        elif re.match(r"\s*(?:[-*]|\d+\.)\s", line):
            flush()
            cur.append(line)
        else:
            cur.append(line)
    flush()
    return blocks


def python_blocks(text: str) -> list[str]:
    """Comment runs (consecutive `#` lines) and docstring paragraphs."""
    blocks: list[str] = []
    run: list[str] = []
    last = -2
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.COMMENT:
            continue
        body = tok.string.lstrip("#").lstrip(":").strip()
        if tok.start[0] != last + 1 and run:
            blocks.append(" ".join(run))
            run = []
        run.append(body)
        last = tok.start[0]
    if run:
        blocks.append(" ".join(run))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                blocks += re.split(r"\n\s*\n", doc)
    return blocks


def scanned_texts() -> dict[str, str]:
    paths = [ROOT / p for p in DOCS] + sorted({p for g in CODE_GLOBS for p in ROOT.glob(g)})
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


@functools.lru_cache(maxsize=256)  # the drift controls rescan the same texts with one edited
def ort_sentences(name: str, text: str) -> list[str]:
    blocks = markdown_blocks(text) if name.endswith(".md") else python_blocks(text)
    return [s for b in blocks for s in sentences(b) if any(t.search(s) for t in _TRIGGERS)]


# --- reading the registry -------------------------------------------------------------------------


@attrs.frozen
class Claim:
    key: str
    where: frozenset[str]
    tests: tuple[str, ...]  # node ids: path::function
    cites: tuple[str, ...]
    binding: str


def parse_registry(text: str) -> dict[str, Claim]:
    claims = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        key, _, body = section.partition("\n")
        fields: dict[str, list[str]] = {}
        for m in re.finditer(r"^- (Where|Test|Cite|Binding): (.+)$", body, flags=re.M):
            fields.setdefault(m.group(1), []).append(m.group(2).strip())
        where = frozenset(w.strip(" `") for w in ",".join(fields.get("Where", [])).split(",") if w.strip())
        tests = tuple(t.strip("`").split(" ")[0].strip("`") for t in fields.get("Test", []))
        claims[key.strip()] = Claim(key.strip(), where, tests, tuple(fields.get("Cite", [])),
                                    " ".join(fields.get("Binding", [])))
    return claims


def _test_exists(node_id: str) -> bool:
    path, _, name = node_id.partition("::")
    file = ROOT / path
    if not name or not file.is_file():
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == name.split("[")[0]
               for n in ast.walk(ast.parse(file.read_text())))


def problems(texts: dict[str, str], registry: str) -> list[str]:
    """Every way the texts and the registry disagree; empty when in step."""
    claims = parse_registry(registry)
    out = []
    seen: dict[str, set[str]] = {}
    for name, text in texts.items():
        for s in ort_sentences(name, text):
            if not _MARKER.search(s):
                out.append(f"{name}: a sentence about ORT carries no [ort:<key>] marker: {s[:160]!r}")
        for m in _MARKER.finditer(text):
            key = m.group(1)
            seen.setdefault(key, set()).add(name)
            if key not in claims:
                out.append(f"{name}: [ort:{key}] names no claim of docs/ort-claims.md")
            if name.endswith(".md") and m.group(3) != key:
                out.append(f"{name}: [ort:{key}] must link ort-claims.md#{key}, not #{m.group(3)}")
    for key, c in claims.items():
        if c.where != frozenset(seen.get(key, ())):
            out.append(f"claim {key}: Where lists {sorted(c.where)}, its markers are in {sorted(seen.get(key, ()))}")
        if not c.tests and not c.cites:
            out.append(f"claim {key}: no evidence (a Test or a Cite)")
        out += [f"claim {key}: test {t} does not exist" for t in c.tests if not _test_exists(t)]
        for cite in c.cites:
            if not re.search(r"`[^`]+`", cite) or not re.search(r"\b(?:ORT|onnxruntime|version) \d+\.\d+", cite):
                out.append(f"claim {key}: cite {cite[:60]!r} names no API in backticks or no version")
        if c.cites and not c.binding:
            out.append(f"claim {key}: cited, so it says what the Python binding offers (Binding:)")
    return out


# --- the tests ------------------------------------------------------------------------------------


def test_every_ort_sentence_has_a_claim_and_every_claim_its_evidence() -> None:
    assert problems(scanned_texts(), REGISTRY.read_text()) == []


def test_the_rule_in_the_registry_is_the_rule_checked_here() -> None:
    rule = REGISTRY.read_text().split("## The rule", 1)[1].split("\n## ", 1)[0]
    listed = re.search(r"```text\n(.*?)\n```", rule, flags=re.S)
    assert listed and tuple(listed.group(1).splitlines()) == TRIGGERS
    for path in (*DOCS, *CODE_GLOBS):
        assert f"`{path}`" in rule, path


def test_the_scan_finds_sentences_in_every_kind_of_text() -> None:
    texts = scanned_texts()
    assert {n for n in texts if ort_sentences(n, texts[n])} >= {"docs/review.md", "docs/guide.md",
                                                                "refimpl/ort/arena.py", "docs/spec.md"}


_CLEAN = "A sentence about nothing in particular."


@pytest.mark.parametrize("edit, expected", [
    # negative controls on the texts
    (lambda t, r: ({**t, "docs/review.md": t["docs/review.md"] + "\nORT never frees an arena.\n"}, r),
     "carries no [ort:<key>] marker"),
    (lambda t, r: ({**t, "refimpl/ort/arena.py": t["refimpl/ort/arena.py"] + "\n# `gpu_mem_limit` caps all.\n"}, r),
     "carries no [ort:<key>] marker"),
    (lambda t, r: ({**t, "docs/review.md": t["docs/review.md"] + "\nORT caps it [ort:no-such](ort-claims.md#no-such).\n"},
                   r), "names no claim"),
    (lambda t, r: ({**t, "docs/review.md": t["docs/review.md"].replace("(ort-claims.md#env-arena-cap)",
                                                                        "(ort-claims.md#arena-shrink)", 1)}, r),
     "must link ort-claims.md#env-arena-cap"),
    # negative controls on the registry
    (lambda t, r: (t, r.replace("- Where: ", "- Where: docs/harms.md, ", 1)), "Where lists"),
    (lambda t, r: (t, r.replace("test_env_arena_caps_the_runs_of_sessions_that_opt_in",
                                "test_env_arena_was_never_observed", 1)), "does not exist"),
    (lambda t, r: (t, re.sub(r"^- Binding: .*$", "", r, count=1, flags=re.M)), "(Binding:)"),
    (lambda t, r: (t, re.sub(r"^- Cite: .*$", lambda m: re.sub(r"\b(?:ORT|onnxruntime|version) \d+\.\d+\w*",
                                                                "unversioned", m.group(0)), r, count=1, flags=re.M)),
     "no version"),
])
def test_drift_is_detected(edit, expected: str) -> None:
    texts, registry = scanned_texts(), REGISTRY.read_text()
    assert problems(texts, registry) == []
    texts, registry = edit(texts, registry)
    found = problems(texts, registry)
    assert any(expected in p for p in found), found


def test_sentences_cut_where_prose_does() -> None:
    assert sentences("ORT caps it, e.g. at 4 MiB. Then 1.32 runs. Done") == [
        "ORT caps it, e.g. at 4 MiB.", "Then 1.32 runs.", "Done"]
    assert _CLEAN not in " ".join(ort_sentences("x.md", _CLEAN))
