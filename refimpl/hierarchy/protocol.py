"""The hierarchy's wire protocol, pure: keys, the mutual handshake, sealed frames, bounded values, refusals.

No sockets here: `refimpl.hierarchy.transport` moves these bytes between
processes, `refimpl.verify.hierarchy_sim` moves them in memory, so the
simulation runs the same bytes the processes do.

Keys. The coordinator holds a master key. Worker w's key is
HMAC(master, "worker:w"), its control key (the operator talking to it)
HMAC(master, "worker-control:w"), the operator's key for the coordinator
HMAC(master, "control"). A worker process is given its own two keys only
(`refimpl.hierarchy.zygote` forks it from a process that never held any key,
and the keys reach it through a pipe only it reads), so it can derive no
other worker's key and cannot speak as the operator.

Handshake (mutual, HMAC-SHA256; the client speaks first):
  HELLO      client -> server   b"ortmem-hello/2" | role (1) | worker (4, big-endian) | client nonce (32)
  CHALLENGE  server -> client   server nonce (32) | HMAC(K, "server" | HELLO | server nonce)
  ANSWER     client -> server   HMAC(K, "client" | HELLO | server nonce)
Both sides then hold one key per direction, HMAC(K, "c2s"/"s2c" | client nonce | server nonce), and every
later frame is tag (32) | body with tag = HMAC(direction key, counter (8) | body), the counter counting that
direction's frames: a frame from another connection, replayed, reordered or altered fails its tag. The
server ends the handshake with the first sealed frame (READY, or its answer to a worker's hello), so a
client never holds a connection the server dropped.

Nothing from a peer is decoded before it authenticates: before the handshake completes, only the fixed
51-byte HELLO is read (a byte comparison and `struct.unpack` of a role byte and a worker number) and the
32-byte tags are compared with `hmac.compare_digest`. A frame's body is parsed (JSON, no floats beyond
finite ones, integers of at most 64 digits) only after its tag verifies; nothing is ever unpickled. A
refusal travels as {"refused": <spec.errors class name>, "message": ...} and is raised on the caller's side
as that class.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from typing import Any

import attrs

from spec import errors as E
from spec.hierarchy_actions import MAX_COUNTER, MAX_PRIORITY, MAX_QUOTA, MAX_WORKER

__all__ = ["UNIT", "worker_key", "worker_control_key", "control_key", "journal_key", "ROLES", "HELLO_LEN", "hello_bytes",
           "parse_hello", "challenge", "check_challenge", "answer", "check_answer", "Session", "session",
           "seal", "sealed_ok", "refusal", "raise_refusal", "REFUSALS", "READY", "decode", "encode",
           "MAX_REQUEST", "MAX_REPLY", "units", "counter", "priority", "REFUSED"]

#: Bytes per protocol unit: quotas and reservations travel in MiB.
UNIT = 1 << 20

#: The largest frame a server reads from a peer (a request or a hello), and a client from its server.
MAX_REQUEST = 64 << 10
MAX_REPLY = 32 << 20

ROLES = {"worker": 1, "control": 2, "inject": 3}
_ROLE_NAMES = {v: k for k, v in ROLES.items()}
_MAGIC = b"ortmem-hello/2"
_HELLO = struct.Struct(f">{len(_MAGIC)}sBI32s")
HELLO_LEN = _HELLO.size
_TAG = 32

#: The server's plain last word to a client whose ANSWER failed (unauthenticated by necessity: it only
#: tells an impostor what it already knows).
REFUSED = b"ortmem-refused"

#: Error classes a refusal may name (the typed errors of C10 / I11 and the generic ones).
REFUSALS: dict[str, type[E.GovernorError]] = {c.__name__: c for c in (
    E.AuthenticationFailed, E.ReplayedMessage, E.StaleEpoch, E.UnknownWorker, E.NotAParticipant,
    E.InvalidBytes, E.InvalidArgument, E.InvalidTransition, E.CapacityDenied, E.UnknownTicket,
    E.ModelFileInvalid, E.SessionCreationFailed, E.WorkerNotLive, E.JournalStale, E.CeilingUnreadable,
    E.CalloutFailed)}


def _hmac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def worker_key(master: bytes, worker: int) -> bytes:
    """Worker `worker`'s own key: one per worker, so one worker's key cannot speak for another."""
    return _hmac(master, f"worker:{worker}".encode())


def worker_control_key(master: bytes, worker: int) -> bytes:
    """The key the operator uses on worker `worker`'s control socket (the worker holds it, no other does)."""
    return _hmac(master, f"worker-control:{worker}".encode())


