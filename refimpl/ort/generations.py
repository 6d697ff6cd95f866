# Scripted generations for the real-ORT campaign (issue #11 item 4): depth
# that Hypothesis' random actions do not reach on their own.
#
# Each script loads two managed models (two decoders of different widths),
# fills the weight cache, opens several concurrent requests on both, and
# decodes them interleaved to max context (KV grows through every bucket),
# with pressure, limit lowering (and raising back), cache refills and
# residency observations injected in the middle of generations, ORT Run
# failures injected inside a bucket and at each request's second growth
# (`spec.sessions.RunFails`, `refimpl.ort.faults`), closing
# finished requests and opening new ones. Every action goes through the same
# checked step as the Hypothesis campaign (`invariants.checked`): refinement
# against `spec.sessions`, every predicate, coverage counted, and the
# adapter's bit-identical check against an ungoverned session.
#
# Owns: the scripts (deterministic from a seed) and the driver. Must not
# touch: the runtime's ledger (it only issues spec actions).

from __future__ import annotations

import contextlib
import os
import random
import time
from typing import Any

from invariants import contracts
from invariants.campaign import CampaignStats, ControlResult, _stats, configure
from invariants._violation import ErrorTypeDivergence, InvariantViolation
from invariants.clauses import CLAUSES
from invariants.model_machine import Model, SpecModelAdapter, make_machine
from invariants.mutation import Mutant
from refimpl.ort.residency import INJECTED, file_rss, process_rss
from spec import sessions as S
from spec.guards import ALL_ON, Guard, GuardSet, Layer
from spec.types import Role

__all__ = ["script", "run_scripts", "hunt_scripts", "SCRIPT_LIMIT"]

SCRIPT_LIMIT = 256 * 1024


class _Observe:
    """An ObserveResidency whose figure is read from /proc when the step runs (real, never invented)."""

    def __init__(self, model: str, which: str, path: str | None) -> None:
        self.model, self.which, self.path = model, which, path

    def __call__(self) -> S.ObserveResidency:
        fig = process_rss() if self.which == "process" or self.path is None else file_rss(_model_files(self.path))
        if fig is None:
            return S.ObserveResidency(self.model, 0, INJECTED + "no real residency figure readable here")
        return S.ObserveResidency(self.model, fig.nbytes, fig.source)


def _model_files(path: str) -> list[str]:
    base = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    return [path] + [os.path.join(base, n) for n in os.listdir(base) if n == f"{stem}.bin"]


def script(seed: int, facts: dict[str, S.ModelFacts], headroom: int,
           paths: dict[str, str] | None = None) -> tuple[Any, list[Any]]:
    """(config, actions) of one scripted run: concurrent generations on two models to max context."""
    rnd = random.Random(seed)
    sources = {"a": (paths or {}).get("dec"), "b": (paths or {}).get("dec_wide")}
    config = (SCRIPT_LIMIT, 0)
    acts: list[Any] = [S.LoadModel("a", "dec", facts["dec"], facts["dec"].loop_carried),
                       S.LoadModel("b", "dec_wide", facts["dec_wide"], facts["dec_wide"].loop_carried),
                       S.Prefetch()]
    # Deterministic probes, one per guard of the ORT model (each refused or harmless with guards on; with
    # one off, the checked step sees the harm): a partial state declaration (C9), a host-mapped load over
    # the reported capacity (C7), a second wide decoder whose peak the env arena has no room left for (I8);
    # later a lowering that cannot hold (C8), a residency observation (I8b),
    # and at the end a compatibility-mode load and a decline (I3).
    dec, wide = facts["dec"], facts["dec_wide"]
    acts += [S.LoadModel("p", "dec", dec, frozenset(sorted(dec.loop_carried)[1:])),
             S.LoadModel("h", "mlp", facts["mlp"], facts["mlp"].loop_carried, True),
             S.LoadModel("q", "dec_wide", wide, wide.loop_carried)]  # its peak past the env arena's room (I8)
    probes_at = rnd.randrange(4, 12)
    # Request ids are the spec's: 1, 2, ... in the order of accepted Opens; a refused Open takes none.
    # The script tracks what it expects; a divergence is caught by the checked step, not here.
    opens = rnd.choice((("a", "a", "b"), ("a", "b", "b"), ("a", "b", "a", "b")))
    live: dict[int, int] = {}  # rid -> tokens
    model_of: dict[int, str] = {}
    nxt = 1
    for m in opens:
        acts.append(S.Open(m))
        live[nxt], model_of[nxt] = 0, m
        nxt += 1
    reopen = 2
    max_context = facts["dec"].max_context
    lowered = False
    decodes = 0
    bucket = facts["dec"].bucket
    while live:
        rid = rnd.choice(sorted(live))
        # INJECTED: ORT fails this Run [ort:run-terminate], inside the first bucket and at the second growth
        # (the first growth stays a plain Decode, so a growth bug shows there first, as it did before failures
        # were drawn).
        if live[rid] in (1, 2 * bucket):
            acts.append(S.RunFails(rid))
        acts.append(S.Decode(rid))
        live[rid] += 1
        decodes += 1
        if decodes == probes_at:
            acts += [S.LowerLimit(headroom + 4096), _Observe(model_of[rid], "process", None)]
        r = rnd.random()
        if r < 0.05:
            acts.append(S.Pressure(rnd.choice((4096, 16384, 10**6))))
        elif r < 0.09:
            acts.append(S.Prefetch())  # refill the cache so later growths must reclaim
        elif r < 0.12:
            acts.append(S.LowerLimit(SCRIPT_LIMIT if lowered else SCRIPT_LIMIT - rnd.choice((8192, 32768))))
            lowered = not lowered
        elif r < 0.14:
            # A real figure, read from /proc when the step runs (a thunk), under its own source (I8b).
            acts.append(_Observe(model_of[rid], rnd.choice(("process", "files")), sources.get(model_of[rid])))
        if live[rid] >= max_context:
            acts.append(S.Decode(rid))  # one past max context: refused (ContextExhausted), nothing changes
            acts.append(S.Close(rid))
            del live[rid]
            if reopen:
                reopen -= 1
                m = rnd.choice(("a", "b"))
                acts.append(S.Open(m))
                live[nxt], model_of[nxt] = 0, m
                nxt += 1
    acts += [S.LoadModel("c", "mlp", facts["mlp"], None), S.Decline(Role.KV)]
    return config, acts


