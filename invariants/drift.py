"""Drift check: catalog, predicates, guards, tests and generated docs in step.

Finds, as a list of human-readable problems:
- docs/spec.md differs from `spec.catalog.render_markdown()` (stale docs);
- an implemented ID with no predicate (and no reasoned `checked_by`), or no test;
- a listed predicate that does not exist, or a registered predicate no entry lists;
- a listed test file or test name that does not exist;
- a guard protecting an ID that is not implemented, or an unknown ID;
- a not-yet-implemented entry that claims predicates or tests.

The docs and test checks read the checkout's docs/ and tests/. An installed
copy (a wheel in site-packages) has neither: there those two checks are not
run, `unchecked()` names them, and `ortmem verify` says so instead of
reporting every test as missing.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from spec.catalog import CATALOG, IDS, Status, render_markdown
from spec.guards import GUARDS

__all__ = ["ROOT", "PREDICATE_MODULES", "drift_problems", "in_checkout", "unchecked"]

#: Modules that register predicates, each with dicts ID -> predicates named
#: STATE_PREDICATES, STEP_PREDICATES, (for temporal properties) TRACE_PREDICATES and (for what a
#: checker observes outside the abstract state, such as a lock probe) OBSERVATION_PREDICATES.
PREDICATE_MODULES = (
    "invariants.ledger",
    "invariants.replay_predicates",
    "invariants.admission",
    "invariants.sessions",
    "invariants.hierarchy",
    "invariants.manager",
)
_TABLES = ("STATE_PREDICATES", "STEP_PREDICATES", "TRACE_PREDICATES", "OBSERVATION_PREDICATES")

#: The repository root (the folder holding spec/, invariants/, docs/, tests/).
ROOT = Path(__file__).resolve().parent.parent


def in_checkout(root: Path = ROOT) -> bool:
    """True iff `root` is a source tree (docs/ and tests/ beside the packages), not an installed copy."""
    return (root / "docs").is_dir() and (root / "tests").is_dir()


def unchecked(root: Path = ROOT) -> list[str]:
    """What `drift_problems(root)` cannot check here (nothing in a checkout)."""
    if in_checkout(root):
        return []
    return [f"docs/spec.md against the catalog: no docs/ in {root} (an installed copy, not a checkout)",
            f"the catalog's tests exist: no tests/ in {root}"]


def _tables() -> list[tuple[str, dict]]:
    out = []
    for name in PREDICATE_MODULES:
        mod = importlib.import_module(name)
        out += [(name, getattr(mod, t)) for t in _TABLES if hasattr(mod, t)]
    return out


def _registered() -> set[str]:
    # A predicate re-used on a component (`__wrapped__`: the ledger's, run on the manager's ledger) is
    # registered where it is defined, not a second time.
    return {f"{mod}.{p.__name__}" for mod, table in _tables() for preds in table.values() for p in preds
            if not hasattr(p, "__wrapped__")}


def _test_exists(root: Path, node: str) -> bool:
    path, _, name = node.partition("::")
    file = root / path
    if not file.is_file():
        return False
    if not name:
        return True
    tree = ast.parse(file.read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return name.split("[")[0] in defined


def drift_problems(root: Path = ROOT) -> list[str]:
    """Every way catalog, code, tests and docs disagree; empty when in step."""
    problems: list[str] = []
    checkout = in_checkout(root)
    doc = root / "docs" / "spec.md"
    if checkout and (not doc.is_file() or doc.read_text() != render_markdown()):
        problems.append("docs/spec.md is stale: run `ortmem spec --write-docs`")
    registered = _registered()
    listed: set[str] = set()
    for e in CATALOG:
        listed |= set(e.predicates)
        if e.status is Status.NOT_YET_IMPLEMENTED:
            if e.predicates or e.tests:
                problems.append(f"{e.id} is not yet implemented but lists predicates or tests")
            continue
        if not e.predicates and not e.checked_by:
            problems.append(f"{e.id} has no predicate and no reasoned 'checked by' entry")
        if not e.tests:
            problems.append(f"{e.id} lists no test")
        for p in e.predicates:
            if p not in registered:
                problems.append(f"{e.id} lists predicate {p}, which is not registered in invariants")
        for t in e.tests if checkout else ():
            if not _test_exists(root, t):
                problems.append(f"{e.id} lists test {t}, which does not exist")
    for p in sorted(registered - listed):
        problems.append(f"predicate {p} is registered but no catalog entry lists it")
    for _, table in _tables():
        for id in table:
            if id not in IDS:
                problems.append(f"predicates registered for unknown ID {id}")
    implemented = {e.id for e in CATALOG if e.status is Status.IMPLEMENTED}
    for g in GUARDS:
        for id in g.ids:
            if id not in implemented:
                problems.append(f"guard {g.name} protects {id}, which is not implemented")
    return problems
