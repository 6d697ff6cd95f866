"""A checker imported on first use, so `refimpl.verify.checkers` (and `ortmem spec`) load without onnxruntime.

The real-ORT checker lives in `refimpl.ort`, the only package that imports
onnxruntime, which is an optional extra; this proxy defers that import to
the first campaign or control.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyChecker"]


class LazyChecker:
    def __init__(self, name: str, module: str, cls: str, explorer: Any = None) -> None:
        self.name, self._module, self._cls = name, module, cls
        self._target: Any = None
        if explorer is not None:  # a spec-only explorer needs no import of the checker's module
            self.explore = explorer

    def _get(self) -> Any:
        if self._target is None:
            self._target = getattr(importlib.import_module(self._module), self._cls)()
        return self._target

    def campaign(self, budget: Any) -> Any:
        return self._get().campaign(budget)

    def control(self, guard: Any, layer: Any, budget: Any) -> Any:
        return self._get().control(guard, layer, budget)
