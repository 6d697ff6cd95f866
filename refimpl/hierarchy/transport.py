"""The hierarchy's sockets: Unix stream sockets carrying `refimpl.hierarchy.protocol` frames.

Framing is `multiprocessing.connection.Connection`'s length prefix, read with a
bound (`recv_bytes(maxlength)` refuses a longer frame before reading it);
its pickling `send`/`recv` are never called. A `Channel` is one authenticated
connection: `send` seals a body, `recv` reads one bounded frame and opens it
(tag first, then the body). Every wait is bounded: a server reads a client's
handshake under `HANDSHAKE_TIMEOUT`, a client waits at most `DIAL_TIMEOUT`.
A send to a peer that vanished raises `OSError` (BrokenPipeError,
ConnectionResetError); callers treat it as that connection closing.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
from collections.abc import Callable
from multiprocessing.connection import Client, Connection
from typing import Any

from refimpl.hierarchy import protocol as P
from spec.errors import AuthenticationFailed

__all__ = ["Channel", "listen", "accept", "handshake_done", "server_handshake", "dial", "call",
           "HANDSHAKE_TIMEOUT", "DIAL_TIMEOUT"]

#: Seconds a server waits on a client during its handshake.
HANDSHAKE_TIMEOUT = 2.0
#: Seconds a client waits for the server: a safety net against a hang, not a protocol deadline (on a loaded
#: 2-core machine a live coordinator took over 10 s to answer).
DIAL_TIMEOUT = 60.0


class Channel:
    """One authenticated connection: sealed frames out, bounded and opened frames in."""

    def __init__(self, conn: Connection, session: P.Session, maxlen: int) -> None:
        self.conn, self.session, self.maxlen = conn, session, maxlen

    def send(self, body: Any) -> None:
        self.conn.send_bytes(self.session.seal(body))

    def recv(self) -> Any:
        """The next body (`EOFError` / `OSError`: the peer went away or sent an oversized frame;
        `AuthenticationFailed`: a frame failed its tag; `InvalidArgument`: an authenticated body is malformed)."""
        frame = self.conn.recv_bytes(self.maxlen)
        if frame == P.REFUSED and self.session.received == 0:
            raise AuthenticationFailed("the server refused the handshake: the key is not the one it expects")
        return self.session.open(frame)

    def poll(self, timeout: float = 0.0) -> bool:
        return self.conn.poll(timeout)

    def fileno(self) -> int:
        return self.conn.fileno()

    def close(self) -> None:
        self.conn.close()

    @property
    def closed(self) -> bool:
        return self.conn.closed


def listen(path: str) -> socket.socket:
    """A non-blocking Unix server socket at `path` (poll its fileno; accept with `accept`)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    s.setblocking(False)
    return s


def _recv_timeout(sock: socket.socket, seconds: float) -> None:
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole, int((seconds - whole) * 1e6)))


def accept(server: socket.socket) -> Connection | None:
    """The next pending connection, reads bounded by `HANDSHAKE_TIMEOUT` until `handshake_done`; or None."""
    try:
        sock, _ = server.accept()
    except (BlockingIOError, InterruptedError):
        return None
    sock.setblocking(True)
    _recv_timeout(sock, HANDSHAKE_TIMEOUT)  # a client stopped mid-handshake must not stall the server
    return Connection(sock.detach())


def handshake_done(conn: Connection) -> None:
    """Back to blocking reads once the peer is authenticated (reads happen only when it is readable)."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        _recv_timeout(sock, 0.0)
    finally:
        sock.close()


def server_handshake(conn: Connection, key_for: Callable[[str, int], bytes]) -> tuple[str, int, Channel]:
    """Server side: read the fixed HELLO, prove we hold the key, check the client's answer.

    `key_for(role, worker)` names the key the claimed identity must hold. Returns (role, worker, channel);
    raises `InvalidArgument` (not a hello), `AuthenticationFailed` (a wrong answer: the client is told
    REFUSED), `OSError` / `EOFError` (timeout, a frame too long, the client went away)."""
    hello = conn.recv_bytes(P.HELLO_LEN)
    role, worker = P.parse_hello(hello)
    key = key_for(role, worker)
    nonce = secrets.token_bytes(32)
    conn.send_bytes(P.challenge(key, hello, nonce))
    got = conn.recv_bytes(64)
    try:
        P.check_answer(key, hello, nonce, got)
    except AuthenticationFailed:
        try:
            conn.send_bytes(P.REFUSED)
        except OSError:
            pass
        raise
    return role, worker, Channel(conn, P.session(key, hello, nonce, server=True), P.MAX_REQUEST)


def dial(path: str, role: str, worker: int, key: bytes, timeout: float = DIAL_TIMEOUT) -> Channel:
    """Connect as (`role`, `worker`) and pass the mutual handshake with `key`.

    The caller reads the server's first frame (`READY`, or its answer to a worker's hello) from the channel:
    a server that refuses the key says REFUSED there (`AuthenticationFailed`). Any failure closes the
    half-made connection."""
    conn = Client(path, family="AF_UNIX")
    try:
        hello = P.hello_bytes(role, worker, secrets.token_bytes(32))
        conn.send_bytes(hello)
        if not conn.poll(timeout):
            raise TimeoutError(f"no challenge within {timeout} s")
        nonce = P.check_challenge(key, hello, conn.recv_bytes(128))
        conn.send_bytes(P.answer(key, hello, nonce))
        return Channel(conn, P.session(key, hello, nonce, server=False), P.MAX_REPLY)
    except BaseException:
        conn.close()
        raise


def call(ch: Channel, msg: Any, timeout: float) -> Any:
    """Send `msg`, wait (bounded) for the reply; a refusal is raised as its typed error; returns the reply."""
    ch.send(msg)
    if not ch.poll(timeout):
        raise TimeoutError(f"no reply within {timeout} s to {str(msg)[:200]}")
    reply = ch.recv()
    P.raise_refusal(reply)
    return reply
