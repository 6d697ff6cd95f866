"""The layout shows the design: one concern, one name, in every layer (issue 10 item 7).

Reads the one mapping, the table in docs/layout.md (concern x layer -> file).

- every concern's model, predicates, machine, scope, implementation, adapter and checker exists;
- no module is over 500 lines (allow-list: generated text only);
- the governor (`refimpl/manager/`) imports nothing from the verification harness, the Hypothesis
  machines or the spec's transition modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS = ("model", "predicates", "machine", "scope", "implementation", "adapter", "checker")
CONCERNS = ("ledger", "tickets", "pressure", "transactions", "admission", "sessions", "hierarchy", "manager")


def layout_table(text: str) -> dict[str, dict[str, str]]:
    """The `| concern | layer... |` table: concern -> layer -> path (the header names the layers)."""
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|") and not line.startswith("|---")]
    head, *body = rows
    assert head == ["concern", *LAYERS], head
    return {row[0]: dict(zip(LAYERS, row[1:], strict=True)) for row in body}


LAYOUT = layout_table((ROOT / "docs" / "layout.md").read_text(encoding="utf-8"))

# Generated prose, not code: the only modules allowed over the limit.
LONG_ALLOWED = {"spec/_catalog_text.py"}
MAX_LINES = 500

# What the governor must never import: the harness, the campaigns, and the spec's transition code
# (refimpl is a second, independent implementation; vocabulary modules such as spec.ledger_actions,
# spec.manager_actions, spec.errors, spec.types, spec.arith are shared on purpose).
FORBIDDEN_FOR_MANAGER = (
    "refimpl.verify",
    "invariants.manager_ledger_machine", "invariants.manager_pressure", "invariants.manager_tx_machine",
    "invariants.manager_machine", "invariants.hierarchy_machine", "invariants.model_machine",
    "invariants.checked", "invariants.campaign", "invariants.explore",
    "spec.ledger", "spec.manager", "spec.manager_parts", "spec.pressure", "spec.manager_tx",
    "spec.admission", "spec.sessions", "spec.hierarchy",
)


def test_the_table_has_every_concern() -> None:
    assert tuple(LAYOUT) == CONCERNS


@pytest.mark.parametrize("concern", CONCERNS)
def test_every_concern_has_a_file_in_every_layer(concern: str) -> None:
    missing = [f"{layer}: {path}" for layer, path in LAYOUT[concern].items() if not (ROOT / path).is_file()]
    assert not missing, f"{concern}: missing {missing}"


def test_layout_table_reader_refuses_a_short_row() -> None:
    # Negative control for the checks above: a row with a layer missing is no mapping.
    with pytest.raises(ValueError):
        layout_table("| concern | " + " | ".join(LAYERS) + " |\n|---|\n| ledger | `spec/ledger.py` |\n")


def test_the_governor_files_carry_the_concern_name() -> None:
    # One hop from a concern's name: model, predicates, machine and checker are named for it, except
    # the documented shared ones (tickets, pressure and transactions: parts of the one composed model, its predicates and
    # adapter, their campaign a restriction of the composed machine; the ledger's adapter, the composed one; the
    # ledger's, pressure's and transactions' checker, the composed machine's one checker class; the generic model
    # machine).
    shared = {("tickets", "predicates"), ("tickets", "machine"), ("tickets", "scope"), ("tickets", "adapter"),
              ("tickets", "checker"), ("tickets", "implementation"), ("pressure", "scope"), ("pressure", "model"),
              ("pressure", "predicates"), ("pressure", "adapter"), ("pressure", "checker"), ("ledger", "checker"),
              ("transactions", "checker"), ("admission", "machine"),
              ("admission", "scope"), ("sessions", "machine"), ("sessions", "scope"), ("sessions", "implementation"),
              ("transactions", "model"), ("transactions", "predicates"), ("transactions", "machine"),
              ("transactions", "scope"), ("transactions", "adapter"), ("ledger", "adapter")}
    unnamed = [f"{c}/{layer}: {p}" for c in CONCERNS for layer, p in LAYOUT[c].items()
               if (c, layer) not in shared and c not in p]
    assert not unnamed


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
RECORDER_HOOKS = ("_lock", "_recorder", "_attach_recorder", "_touched", "_observed", "_take_grants", "_wake_waiters",
                  "_topology_epoch")  # the epoch an event was decided in: the manager numbers its topology


def test_tracing_uses_only_the_recorder_hooks_of_the_manager() -> None:
    src = (ROOT / "refimpl" / "tracing.py").read_text(encoding="utf-8")
    other = [a for a in private_accesses(src) if a.split(" ")[0].rsplit(".", 1)[1] not in RECORDER_HOOKS]
    assert not other, other


def test_private_access_finder_sees_a_private_hook() -> None:
    # Negative control for the check above.
    assert private_accesses("def f(pmm, rec):\n    pmm._lock.acquire()\n    rec.pmm._auths\n    self._x\n"
                            "    f.__name__\n") == ["pmm._lock (line 2)", "rec.pmm._auths (line 3)"]
