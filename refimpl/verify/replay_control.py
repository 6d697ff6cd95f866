"""The replay control: a named mutant of replay or tracing is found when a fixed corpus's verdicts flip.

The replay checker (`invariants.manager_replay`, with `invariants.replay`) and the
tracing that feeds it (`refimpl.tracing`, `refimpl.manager.views._observed`)
are checked like the governor: each mutant of `refimpl.verify.mutants_replay`
runs this control instead of a campaign. Under the mutant, the corpus is
recorded again from refimpl (so a tracing bug changes what is recorded) and
replayed: every known-good trace must stay clean, and every known-bad trace
must stay rejected with its recorded failure kind and ID. The mutant is found
iff some verdict differs; a different failure kind counts too (a duplicate
reported as an over-credit is a checker that no longer knows what it saw).

The good traces are short fixed refimpl scripts; each bad trace is a good one
with one realistic defect of a governor or emitter written into it (a lost or
repeated event, a misreported refusal, a figure moved on a ledger the
operation did not touch, a reused id, work left open at the end, a charge the event made left unobserved).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

from invariants.campaign import ControlResult
from spec.guards import Layer
from spec.types import Role, Tier

__all__ = ["Verdict", "corpus_of", "ledger_corpus", "manager_corpus", "replay_control", "verdict"]

#: (ok, failure kind, catalog ID) of one replay.
Verdict = tuple[bool, str | None, str | None]
_D = Tier.DEVICE


def verdict(r: Any) -> Verdict:
    return (r.ok, r.failure, r.id)


def _record(script: Callable[[Any], None]) -> list[bytes]:
    from refimpl.manager import ProcessMemoryManager
    from refimpl.tracing import JsonlSink
    buf = io.StringIO()
    pmm = ProcessMemoryManager(trace=JsonlSink(buf))
    script(pmm)
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


def _ledger_script(pmm: Any) -> None:
    """Every figure-moving ledger operation once, through a view too, and one refusal."""
    h, g = pmm.register_holder("kv"), pmm.register_holder("weights")
    a, b = pmm.register_authority("gpu0", _D, 256), pmm.register_authority("host", Tier.HOST, 128)
    v = pmm.register_alias(a, "uma")
    r1 = pmm.reserve(h, a, _D, 100, Role.KV)
    pmm.commit(h, r1, 80)
    r2 = pmm.record_committed(g, v, _D, 60, Role.WEIGHTS)
    try:
        pmm.reserve(h, a, _D, 200, Role.KV)  # 80 + 60 + 200 > 256: CapacityDenied
    except Exception:
        pass
    r3 = pmm.reserve(g, b, Tier.HOST, 50, Role.WEIGHTS)
    pmm.cancel(g, r3)
    pmm.release(h, r1)
    r4 = pmm.reserve(h, a, _D, 30, Role.KV)
    pmm.commit(h, r4, 30)
    pmm.release(g, r2)


def _ledger_left_open(pmm: Any) -> None:
    """A boundary mid-trace, then a reservation never settled before the trace ends."""
    from refimpl.tracing import boundary
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 256)
    pmm.commit(h, pmm.reserve(h, a, _D, 10, Role.KV), 10)
    boundary(pmm)
    pmm.reserve(h, a, _D, 20, Role.KV)


def _growth_left_open(pmm: Any) -> None:
    """Allowance growth reserved and never mapped or unmapped before the trace ends (no boundary)."""
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 256)
    pmm.reserve_growth(h, pmm.open_allowance(h, a, 64), 16)


def _events(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in lines]


def _lines(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e).encode() + b"\n" for e in events]


def _find(events: list[dict[str, Any]], kind: str, outcome: str = "accepted", nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if e["kind"] == kind and e["payload"].get("outcome") == outcome][nth]


def _renumber(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for n, e in enumerate(events, 1):
        e["source_sequence"] = n
    return events


def _duplicated_release(good: list[bytes]) -> list[bytes]:
    """The first release delivered twice under one sequence number (an emitter's retry)."""
    ev = _events(good)
    i = _find(ev, "release")
    return _lines(ev[:i + 1] + [dict(ev[i])] + ev[i + 1:])


def _lost_cancel(good: list[bytes]) -> list[bytes]:
    """The cancel event lost (its number skipped): its credit is never seen."""
    ev = _events(good)
    i = _find(ev, "cancel")
    return _lines(ev[:i] + ev[i + 1:])


def _misreported_refusal(good: list[bytes]) -> list[bytes]:
    """The over-limit reserve refused as a tier mismatch, although its tier matches."""
    ev = _events(good)
    i = _find(ev, "reserve", "rejected")
    ev[i]["payload"]["error"] = "TierMismatch"
    return _lines(ev)


def _moved_untouched_ledger(good: list[bytes]) -> list[bytes]:
    """The commit of gpu0's lease also reports 7 B more used on host, which the commit does not touch."""
    ev = _events(good)
    host = ev[_find(ev, "register_authority", nth=1)]["payload"]["result"]
    i = _find(ev, "commit")
    ev[i]["payload"]["used"][str(host)] = 7
    return _lines(ev)


def _refusal_that_moved_used(good: list[bytes]) -> list[bytes]:
    """The refused over-limit reserve reports gpu0's used 5 B higher: a refusal that charged bytes."""
    ev = _events(good)
    i = _find(ev, "reserve", "rejected")
    used = ev[i]["payload"]["used"]
    gpu = next(iter(used))
    used[gpu] += 5
    return _lines(ev)


def _reused_allocation_id(good: list[bytes]) -> list[bytes]:
    """After the first release, the next reservation is issued the released lease's id again."""
    ev = _events(good)
    old = ev[_find(ev, "release")]["ids"]["allocation"]
    i = _find(ev, "reserve", nth=2)  # the first reservation after that release
    new = ev[i]["payload"]["result"]
    for e in ev[i:]:
        if e["ids"].get("allocation") == new:
            e["ids"]["allocation"] = old
        if e["kind"] == "reserve" and e["payload"].get("result") == new:
            e["payload"]["result"] = old
        charges = e["payload"].get("charges", {})
        if str(new) in charges:
            charges[str(old)] = charges.pop(str(new))
    return _lines(ev)


def ledger_corpus() -> list[tuple[str, list[bytes], Verdict]]:
    """(name, trace, the intact replay's verdict) of the ledger-only corpus, recorded now from refimpl."""
    good = _record(_ledger_script)
    return [
        ("ledger-good", good, (True, None, None)),
        ("duplicated-release", _duplicated_release(good), (False, "duplicate-sequence", None)),
        ("lost-cancel", _lost_cancel(good), (False, "sequence-gap", None)),
        ("misreported-refusal", _misreported_refusal(good), (False, "refinement", None)),
        ("moved-untouched-ledger", _moved_untouched_ledger(good), (False, "violation", "I1")),
        ("reused-allocation-id", _reused_allocation_id(good), (False, "violation", "I4a")),
        ("refusal-that-moved-used", _refusal_that_moved_used(good), (False, "violation", "G4")),
        ("growth-left-open", _record(_growth_left_open), (False, "leftover", None)),
        ("left-open-after-boundary", _record(_ledger_left_open), (False, "leftover", None)),
    ]


def _manager_script(pmm: Any) -> None:
    """A transaction planned, reserved and committed, and a ticket granted and claimed."""
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 256)
    tx = pmm.plan_tx(h, ((a, 40),))
    pmm.reserve_all(tx)
    pmm.commit_tx(tx)
    t = pmm.submit(h, a, 30, 1, Role.KV)
    pmm.claim(h, t)


