"""Trace emission for `ProcessMemoryManager(trace=sink)`: one JSONL event per operation.

`attach(pmm, sink)` (called by the governor's constructor when a sink is
given) wraps each public operation of that one instance. Under the ledger
lock the wrapper notes what the operation touches, runs it, numbers the
accepted or rejected operation in lock order and encodes its event in the
one revision every manager event is written in, `ortmem-manager/2`
(`invariants.manager_trace.encode_manager_event`, with the charges of the
allocations an operation touched, a grant its own, and a registration's physical
device; the encoding is total: a hostile argument
is written opaque, never refused by the encoder), so the trace is the
governor's linearisation and recording can never change a result or use a
sequence number without an event. The event is queued; the sink is called
only after the ledger lock is released (I7), by whichever thread finds the
queue unclaimed, in sequence order: a slow sink stalls no other caller, and
a sink that waits on another thread's governor call cannot deadlock it (that
call queues its event and returns). A sink that raises loses no outcome: for
the caller's own accepted event `TraceSinkFailed` carries the result; for a
rejected one the operation's own error is raised, with the sink failure
noted; failures while delivering other threads' events are kept in
`sink_errors(pmm)`. KeyboardInterrupt / SystemExit from a sink propagate
after the queue is left consistent. An `InvariantViolation` from contracts
propagates without an event. A governor built without a sink is not wrapped
at all (the off path costs one `is None` test in the constructor). The
recorder is part of the governor's package and uses its private members
directly (`_lock`, `_recorder`, `_attach_recorder`, `_touched`, `_observed`,
`_take_grants`, `_wake_waiters`: no public verb, `refimpl.manager.views`);
checkers and tests reach the lock and the recorder through
`refimpl.verify.manager_hooks`. The composed operations (tickets, pressure,
transactions, bundles, limits) number and emit their own events through the
same recorder (`refimpl.manager.views`).

The first event is preceded by a `configure` event naming the manager's
aging bound (`invariants.manager_trace`), which the replay arbitrates with.
Each event carries the topology epoch its operation was decided in: the
manager's `_topology_epoch` as the operation began (the operations that
register, remove, lose or terminate an authority advance it; the recorder
never diffs the spec), so the events after a topology change carry the new one.

`JsonlSink` writes events to a text file, one compact JSON object per line.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading

import attrs
from collections.abc import Callable
from typing import IO, Any

from invariants.manager_trace import MANAGER_REVISION, encode_configure, encode_manager_event
from invariants.trace_format import BOUNDARY, KINDS
from spec.errors import GovernorError, InvalidArgument, TraceSinkFailed
from spec.grants import GrantTicket

__all__ = ["Sink", "JsonlSink", "attach", "boundary", "sink_errors"]

Sink = Callable[[dict[str, Any]], None]
_SOURCES = itertools.count(1)


class JsonlSink:
    """Append events to `stream` as JSON lines (compact, keys in a fixed order)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: dict[str, Any]) -> None:
        self.stream.write(json.dumps(event, separators=(",", ":")) + "\n")


