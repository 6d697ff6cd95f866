"""Move modules to their concern names and rewrite every reference: idempotent, `--check` to preview.

Usage (from the repository root, after the branches that still touch the moved files have merged):

    python tools/relayout.py --check     # say what would move and which files would change; exit 1 if any
    python tools/relayout.py             # git mv + rewrite; running it again changes nothing
    python tools/relayout.py --docs      # only regenerate docs/layout.md from LAYOUT

The one mapping is `MOVES` (old path -> new path). Everything else is derived from it: the dotted
module names (`spec.machine` -> `spec.ledger`), the `from PKG import mod` forms, the paths
(`invariants/predicates.py`) in .py/.md/.toml/.json/.sh/.yml/.yaml/.txt files and `.ci/run`, and
`refimpl/verify/__init__.py`, a lazy re-export of `refimpl.verify.job`'s names so that
`from refimpl.verify import X` keeps working without importing the whole harness with any of its
submodules. `LAYOUT` (concern x layer -> path, after the moves) is what docs/layout.md and
tests/test_layout.py read.

Rewrite rules, in order, per file:
1. (.py only) `from PKG import a, b as c` where `a` is a moved module: `a` is imported from its new
   package under its old local name (`from spec import ledger as machine`), so no usage changes;
   the statement is split when the moved names land in different packages.
2. dotted names: `spec.machine` as a whole dotted token (not preceded by a name character or a dot,
   not followed by a name character) -> `spec.ledger`; this covers `import x.y`, `from x.y import`,
   attribute chains `x.y.z`, and registry strings such as "refimpl.pressure_adapter".
3. paths: `invariants/predicates.py` as a whole path token -> `invariants/ledger.py`.
Nothing under .git, .venv, node_modules or build is read; this file, tests/test_layout.py and
docs/layout.md hold the mapping itself and are never rewritten.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["MOVES", "LAYOUT", "LAYERS", "CONCERNS", "plan", "apply", "depth_hazards", "render_layout", "rewrite_text"]

# ---------------------------------------------------------------------------------------------------
# THE mapping: old path -> new path. Keep names that already follow "same concern, same name".
MOVES: dict[str, str] = {
    # spec/: the ledger model is named for its concern, like pressure, transactions, admission, ...
    "spec/machine.py": "spec/ledger.py",
    "spec/actions.py": "spec/ledger_actions.py",
    "spec/state.py": "spec/ledger_state.py",
    # invariants/: predicates under the concern name, machines and scopes as <concern>_machine/_scope
    "invariants/predicates.py": "invariants/ledger.py",
    "invariants/machine.py": "invariants/ledger_machine.py",
    "invariants/admission_predicates.py": "invariants/admission.py",
    "invariants/session_predicates.py": "invariants/sessions.py",
    # refimpl/verify/: the verification harness, apart from the governor an ORT engineer would port
    "refimpl/verify.py": "refimpl/verify/job.py",
    "refimpl/checkers.py": "refimpl/verify/checkers.py",
    "refimpl/checker_api.py": "refimpl/verify/checker_api.py",
    "refimpl/lazy_checker.py": "refimpl/verify/lazy_checker.py",
    # not verify/verdict.py: job defines a function `verdict`, which `from refimpl.verify import verdict`
    # must keep finding (a submodule of that name would shadow it once imported)
    "refimpl/verdict.py": "refimpl/verify/verdict_rules.py",
    "refimpl/mutants.py": "refimpl/verify/mutants.py",
    "refimpl/crosshair_check.py": "refimpl/verify/crosshair_check.py",
    "refimpl/adapter.py": "refimpl/verify/ledger_adapter.py",
    "refimpl/ledger_checker.py": "refimpl/verify/ledger_checker.py",
    "refimpl/pressure_checker.py": "refimpl/verify/pressure_checker.py",
    "refimpl/tx_checker.py": "refimpl/verify/transactions_checker.py",
    "refimpl/admission_checker.py": "refimpl/verify/admission_checker.py",
    "refimpl/manager_adapter.py": "refimpl/verify/manager_adapter.py",
    "refimpl/manager_checker.py": "refimpl/verify/manager_checker.py",
    "refimpl/hierarchy_checker.py": "refimpl/verify/hierarchy_checker.py",
    "refimpl/hierarchy/adapter.py": "refimpl/verify/hierarchy_adapter.py",
    "refimpl/hierarchy/mutants.py": "refimpl/verify/hierarchy_mutants.py",
    # the real-ORT checker (checker name "ort") checks the sessions model; it imports onnxruntime only
    # through refimpl.ort's modules, which stay the only ones that import it
    "refimpl/ort/checker.py": "refimpl/verify/sessions_checker.py",
}

# The package `refimpl.verify` replaces the module `refimpl/verify.py`: generated, lazy re-export.
VERIFY_INIT = "refimpl/verify/__init__.py"
VERIFY_JOB = "refimpl/verify/job.py"

# ---------------------------------------------------------------------------------------------------
# Concern x layer -> file, AFTER the moves (docs/layout.md and tests/test_layout.py read this).
LAYERS = ("model", "predicates", "machine", "scope", "implementation", "adapter", "checker")
CONCERNS = ("ledger", "tickets", "pressure", "transactions", "admission", "sessions", "hierarchy", "manager")
LAYOUT: dict[str, dict[str, str]] = {
    "ledger": {"model": "spec/ledger.py", "predicates": "invariants/ledger.py",
               "machine": "invariants/ledger_machine.py", "scope": "invariants/ledger_scope.py",
               "implementation": "refimpl/manager/ledger.py", "adapter": "refimpl/verify/ledger_adapter.py",
               "checker": "refimpl/verify/ledger_checker.py"},
    # Tickets and holder pressure are parts of the one composed model (`spec.manager`): their predicates are
    # the composed ones (grant order and aging, the holder's answer), their campaign the composed machine
    # restricted to them (`invariants.manager_pressure`), their adapter the composed one.
    "tickets": {"model": "spec/tickets.py", "predicates": "invariants/manager_order.py",
                "machine": "invariants/manager_pressure.py", "scope": "invariants/manager_scope.py",
                "implementation": "refimpl/manager/arbitration.py", "adapter": "refimpl/verify/manager_adapter.py",
                "checker": "refimpl/verify/pressure_checker.py"},
    "pressure": {"model": "spec/manager_parts.py", "predicates": "invariants/manager_answers.py",
                 "machine": "invariants/manager_pressure.py", "scope": "invariants/manager_scope.py",
                 "implementation": "refimpl/manager/pressure.py", "adapter": "refimpl/verify/manager_adapter.py",
                 "checker": "refimpl/verify/pressure_checker.py"},
    # Transactions, views and bundles are parts of the composed model too (issue #21: one spec): their campaign
    # is the composed machine restricted to them (`invariants.manager_tx_machine`), their adapter the composed one.
    "transactions": {"model": "spec/manager_tx.py", "predicates": "invariants/manager_tx.py",
                     "machine": "invariants/manager_tx_machine.py", "scope": "invariants/manager_scope.py",
                     "implementation": "refimpl/manager/transactions.py",
                     "adapter": "refimpl/verify/manager_adapter.py",
                     "checker": "refimpl/verify/transactions_checker.py"},
    # The admission and sessions models share the generic model machine and scopes module; their
    # `Model` values (how to draw, the adapter) live in their checkers.
    "admission": {"model": "spec/admission.py", "predicates": "invariants/admission.py",
                  "machine": "invariants/model_machine.py", "scope": "invariants/model_scopes.py",
                  "implementation": "refimpl/admission/__init__.py", "adapter": "refimpl/verify/admission_checker.py",
                  "checker": "refimpl/verify/admission_checker.py"},
    "sessions": {"model": "spec/sessions.py", "predicates": "invariants/sessions.py",
                 "machine": "invariants/model_machine.py", "scope": "invariants/model_scopes.py",
                 "implementation": "refimpl/ort/governed.py", "adapter": "refimpl/verify/sessions_checker.py",
                 "checker": "refimpl/verify/sessions_checker.py"},
    "hierarchy": {"model": "spec/hierarchy.py", "predicates": "invariants/hierarchy.py",
                  "machine": "invariants/hierarchy_machine.py", "scope": "invariants/hierarchy_scope.py",
                  "implementation": "refimpl/hierarchy/core.py", "adapter": "refimpl/verify/hierarchy_adapter.py",
                  "checker": "refimpl/verify/hierarchy_checker.py"},
    "manager": {"model": "spec/manager.py", "predicates": "invariants/manager.py",
                "machine": "invariants/manager_machine.py", "scope": "invariants/manager_scope.py",
                "implementation": "refimpl/manager/__init__.py", "adapter": "refimpl/verify/manager_adapter.py",
                "checker": "refimpl/verify/manager_checker.py"},
}

# Files that hold the mapping itself: never rewritten.
SELF = ("tools/relayout.py", "tests/test_layout.py", "docs/layout.md")
TEXT_SUFFIXES = (".py", ".md", ".toml", ".json", ".sh", ".yml", ".yaml", ".txt", ".cfg", ".ini")
TEXT_NAMES = (".ci/run",)
SKIP_DIRS = (".git", ".venv", "node_modules", "build", "__pycache__", ".hypothesis", ".pytest_cache")


def _dotted(path: str) -> str:
    p = path[:-3] if path.endswith(".py") else path
    if p.endswith("/__init__"):
        p = p[: -len("/__init__")]
    return p.replace("/", ".")


def module_moves() -> dict[str, str]:
    """Dotted old module -> dotted new module (refimpl.verify keeps its name: it becomes the package)."""
    out = {_dotted(o): _dotted(n) for o, n in MOVES.items()}
    out.pop("refimpl.verify", None)
    return out


def _token_re(names: list[str], sep: str) -> re.Pattern[str]:
    # Longest first (defensive: the lookahead already stops `x.y` from matching inside `x.y_z`).
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    lead = r"(?<![\w.])" if sep == "." else r"(?<![\w./-])"
    return re.compile(lead + "(" + alt + r")(?![\w])" if sep == "." else lead + "(" + alt + r")(?![\w/])")


_MODS = module_moves()
_MOD_RE = _token_re(list(_MODS), ".")
_PATH_RE = _token_re(list(MOVES), "/")


def _split_parent(dotted: str) -> tuple[str, str]:
    parent, _, leaf = dotted.rpartition(".")
    return parent, leaf


def _rewrite_from_imports(src: str) -> str:
    """Rule 1: `from PKG import mod [as x]` where PKG.mod moved: import it from its new place, same local name."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        moved = [a for a in node.names if f"{node.module}.{a.name}" in _MODS]
        if not moved:
            continue
        groups: dict[str, list[str]] = {}
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if full in _MODS:
                parent, leaf = _split_parent(_MODS[full])
                groups.setdefault(parent, []).append(f"{leaf} as {a.asname or a.name}")
            else:
                groups.setdefault(node.module, []).append(a.name if a.asname is None else f"{a.name} as {a.asname}")
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = re.match(r"\s*", lines[first]).group(0)  # type: ignore[union-attr]
        tail = lines[last][node.end_col_offset:]  # a trailing comment survives on the last statement
        stmts = [f"{indent}from {pkg} import {', '.join(names)}" for pkg, names in groups.items()]
        edits.append((first, last, "\n".join(stmts) + tail.rstrip("\n") + "\n"))
    for first, last, text in sorted(edits, reverse=True):
        lines[first:last + 1] = [text]
    return "".join(lines)


