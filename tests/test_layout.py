"""The layout shows the design: one concern, one name, in every layer (issue 10 item 7).

Reads the one mapping in tools/relayout.py (`MOVES`, `LAYOUT`). These tests FAIL until
`python tools/relayout.py` has been applied (the moves are applied by the lead after the branches
that still edit the moved files have merged); the rewrite rules themselves are tested here on
small synthetic sources, which pass before and after.

- every concern's model, predicates, machine, scope, implementation, adapter and checker exists;
- no module moved by the mapping is still at its old path, and `relayout.py --check` has nothing to do;
- no module is over 500 lines (allow-list: generated text only);
- the governor (`refimpl/manager/`) imports nothing from the verification harness, the Hypothesis
  machines or the spec's transition modules;
- docs/layout.md is what the mapping renders.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_relayout():
    spec = importlib.util.spec_from_file_location("_relayout", ROOT / "tools" / "relayout.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


R = _load_relayout()

# Generated prose, not code: the only modules allowed over the limit.
LONG_ALLOWED = {"spec/_catalog_text.py"}
MAX_LINES = 500

# What the governor must never import: the harness, the campaigns, and the spec's transition code
# (refimpl is a second, independent implementation; vocabulary modules such as spec.ledger_actions,
# spec.manager_actions, spec.errors, spec.types, spec.arith are shared on purpose).
FORBIDDEN_FOR_MANAGER = (
    "refimpl.verify",
    "invariants.ledger_machine", "invariants.manager_pressure", "invariants.manager_tx_machine",
    "invariants.manager_machine", "invariants.hierarchy_machine", "invariants.model_machine",
    "invariants.checked", "invariants.campaign", "invariants.explore",
    "spec.ledger", "spec.manager", "spec.manager_parts", "spec.pressure", "spec.manager_tx",
    "spec.admission", "spec.sessions", "spec.hierarchy",
)


@pytest.mark.parametrize("concern", R.CONCERNS)
def test_every_concern_has_a_file_in_every_layer(concern: str) -> None:
    row = R.LAYOUT[concern]
    assert set(row) == set(R.LAYERS), f"{concern}: layers {sorted(row)}"
    missing = [f"{layer}: {path}" for layer, path in row.items() if not (ROOT / path).is_file()]
    assert not missing, f"{concern}: missing {missing} (has tools/relayout.py been applied?)"


def test_the_governor_files_carry_the_concern_name() -> None:
    # One hop from a concern's name: model, predicates, machine and checker are named for it, except
    # the documented shared ones (tickets, pressure and transactions: parts of the one composed model, its predicates and
    # adapter, their campaign a restriction of the composed machine; the generic model machine).
    shared = {("tickets", "predicates"), ("tickets", "machine"), ("tickets", "scope"), ("tickets", "adapter"),
              ("tickets", "checker"), ("tickets", "implementation"), ("pressure", "scope"), ("pressure", "model"),
              ("pressure", "predicates"), ("pressure", "adapter"), ("admission", "machine"),
              ("admission", "scope"), ("sessions", "machine"), ("sessions", "scope"), ("sessions", "implementation"),
              ("transactions", "model"), ("transactions", "predicates"), ("transactions", "machine"),
              ("transactions", "scope"), ("transactions", "adapter")}
    unnamed = [f"{c}/{layer}: {p}" for c in R.CONCERNS for layer, p in R.LAYOUT[c].items()
               if (c, layer) not in shared and c not in p]
    assert not unnamed


@pytest.mark.parametrize("old", sorted(R.MOVES))
def test_moved_module_is_not_at_its_old_path(old: str) -> None:
    assert not (ROOT / old).exists(), f"{old} still exists: apply tools/relayout.py (-> {R.MOVES[old]})"
    assert (ROOT / R.MOVES[old]).is_file()


def test_relayout_has_nothing_left_to_do() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "relayout.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def _modules() -> list[Path]:
    return sorted(p for pkg in ("spec", "invariants", "refimpl") for p in (ROOT / pkg).rglob("*.py")
                  if "__pycache__" not in p.parts)


def test_no_module_over_the_line_limit() -> None:
    long = {p.relative_to(ROOT).as_posix(): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert set(long) <= LONG_ALLOWED, {k: v for k, v in long.items() if k not in LONG_ALLOWED}


def _imports(path: Path) -> set[str]:
    """Every module a file imports, statically or through `importlib.import_module("...")`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
            out.add(str(node.args[0].value))
    return out


def forbidden_imports(path: Path) -> list[str]:
    return sorted({f for m in _imports(path) for f in FORBIDDEN_FOR_MANAGER if m == f or m.startswith(f + ".")})


@pytest.mark.parametrize("path", sorted((ROOT / "refimpl" / "manager").glob("*.py")), ids=lambda p: p.name)
def test_governor_imports_no_harness_machine_or_spec_transitions(path: Path) -> None:
    assert not forbidden_imports(path)


def test_forbidden_import_finder_sees_every_form(tmp_path: Path) -> None:
    # Negative control for the check above: each form of importing a forbidden module is found.
    src = ("import spec.ledger\nfrom refimpl.verify.checkers import CHECKERS\nfrom spec import manager as MG\n"
           "def f():\n    import importlib\n    importlib.import_module('invariants.manager_machine')\n"
           "from spec import ledger_actions as A\nfrom spec.manager_actions import Manager\n")
    p = tmp_path / "m.py"
    p.write_text(src)
    assert forbidden_imports(p) == ["invariants.manager_machine", "refimpl.verify", "spec.ledger", "spec.manager"]