def _drive(model: Model, factory: Any, refine: bool, stats: dict[str, Any], config: Any, acts: list[Any]) -> None:
    m = configure(make_machine(model), factory, refine=refine, stats=stats)()
    m.trace.append(config)
    try:
        m.start(factory(config), model.init(config))
        for a in acts:
            m._do(a() if isinstance(a, _Observe) else a)
    except BaseException:
        # A detected harm can leave the runtime's ledger inconsistent (a mutant released a lease twice):
        # closing it may then fail too, and that must not hide the harm.
        with contextlib.suppress(Exception):
            m.teardown()
        raise
    m.teardown()


def run_scripts(model: Model, facts: dict[str, S.ModelFacts], headroom: int, n: int, seed: int = 0,
                paths: dict[str, str] | None = None) -> CampaignStats:
    """`n` scripted runs, implementation against the spec, every guard on; a violation propagates."""
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    for i in range(n):
        config, acts = script(seed + i, facts, headroom, paths)
        _drive(model, lambda c: model.impl(c, ALL_ON), True, stats, config, acts)
    return _stats(stats, time.perf_counter() - t0)


def hunt_scripts(model: Model, g: Guard | Mutant, layer: Layer, facts: dict[str, S.ModelFacts], headroom: int,
                 n: int, paths: dict[str, str] | None = None) -> ControlResult | None:
    """The scripted, deterministic part of a control (R4-style): a harm found by a script, else None.

    Same rules as `invariants.campaign.hunt`: a mutant runs with every guard on and refinement off;
    a guard off in the spec drives the spec alone; in refimpl, refinement counts as a harm.
    """
    if isinstance(g, Mutant):
        off, refine, accept = ALL_ON, False, set(g.ids)
        factory = (lambda c: SpecModelAdapter(model, c, off)) if layer is Layer.SPEC else (lambda c: model.impl(c, off))
    elif layer is Layer.SPEC:
        off = GuardSet.without(g.name)
        factory, refine, accept = (lambda c: SpecModelAdapter(model, c, off)), False, set(g.ids)
    else:
        off = GuardSet.without(g.name)
        factory, refine, accept = (lambda c: model.impl(c, off)), True, set(g.ids) | {"refinement", "G4"}
    t0 = time.perf_counter()
    for i in range(n):
        config, acts = script(i, facts, headroom, paths)
        stats: dict[str, Any] = {}
        try:
            with contracts.contracts(False):  # as in `hunt`: only the checker's own predicates detect
                _drive(model, factory, refine, stats, config, acts)
        except ErrorTypeDivergence:
            continue
        except InvariantViolation as e:
            trace = tuple(repr(a) for a in stats.get("last_trace", ()))
            broken = [e.clause] if e.clause else []
            last = stats.get("last_step")
            if not e.id.startswith("refinement") and last is not None:  # every clause the step breaks (R3)
                machine, prev, action, now, accepted = last
                with contracts.contracts(False):
                    broken += machine.failing_clauses(prev, action, now, accepted)
            found = e.id in accept or any(k in CLAUSES and CLAUSES[k].id in accept for k in broken)
            if not found:
                continue
            return ControlResult(g.name, layer, g.ids, True, e.id, len(trace), time.perf_counter() - t0,
                                 trace, f"scripted generation {i}: {e}", e.clause, tuple(dict.fromkeys(broken)))
    return None
