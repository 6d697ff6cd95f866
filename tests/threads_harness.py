"""Shared harness of the real-threads suites: start together, join with a safety net, re-raise.

Wall-clock timeouts here are only a safety net against a hang, never the assertion.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

JOIN_S = 30.0  # safety net only


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every microsecond, so races interleave finely."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_together(targets: list[Callable[[], None]]) -> None:
    """One thread per target behind a barrier; re-raise the first failure."""
    barrier = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait(timeout=JOIN_S)
                fn()
            except BaseException as e:  # surfaced below, with the thread's traceback
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not [t for t in threads if t.is_alive()], "a thread hung (safety net)"
    if errors:
        raise errors[0]