def test_layout_doc_is_the_rendered_mapping() -> None:
    assert (ROOT / "docs" / "layout.md").read_text(encoding="utf-8") == R.render_layout(), \
        "regenerate with: python tools/relayout.py --docs"


# --- the rewrite rules, on synthetic sources (independent of whether the moves were applied) -------

@pytest.mark.parametrize(("src", "want"), [
    ("from spec import machine\n", "from spec import ledger as machine\n"),
    ("from spec import actions as A  # noqa\n", "from spec import ledger_actions as A  # noqa\n"),
    ("from refimpl import adapter, demo\n", "from refimpl.verify import ledger_adapter as adapter\nfrom refimpl import demo\n"),
    ("def f():\n    from invariants import (predicates as LP,\n        pressure)\n",
     "def f():\n    from invariants import ledger as LP, pressure\n"),
    ("import invariants.admission_predicates  # noqa: F401\n", "import invariants.admission  # noqa: F401\n"),
    ("x = spec.machine.step(s)\n", "x = spec.ledger.step(s)\n"),
    ('LazyChecker("ort", "refimpl.ort.checker", "OrtChecker")\n',
     'LazyChecker("ort", "refimpl.verify.sessions_checker", "OrtChecker")\n'),
    ('_P = "invariants.predicates."\n', '_P = "invariants.ledger."\n'),
    # a longer dotted name that merely starts with a moved one is left alone
    ('"refimpl.pressure_checker", "refimpl.pressure", "spec.state_of"\n',
     '"refimpl.verify.pressure_checker", "refimpl.pressure", "spec.state_of"\n'),
    # a module of another package with the same leaf is not a moved module
    ("from refimpl.hierarchy.protocol import x\nimport a.spec.machine\n",
     "from refimpl.hierarchy.protocol import x\nimport a.spec.machine\n"),
    ("from refimpl.verify import PROFILES, _job\n", "from refimpl.verify import PROFILES, _job\n"),
])
def test_rewrite_python(src: str, want: str) -> None:
    got = R.rewrite_text(src, True)
    assert got == want
    assert R.rewrite_text(got, True) == got  # idempotent


@pytest.mark.parametrize(("src", "want"), [
    ("see `invariants/predicates.py` and refimpl/verify.py\n", "see `invariants/ledger.py` and refimpl/verify/job.py\n"),
    ("python refimpl/hierarchy/adapter.py; docs/refimpl/adapter.py\n",
     "python refimpl/verify/hierarchy_adapter.py; docs/refimpl/adapter.py\n"),
    ('{"module": "spec/machine.py", "m": "spec.machine"}\n', '{"module": "spec/ledger.py", "m": "spec.ledger"}\n'),
])
def test_rewrite_paths_and_names_in_text(src: str, want: str) -> None:
    got = R.rewrite_text(src, False)
    assert got == want
    assert R.rewrite_text(got, False) == got


def test_no_moved_module_locates_files_from_its_own_path() -> None:
    # `Path(__file__).parent.parent` means another folder once the module is one level deeper.
    assert not R.depth_hazards(ROOT)


def test_depth_hazard_is_found(tmp_path: Path) -> None:
    # Negative control for the check above, on a synthetic tree.
    old = next(o for o, n in R.MOVES.items() if o.count("/") != n.count("/"))
    (tmp_path / old).parent.mkdir(parents=True)
    (tmp_path / old).write_text("ROOT = Path(__file__).resolve().parent.parent\n")
    assert [h.split(" ")[0] for h in R.depth_hazards(tmp_path)] == [old]


def test_mapping_has_no_chains_or_collisions() -> None:
    # A target that is also a source would make a second run move it again (not idempotent).
    assert not set(R.MOVES.values()) & set(R.MOVES)
    assert len(set(R.MOVES.values())) == len(R.MOVES)


def private_accesses(src: str) -> list[str]:
    """`x._name` where x is not `self`/`cls` (a dunder such as `__name__` is public)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            out.append((node.lineno, f"{ast.unparse(node)} (line {node.lineno})"))
    return [text for _, text in sorted(out)]


#: The private members of the manager the trace recorder may use (issue #21 item 2: the hooks are no public verbs;
#: `refimpl.manager.views`): the lock, the recorder's slot and wiring, and what an operation touched and left.
RECORDER_HOOKS = ("_lock", "_recorder", "_attach_recorder", "_touched", "_observed", "_take_grants", "_wake_waiters")


def test_tracing_uses_only_the_recorder_hooks_of_the_manager() -> None:
    src = (ROOT / "refimpl" / "tracing.py").read_text(encoding="utf-8")
    other = [a for a in private_accesses(src) if a.split(" ")[0].rsplit(".", 1)[1] not in RECORDER_HOOKS]
    assert not other, other


def test_private_access_finder_sees_a_private_hook() -> None:
    # Negative control for the check above.
    assert private_accesses("def f(pmm, rec):\n    pmm._lock.acquire()\n    rec.pmm._auths\n    self._x\n"
                            "    f.__name__\n") == ["pmm._lock (line 2)", "rec.pmm._auths (line 3)"]
