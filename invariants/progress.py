"""Live counts from inside a long check (a campaign's examples and steps, an explorer's states) to a listener.

A campaign or an exploration can run for minutes inside one call; whoever
started it (the `ortmem verify` job, in a worker process or in its own) wants
to show that it moves. The check calls `tick("steps")`; the listener, if
any, is the sink installed around the call with `reporting(sink)`. With no
sink installed a tick costs one context-variable read, so the checks run the
same inside and outside the CLI. The sink is carried by a `ContextVar`, the
standard ambient-context mechanism (as `decimal` keeps its context): nothing
here is shared between threads or processes, and a check never reads it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Sink", "reporting", "tick"]

#: counter name ("examples", "steps", "states"), amount to add.
Sink = Callable[[str, int], None]

_SINK: ContextVar[Sink | None] = ContextVar("ortmem_progress_sink", default=None)


@contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """Send the ticks of the checks run inside this block to `sink` (None: to nobody)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def tick(counter: str, n: int = 1) -> None:
    """Count `n` more of `counter` for whoever listens."""
    sink = _SINK.get()
    if sink is not None:
        sink(counter, n)
