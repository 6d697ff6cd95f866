"""The hierarchy's checked campaign: what one campaign step means in the spec, and which steps to draw.

A real fault is several spec steps, so the campaign has composite actions and
`campaign_step` expands them (returning the first spec action's result):

- `SpawnHeld`: a worker process started and held back from authenticating
  (the spec's `Spawn` without the `Hello`), so a spawned, unauthenticated
  worker exists and a real connection claiming to be it with a wrong key
  (`Hello(i, authentic=False)`) is refused while it holds nothing; `Hello(i)`
  lets it authenticate. `Spawn` includes the worker's hello.
- `Kill` is `Kill` then, once the coordinator saw the exit, `ObserveExit`.
- `Restart` re-observes every recorded exit. Every connection is lost: each
  worker is out of sync until the campaign lets it say `Hello` again (the
  campaign's workers redial only when told, so the window in which a worker
  is out of sync while the others act is explored).
- `Lose(act, fate)`: the call `act` (a worker's own) loses its reply
  (REPLY_LOST: the coordinator journaled it and dropped the connection
  instead of replying) or its message (MESSAGE_LOST: dropped before it was
  applied); an `Arbitrate` loses its grant pushes.
- `Crash(act, fate)`: the coordinator crashes between its journal write and
  its reply (REPLY_LOST) or before its journal write (MESSAGE_LOST), then
  restarts from the journal: `act` with that fate, then `Restart`'s steps.

A missed heartbeat only fences: the campaign's coordinator leaves the
termination to the environment (a later `Kill`), so the window between fence
and exit is explored too.

`actions(state)` draws from the current abstraction: a worker's own calls
carry its epoch and next sequence number (only while its view is current);
the network's carry a bad MAC, a replayed sequence number, an old epoch, or
the current epoch in the name of a spawned-but-silent, fenced, exited or
never-spawned identity. Local actions are drawn only for running workers (a
stopped process cannot act). `HIERARCHY` is the `invariants.model_machine.Model`
that the checker runs against `refimpl.verify.hierarchy_adapter.HierarchyAdapter`
(real processes) and `refimpl.verify.hierarchy_sim.SimAdapter` (the same code
in one process, its network simulated).
"""

from __future__ import annotations

import functools
import random
from typing import Any

import attrs
from hypothesis import strategies as st

from invariants.hierarchy import check_state, check_step
from invariants.model_machine import Model
from spec import hierarchy as H
from spec.errors import InvalidArgument
from spec.guards import ALL_ON, GuardSet

__all__ = ["campaign_step", "actions", "choose", "CONFIGS", "model", "to_campaign", "SpawnHeld", "Lose", "Crash",
           "expand"]


@attrs.frozen
class SpawnHeld:
    """Start a worker process that does not authenticate until a later `Hello` (campaign form of `Spawn`)."""


@attrs.frozen
class Lose:
    """`act` (a worker's own call, or an arbitration round's pushes) meets `fate`; no crash."""

    act: Any
    fate: str = H.REPLY_LOST


@attrs.frozen
class Crash:
    """The coordinator crashes while handling `act`: after its journal write (REPLY_LOST) or before it
    (MESSAGE_LOST); then it restarts from the journal."""

    act: Any
    fate: str = H.REPLY_LOST

#: (serving quota, machine, aging cap) per campaign example.
CONFIGS = ((8, 12, 2), (6, 16, 3))
_R = H.ProcState.RUNNING


def _with_fate(act: Any, fate: str) -> Any:
    if not attrs.has(type(act)) or "fate" not in attrs.fields_dict(type(act)):
        raise InvalidArgument(f"{act!r:.80} carries no message that can be lost")
    return attrs.evolve(act, fate=fate)