def _manager_tx_left_open(pmm: Any) -> None:
    """A transaction still holding its reservation when the trace ends (no boundary)."""
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 256)
    pmm.reserve_all(pmm.plan_tx(h, ((a, 40),)))


def _owed_then_newcomer(pmm: Any) -> None:
    """A 50 B ticket waits behind 90 B; the release grants it; then a 30 B newcomer of higher priority."""
    from refimpl.tracing import boundary
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", _D, 100)
    big = pmm.claim(h, pmm.submit(h, a, 90, 0, Role.KV))
    pmm.submit(h, a, 50, 0, Role.KV)
    pmm.release(h, big)
    pmm.submit(h, a, 30, 5, Role.KV)
    boundary(pmm)


def _newcomer_served_first(good: list[bytes]) -> list[bytes]:
    """The waiter's owed grant written after the newcomer's submit and grant, every figure as such a governor
    would report it: the newcomer took bytes the design's round had already given the waiter (I13)."""
    ev = _events(good)
    i = _find(ev, "grant", nth=1)  # the waiter's (50 B), right after the release; then the newcomer's submit, grant
    owed, sub, new = ev[i], ev[i + 1], ev[i + 2]
    aid = next(iter(owed["payload"]["used"]))
    sub["payload"]["used"][aid] -= 50
    new["payload"]["used"][aid] -= 50
    owed["payload"]["used"][aid] = new["payload"]["used"][aid] + 50
    return _lines(_renumber(ev[:i] + [sub, new, owed] + ev[i + 3:]))


