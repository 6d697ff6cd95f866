"""Shared harness of the real-threads suites: start together, join with a safety net, re-raise.

Wall-clock timeouts here are only a safety net against a hang, never the assertion.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

JOIN_S = 30.0  # safety net only


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every microsecond, so races interleave finely."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_together(targets: list[Callable[[], None]],
                 watchers: Sequence[Callable[[threading.Event], None]] = ()) -> None:
    """One thread per target and per watcher behind a barrier; re-raise the first failure. A watcher gets the
    event that is set once every target has returned, and must return when it is."""
    barrier = threading.Barrier(len(targets) + len(watchers))
    errors: list[BaseException] = []
    done, lock, left = threading.Event(), threading.Lock(), [len(targets)]

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait(timeout=JOIN_S)
                fn()
            except BaseException as e:  # surfaced below, with the thread's traceback
                errors.append(e)
            finally:
                if fn in targets:
                    with lock:
                        left[0] -= 1
                        if not left[0]:
                            done.set()
        return run

    start_and_join([threading.Thread(target=wrap(t), daemon=True)
                    for t in [*targets, *(lambda w=w: w(done) for w in watchers)]])
    if errors:
        raise errors[0]


def start_and_join(threads: list[threading.Thread]) -> None:
    """Start every thread, join each with the safety net; none may still run."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not [t for t in threads if t.is_alive()], "a thread hung (safety net)"
