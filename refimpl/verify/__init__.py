"""The verification harness: adapters, checkers, mutants and the `ortmem verify` job (`refimpl.verify.job`).

Kept apart from the governor (`refimpl.manager`), which imports nothing from here. The job's names
are re-exported lazily (PEP 562): `from refimpl.verify import X` works, and importing one adapter or
checker does not import the whole harness.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ['PROFILES', 'CHECKER_NAMES', 'Report', 'IdReport', 'Search', 'verify', 'verdict']


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    job = importlib.import_module("refimpl.verify.job")
    try:
        return getattr(job, name)
    except AttributeError:
        raise AttributeError(f"module 'refimpl.verify' has no attribute {name!r}") from None
