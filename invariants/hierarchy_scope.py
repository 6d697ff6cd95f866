"""Deterministic controls for the hierarchy (C10, I11): scripted scenarios and an explorer scope.

Every hierarchy guard has one scripted scenario: a short action list that a
switched-off guard turns into a violation of a harm clause of
`invariants.hierarchy`, and that with every guard on runs clean (the guard
refuses the harmful step or the harm never arises). `run_script` replays a
script against `spec.hierarchy` and returns the first violation.

`COMPLETE_SCOPES` are the explorer's finite scopes (`invariants.explore`),
each explored to its fixpoint: every reachable state, no depth cut. A scope
bounds what the spec counts (identities spawned, a worker's accepted
sequence numbers and epochs, reclaim tickets, journaled intents); a step
whose successor leaves the bounds is cut (`OutOfScope`, counted with the
refused ones), as the manager's scopes stop offering actions at their
bounds. `hierarchy_one`: one worker with the environment's whole freedom:
messages genuine, forged, replayed, of a stale or the current epoch in the
name of live, spawned-but-silent, fenced, exited and never-spawned
identities; replies and messages lost (a crash between the journal write
and the reply is a lost reply, then `Restart`); reconnects; processes
stopped and killed at any point; its own reservations, commits, frees and
reclaims; an outside program. `hierarchy_two`: two workers sharing the
serving quota of 4 on a machine of 6 through their own calls only (any
fate), with reconnects, stops, missed heartbeats, kills, exits, restarts
and arbitration. The coordinator's incarnation counter is the one figure
no rule reads, so both scopes forget it (a restart is then a self-loop
whose step is still checked) instead of counting restarts into distinct
states. Aging needs longer histories, so `arbitration_model` is a third,
narrower scope: three authenticated workers, one holding most of the
quota, and only requests, returns and arbitration rounds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.explore import Model
from invariants.hierarchy import check_state, check_step
from spec import hierarchy as H
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet

__all__ = ["SCRIPT_CONFIG", "SCRIPTS", "ScriptResult", "run_script", "HierarchyScope", "COMPLETE_SCOPES",
           "OutOfScope", "hierarchy_model", "EXPLORE_CONFIG", "arbitration_model", "environment_cases",
           "counting_cases"]

#: (serving quota, machine, aging cap) of every script.
SCRIPT_CONFIG = (10, 16, 2)

_UP = (H.Spawn(), H.Hello(1))
_TWO = (H.Spawn(), H.Hello(2))
_THREE = (H.Spawn(), H.Hello(3))

SCRIPTS: dict[str, tuple[Any, ...]] = {
    "authenticated_only": _UP + (H.Request(1, 1, 1, 4, authentic=False),),
    "sequence_check": _UP + (H.Request(1, 1, 1, 3), H.Request(1, 1, 1, 3)),
    # A return delayed past the worker's reconnect (epoch 1 -> 2): the resynchronised worker never learns of it.
    "epoch_fencing": _UP + (H.Request(1, 1, 1, 6), H.Hello(1), H.Return(1, 1, 2, 4)),
    "charge_until_exit": _UP + (H.Request(1, 1, 1, 6), H.MissHeartbeat(1), *_TWO, H.Request(2, 1, 1, 8)),
    "return_once": _UP + (H.Request(1, 1, 1, 4), H.Kill(1), H.ObserveExit(1), H.Restart(), H.ObserveExit(1)),
    "defer_returns_uncommitted": _UP + (H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Commit(1), H.Reserve(1, 2),
                                        *_TWO, H.Request(2, 1, 1, 4), H.Request(1, 1, 2, 3)),
    "coordinator_aging": _UP + (H.Request(1, 1, 1, 8), *_TWO, H.Request(2, 1, 1, 5), H.Arbitrate(), H.Arbitrate(),
                                *_THREE, H.Request(3, 1, 1, 3), H.Return(1, 1, 2, 1), H.Arbitrate()),
    "budget_min_ceiling": _UP + (H.Request(1, 1, 1, 8), H.Outside("db", 12), H.Reserve(1, 6)),
    "live_workers_only": _UP + (H.Request(1, 1, 1, 3), H.MissHeartbeat(1), H.Request(1, 2, 2, 2)),
    "lost_reply_assumes_worst": _UP + (H.Request(1, 1, 1, 6), H.Reserve(1, 2), *_TWO, H.Request(2, 1, 1, 4),
                                       H.Request(1, 1, 2, 3, fate=H.REPLY_LOST), H.Restart(), H.Hello(1)),
    "participants_only": (H.Outside("db", 2), H.Reclaim("db", 1)),
    "outside_is_ceiling": _UP + (H.Request(1, 1, 1, 2), H.Outside("db", 3)),
}


@attrs.frozen
class ScriptResult:
    violated: str | None  # the ID of the first violation, else None
    message: str
    at: int | None  # index of the action after which it was found
    rejected: tuple[str, ...]  # the refusals met on the way, as "index: ErrorType"


def run_script(script: Iterable[Any], guards: GuardSet = ALL_ON,
               config: tuple[int, int, int] = SCRIPT_CONFIG) -> ScriptResult:
    """Replay `script` on the spec with `guards`; every predicate after every step."""
    s = H.new_hierarchy(*config)
    rejected: list[str] = []
    for k, act in enumerate(script):
        try:
            nxt, _ = H.step(s, act, guards)
        except GovernorError as e:
            rejected.append(f"{k}: {type(e).__name__}")
            continue
        try:
            check_step(s, act, nxt)
            check_state(nxt)
        except InvariantViolation as e:
            return ScriptResult(e.id, str(e), k, tuple(rejected))
        s = nxt
    return ScriptResult(None, "no violation", None, tuple(rejected))


#: (serving quota, machine, aging cap) of the explorer's scope.
EXPLORE_CONFIG = (4, 6, 2)


def _actions(s: H.HierarchyState) -> Iterable[Any]:
    if s.next_worker <= 2:
        yield H.Spawn()
    yield H.Request(s.next_worker, 1, 1, 1)  # in the name of an identity never spawned
    for i, w in s.workers.items():
        e, q = w.known_epoch, w.seq + 1
        yield H.Hello(i)  # the first hello, or a reconnect that resynchronises
        yield H.Request(i, e, q, 2, authentic=False)
        yield H.Return(i, e, q, 1, authentic=False)
        if w.seq:
            yield H.Request(i, e, w.seq, 2)
            yield H.Return(i, e, w.seq, 1)
        if w.state is not H.WorkerState.ACTIVE:  # the key and the current epoch, in the name of a non-live worker
            yield H.Request(i, w.epoch, q, 1)
            yield H.Return(i, w.epoch, q, 1)
        if w.epoch != e:
            yield H.Request(i, e, q, 1)  # the epoch it was told: stale once it was fenced
        if e > 1:  # delayed from its previous connection (before its last reconnect)
            yield H.Return(i, e - 1, q, 1)
        # With its key, the current epoch and a fresh sequence number only the worker itself speaks: its own
        # call, which needs a current view (an unsynced worker says hello first).
        if w.state is H.WorkerState.ACTIVE and w.synced:
            for n in (1, 3):
                yield H.Request(i, e, q, n)
            yield H.Return(i, e, q, 1)
            for fate in (H.REPLY_LOST, H.MESSAGE_LOST):
                yield H.Request(i, e, q, 3, fate=fate)
                yield H.Return(i, e, q, 1, fate=fate)
                yield H.Free(i, 1, fate=fate)
        yield H.Reserve(i, 1)
        yield H.Reserve(i, 2)
        yield H.Commit(i)
        yield H.Free(i, 1)
        yield H.Stop(i)
        yield H.Cont(i)
        yield H.Kill(i)
        yield H.MissHeartbeat(i)
        yield H.ObserveExit(i)
        yield H.Reclaim(i, 1)
    yield H.Outside("db", 3)
    yield H.Outside("db", -3)
    yield H.Reclaim("db", 1)
    yield H.Restart()
    for t in s.tickets:
        yield H.Answer(t, 0)
        yield H.Answer(t, 1)
        yield H.Answer(t, 1, fate=H.REPLY_LOST)
    if s.intents:
        yield H.Arbitrate()
        yield H.Arbitrate(fate=H.REPLY_LOST)


@attrs.frozen
class HierarchyScope:
    """A finite scope of the hierarchy spec: bounds on every counter the spec advances, and the alphabet."""

    workers: int  # identities ever spawned
    seq: int  # a worker's last accepted sequence number
    epoch: int  # a worker's epoch (a reconnect, a fence and an exit each advance it)
    tickets: int = 1  # reclaim tickets ever issued
    intents: int = 1  # deferred requests ever journaled
    own_calls_only: bool = False  # True: no forged message, no worker-local ledger step, no outside program


COMPLETE_SCOPES: dict[str, HierarchyScope] = {
    "hierarchy_one": HierarchyScope(workers=1, seq=2, epoch=3),
    "hierarchy_two": HierarchyScope(workers=2, seq=2, epoch=2, own_calls_only=True),
}

#: Kinds `own_calls_only` offers besides a worker's own authentic Request and Return.
_COORDINATION = (H.Spawn, H.Hello, H.Stop, H.Cont, H.Kill, H.MissHeartbeat, H.ObserveExit, H.Restart, H.Arbitrate,
                 H.Answer)


class OutOfScope(Exception):
    """A step whose successor leaves the scope's bounds: not part of the scope (the step is cut, not judged)."""


