"""The worker's serve loop: a connection made stale by an earlier command of the same round is skipped.

Found by `ortmem verify --quick`: a control command (a redial) replaced the coordinator connection while
the old one was also ready; the loop handed the old one to `_control`, whose EOF handling removed it from
`controls`, where it never was (ValueError), and the worker process died. Its driver then saw only a
reset connection (the hierarchy campaign's ConnectionResetError under load).
"""

from __future__ import annotations

from typing import Any

import pytest

from refimpl.hierarchy.worker import Worker


class _Conn:
    def __init__(self, name: str) -> None:
        self.name = name

    def poll(self, timeout: float) -> bool:
        raise EOFError(f"{self.name} is closed")  # a stale connection: its peer went away

    def recv(self) -> Any:
        raise EOFError(f"{self.name} is closed")

    def close(self) -> None:
        pass


def _worker(controls: list[Any], coord: Any) -> tuple[Worker, list[str]]:
    w = Worker.__new__(Worker)  # no sockets: only the loop's dispatch is under test
    w.ctl, w.controls, w.coord = object(), controls, coord
    served: list[str] = []

    def control(conn: Any) -> None:
        served.append(conn.name)
        w.coord = _Conn("new coordinator")  # the command redials: the old coordinator connection is stale

    w._control = control  # type: ignore[method-assign]
    return w, served


def test_a_coordinator_connection_replaced_earlier_in_the_round_is_skipped() -> None:
    cmd, old = _Conn("control"), _Conn("old coordinator")
    w, served = _worker([cmd], old)
    w._serve_ready([cmd, old])  # both were ready when the round began
    assert served == ["control"] and w.controls == [cmd] and w.coord is not old


def test_without_the_membership_test_the_stale_connection_kills_the_worker() -> None:
    """Negative control: the old dispatch (anything else is a control connection) meets the harm."""
    cmd, old = _Conn("control"), _Conn("old coordinator")
    w, _ = _worker([cmd], old)

    def old_dispatch(ready: list[Any]) -> None:
        for r in ready:
            if r is w.coord:
                pass
            elif r is w.ctl:
                pass
            else:
                Worker._control(w, r) if r is old else w._control(r)  # the old `else: self._control(r)`

    with pytest.raises(ValueError, match="not in list"):
        old_dispatch([cmd, old])
