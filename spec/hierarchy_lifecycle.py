"""Lifecycles of the cooperative hierarchy (C10): a worker as the coordinator sees it, and its process.

A worker is spawned -> active (authenticated; a reconnect says hello again and
stays active) -> fenced (heartbeat lost, epoch bumped) -> exited (exit observed,
quota returned once); observing an exit again is a no-op. Its process is running, stopped (SIGSTOP) or dead. Tables looked up
through `spec.lifecycle.lookup`; diagrams in docs/spec.md are generated from
them. Enums and tables only.
"""

from __future__ import annotations

from collections.abc import Mapping

from spec.types import _ShortRepr

__all__ = ["WorkerState", "WorkerEvent", "ProcState", "ProcEvent", "WORKER_TABLE", "PROC_TABLE"]


class WorkerState(_ShortRepr):
    SPAWNED = "spawned"  # started by the coordinator, not yet authenticated: holds no quota
    ACTIVE = "active"  # authenticated in the current epoch
    FENCED = "fenced"  # heartbeat lost: epoch bumped, termination requested, quota still charged
    EXITED = "exited"  # exit observed: quota returned (once)


class WorkerEvent(_ShortRepr):
    HELLO = "hello"
    FENCE = "fence"
    OBSERVE_EXIT = "observe-exit"


class ProcState(_ShortRepr):
    RUNNING = "running"
    STOPPED = "stopped"  # SIGSTOP: alive, silent
    DEAD = "dead"


class ProcEvent(_ShortRepr):
    STOP = "stop"
    CONT = "cont"
    KILL = "kill"


_W, _WE, _P, _PE = WorkerState, WorkerEvent, ProcState, ProcEvent

WORKER_TABLE: Mapping[tuple[WorkerState, WorkerEvent], WorkerState] = {
    (_W.SPAWNED, _WE.HELLO): _W.ACTIVE,
    # A reconnect (after a restart or a lost reply) authenticates again and resynchronises the worker.
    (_W.ACTIVE, _WE.HELLO): _W.ACTIVE,
    (_W.SPAWNED, _WE.FENCE): _W.FENCED,
    (_W.ACTIVE, _WE.FENCE): _W.FENCED,
    (_W.SPAWNED, _WE.OBSERVE_EXIT): _W.EXITED,
    (_W.ACTIVE, _WE.OBSERVE_EXIT): _W.EXITED,
    (_W.FENCED, _WE.OBSERVE_EXIT): _W.EXITED,
    # Observing an exit again (a restarted coordinator reconciling) is a no-op, never a second return.
    (_W.EXITED, _WE.OBSERVE_EXIT): _W.EXITED,
}

PROC_TABLE: Mapping[tuple[ProcState, ProcEvent], ProcState] = {
    (_P.RUNNING, _PE.STOP): _P.STOPPED,
    (_P.STOPPED, _PE.CONT): _P.RUNNING,
    (_P.RUNNING, _PE.KILL): _P.DEAD,
    (_P.STOPPED, _PE.KILL): _P.DEAD,
}