def control_key(master: bytes) -> bytes:
    """The key of the operator's control connections to the coordinator (driver, CLI)."""
    return _hmac(master, b"control")


def journal_key(master: bytes) -> bytes:
    """The key of the journal's digest (only the coordinator writes or checks it)."""
    return _hmac(master, b"journal")


# --- handshake ------------------------------------------------------------------------------


def hello_bytes(role: str, worker: int, nonce: bytes) -> bytes:
    if role not in ROLES or type(worker) is not int or not 0 <= worker <= MAX_WORKER or len(nonce) != 32:
        raise E.InvalidArgument(f"hello: role {role!r:.20}, worker {worker!r:.20}, a 32-byte nonce")
    return _HELLO.pack(_MAGIC, ROLES[role], worker, nonce)


def parse_hello(data: bytes) -> tuple[str, int]:
    """(role, worker) of a HELLO; anything else is `InvalidArgument` (the only bytes read unauthenticated)."""
    if type(data) is not bytes or len(data) != HELLO_LEN:
        raise E.InvalidArgument(f"not a hello: {len(data) if isinstance(data, bytes) else type(data).__name__} "
                                f"bytes, a hello has {HELLO_LEN}")
    magic, role, worker, _ = _HELLO.unpack(data)
    if magic != _MAGIC or role not in _ROLE_NAMES or worker > MAX_WORKER:
        raise E.InvalidArgument("not a hello: bad magic, role or worker number")
    return _ROLE_NAMES[role], worker


def challenge(key: bytes, hello: bytes, server_nonce: bytes) -> bytes:
    return server_nonce + _hmac(key, b"server", hello, server_nonce)


def check_challenge(key: bytes, hello: bytes, data: bytes) -> bytes:
    """The server nonce, once the server proved it holds `key`; `AuthenticationFailed` otherwise."""
    if type(data) is not bytes or len(data) != 32 + _TAG:
        raise E.AuthenticationFailed("the server's challenge has the wrong length")
    nonce, tag = data[:32], data[32:]
    if not hmac.compare_digest(tag, _hmac(key, b"server", hello, nonce)):
        raise E.AuthenticationFailed("the server does not hold this connection's key")
    return nonce


def answer(key: bytes, hello: bytes, server_nonce: bytes) -> bytes:
    return _hmac(key, b"client", hello, server_nonce)


def check_answer(key: bytes, hello: bytes, server_nonce: bytes, data: bytes) -> None:
    if type(data) is not bytes or not hmac.compare_digest(data, answer(key, hello, server_nonce)):
        raise E.AuthenticationFailed("the client does not hold the key it claims")


@attrs.define
class Session:
    """One side of an authenticated connection: a key and a frame counter per direction."""

    out_key: bytes
    in_key: bytes
    sent: int = 0
    received: int = 0

    def seal(self, body: Any) -> bytes:
        data = encode(body)
        tag = _hmac(self.out_key, self.sent.to_bytes(8, "big"), data)
        self.sent += 1
        return tag + data

    def open(self, frame: bytes) -> Any:
        """The body of the next frame from the peer; `AuthenticationFailed` before any byte of it is parsed."""
        if type(frame) is not bytes or len(frame) < _TAG:
            raise E.AuthenticationFailed("a frame shorter than its tag")
        tag, data = frame[:_TAG], frame[_TAG:]
        if not hmac.compare_digest(tag, _hmac(self.in_key, self.received.to_bytes(8, "big"), data)):
            raise E.AuthenticationFailed("a frame failed its tag (altered, replayed, reordered or not this peer's)")
        self.received += 1
        return decode(data)