def _within(scope: HierarchyScope, s: H.HierarchyState) -> bool:
    return (s.next_worker <= scope.workers + 1 and s.next_ticket <= scope.tickets + 1
            and s.next_intent <= scope.intents + 1
            and all(w.seq <= scope.seq and w.epoch <= scope.epoch for w in s.workers.values()))


def _scoped_actions(scope: HierarchyScope) -> Any:
    if not scope.own_calls_only:
        return _actions

    def actions(s: H.HierarchyState) -> Iterable[Any]:
        for a in _actions(s):
            if isinstance(a, _COORDINATION) or (isinstance(a, (H.Request, H.Return)) and a.authentic
                                                and H.own_call(s, a)):
                yield a
    return actions


def hierarchy_model(guards: GuardSet = ALL_ON, scope: HierarchyScope = COMPLETE_SCOPES["hierarchy_one"],
                    name: str = "hierarchy") -> Model:
    """The explorer's finite `scope` of the hierarchy spec with `guards` (the incarnation forgotten)."""
    def step(s: H.HierarchyState, a: Any) -> H.HierarchyState:
        nxt = attrs.evolve(H.step(s, a, guards)[0], incarnation=1)
        if not _within(scope, nxt):
            raise OutOfScope(f"{a!r} leaves the scope")
        return nxt
    return Model(name=name, initial=H.new_hierarchy(*EXPLORE_CONFIG), step=step, actions=_scoped_actions(scope),
                 check_state=check_state, check_step=check_step, rejects=(GovernorError, OutOfScope))


