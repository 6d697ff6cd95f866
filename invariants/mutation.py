"""Mutation controls: a named, realistic bug applied to a copy of one module, with every guard on.

A guard-off negative control shows that a guard is necessary; a mutation
control shows that a *clause can fail*: the bug is injected by the harness
(never by a switch on the governor's own paths), the checker's machine runs
with every guard on and refinement off, and only the predicates can detect
it. A clause that no control ever makes fail is one a reader cannot trust.

`Mutant.patched_source` replaces one exact snippet of one module's source (or
several, in order, given as tuples); each must occur exactly once there, so
a mutant that no longer matches the code is reported as stale instead of
silently testing nothing. `applied(m)` replaces the one top-level definition
the snippets lie in (a function, a class, a constant) and re-points the names
other loaded project modules imported it under (and the entries of
module-level dicts that hold it, such as a handler table), then restores all
of them exactly. It runs inside one verify job (a worker process), one mutant
at a time.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import attrs

from spec.guards import Layer

__all__ = ["Mutant", "StaleMutant", "applied", "PROJECT_PACKAGES"]

PROJECT_PACKAGES = ("spec", "invariants", "refimpl")


class StaleMutant(ValueError):
    """A mutant's snippet does not occur exactly once in its module: the mutant tests nothing."""


def _snippets(s: str | tuple[str, ...]) -> tuple[str, ...]:
    return (s,) if isinstance(s, str) else s


@attrs.frozen
class Mutant:
    name: str
    #: The catalog IDs one of whose clauses must detect the bug.
    ids: tuple[str, ...]
    #: The checker whose machine runs it (`refimpl.verify.checkers.CHECKERS`).
    model: str
    #: Which layer the patched module belongs to: the spec (invariants detect on the spec's own
    #: states) or refimpl (invariants detect on the implementation's abstraction).
    layer: Layer
    module: str
    #: The snippet replaced by `new`, or a tuple of snippets of the one definition, each replaced by its `new`.
    old: str | tuple[str, ...]
    new: str | tuple[str, ...]
    description: str
    #: For checkers that run several models: which one (e.g. the admission checker's guard names).
    submodel: str | None = None

    def patched_source(self) -> str:
        mod = importlib.import_module(self.module)
        path = mod.__file__
        if path is None:
            raise StaleMutant(f"{self.name}: module {self.module} has no source file")
        with open(path, encoding="utf-8") as f:
            src = f.read()
        edits = []
        for old, new in zip(_snippets(self.old), _snippets(self.new), strict=True):
            n = src.count(old)  # in the module's own source: each snippet names one place there
            if n != 1:
                raise StaleMutant(f"{self.name}: snippet occurs {n} times in {self.module} (expected once): {old!r}")
            edits.append((src.index(old), old, new))
        out, end = [], 0  # each edit at its place in the source, so no edit can patch another's text
        for start, old, new in sorted(edits):
            if start < end:
                raise StaleMutant(f"{self.name}: snippets overlap in {self.module}: {old!r}")
            out += (src[end:start], new)
            end = start + len(old)
        return "".join(out) + src[end:]


def _project_modules() -> list[ModuleType]:
    return [m for name, m in list(sys.modules.items())
            if m is not None and name.split(".")[0] in PROJECT_PACKAGES]


def _changed_definition(src: str, m: Mutant) -> str:
    """The name of the one top-level definition (def, class or assignment) all the snippets lie in."""
    olds = _snippets(m.old)
    starts = [src.index(old) for old in olds]
    ends = [start + len(old) for start, old in zip(starts, olds)]
    lines = src[:min(starts)].count("\n") + 1, src[:max(ends)].rstrip().count("\n") + 1
    for node in ast.parse(src).body:
        if node.lineno <= lines[0] and lines[1] <= (node.end_lineno or node.lineno):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return node.name
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                return node.targets[0].id
    raise StaleMutant(f"{m.name}: the snippet is not inside one top-level definition of {m.module}")


@contextmanager
def applied(m: Mutant) -> Iterator[None]:
    """Run the block with the one definition `m` patches replaced; restore exactly afterwards.

    The patched module is executed in a scratch namespace whose every other name is then pointed back
    at the original object, so the mutated function or class sees the module's real classes, enums
    and constants (objects made before the patch keep working) and only its own code differs.
    """
    mod = importlib.import_module(m.module)
    original_src = open(mod.__file__ or "", encoding="utf-8").read()
    src = m.patched_source()
    name = _changed_definition(original_src, m)
    scratch: dict[str, Any] = {"__name__": mod.__name__, "__file__": mod.__file__, "__builtins__": __builtins__}
    exec(compile(src, mod.__file__ or m.module, "exec"), scratch)
    for k, v in mod.__dict__.items():
        if k != name:
            scratch[k] = v
    old, new = mod.__dict__[name], scratch[name]
    rebinds: list[tuple[Any, str]] = []
    rebased: list[tuple[type, tuple[type, ...]]] = []
    # A handler table (`_HANDLERS = {T.Release: _release, ...}`) holds the function itself, not its name:
    # without re-pointing its entry, a mutated action handler would never run (a mutant testing nothing).
    entries: list[tuple[dict[Any, Any], Any]] = []
    try:
        mod.__dict__[name] = new
        for other in _project_modules():
            for k, v in list(vars(other).items()):
                if v is old and other is not mod:
                    rebinds.append((other, k))
                    setattr(other, k, new)
                elif type(v) is dict and not k.startswith("__"):
                    for dk, dv in list(v.items()):
                        if dv is old:
                            entries.append((v, dk))
                            v[dk] = new
        if isinstance(old, type):  # a part (mixin) of a composed class: the composed class takes the patched part
            for sub in old.__subclasses__():
                rebased.append((sub, sub.__bases__))
                sub.__bases__ = tuple(new if b is old else b for b in sub.__bases__)
        yield
    finally:
        for sub, bases in rebased:
            sub.__bases__ = bases
        for table, dk in entries:
            table[dk] = old
        for other, k in rebinds:
            setattr(other, k, old)
        mod.__dict__[name] = old
