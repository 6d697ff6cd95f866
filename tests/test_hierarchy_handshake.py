"""The hierarchy under load (issue 12 flake). The handshake: a server that gives up on a slow client
(HANDSHAKE_TIMEOUT) must never leave that client holding a connection it believes authenticated.

The server ends every handshake with its first sealed frame (READY, or its answer to a worker's hello), and
a client counts a connection only once that frame verified (`refimpl.hierarchy.driver._dial`,
`Worker.try_connect`). A server that dropped the client after the challenge leaves it an EOF, never a
connection that is reset on first use (`ConnectionResetError` in `Hierarchy.wop(wid, "snapshot")` in the
campaign, which Hypothesis then reported as `FlakyFailure`). Both tests are deterministic: the slow client
is slow by construction.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from multiprocessing.connection import Client, Connection

import pytest

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy import transport as T
from refimpl.hierarchy.driver import Hierarchy, leftovers

KEY = b"k" * 32


def test_a_connection_the_server_dropped_after_the_challenge_is_never_confirmed(where: str) -> None:
    """The whole challenge passes, then the server closes instead of sending its first sealed frame."""
    path = os.path.join(where, "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve() -> None:
        sock, _ = server.accept()
        conn = Connection(sock.detach())
        T.server_handshake(conn, lambda role, wid: KEY)  # the client's answer is read and verified here ...
        conn.close()  # ... and the server drops the connection instead of confirming it

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        ch = T.dial(path, "control", 0, KEY)
        with pytest.raises((EOFError, OSError)):
            assert ch.poll(T.DIAL_TIMEOUT)
            ch.recv()  # no READY: the connection is never counted as authenticated
        ch.close()
    finally:
        t.join(10)
        server.close()


def test_a_client_too_slow_for_a_real_worker_gets_no_connection_and_the_next_dial_works(where: str) -> None:
    """A real worker's control socket: a client that stalls longer than HANDSHAKE_TIMEOUT before its answer
    is dropped, and learns it (no READY) instead of holding a dead connection; the driver's next call works."""
    with Hierarchy(where, 10) as h:  # closed on the way out, pass or fail
        wid = h.spawn()
        key = P.worker_control_key(h.cfg.master, wid)
        conn = Client(os.path.join(where, f"w{wid}.sock"), family="AF_UNIX")
        hello = P.hello_bytes("control", wid, secrets.token_bytes(32))
        conn.send_bytes(hello)
        assert conn.poll(T.DIAL_TIMEOUT)
        nonce = P.check_challenge(key, hello, conn.recv_bytes(128))  # the worker proved it holds the key
        time.sleep(T.HANDSHAKE_TIMEOUT + 1.0)  # the worker gives up on us meanwhile
        try:
            conn.send_bytes(P.answer(key, hello, nonce))
        except OSError:
            pass  # already closed: the same verdict
        with pytest.raises((EOFError, OSError)):
            assert conn.poll(T.DIAL_TIMEOUT)
            conn.recv_bytes(P.MAX_REPLY)
        conn.close()
        assert h.wop(wid, "snapshot")["worker"] == wid  # the worker survived; a fresh dial is confirmed
    assert leftovers(h.pids, h.starts) == []


def test_close_never_kills_a_process_that_reused_one_of_its_pids(where: str) -> None:
    """A pid of ours whose process exited and was reaped may name another process by the time `close` runs
    (pid_max 32768 on a busy machine: a worker of a hierarchy running beside this one). `close` kills only
    pids that still name the process it recorded (same start time)."""
    import subprocess
    from refimpl.hierarchy.coordinator import proc_state, starttime
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        h = Hierarchy(where, 10).start()
        h.spawn()
        start = starttime(bystander.pid)
        assert start is not None
        h._own(bystander.pid, start - 1)  # the number we recorded, for a process started before this one
        h.close()
        assert proc_state(bystander.pid) == "running", "close killed a process that was never ours"
        assert [p for p in h.pids if p != bystander.pid and h._alive(p)] == []  # by identity: pids move under load
    finally:
        bystander.kill()
        bystander.wait(10)