_WHO = {H.WorkerState.SPAWNED: "spawned-but-silent", H.WorkerState.FENCED: "fenced",
        H.WorkerState.EXITED: "exited", H.WorkerState.ACTIVE: "live"}


def environment_cases(s: H.HierarchyState, act: Any) -> list[str]:
    """The environment's cases a spec action from state `s` is (what the scope's coverage counts)."""
    out = []
    fate = getattr(act, "fate", H.DELIVERED)
    if fate == H.REPLY_LOST:
        out.append("replies lost (journaled, unanswered)")
    elif fate == H.MESSAGE_LOST:
        out.append("messages lost")
    if isinstance(act, (H.Request, H.Return)) and not H.own_call(s, act):
        w = s.workers.get(act.worker) if type(act.worker) is int else None
        out.append(f"messages from {'never-spawned' if w is None else _WHO[w.state]} identities")
    if isinstance(act, H.Restart) and any(not w.synced and w.state is H.WorkerState.ACTIVE and w.proc is not
                                          H.ProcState.DEAD for w in s.workers.values()):
        out.append("restarts with a worker out of sync (after a crash between journal and reply)")
    return out


def counting_cases(model: Model) -> tuple[Model, dict[str, int]]:
    """`model` with every transition it tries counted by `environment_cases` into the returned dict."""
    counts: dict[str, int] = {}
    step = model.step

    def counted(s: H.HierarchyState, a: Any) -> H.HierarchyState:
        for c in environment_cases(s, a):
            counts[c] = counts.get(c, 0) + 1
        return step(s, a)
    return attrs.evolve(model, step=counted), counts


def _arbitration_actions(s: H.HierarchyState) -> Iterable[Any]:
    waiting = {i.worker for i in s.intents.values()}
    for i in (2, 3):
        w = s.workers[i]
        if i not in waiting:
            for n in (1, 3, 5):
                yield H.Request(i, w.known_epoch, w.seq + 1, n)
    w = s.workers[1]
    if w.slice > w.committed:
        yield H.Return(1, w.known_epoch, w.seq + 1, 1)
    yield H.Arbitrate()


def arbitration_model(guards: GuardSet = ALL_ON) -> Model:
    """The explorer's arbitration scope: worker 1 holds 8 of 10; workers 2 and 3 ask and wait."""
    s = H.new_hierarchy(*SCRIPT_CONFIG)
    for a in (*_UP, *_TWO, *_THREE, H.Request(1, 1, 1, 8)):
        s, _ = H.step(s, a)
    return Model(name="hierarchy-arbitration", initial=s, step=lambda s, a: H.step(s, a, guards)[0],
                 actions=_arbitration_actions, check_state=check_state, check_step=check_step,
                 rejects=(GovernorError,))