def manager_corpus() -> list[tuple[str, list[bytes], Verdict]]:
    """(name, trace, the intact replay's verdict) of the composed corpus, recorded now from refimpl."""
    good = _record(_manager_script)
    return [
        ("manager-good", good, (True, None, None)),
        ("manager-duplicated-event", _duplicated_last(good), (False, "duplicate-sequence", None)),
        ("newcomer-served-first", _newcomer_served_first(_record(_owed_then_newcomer)), (False, "violation", "I13")),
        ("tx-left-open", _record(_manager_tx_left_open), (False, "leftover", None)),
        ("grant-charge-left-out", _grant_charge_left_out(good), (False, "refinement", None)),
        ("stale-topology-epoch", _stale_epoch(_record(_loss_then_holder)), (False, "refinement", None)),
    ]


def _loss_then_holder(pmm: Any) -> None:
    """Two devices, one lost; then a holder registered (in the topology after the loss)."""
    pmm.register_authority("gpu0", _D, 256)
    a = pmm.register_authority("gpu1", _D, 256)
    pmm.lose_device(a)
    pmm.register_holder("late")


def _stale_epoch(good: list[bytes]) -> list[bytes]:
    """The event after the device loss carries the epoch before it: decided against a topology already gone."""
    ev = _events(good)
    i = _find(ev, "lose_device")
    ev[i + 1]["topology_epoch"] = ev[i]["topology_epoch"]
    return _lines(ev)


def _grant_charge_left_out(good: list[bytes]) -> list[bytes]:
    """The grant event observes no charge: the allocation it reserved is not named by any argument (issue #21)."""
    ev = _events(good)
    ev[_find(ev, "grant")]["payload"]["charges"] = {}
    return _lines(ev)


def _duplicated_last(good: list[bytes]) -> list[bytes]:
    """The last event delivered twice under one sequence number."""
    ev = _events(good)
    return _lines(ev + [dict(ev[-1])])


def corpus_of(model: str) -> tuple[list[tuple[str, list[bytes], Verdict]], Callable[[list[bytes]], Any]]:
    """The corpus of checker `model`, recorded now, and the replay that judges it (looked up now: a mutant
    of the replay itself is the one in effect)."""
    from invariants import manager_replay
    return manager_corpus() if model == "manager" else ledger_corpus(), manager_replay.replay_manager_lines


def replay_control(m: Any, layer: Layer) -> ControlResult:
    """Run mutant `m` (already applied) as a replay control: found iff a verdict of its corpus flips."""
    t0 = time.perf_counter()
    corpus, replay = corpus_of(m.model)
    flips = []
    for name, lines, want in corpus:
        got = verdict(replay(lines))
        if got != want:
            flips.append(f"{name}: expected {_say(want)}, the mutated replay says {_say(got)}")
    found = bool(flips)
    return ControlResult(m.name, layer, m.ids, found, m.ids[0] if found else None, 1 if found else None,
                         time.perf_counter() - t0, tuple(flips),
                         "; ".join(flips) if found else f"all {len(corpus)} verdicts of the replay corpus held")


def _say(v: Verdict) -> str:
    ok, failure, id = v
    return "clean" if ok else f"rejected ({failure}{' [' + id + ']' if id else ''})"
