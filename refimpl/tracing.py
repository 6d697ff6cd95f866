"""Trace emission for `ProcessMemoryManager(trace=sink)`: one JSONL event per operation.

`attach(pmm, sink)` (called by the governor's constructor when a sink is
given) wraps each public operation of that one instance: under the ledger
lock it notes what the operation touches, runs it, and hands the sink one
event (`invariants.trace_format`) for the accepted or rejected operation,
numbered in lock order, so the trace is the governor's linearisation. A
governor built without a sink is not wrapped at all (the off path costs one
`is None` test in the constructor). An `InvariantViolation` from contracts
propagates without an event.

`JsonlSink` writes events to a text file, one compact JSON object per line.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from typing import IO, Any

from invariants.trace_format import BOUNDARY, CONTRACT_REVISION, KINDS, encode_event
from spec import actions as A
from spec.errors import GovernorError

__all__ = ["Sink", "JsonlSink", "attach", "boundary"]

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

    def emit(self, event_for: Callable[[int], dict[str, Any]]) -> None:
        self.sequence += 1
        self.sink(event_for(self.sequence))

    def touched(self, act: Any) -> tuple[set[int], set[int]]:
        """(canonical authority ids, allocation ids) the operation may change, read before it runs."""
        pmm = self.pmm
        auths: set[int] = set()
        allocs: set[int] = set()
        aid = getattr(act, "authority", None)
        a = pmm._auths.get(aid) if type(aid) is int else None
        if a is not None:
            auths.add(a.id)
            if a.alias_of is not None:
                auths.add(a.alias_of)
            if isinstance(act, (A.LoseDevice, A.ConfirmTermination)):
                for i in auths:
                    allocs |= set(pmm._auths[i].allocs)
        rid = getattr(act, "allocation", None)
        rec = pmm._allocs.get(rid) if type(rid) is int else None
        if rec is not None:
            auths.add(rec.auth.id)
            allocs.add(rec.id)
        for field in ("allowance", "source", "target"):
            wid = getattr(act, field, None)
            w = pmm._allows.get(wid) if type(wid) is int else None
            if w is not None:
                auths.add(w.auth.id)
        return auths, allocs

    def observe(self, auths: set[int], allocs: set[int], result: Any, act: Any) -> dict[str, dict[int, int]]:
        pmm = self.pmm
        if isinstance(act, (A.Reserve, A.RecordCommitted)) and type(result) is int and result in pmm._allocs:
            allocs = allocs | {result}
            auths = auths | {pmm._allocs[result].auth.id}
        return {"used": {i: pmm._auths[i].used for i in auths if i in pmm._auths},
                "charges": {i: pmm._allocs[i].charge for i in allocs if i in pmm._allocs}}


def attach(pmm: Any, sink: Sink, source: str | None = None) -> None:
    """Make every operation of `pmm` emit one event to `sink`."""
    rec = _Recorder(pmm, sink, source or f"pmm-{next(_SOURCES)}")
    pmm._lock = threading.RLock()  # the wrapper holds it across the operation, which takes it again
    pmm._trace_recorder = rec
    for kind, cls in KINDS.items():
        setattr(pmm, kind, _wrap(rec, cls, getattr(type(pmm), kind).__get__(pmm)))


def _wrap(rec: _Recorder, cls: type, op: Callable[..., Any]) -> Callable[..., Any]:
    def traced(*args: Any, **kwargs: Any) -> Any:
        act = cls(*args, **kwargs)
        with rec.pmm._lock:
            auths, allocs = rec.touched(act)
            try:
                result = op(*args, **kwargs)
            except GovernorError as e:
                rec.emit(lambda seq: encode_event(rec.source, seq, act, None, e, rec.observe(auths, allocs, None, act)))
                raise
            rec.emit(lambda seq: encode_event(rec.source, seq, act, result, None,
                                              rec.observe(auths, allocs, result, act)))
            return result

    traced.__name__ = traced.__qualname__ = op.__name__
    traced.__doc__ = op.__doc__
    return traced


def boundary(pmm: Any) -> None:
    """Declare a crash/snapshot boundary: work in flight when the trace ends here is not an error."""
    rec: _Recorder = pmm._trace_recorder
    with pmm._lock:
        rec.emit(lambda seq: {"contract_revision": CONTRACT_REVISION, "source": rec.source, "source_sequence": seq,
                              "kind": BOUNDARY, "ids": {}, "payload": {}})
