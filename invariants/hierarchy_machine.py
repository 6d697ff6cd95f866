"""The hierarchy's checked campaign: what one campaign step means in the spec, and which steps to draw.

`SpawnHeld` is the campaign's one action of its own: a worker process started
and held back from authenticating (the spec's `Spawn` without the `Hello`), so
states with a spawned, unauthenticated worker occur, and a real connection
claiming to be it with a wrong key (`Hello(i, authentic=False)`) is refused
while it holds nothing (C10 `unauthenticated_hold_nothing`); `Hello(i)` then
lets it authenticate.

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
checker runs against `refimpl.verify.hierarchy_adapter.HierarchyAdapter`.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st

from invariants.hierarchy import check_state, check_step
from invariants.model_machine import Model
from spec import hierarchy as H
from spec.guards import ALL_ON, GuardSet

__all__ = ["campaign_step", "actions", "CONFIGS", "model", "to_campaign", "SpawnHeld"]


@attrs.frozen
class SpawnHeld:
    """Start a worker process that does not authenticate until a later `Hello` (campaign form of `Spawn`)."""

#: (serving quota, machine, aging cap) per campaign example.
CONFIGS = ((8, 12, 2), (6, 16, 3))
_R = H.ProcState.RUNNING


def _expand(s: H.HierarchyState, act: Any) -> list[Any]:
    if isinstance(act, SpawnHeld):
        return [H.Spawn()]
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


def _weighted(options: list[tuple[int, Any]]) -> Any:
    """One of `options`, by weight: steer to the cases the clauses are about (reservations, defers, grants).

    Hypothesis draws small and boundary indices more often, so the heaviest options sit at both ends.
    """
    ranked = sorted(options, key=lambda o: -o[0])
    ordered = ranked[0::2] + ranked[1::2][::-1]
    slots = [strat for weight, strat in ordered for _ in range(weight)]
    return st.integers(0, len(slots) - 1).flatmap(lambda k: slots[k])


def _arbitrate_weight(s: H.HierarchyState) -> int:
    """Arbitrate often while an intent cannot be granted yet: it ages, matures and must not be overtaken (I13)."""
    if any(i.nbytes > s.free for i in s.intents.values()):
        return 8
    return 5 if s.intents else 1


def actions(s: H.HierarchyState) -> Any:
    live = [w for w in s.workers.values() if w.state is not H.WorkerState.EXITED]
    options: list[tuple[int, Any]] = []
    if s.next_worker <= 3:
        options.append((3 if len(live) < 2 else 1, st.just(H.Spawn())))
        options.append((2, st.just(SpawnHeld())))
    q = s.serving_quota
    waiting = {x.worker for x in s.intents.values()}
    for i, w in s.workers.items():
        if w.state is H.WorkerState.EXITED:
            continue
        if w.state is H.WorkerState.SPAWNED:  # not authenticated yet: it can only say hello, or die
            options += [(1, st.just(H.Kill(i)))]
            if w.proc is _R:
                options += [(3, st.just(H.Hello(i))), (3, st.just(H.Hello(i, authentic=False)))]
            else:
                options.append((3, st.just(H.Cont(i))))
            continue
        if w.proc is _R:
            options.append((1, st.just(H.Hello(i, authentic=False))))  # an impostor of an authenticated worker
        e, nxt = w.known_epoch, w.seq + 1
        bad = st.sampled_from([  # forged (bad MAC), replayed (old sequence), stale (old epoch)
            H.Request(i, e, nxt, 2, authentic=False), H.Return(i, e, nxt, 1, authentic=False),
            H.Request(i, e, w.seq, 1), H.Request(i, e - 1, nxt, 1)])
        options += [(1, bad), (1, st.just(H.Kill(i)))]
        if w.state is H.WorkerState.ACTIVE:
            options.append((1, st.just(H.MissHeartbeat(i))))
        if w.proc is not _R:
            options.append((3, st.just(H.Cont(i))))
            continue
        free = w.slice - w.committed - w.reserved
        options.append((1, st.just(H.Stop(i))))
        if i not in waiting:
            options += [
                (4, st.builds(H.Request, st.just(i), st.just(e), st.just(nxt), st.integers(1, max(1, q // 2)),
                              st.integers(0, 1))),
                (2, st.builds(H.Request, st.just(i), st.just(e), st.just(nxt), st.integers(q // 2, q),
                              st.integers(0, 1))),
            ]
            if s.free < q:  # the whole pool while others hold part of it: an intent that waits and matures
                options.append((2, st.builds(H.Request, st.just(i), st.just(e), st.just(nxt), st.just(q),
                                             st.just(0))))
        if free > 0:
            options += [(4, st.builds(H.Reserve, st.just(i), st.integers(1, free))),
                        (1, st.builds(H.Return, st.just(i), st.just(e), st.just(nxt), st.integers(1, free)))]
        if w.reserved:
            options.append((3, st.just(H.Commit(i))))
        if w.committed:
            options.append((2, st.builds(H.Free, st.just(i), st.integers(1, w.committed))))
        if w.state is H.WorkerState.ACTIVE:
            options.append((1, st.builds(H.Reclaim, st.just(i), st.integers(1, 3))))
    for t, x in s.tickets.items():
        w = s.workers.get(x.target) if isinstance(x.target, int) else None
        if w is not None and w.proc is _R:
            room = max(0, min(x.nbytes, w.slice - w.committed - w.reserved))
            options.append((3, st.builds(H.Answer, st.just(t), st.integers(0, room))))
    if sum(s.outside.values()) + 3 <= s.machine:  # I11: outside usage moves only the ceiling
        options.append((2, st.just(H.Outside("db", 3))))
    if s.outside.get("db", 0) >= 3:
        options.append((2, st.just(H.Outside("db", -3))))
    options += [(1, st.just(H.Reclaim("db", 1))), (_arbitrate_weight(s), st.just(H.Arbitrate())),
                (1, st.just(H.Restart()))]
    return _weighted(options)


def model(impl: Any) -> Model:
    """The campaign as a `Model` over the implementation factory `impl(config, guards)`."""
    return Model(name="hierarchy", configs=st.sampled_from(CONFIGS), init=lambda c: H.new_hierarchy(*c),
                 step=campaign_step, impl=impl, actions=actions, check_state=check_state, check_step=check_step)