class _Recorder:
    def __init__(self, pmm: Any, sink: Sink, source: str) -> None:
        self.pmm, self.sink, self.source = pmm, sink, source
        self.sequence = 0
        self.queue: collections.deque[dict[str, Any]] = collections.deque()  # appended under the ledger lock
        self.delivering = threading.Lock()  # held by the one thread calling the sink; never the ledger lock
        self.errors: list[tuple[int, BaseException]] = []  # (sequence, error) of failed deliveries, bounded
        self.lost = 0
        self.configured = False  # the `configure` event (the manager's constants) is queued
        self.aging_bound = 4  # the manager's (`pmm._attach_recorder` sets it)
        self.pending_grants: list[tuple[int, int | None, int, int, int]] = []  # `take_grants`, not yet recorded
        self.epoch = pmm._topology_epoch  # the topology epoch the next event was decided in

    def record(self, event_for: Callable[[int, int], dict[str, Any]]) -> int:
        """Number and queue one event (caller holds the ledger lock); returns its sequence number. `event_for(sequence,
        epoch)`: the event, decided in topology epoch `epoch`, the manager's as the operation began (an operation that
        changed it advanced `pmm._topology_epoch`: the events after it carry the new one). The first is preceded by
        the `configure` event that names the manager's aging bound, which the replay arbitrates with."""
        epoch = self.epoch
        if not self.configured:
            grants, self.pending_grants, self.configured = self.pending_grants, [], True  # they follow the operation
            self.record(lambda s, e: encode_configure(self.source, s, e, self.aging_bound))
            self.pending_grants = grants
        event = event_for(self.sequence + 1, epoch)  # total: cannot raise, so no number is used without an event
        self.sequence += 1
        self.epoch = self.pmm._topology_epoch
        self.queue.append(event)
        mine = self.sequence
        if self.pending_grants:
            self._record_grants()
        return mine

    def _record_grants(self) -> None:
        """A `grant` event for each grant `take_grants` kept, right after the event of the operation that made them
        The replay steps each as `spec.grants.GrantTicket`."""
        grants, self.pending_grants = self.pending_grants, []
        for tid, alloc, aid, after, charged in grants:
            self.record(lambda s, e, t=tid, r=alloc, a=aid, u=after, c=charged: encode_manager_event(
                self.source, s, e, GrantTicket(t), r, None, {a: u}, None, {} if r is None else {r: c}))

    def take_grants(self, used: dict[int, int]) -> dict[int, int]:
        """`used` as it stood before the grants the operation made (`pmm._take_grants`); the next `record` queues
        their `grant` events after the operation's own (caller holds the ledger lock)."""
        self.pending_grants = grants = self.pmm._take_grants()
        if not grants:
            return used
        used = dict(used)
        for _, _, aid, after, charged in reversed(grants):
            if aid in used:
                used[aid] = after - charged  # the earliest grant on `aid` decides: before it, before them all
        return used

    def deliver(self, mine: int) -> BaseException | None:
        """Hand queued events to the sink in order (ledger lock released); the failure of event `mine`, if any."""
        failure: BaseException | None = None
        while self.queue:
            if not self.delivering.acquire(blocking=False):
                return failure  # another thread is delivering: it will hand ours over too
            try:
                while self.queue:
                    event = self.queue.popleft()
                    try:
                        self.sink(event)
                    except Exception as e:
                        self.lost += 1
                        if len(self.errors) < 1000:
                            self.errors.append((event["source_sequence"], e))
                        if event["source_sequence"] == mine:
                            failure = e
            finally:
                self.delivering.release()
        return failure

    def settle(self, mine: int, what: str, result: Any, error: GovernorError | None) -> Any:
        """Deliver (ledger lock released), then the caller's outcome of event `mine`: `result`, or `error` raised
        (a sink failure noted on it), or TraceSinkFailed carrying `result`; the one place a sink failure is settled
        (this module's wrappers and the composed operations, `refimpl.manager.views`)."""
        try:
            failure = self.deliver(mine)  # outside the ledger lock (I7)
        except BaseException as e:  # KeyboardInterrupt / SystemExit from the sink: the operation stands
            e.add_note(f"ortmem: {what} was already applied (event {mine}): "
                       + (f"{type(error).__name__}: {error}" if error is not None else f"result {result!r}"))
            raise
        if error is not None:
            if failure is not None:
                error.add_note(f"trace sink failed on event {mine}: {type(failure).__name__}: {failure}")
            raise error
        if failure is not None:
            raise TraceSinkFailed(f"{what} was applied (result {result!r}) but the trace sink raised "
                                  f"{type(failure).__name__} on event {mine}: {failure}", result) from failure
        return result


def attach(pmm: Any, sink: Sink, source: str | None = None) -> None:
    """Make every operation of `pmm` emit one event to `sink`."""
    if not callable(sink):
        raise InvalidArgument(f"a trace sink must be callable, got {sink!r:.80}")
    rec = _Recorder(pmm, sink, source or f"pmm-{next(_SOURCES)}")
    pmm._attach_recorder(rec)  # the wrapper holds the ledger lock across the operation, which takes it again
    for kind, cls in KINDS.items():
        setattr(pmm, kind, _wrap(rec, cls, getattr(type(pmm), kind).__get__(pmm)))


def _wrap(rec: _Recorder, cls: type, op: Callable[..., Any]) -> Callable[..., Any]:
    def traced(*args: Any, **kwargs: Any) -> Any:
        act = cls(*args, **kwargs)  # a wrong call signature is Python's TypeError, before any number is used
        error: GovernorError | None = None
        with rec.pmm._lock:
            auths, allocs = rec.pmm._touched(act)
            try:
                result = op(*args, **kwargs)
            except GovernorError as e:
                error, result = e, None
            observed = rec.pmm._observed(auths, allocs, result, act)
            used, charges = rec.take_grants(observed["used"]), observed["charges"]
            named = attrs.evolve(act, device=observed["device"]) if "device" in observed else act  # C1
            seq = rec.record(lambda s, e: encode_manager_event(rec.source, s, e, named, result, error, used, None,
                                                               charges))
        rec.pmm._wake_waiters()  # waiters the operation granted are woken only now, with the lock released (I7)
        return rec.settle(seq, cls.__name__, result, error)

    traced.__name__ = traced.__qualname__ = op.__name__
    traced.__doc__ = op.__doc__
    return traced


def sink_errors(pmm: Any) -> list[tuple[int, BaseException]]:
    """(sequence number, error) of every event the sink failed to take, oldest first (at most 1000)."""
    return list(pmm._recorder.errors)


def boundary(pmm: Any) -> None:
    """Declare a crash/snapshot boundary: work in flight when the trace ends here is not an error."""
    rec: _Recorder = pmm._recorder
    with pmm._lock:
        seq = rec.record(lambda s, e: {"contract_revision": MANAGER_REVISION, "topology_epoch": e, "source": rec.source,
                                       "source_sequence": s, "kind": BOUNDARY, "ids": {}, "payload": {}})
    failure = rec.deliver(seq)
    if failure is not None:
        raise TraceSinkFailed(f"the trace sink raised {type(failure).__name__} on boundary event {seq}: {failure}",
                              None) from failure

