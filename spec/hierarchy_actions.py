"""The actions of the cooperative hierarchy (C10, I11), and the bounds every figure of a message respects.

Values only: frozen action records, the message fates and the numeric bounds
`spec.hierarchy` checks and the implementation enforces at its wire. No rules
here (the step is `spec.hierarchy.step`).

A message's `fate` is the environment's freedom over one call (FoundationDB's
"buggify"): DELIVERED (the reply reaches the sender), REPLY_LOST (the
coordinator applied and journaled it, then the reply was lost: the connection
broke, or the coordinator crashed between its journal write and its reply) or
MESSAGE_LOST (the coordinator never applied it: lost in transit, or the
coordinator crashed before its journal write). With any fate but DELIVERED the
caller learns nothing, so the step never raises a coordinator refusal: it
returns None.
"""

from __future__ import annotations

import attrs

__all__ = [
    "DELIVERED", "REPLY_LOST", "MESSAGE_LOST", "FATES", "GRANTED", "DEFERRED",
    "MAX_QUOTA", "MAX_PRIORITY", "MAX_COUNTER", "MAX_WORKER",
    "Spawn", "Hello", "Request", "Return", "Reserve", "Commit", "Free", "Stop", "Cont", "Kill",
    "MissHeartbeat", "ObserveExit", "Restart", "Outside", "Reclaim", "Answer", "Arbitrate",
]

GRANTED, DEFERRED = "granted", "deferred"

DELIVERED, REPLY_LOST, MESSAGE_LOST = "delivered", "reply-lost", "message-lost"
FATES = (DELIVERED, REPLY_LOST, MESSAGE_LOST)

#: Largest serving quota (units; a unit is a MiB on the wire): 2**40 MiB, far above any machine, far below
#: sqlite's and JSON's integer range. A request larger than the serving quota can never be granted.
MAX_QUOTA = 1 << 40
#: Priorities are ints in [0, MAX_PRIORITY].
MAX_PRIORITY = (1 << 31) - 1
#: Epochs, sequence numbers and ticket ids are ints in [0, MAX_COUNTER]: they only count up, one per step.
MAX_COUNTER = (1 << 62) - 1
#: Worker ids are ints in [1, MAX_WORKER] (4 bytes in the handshake).
MAX_WORKER = (1 << 31) - 1


@attrs.frozen
class Spawn:
    pass


@attrs.frozen
class Hello:
    """A connection from worker `worker`: its first authentication, or a reconnect that resynchronises it."""

    worker: int
    authentic: bool = True
    fate: str = DELIVERED


@attrs.frozen
class Request:
    worker: int
    epoch: int
    seq: int
    nbytes: int
    priority: int = 0
    authentic: bool = True
    fate: str = DELIVERED


@attrs.frozen
class Return:
    worker: int
    epoch: int
    seq: int
    nbytes: int
    authentic: bool = True
    fate: str = DELIVERED


@attrs.frozen
class Reserve:
    worker: int
    nbytes: int


@attrs.frozen
class Commit:
    worker: int


@attrs.frozen
class Free:
    """The worker releases `nbytes` committed units; while it awaits quota it returns them (a message)."""

    worker: int
    nbytes: int
    fate: str = DELIVERED


@attrs.frozen
class Stop:
    worker: int


@attrs.frozen
class Cont:
    worker: int


@attrs.frozen
class Kill:
    worker: int


@attrs.frozen
class MissHeartbeat:
    worker: int


@attrs.frozen
class ObserveExit:
    worker: int


@attrs.frozen
class Restart:
    pass


@attrs.frozen
class Outside:
    name: str
    delta: int  # units the outside program allocates (> 0) or frees (< 0)


@attrs.frozen
class Reclaim:
    target: int | str
    nbytes: int


@attrs.frozen
class Answer:
    ticket: int
    nbytes: int
    fate: str = DELIVERED


@attrs.frozen
class Arbitrate:
    """One arbitration round; REPLY_LOST: journaled, then every grant push of the round was lost."""

    fate: str = DELIVERED
