"""Mutation controls: a named, realistic bug applied to a copy of one module, with every guard on.

A guard-off negative control shows that a guard is necessary; a mutation
control shows that a *clause can fail*: the bug is injected by the harness
(never by a switch on the governor's own paths), the checker's machine runs
with every guard on and refinement off, and only the predicates can detect
it. A clause that no control ever makes fail is one a reader cannot trust.

`Mutant.patch` replaces one exact snippet of one module's source; the
snippet must occur exactly once, so a mutant that no longer matches the code
is reported as stale instead of silently testing nothing. `applied(m)`
re-executes the patched source into the module's namespace and re-points the
names other loaded project modules imported from it, then restores both
exactly. It runs inside one verify job (a worker process), one mutant at a
time.
"""

from __future__ import annotations

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


@attrs.frozen
class Mutant:
    name: str
    #: The catalog IDs one of whose clauses must detect the bug.
    ids: tuple[str, ...]
    #: The checker whose machine runs it (`refimpl.checkers.CHECKERS`).
    model: str
    #: Which layer the patched module belongs to: the spec (invariants detect on the spec's own
    #: states) or refimpl (invariants detect on the implementation's abstraction).
    layer: Layer
    module: str
    old: str
    new: str
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
        n = src.count(self.old)
        if n != 1:
            raise StaleMutant(f"{self.name}: snippet occurs {n} times in {self.module} (expected once): {self.old!r}")
        return src.replace(self.old, self.new)


def _project_modules() -> list[ModuleType]:
    return [m for name, m in list(sys.modules.items())
            if m is not None and name.split(".")[0] in PROJECT_PACKAGES]


@contextmanager
def applied(m: Mutant) -> Iterator[None]:
    """Run the block with `m`'s module replaced by its patched copy; restore exactly afterwards."""
    mod = importlib.import_module(m.module)
    src = m.patched_source()
    saved = dict(mod.__dict__)
    rebinds: list[tuple[Any, str, Any]] = []
    try:
        exec(compile(src, mod.__file__ or m.module, "exec"), mod.__dict__)
        # Names other modules imported from `mod` (`from refimpl.governor import X`) still point at the
        # originals: re-point those whose definition changed.
        changed = {id(v): mod.__dict__[k] for k, v in saved.items()
                   if k in mod.__dict__ and mod.__dict__[k] is not v
                   and getattr(v, "__module__", None) == mod.__name__}
        for other in _project_modules():
            if other is mod:
                continue
            for k, v in list(vars(other).items()):
                if id(v) in changed:
                    rebinds.append((other, k, v))
                    setattr(other, k, changed[id(v)])
        yield
    finally:
        for other, k, v in rebinds:
            setattr(other, k, v)
        mod.__dict__.clear()
        mod.__dict__.update(saved)