def session(key: bytes, hello: bytes, server_nonce: bytes, server: bool) -> Session:
    client_nonce = hello[-32:]
    c2s = _hmac(key, b"c2s", client_nonce, server_nonce)
    s2c = _hmac(key, b"s2c", client_nonce, server_nonce)
    return Session(s2c, c2s) if server else Session(c2s, s2c)


#: The server's first frame to a control or inject client: the handshake is complete.
READY = {"ready": True}


# --- bodies -------------------------------------------------------------------------------------


#: The longest integer a body may spell: far past every field's bound (each field's own check then names the
#: field and its range), far below what costs anything to parse.
MAX_DIGITS = 64


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def decode(data: bytes) -> Any:
    """An authenticated body: JSON, integers of at most `MAX_DIGITS` digits, no NaN or infinities."""
    try:
        return json.loads(data.decode("utf-8"), parse_int=_int, parse_constant=_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise E.InvalidArgument(f"a malformed body: {type(e).__name__}: {str(e)[:80]}") from None


def encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


# --- bounded values -------------------------------------------------------------------------------


def units(n: object, what: str = "nbytes", zero_ok: bool = False) -> int:
    """A unit count in [1 (or 0), 2**40]; `InvalidBytes` otherwise."""
    if type(n) is not int or n < 0 or (n == 0 and not zero_ok) or n > MAX_QUOTA:
        raise E.InvalidBytes(f"{what} must be an int in [{0 if zero_ok else 1}, 2**40], got {n!r:.40}")
    return n


def counter(n: object, what: str) -> int:
    """An epoch, sequence number or ticket id: an int in [0, 2**62-1]; `InvalidArgument` otherwise."""
    if type(n) is not int or not 0 <= n <= MAX_COUNTER:
        raise E.InvalidArgument(f"{what} must be an int in [0, 2**62-1], got {n!r:.40}")
    return n


def priority(n: object) -> int:
    if type(n) is not int or not 0 <= n <= MAX_PRIORITY:
        raise E.InvalidArgument(f"priority must be an int in [0, 2**31-1], got {n!r:.40}")
    return n


# --- messages in the network's hands (the inject path) ------------------------------------------

_FIELDS = ("kind", "worker", "epoch", "seq", "nbytes", "priority", "keep", "ticket")


def _mac(key: bytes, body: dict[str, Any]) -> str:
    canon = json.dumps([body.get(f) for f in _FIELDS], separators=(",", ":"))
    return hmac.new(key, canon.encode(), hashlib.sha256).hexdigest()


def seal(key: bytes, **body: Any) -> dict[str, Any]:
    """A worker message with its MAC, as the network carries it (`inject`: a message judged by its MAC alone)."""
    return {**body, "mac": _mac(key, body)}


def sealed_ok(key: bytes, msg: object) -> bool:
    """True iff `msg` is a dict whose MAC was made with `key`."""
    if not isinstance(msg, dict) or not isinstance(msg.get("mac"), str):
        return False
    return hmac.compare_digest(msg["mac"], _mac(key, msg))


def refusal(err: E.GovernorError, **extra: Any) -> dict[str, Any]:
    return {**extra, "refused": type(err).__name__, "message": str(err)}


def raise_refusal(reply: object) -> None:
    """Raise the typed error a reply names; no-op for an accepted reply."""
    if not isinstance(reply, dict):
        raise E.InvalidArgument(f"a reply is an object, got {type(reply).__name__}")
    name = reply.get("refused")
    if name is not None:
        raise REFUSALS.get(name, E.InvalidArgument)(str(reply.get("message", name))[:2000])