def rewrite_text(src: str, is_py: bool) -> str:
    """Every reference to a moved module or path in one file's text, rewritten (rules 1-3)."""
    if is_py:
        src = _rewrite_from_imports(src)
    src = _MOD_RE.sub(lambda m: _MODS[m.group(1)], src)
    return _PATH_RE.sub(lambda m: MOVES[m.group(1)], src)


def _text_files(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         check=True, capture_output=True).stdout.decode().split("\0")
    files = []
    for rel in sorted(set(filter(None, out))):
        if rel in SELF or any(part in SKIP_DIRS for part in Path(rel).parts):
            continue
        p = root / rel
        if p.is_file() and (rel.endswith(TEXT_SUFFIXES) or rel in TEXT_NAMES):
            files.append(p)
    return files


def _verify_init(root: Path) -> str | None:
    """The generated `refimpl/verify/__init__.py`: job's `__all__`, re-exported lazily."""
    job = root / VERIFY_JOB
    if not job.exists():
        return None
    names: list[str] = []
    for node in ast.parse(job.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
    return (
        '"""The verification harness: adapters, checkers, mutants and the `ortmem verify` job (`refimpl.verify.job`).\n'
        "\n"
        "Kept apart from the governor (`refimpl.manager`), which imports nothing from here. Generated by\n"
        "tools/relayout.py: the job's names are re-exported lazily (PEP 562), so `from refimpl.verify import X`\n"
        "works as it did when the job was a single module, and importing one adapter or checker\n"
        "does not import the whole harness.\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "import importlib\n"
        "from typing import Any\n\n"
        f"__all__ = {names!r}\n\n\n"
        "def __getattr__(name: str) -> Any:\n"
        '    if name.startswith("__"):\n'
        "        raise AttributeError(name)\n"
        '    job = importlib.import_module("refimpl.verify.job")\n'
        "    try:\n"
        "        return getattr(job, name)\n"
        "    except AttributeError:\n"
        "        raise AttributeError(f\"module 'refimpl.verify' has no attribute {name!r}\") from None\n"
    )


def depth_hazards(root: Path) -> list[str]:
    """Moved modules that change folder depth and locate files from their own `__file__` (they would break)."""
    out = []
    for old, new in MOVES.items():
        here = root / old if (root / old).exists() else root / new
        if (old.count("/") != new.count("/") and here.exists()
                and "__file__" in here.read_text(encoding="utf-8", errors="surrogateescape")):
            out.append(f"{here.relative_to(root).as_posix()} uses __file__ and moves from depth "
                       f"{old.count('/')} to {new.count('/')}: locate the root through invariants.drift.ROOT")
    return out


def plan(root: Path) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(moves still to do, moves whose source is gone and target absent, files whose text would change)."""
    todo, missing = [], []
    for old, new in MOVES.items():
        if (root / old).exists():
            if (root / new).exists():
                raise SystemExit(f"relayout: both {old} and {new} exist; merge them by hand first")
            todo.append((old, new))
        elif not (root / new).exists():
            missing.append(old)
    changed = []
    for p in _text_files(root):
        rel = p.relative_to(root).as_posix()
        src = p.read_text(encoding="utf-8", errors="surrogateescape")
        if rewrite_text(src, rel.endswith(".py")) != src:
            changed.append(MOVES.get(rel, rel))
    return todo, missing, changed


def render_layout() -> str:
    """docs/layout.md: concern x layer -> file, and the moves that produced it."""
    head = "| concern | " + " | ".join(LAYERS) + " |\n|" + "---|" * (len(LAYERS) + 1) + "\n"
    rows = "".join(f"| {c} | " + " | ".join(f"`{LAYOUT[c][l]}`" for l in LAYERS) + " |\n" for c in CONCERNS)
    moves = "".join(f"| `{o}` | `{n}` |\n" for o, n in MOVES.items())
    return (
        "# Layout: the same concern, the same name, in every layer\n\n"
        "Generated from `tools/relayout.py` (`LAYOUT`, `MOVES`) by `python tools/relayout.py --docs`;\n"
        "`tests/test_layout.py` checks that every file below exists.\n\n"
        "- **model** (`spec/`): the pure abstract state machine; **predicates** (`invariants/`): the harm clauses;\n"
        "  **machine** and **scope** (`invariants/`): the Hypothesis campaign and the explorer's deterministic scope.\n"
        "- **implementation**: the governor (`refimpl/manager/`, one file per part, what an ORT engineer would\n"
        "  port), the ORT holders and sessions (`refimpl/ort/`), the hierarchy's processes (`refimpl/hierarchy/`).\n"
        "- **adapter** and **checker** (`refimpl/verify/`): the verification harness, apart from the governor.\n"
        "  The sessions checker is registered as `ort` (`ortmem verify --checker ort`); tickets are checked by the\n"
        "  pressure protocol's campaign; admission and sessions draw their models through the generic\n"
        "  `invariants/model_machine.py`, with their adapters inside their checkers.\n\n"
        + head + rows +
        "\n## Moves\n\n| before | after |\n|---|---|\n" + moves
    )


def apply(root: Path) -> int:
    hazards = depth_hazards(root)
    if hazards:
        raise SystemExit("relayout: refusing to move:\n  " + "\n  ".join(hazards))
    todo, _, _ = plan(root)
    for old, new in todo:
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", old, new], cwd=root, check=True)
    n = 0
    for p in _text_files(root):
        src = p.read_text(encoding="utf-8", errors="surrogateescape")
        out = rewrite_text(src, p.suffix == ".py")
        if out != src:
            p.write_text(out, encoding="utf-8", errors="surrogateescape")
            n += 1
    init = _verify_init(root)
    if init is not None and (not (root / VERIFY_INIT).exists() or (root / VERIFY_INIT).read_text() != init):
        (root / VERIFY_INIT).write_text(init, encoding="utf-8")
        subprocess.run(["git", "add", VERIFY_INIT], cwd=root, check=True)
        n += 1
    docs = root / "docs" / "layout.md"
    if not docs.exists() or docs.read_text(encoding="utf-8") != render_layout():
        docs.write_text(render_layout(), encoding="utf-8")
        n += 1
    return n + len(todo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report what would change; exit 1 if anything would")
    ap.add_argument("--docs", action="store_true", help="only regenerate docs/layout.md")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args(argv)
    root = args.root.resolve()
    if args.docs:
        (root / "docs" / "layout.md").write_text(render_layout(), encoding="utf-8")
        return 0
    if args.check:
        todo, missing, changed = plan(root)
        init = _verify_init(root)
        stale_init = init is not None and (not (root / VERIFY_INIT).exists()
                                           or (root / VERIFY_INIT).read_text() != init)
        for old, new in todo:
            print(f"move     {old} -> {new}")
        for old in missing:
            print(f"absent   {old} (neither it nor {MOVES[old]} exists; skipped)")
        for rel in changed:
            print(f"rewrite  {rel}")
        for h in depth_hazards(root):
            print(f"HAZARD   {h}")
        if stale_init:
            print(f"generate {VERIFY_INIT}")
        pending = bool(todo or changed or stale_init or depth_hazards(root))
        print("relayout: " + (f"{len(todo)} moves, {len(changed)} files to rewrite" if pending else "nothing to do"))
        return 1 if pending else 0
    n = apply(root)
    print(f"relayout: {n} changes" if n else "relayout: nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
