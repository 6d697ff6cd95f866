"""The hierarchy's wire protocol: per-worker keys, authkey challenges, sealed messages, typed refusals.

Transport: `multiprocessing.connection` over a Unix socket. A connection opens
with a plain ("hello", worker id, role); the coordinator then runs the standard
authkey challenge both ways (`deliver_challenge` / `answer_challenge`) with
that worker's own key, derived from the coordinator's master key, and ends
the handshake with its READY (a client holds a connection only once the
server has confirmed it: a server that gave up on a slow client mid-handshake
never leaves it a connection that is reset on first use). After that
every worker message is a dict sealed with an HMAC over its fields, carrying
the worker's epoch and a sequence number: a forged message (bad MAC or failed
challenge), a replay (sequence not above the last accepted) or a stale epoch
gets a typed refusal and changes nothing.

A refusal travels as {"refused": <spec.errors class name>, "message": ...}
and is raised on the caller's side as that class, so every bad message gets
a typed error. No coordinator or worker logic here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from typing import Any

from spec import errors as E

__all__ = ["UNIT", "worker_key", "control_key", "seal", "sealed_ok", "refusal", "raise_refusal", "REFUSALS",
           "listen", "accept", "challenge_server", "challenge_client", "dial", "call", "handshake_done",
           "HANDSHAKE_TIMEOUT", "READY", "DIAL_TIMEOUT"]

#: Bytes per protocol unit: quotas and reservations travel in MiB.
UNIT = 1 << 20

#: Error classes a refusal may name (the typed errors of C10 / I11 and the generic ones).
REFUSALS: dict[str, type[E.GovernorError]] = {c.__name__: c for c in (
    E.AuthenticationFailed, E.ReplayedMessage, E.StaleEpoch, E.UnknownWorker, E.NotAParticipant,
    E.InvalidBytes, E.InvalidArgument, E.InvalidTransition, E.CapacityDenied, E.UnknownTicket,
    E.ModelFileInvalid, E.SessionCreationFailed)}

_FIELDS = ("kind", "worker", "epoch", "seq", "nbytes", "priority", "keep", "ticket")


def worker_key(master: bytes, worker: int) -> bytes:
    """Worker `worker`'s own key: a key per worker, so one leaked key cannot speak for another."""
    return hmac.new(master, f"worker:{worker}".encode(), hashlib.sha256).digest()


def control_key(master: bytes) -> bytes:
    """The key of the operator's control connections (driver, CLI)."""
    return hmac.new(master, b"control", hashlib.sha256).digest()


def _mac(key: bytes, body: dict[str, Any]) -> str:
    canon = json.dumps([body.get(f) for f in _FIELDS], separators=(",", ":"))
    return hmac.new(key, canon.encode(), hashlib.sha256).hexdigest()


def seal(key: bytes, **body: Any) -> dict[str, Any]:
    """A worker message with its MAC."""
    return {**body, "mac": _mac(key, body)}


def sealed_ok(key: bytes, msg: object) -> bool:
    """True iff `msg` is a dict whose MAC was made with `key`."""
    if not isinstance(msg, dict) or not isinstance(msg.get("mac"), str):
        return False
    return hmac.compare_digest(msg["mac"], _mac(key, msg))


def refusal(err: E.GovernorError, **extra: Any) -> dict[str, Any]:
    return {**extra, "refused": type(err).__name__, "message": str(err)}


def raise_refusal(reply: dict[str, Any]) -> None:
    """Raise the typed error a reply names; no-op for an accepted reply."""
    name = reply.get("refused")
    if name is not None:
        raise REFUSALS.get(name, E.InvalidArgument)(reply.get("message", name))


def listen(path: str) -> "socket.socket":
    """A non-blocking Unix server socket at `path` (poll its fileno; accept with `accept`)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(64)
    s.setblocking(False)
    return s


def accept(server: "socket.socket") -> Connection | None:
    """The next pending connection as a `multiprocessing.connection.Connection`, or None."""
    try:
        sock, _ = server.accept()
    except (BlockingIOError, InterruptedError):
        return None
    sock.setblocking(True)
    _recv_timeout(sock, HANDSHAKE_TIMEOUT)  # a client stopped mid-handshake must not stall the server
    return Connection(sock.detach())


#: Seconds a server waits on a client during its hello and challenge.
HANDSHAKE_TIMEOUT = 2.0


def _recv_timeout(sock: socket.socket, seconds: float) -> None:
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole, int((seconds - whole) * 1e6)))


def handshake_done(conn: Connection) -> None:
    """Back to blocking reads once the peer is authenticated (reads happen only when it is readable)."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        _recv_timeout(sock, 0.0)
    finally:
        sock.close()


#: The server's last word of a handshake. The stdlib challenge ends with the *client's* WELCOME: without
#: this, a server that gave up just before reading it (HANDSHAKE_TIMEOUT passed on a loaded machine) had
#: closed a connection the client took for authenticated, and the client's first call on it was reset.
READY = b"#READY#"

#: Seconds a client waits for the server's READY: a safety net against a hang, not a protocol deadline.
DIAL_TIMEOUT = 60.0


def challenge_server(conn: Connection, key: bytes) -> None:
    """Mutual authkey challenge, server side (raises `multiprocessing.AuthenticationError`), then READY:
    the handshake ends with a message from the server, so a client never holds a connection the server
    dropped mid-handshake."""
    deliver_challenge(conn, key)
    answer_challenge(conn, key)
    conn.send_bytes(READY)


def challenge_client(conn: Connection, key: bytes, timeout: float = DIAL_TIMEOUT) -> None:
    """Client side: both challenges, then the server's READY (EOFError / OSError: it dropped us first)."""
    answer_challenge(conn, key)
    deliver_challenge(conn, key)
    if not conn.poll(timeout):
        raise TimeoutError(f"no READY within {timeout} s after the challenge")
    if conn.recv_bytes(64) != READY:
        raise AuthenticationError("the server did not confirm the handshake")


def dial(path: str, role: str, worker: int, key: bytes) -> Connection:
    """Connect to a hierarchy socket as (`role`, `worker`) and pass the challenge with `key`.

    Returns only once the server confirmed (READY); any failure closes the half-made connection."""
    conn = Client(path, family="AF_UNIX")
    try:
        conn.send(("hello", role, worker))
        challenge_client(conn, key)
    except BaseException:
        conn.close()
        raise
    return conn


def call(conn: Connection, msg: object, timeout: float) -> dict[str, Any]:
    """Send `msg` and wait (bounded) for the reply dict; a refusal is raised as its typed error."""
    conn.send(msg)
    if not conn.poll(timeout):
        raise TimeoutError(f"no reply within {timeout} s to {msg!r}")
    reply = conn.recv()
    raise_refusal(reply)
    return reply
