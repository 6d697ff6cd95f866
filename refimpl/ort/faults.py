# Injected ORT Run failures (FoundationDB-style BUGGIFY for the one
# environment event the campaign cannot make happen on its own at a chosen
# step: ORT failing a decode's Run). Labelled injected everywhere it is used.
# The failure is ORT's own: the Run is made with `RunOptions.terminate` set,
# so ORT refuses it ("Exiting due to terminate flag ...") before any kernel
# runs [ort:run-terminate], raising as any failed Run does. The real,
# uninjected failures (a Run over the env arena's cap [ort:env-arena-cap], an
# IOBinding shape error [ort:iobinding-shape]) are tested in
# tests/ort/test_ort_run_failures.py.
#
# Owns: the patch of `InferenceSession.run_with_iobinding` for one block.
# Must not touch: the ledger or the runtime's state.

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import onnxruntime as ort

__all__ = ["failing_runs", "INJECTED_RUN_FAILURE"]

INJECTED_RUN_FAILURE = "injected: the Run's RunOptions.terminate is set"


@contextmanager
def failing_runs() -> Iterator[list[int]]:
    """Every IOBinding Run inside the block is refused by ORT [ort:run-terminate]; yields a list, one item per Run."""
    real = ort.InferenceSession.run_with_iobinding
    fired: list[int] = []

    def run(self: Any, iobinding: Any, run_options: Any = None) -> Any:
        ro = ort.RunOptions()
        ro.terminate = True
        fired.append(1)
        return real(self, iobinding, ro)

    ort.InferenceSession.run_with_iobinding = run  # type: ignore[method-assign]
    try:
        yield fired
    finally:
        ort.InferenceSession.run_with_iobinding = real  # type: ignore[method-assign]
