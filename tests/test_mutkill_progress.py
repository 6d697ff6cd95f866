"""invariants/progress.py pinned (its mutation run, benchmarks/mutation.py): a tick reaches the sink installed
around it, with its counter and amount (one by default), and nobody else; with no sink a tick is a no-op; an inner
`reporting` (None included) hides the outer sink until it ends, on an error too."""

from __future__ import annotations

import pytest

from invariants.progress import reporting, tick


def test_a_tick_reaches_the_installed_sink_with_its_counter_and_amount() -> None:
    got: list[tuple[str, int]] = []
    tick("steps")  # nobody listens: nothing happens
    with reporting(lambda c, n: got.append((c, n))):
        tick("steps")
        tick("states", 3)
    tick("examples")
    assert got == [("steps", 1), ("states", 3)]


def test_an_inner_block_hides_the_outer_sink_until_it_ends_even_on_an_error() -> None:
    outer: list[tuple[str, int]] = []
    inner: list[tuple[str, int]] = []
    with reporting(lambda c, n: outer.append((c, n))):
        with reporting(lambda c, n: inner.append((c, n))):
            tick("steps", 2)
        with reporting(None):
            tick("steps", 5)
        with pytest.raises(ZeroDivisionError), reporting(lambda c, n: inner.append((c, n))):
            tick("states")
            1 / 0  # noqa: B018
        tick("examples", 7)
    tick("examples", 9)
    assert (outer, inner) == ([("examples", 7)], [("steps", 2), ("states", 1)])