def expand(s: H.HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> list[Any]:
    """The spec steps of a campaign action, the later ones computed from the state the earlier ones reach
    (`campaign_step` applies them; the refinement mapping of a real fault is this list)."""
    return [a for a, _ in _expansion(s, act, guards)[1]]


def _restarted(s: H.HierarchyState) -> list[Any]:
    return [H.ObserveExit(w) for w, x in s.workers.items() if x.state is H.WorkerState.EXITED]


def _expansion(s: H.HierarchyState, act: Any, guards: GuardSet) -> tuple[H.HierarchyState, list[tuple[Any, Any]]]:
    """The state after one campaign action and [(spec action, its result)]; any step's refusal raises."""
    out: list[tuple[Any, Any]] = []

    def do(a: Any) -> None:
        nonlocal s
        s, result = H.step(s, a, guards)
        out.append((a, result))

    if isinstance(act, SpawnHeld):
        do(H.Spawn())
    elif isinstance(act, H.Spawn):
        wid = s.next_worker
        do(act)
        do(H.Hello(wid))
    elif isinstance(act, H.Kill):
        do(act)
        do(H.ObserveExit(act.worker))
    elif isinstance(act, H.Restart):
        do(act)
        for a in _restarted(s):
            do(a)
    elif isinstance(act, (Lose, Crash)):
        do(_with_fate(act.act, act.fate))
        if isinstance(act, Crash):
            do(H.Restart())
            for a in _restarted(s):
                do(a)
    else:
        do(act)
    return s, out


def to_campaign(script: tuple[Any, ...]) -> tuple[Any, ...]:
    """A spec script in campaign form: the steps a campaign action already includes are dropped, and a
    lost call followed by `Restart` (a crash between journal and reply) becomes a `Crash`, else a `Lose`."""
    out: list[Any] = []
    k = 0
    while k < len(script):
        a = script[k]
        prev = out[-1] if out else None
        k += 1
        if isinstance(a, H.Hello) and isinstance(prev, H.Spawn):
            continue
        if isinstance(a, H.ObserveExit) and isinstance(prev, (H.Kill, H.Restart, Crash)):
            continue
        fate = getattr(a, "fate", H.DELIVERED)
        if fate != H.DELIVERED:
            if k < len(script) and isinstance(script[k], H.Restart):
                out.append(Crash(attrs.evolve(a, fate=H.DELIVERED), fate))
                k += 1
            else:
                out.append(Lose(attrs.evolve(a, fate=H.DELIVERED), fate))
            continue
        out.append(a)
    return tuple(out)


def campaign_step(s: H.HierarchyState, act: Any, guards: GuardSet = ALL_ON) -> tuple[H.HierarchyState, Any]:
    """One campaign step in the spec: the expanded spec steps; the first one's result."""
    s, steps = _expansion(s, act, guards)
    return s, steps[0][1]


def _arbitrate_weight(s: H.HierarchyState) -> int:
    """Arbitrate often while an intent cannot be granted yet: it ages, matures and must not be overtaken (I13)."""
    if any(i.nbytes > s.free for i in s.intents.values()):
        return 8
    return 5 if s.intents else 1


_LOSSES = (H.REPLY_LOST, H.MESSAGE_LOST)


def _hostile(s: H.HierarchyState, i: int, w: H.Worker, r: random.Random) -> Any:
    """What the network or a dead identity's key can say in the name of worker `i`."""
    e, nxt = w.known_epoch, w.seq + 1
    bad = [lambda: H.Request(i, e, nxt, 2, authentic=False), lambda: H.Return(i, e, nxt, 1, authentic=False),
           lambda: H.Request(i, e, w.seq, 1),  # replayed (an accepted sequence number)
           lambda: H.Request(i, max(0, e - 1), nxt, 1)]  # an older epoch
    if w.state is not H.WorkerState.ACTIVE:  # the key and the current epoch of a silent, fenced or exited worker
        bad += [lambda: H.Request(i, w.epoch, nxt, 1), lambda: H.Return(i, w.epoch, nxt, 1),
                lambda: H.Request(i, w.epoch, nxt + r.randint(1, 5), 2)]
    return r.choice(bad)()


def _own_calls(s: H.HierarchyState, i: int, w: H.Worker, waiting: set[int],
               r: random.Random) -> list[tuple[int, Any]]:
    """The worker's own calls (weighted thunks), and the same calls meeting a lost reply or a coordinator crash."""
    q, e, nxt = s.serving_quota, w.known_epoch, w.seq + 1
    room = w.slice - w.committed - w.reserved
    calls: list[tuple[int, Any]] = []
    if i not in waiting:
        calls += [(4, lambda: H.Request(i, e, nxt, r.randint(1, max(1, q // 2)), r.randint(0, 1))),
                  (2, lambda: H.Request(i, e, nxt, r.randint(q // 2, q), r.randint(0, 1)))]
        if s.free < q:  # the whole pool while others hold part of it: an intent that waits and matures
            calls.append((2, lambda: H.Request(i, e, nxt, q, 0)))
    if room > 0:
        calls.append((1, lambda: H.Return(i, e, nxt, r.randint(1, room))))
    if w.committed:
        calls.append((2, lambda: H.Free(i, r.randint(1, w.committed))))
    faults = [(1, lambda call=call: r.choice((Lose, Crash))(call(), r.choice(_LOSSES))) for _, call in calls]
    return calls + faults


def choose(s: H.HierarchyState, r: random.Random) -> Any:
    """One campaign action for state `s`, drawn with `r` (Hypothesis' recorded randomness, or a seeded walk's)."""
    live = [w for w in s.workers.values() if w.state is not H.WorkerState.EXITED]
    options: list[tuple[int, Any]] = []
    if s.next_worker <= 3:
        options += [(3 if len(live) < 2 else 1, H.Spawn), (2, SpawnHeld)]
    waiting = {x.worker for x in s.intents.values()}
    # In the name of an identity this coordinator never spawned (with a key derived for it).
    options.append((1, lambda: H.Request(s.next_worker + r.randint(0, 5), 1, 1, 1)))
    for i, w in s.workers.items():
        options.append((1, lambda i=i, w=w: _hostile(s, i, w, r)))
        if w.state is H.WorkerState.EXITED:
            continue
        if w.state is H.WorkerState.SPAWNED:  # not authenticated yet: it can only say hello, or die
            options.append((1, lambda i=i: H.Kill(i)))
            if w.proc is _R:
                options += [(3, lambda i=i: H.Hello(i)), (3, lambda i=i: H.Hello(i, authentic=False))]
            else:
                options.append((3, lambda i=i: H.Cont(i)))
            continue
        if w.proc is _R:
            options.append((1, lambda i=i: H.Hello(i, authentic=False)))  # an impostor of an authenticated worker
        options.append((1, lambda i=i: H.Kill(i)))
        if w.state is H.WorkerState.ACTIVE:
            options.append((1, lambda i=i: H.MissHeartbeat(i)))
        if w.proc is not _R:
            options.append((3, lambda i=i: H.Cont(i)))
            continue
        options.append((1, lambda i=i: H.Stop(i)))
        if w.state is not H.WorkerState.ACTIVE:
            continue  # a fenced worker is refused at the coordinator
        # Its reconnect, the coordinator crashing before or after it journaled the hello.
        options.append((1, lambda i=i: Crash(H.Hello(i), r.choice(_LOSSES))))
        if not w.synced:  # out of sync (a lost reply, a restart): it says hello before it does anything else
            options.append((4, lambda i=i: H.Hello(i)))
            continue
        options.append((1, lambda i=i: H.Hello(i)))  # a reconnect at will: a new epoch, resynchronised
        options += _own_calls(s, i, w, waiting, r)
        free = w.slice - w.committed - w.reserved
        if free > 0:
            options.append((5, lambda i=i, free=free: H.Reserve(i, r.randint(1, free))))
        if w.reserved:
            options.append((4, lambda i=i: H.Commit(i)))
        options.append((1, lambda i=i: H.Reclaim(i, r.randint(1, 3))))
    for t, x in s.tickets.items():
        w = s.workers.get(x.target) if isinstance(x.target, int) else None
        if w is not None and w.proc is _R and w.synced:
            room = max(0, min(x.nbytes, w.slice - w.committed - w.reserved))
            options += [(3, lambda t=t, room=room: H.Answer(t, r.randint(0, room))),
                        (1, lambda t=t, room=room: Lose(H.Answer(t, r.randint(0, room)), r.choice(_LOSSES)))]
    if sum(s.outside.values()) + 3 <= s.machine:  # I11: outside usage moves only the ceiling
        options.append((2, lambda: H.Outside("db", 3)))
    if s.outside.get("db", 0) >= 3:
        options.append((2, lambda: H.Outside("db", -3)))
    options += [(1, lambda: H.Reclaim("db", 1)), (_arbitrate_weight(s), H.Arbitrate), (1, H.Restart)]
    if s.intents:  # a round journaled, then its grant pushes lost (a dropped connection, or a crash)
        options += [(1, lambda: Lose(H.Arbitrate())), (1, lambda: Crash(H.Arbitrate()))]
    return r.choices([o for _, o in options], weights=[wt for wt, _ in options])[0]()


_RANDOMS = st.randoms(use_true_random=True)  # a seeded Random: uniform draws (the recorded one favours the first option)


def actions(s: H.HierarchyState) -> Any:
    """The campaign's action strategy: `choose` over Hypothesis' recorded randomness (one strategy per step:
    building a strategy per option per step cost more than running the step)."""
    return _RANDOMS.map(functools.partial(choose, s))


def model(impl: Any) -> Model:
    """The campaign as a `Model` over the implementation factory `impl(config, guards)`."""
    return Model(name="hierarchy", configs=st.sampled_from(CONFIGS), init=lambda c: H.new_hierarchy(*c),
                 step=campaign_step, impl=impl, actions=actions, check_state=check_state, check_step=check_step)
