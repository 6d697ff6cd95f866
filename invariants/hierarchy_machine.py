"""The hierarchy's checked campaign: what one campaign step means in the spec, and which steps to draw.

A real fault is several spec steps: killing a worker is `Kill` then, once the
coordinator saw the sentinel, `ObserveExit`; spawning includes the worker's
authenticated hello; a restart re-observes every recorded exit. A missed
heartbeat only fences: the campaign's coordinator leaves the termination to
the environment (a later `Kill`), so the window between fence and exit is
explored too. So
the campaign's step function `campaign_step` expands those actions and
returns the first spec action's result. Everything else is one spec step.

`actions(state)` draws from the current abstraction: genuine messages carry
the worker's own epoch and next sequence number; forged ones fail their MAC;
replays reuse the last accepted sequence number; stale ones carry an older
epoch. Local actions are drawn only for running workers (a stopped process
cannot act). `HIERARCHY` is the `invariants.model_machine.Model` that the
checker runs against `refimpl.hierarchy.adapter.HierarchyAdapter`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from invariants.hierarchy import check_state, check_step
from invariants.model_machine import Model
from spec import hierarchy as H
from spec.guards import ALL_ON, GuardSet

__all__ = ["campaign_step", "actions", "CONFIGS", "model", "to_campaign"]

#: (serving quota, machine, aging cap) per campaign example.
CONFIGS = ((8, 12, 2), (6, 16, 3))
_R = H.ProcState.RUNNING


def _expand(s: H.HierarchyState, act: Any) -> list[Any]:
    if isinstance(act, H.Spawn):
        return [act, H.Hello(s.next_worker)]
    if isinstance(act, H.Kill):
        return [act, H.ObserveExit(act.worker)]
    if isinstance(act, H.Restart):
        return [act] + [H.ObserveExit(w) for w, x in s.workers.items() if x.state is H.WorkerState.EXITED]
    return [act]


def to_campaign(script: tuple[Any, ...]) -> tuple[Any, ...]:
    """A spec script in campaign form: the steps a campaign action already includes are dropped."""
    out: list[Any] = []
    for a in script:
        prev = out[-1] if out else None
        if isinstance(a, H.Hello) and isinstance(prev, H.Spawn):
            continue
        if isinstance(a, H.ObserveExit) and isinstance(prev, (H.Kill, H.Restart)):
            continue
        out.append(a)
    return tuple(out)


def campaign_step(s: H.HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> tuple[H.HierarchyState, Any]:
    """One campaign step in the spec: the expanded spec steps; the first one's result."""
    first: Any = None
    for k, a in enumerate(_expand(s, act)):
        s, result = H.step(s, a, guards)
        if k == 0:
            first = result
    return s, first


def actions(s: H.HierarchyState) -> Any:
    options: list[Any] = []
    if s.next_worker <= 3:
        options.append(st.just(H.Spawn()))
    for i, w in s.workers.items():
        if w.state is H.WorkerState.EXITED:
            continue
        e, q = w.known_epoch, w.seq + 1
        n = st.integers(1, max(2, s.serving_quota // 2))
        bad = st.sampled_from([  # forged (bad MAC), replayed (old sequence), stale (old epoch)
            H.Request(i, e, q, 2, authentic=False), H.Return(i, e, q, 1, authentic=False),
            H.Request(i, e, w.seq, 1), H.Request(i, e - 1, q, 1)])
        options.append(bad)
        if w.proc is _R:
            free = w.slice - w.committed - w.reserved
            options += [
                st.builds(H.Request, st.just(i), st.just(e), st.just(q), n, st.integers(0, 1)),
                st.builds(H.Request, st.just(i), st.just(e), st.just(q), n, st.integers(0, 1)),
                st.builds(H.Reserve, st.just(i), st.integers(1, 3)),
                st.just(H.Commit(i)),
                st.just(H.Stop(i)),
            ]
            if free > 0:
                options.append(st.builds(H.Return, st.just(i), st.just(e), st.just(q), st.integers(1, free)))
            if w.committed:
                options.append(st.builds(H.Free, st.just(i), st.integers(1, w.committed)))
            if w.state is H.WorkerState.ACTIVE:
                options.append(st.builds(H.Reclaim, st.just(i), st.integers(1, 3)))
        else:
            options.append(st.just(H.Cont(i)))
        options += [st.just(H.Kill(i)), st.just(H.MissHeartbeat(i))]
    for t, x in s.tickets.items():
        w = s.workers.get(x.target) if isinstance(x.target, int) else None
        if w is not None and w.proc is _R:
            room = max(0, min(x.nbytes, w.slice - w.committed - w.reserved))
            options.append(st.builds(H.Answer, st.just(t), st.integers(0, room)))
    used = sum(s.outside.values())
    if used + 3 <= s.machine:
        options.append(st.just(H.Outside("db", 3)))
    if s.outside.get("db", 0) >= 3:
        options.append(st.just(H.Outside("db", -3)))
    options += [st.just(H.Reclaim("db", 1)), st.just(H.Arbitrate()), st.just(H.Restart())]
    return st.one_of(*options)


def model(impl: Any) -> Model:
    """The campaign as a `Model` over the implementation factory `impl(config, guards)`."""
    return Model(name="hierarchy", configs=st.sampled_from(CONFIGS), init=lambda c: H.new_hierarchy(*c),
                 step=campaign_step, impl=impl, actions=actions, check_state=check_state, check_step=check_step)
