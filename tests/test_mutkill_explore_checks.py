"""Survivors of invariants/explore_checks.py's mutation run, killed (benchmarks/mutation.py). Each projection's
partition of the quick scopes' states and steps is pinned (how many distinct inputs each predicate group passed on),
so a projection that reads less (merges inputs) or more (splits them) fails here even where the verdicts agree."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, collecting, recording
from invariants import explore_checks as EC
from invariants.explore_checks import READS, IncrementalChecks
from invariants.manager_scope import QUOTA_SCOPE, VIEW_SCOPE, manager_start
from spec import manager as MG
from spec import manager_actions as M
from spec.guards import ALL_ON, GUARDS, GuardSet
from test_explore_fast import _judge_scope, _verdict

#: Scope name -> (guards, scope (None: the guard's control scope), depth): every manager guard's control scope and
#: CONTROL_SCOPE with every guard on (test_explore_fast's), the view scope and the quota scope.
SCOPES = {"all_on": (ALL_ON, None, 3),
          **{g.name: (GuardSet.without(g.name), None, 3) for g in GUARDS if g.model == "manager"},
          "views": (ALL_ON, VIEW_SCOPE, 4), "quota": (ALL_ON, QUOTA_SCOPE, 4)}
_ORDER = ("state:ledger_of", "state:parts_of", "state:tickets_of", "state:generations_of", "state:views_of",
          "state:holds_of", "state:intents_of", "step:ledger_step_of", "step:parts_step_of", "step:quota_step_of",
          "step:holders_step_of", "step:parts_uses_step_of", "step:removal_step_of", "step:bundles_step_of",
          "step:pressure_step_of", "step:answers_step_of", "step:tickets_step_of", "step:order_step_of",
          "step:views_step_of", "step:view_bytes_step_of", "step:intents_step_of", "step:abort_step_of",
          "step:poisoned_step_of")


def _figures(inc: IncrementalChecks) -> tuple[int, ...]:
    """How many distinct inputs each projection passed on (in `_ORDER`), then the groups evaluated and skipped."""
    sizes = {f"{kind}:{proj.__name__}": len(passed) for kind, plan in (("state", inc._state), ("step", inc._step))
             for proj, passed in zip(plan.projections, plan.passed_sets)}
    assert tuple(sizes) == _ORDER
    return (*sizes.values(), inc.evaluated, inc.skipped)


@pytest.mark.parametrize("name", sorted(SCOPES))
def test_each_projection_partitions_each_quick_scope_as_pinned(name: str) -> None:
    guards, scope, depth = SCOPES[name]
    # the table built afresh: READS was built at import, before a mutant (benchmarks/mutation.py) is active
    full, inc_flags, inc = _judge_scope(guards, depth, EC._reads(), scope)
    assert inc_flags == full
    assert _figures(inc) == PINNED[name]


#: Scope -> `_figures` of a walk of it.
PINNED = {
    "all_on": (464, 1136, 105, 105, 21, 161, 23, 2332, 2409, 810, 1, 2409, 2444,
               371, 2350, 3993, 2632, 2570, 341, 50, 521, 19, 1, 25268, 108228),
    "grant_charges_ledger": (79, 187, 11, 11, 15, 71, 17, 542, 579, 354, 1, 579, 686,
                             333, 544, 3499, 2230, 2222, 303, 42, 445, 13, 1, 25844, 105892),
    "tx_counts_granted": (464, 1136, 105, 105, 21, 161, 23, 2332, 2409, 810, 1, 2409, 2444,
                          371, 2350, 3993, 2632, 2570, 341, 50, 521, 19, 1, 25412, 108360),
    "loss_keeps_charge": (460, 1132, 105, 105, 21, 161, 23, 2328, 2405, 810, 1, 2405, 2440,
                          365, 2346, 3987, 2628, 2566, 341, 50, 515, 19, 1, 25279, 108196),
    "provider_pinned": (464, 1188, 105, 105, 21, 197, 23, 2428, 2515, 810, 1, 2515, 2552,
                        371, 2450, 4175, 2728, 2666, 341, 50, 521, 19, 1, 29854, 118896),
    "holder_in_use": (565, 1337, 105, 105, 21, 161, 23, 2862, 2951, 878, 149, 2951, 2998,
                      385, 2882, 4741, 3170, 3100, 355, 52, 539, 19, 1, 33827, 129270),
    "limit_after_reclaim": (464, 1136, 105, 105, 21, 161, 23, 2332, 2405, 810, 1, 2405, 2444,
                            371, 2350, 3989, 2628, 2570, 341, 50, 519, 19, 1, 25294, 108230),
    "views": (12, 23, 1, 1, 16, 12, 16, 35, 36, 30, 1, 36, 35,
              37, 35, 49, 36, 29, 32, 19, 44, 10, 1, 546, 910),
    "quota": (105, 365, 87, 87, 5, 25, 6, 575, 619, 383, 1, 619, 575,
              60, 575, 949, 733, 910, 57, 21, 106, 7, 1, 6871, 17391),
}


def test_the_table_built_afresh_declares_every_predicate_as_read_names() -> None:
    reads = EC._reads()
    every = {p for preds in (*IM.STATE_PREDICATES.values(), *IM.STEP_PREDICATES.values()) for p in preds}
    assert set(reads) == every and reads == READS
    wrapped = {p for p in every if hasattr(p, "__wrapped__")}  # the ledger's own predicates, on the ledger part
    assert wrapped and {reads[p] for p in wrapped} == {EC.ledger_of, EC.ledger_step_of}
    assert {p for p in wrapped if reads[p] is EC.ledger_of} == {p for ps in IM.STATE_PREDICATES.values() for p in ps
                                                                if p in wrapped}
    assert reads[IM.step_I2_manager] is EC.ledger_step_of and reads[IM.step_C3_manager] is EC.removal_step_of


def _plant(monkeypatch: pytest.MonkeyPatch, step: bool = False) -> tuple[list, Any, Any]:
    """A planted predicate (state, or step) that fails on any state with a transaction, and logs each call; its
    call log, and two states: the view scope's start, and it after a transaction is planned."""
    calls: list = []

    def planted(*args) -> None:
        calls.append(len(args))
        if args[-1 if not step else 2].txs:
            raise InvariantViolation("PLANT", "a transaction")
    table = IM.STEP_PREDICATES if step else IM.STATE_PREDICATES
    monkeypatch.setitem(table, "PLANT", (planted,))
    m = manager_start(VIEW_SCOPE)
    return calls, m, MG.step(m, MG.M.PlanTx(1, ((1, 1),)))[0]


@pytest.mark.parametrize("declared", [False, True])
def test_a_planted_state_violation_is_reported_every_time(monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    calls, a, b = _plant(monkeypatch)
    planted = IM.STATE_PREDICATES["PLANT"][0]
    inc = IncrementalChecks({**READS, planted: lambda m: m.txs} if declared else READS)
    inc.check_state(a)
    inc.check_state(a)  # passed before: a declared planted predicate is skipped, an undeclared one runs again
    assert len(calls) == (1 if declared else 2)
    for _ in range(2):
        assert _verdict(inc.check_state, b) == _verdict(IM.check_all, b) == "PLANT"
    assert len(calls) == (5 if declared else 6)  # each check above ran it, the full one too
    assert _verdict(inc.check_state, a) is None


def test_a_predicate_runs_only_when_its_own_projections_input_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, a, _ = _plant(monkeypatch)
    planted = IM.STATE_PREDICATES["PLANT"][0]
    first = IncrementalChecks()._state.projections[0]  # the planted predicate shares the first projection
    inc = IncrementalChecks({**READS, planted: first})
    other = MG.step(a, MG.M.Reconfigure(1))[0]  # a generation: new to generations_of, not to the first projection
    assert first(other) == first(a) and EC.generations_of(other) != EC.generations_of(a)
    inc.check_state(a)
    before = inc.evaluated
    inc.check_state(other)
    assert len(calls) == 1 and inc.evaluated > before  # another group ran; the planted one did not


def test_a_planted_step_violation_is_reported_and_an_undeclared_one_always_runs(monkeypatch) -> None:
    calls, a, b = _plant(monkeypatch, step=True)
    act = MG.M.PlanTx(1, ((1, 1),))
    inc = IncrementalChecks({})  # nothing declared: every predicate runs every time, nothing is skipped
    for _ in range(2):
        assert _verdict(inc.check_step, a, act, b, None) == "PLANT"
    inc.check_step(a, act, a, None)
    inc.check_step(a, act, a, None)
    assert calls == [4, 4, 4, 4] and inc.evaluated == inc.skipped == 0


@pytest.mark.parametrize("mode", ["recording", "collecting"])
def test_while_clauses_are_counted_the_full_check_runs(monkeypatch, mode: str) -> None:
    calls, a, b = _plant(monkeypatch)
    inc, cov = IncrementalChecks(), Coverage()
    with (recording(cov) if mode == "recording" else collecting()) as found:
        inc.check_state(a)
        inc.check_state(a)
        # the full check: it raises, or notes the failure and goes on (collecting)
        assert _verdict(inc.check_state, b) == ("PLANT" if mode == "recording" else None)
        inc.check_step(a, MG.M.PlanTx(1, ((1, 1),)), b, None)
    assert found == (None if mode == "recording" else ["PLANT"])
    assert calls == [1, 1, 1] and inc.evaluated == inc.skipped == 0
    assert all(not s for plan in (inc._state, inc._step) for s in plan.passed_sets)
    if mode == "recording":
        full = Coverage()
        with recording(full):
            IM.check_all(a)
            IM.check_all(a)
            _verdict(IM.check_all, b)
            IM.check_step(a, MG.M.PlanTx(1, ((1, 1),)), b, None)
        assert cov.counts == full.counts and cov.counts


# --- each projection's whole output, on hand-made before/after parts (only the fields a projection reads) -------


def _side(tag: str, **over: object) -> SimpleNamespace:
    led = SimpleNamespace(authorities={1: f"{tag}.auth1"}, allocations={5: f"{tag}.alloc5", 6: f"{tag}.alloc6"},
                          holders={1: f"{tag}.h1"}, allowances={})
    parts = {name: f"{tag}.{name}" for name in ("tickets", "txs", "pressures", "changes", "aging_bound", "quotas",
                                                "generations", "views", "next_view", "next_ticket", "intents",
                                                "bundles", "uses")}
    parts.update({"ledger": led, "poisoned": False, **over})
    return SimpleNamespace(**parts)


def test_the_ledger_and_parts_projections_whole() -> None:
    b, a, act = _side("b"), _side("a"), "act"
    assert EC.ledger_of(b) is b.ledger and EC.ledger_step_of(b, act, a) == (b.ledger, act, a.ledger)
    assert EC.removal_step_of(b, act, a) == (b.ledger, act, a.ledger)  # no authority removed
    gone = _side("a")
    gone.ledger.authorities = {}
    assert EC.removal_step_of(b, act, gone) == ((b.ledger, act, gone.ledger), "a.tickets", "a.pressures",
                                                "a.changes", "a.txs")
    assert EC.parts_of(b) == (b.ledger, "b.tickets", "b.txs", "b.aging_bound", "b.quotas")
    assert EC.quota_step_of(b, act, a) == (act, {1: "b.auth1"}, "b.quotas", {1: "a.auth1"}, "a.quotas")
    assert EC.answers_step_of(b, act, a, "r") == (act, b.ledger, a.ledger, "b.tickets", "a.tickets", "b.txs",
                                                  "a.txs", "r")
    assert EC.tickets_step_of(b, act, a, "r") == (act, "b.tickets", b.ledger, a.ledger, "r")
    assert EC.order_step_of(b, act, a) == (act, "b.tickets", "b.next_ticket", "a.tickets", a.ledger,
                                           "a.aging_bound", "a.quotas")
    assert EC.generations_of(b) == ("b.tickets", "b.generations") and EC.tickets_of(b) == "b.tickets"
    assert EC.views_of(b) == ("b.views", "b.txs") and EC.intents_of(b) == ("b.txs", "b.intents")
    assert EC.views_step_of(b, act, a) == ("b.views", act, "a.views", "a.txs")
    assert EC.intents_step_of(b, act, a, "r") == (act, "r", "b.txs", "b.intents", "a.txs", "a.intents",
                                                  "b.aging_bound")


def test_the_named_record_projections_whole() -> None:
    b = _side("b", tickets={7: "ticket7"}, txs={3: "tx3"}, pressures={4: "pressure4"})
    a = _side("a")
    for act, named in [(M.CancelTicket(1, 7), "ticket7"), (M.TimeoutTicket(1, 7), "ticket7"),
                       (M.ReserveTx(3), "tx3"), (M.CommitTx(3), "tx3"), (M.AbortTx(3), "tx3"),
                       (M.JoinBundle(3, 1), "tx3"), (M.CancelTicket(1, 8), None), ("other", None)]:
        assert EC.parts_step_of(b, act, a, "r") == (b.ledger, act, a.ledger, named, "r"), act
        assert EC.parts_uses_step_of(b, act, a, "r") == ((b.ledger, act, a.ledger, named, "r"), "b.uses")
    for act, named in [(M.Answer(1, 4, ()), "pressure4"), (M.Answer(1, 9, ()), None), ("other", None)]:
        assert EC.pressure_step_of(b, act, a) == (act, named, "b.generations", b.ledger, a.ledger)
    assert EC.abort_step_of(b, M.AbortTx(3), a) == (M.AbortTx(3), {3: "tx3"}, frozenset({5, 6}))
    assert EC.abort_step_of(b, "other", a) == EC.abort_step_of(b, M.CommitTx(3), _side("c")) == ()


def test_the_held_bytes_projections_whole() -> None:
    tx = SimpleNamespace(bundle=2, held=(5,))
    loose = SimpleNamespace(bundle=None, held=(6,))
    b, a = _side("b", txs={1: tx, 2: loose}), _side("a")
    assert EC.bundles_step_of(b, "act", a) == (b.txs, "b.bundles", "act", "a.txs", "a.bundles",
                                               ((5, "b.alloc5", "a.alloc5"),))
    views = {1: SimpleNamespace(allocation=6), 2: SimpleNamespace(allocation=9)}
    b = _side("b", views=views)
    assert EC.view_bytes_step_of(b, "act", a) == (views, "act", "a.views",
                                                  ((6, "b.alloc6", "a.alloc6"), (9, None, None)),
                                                  "b.next_view", "a.next_view")
    assert EC.holds_of(_side("b", txs={})) == () and EC.holds_of(b) == ("b.txs", {1: "b.auth1"})


def test_the_poisoning_and_holder_projections_whole() -> None:
    b, a, report = _side("b"), _side("a"), M.ReportMismatch(1)
    assert EC.poisoned_step_of(b, report, a) == ("b.bundles", "a.bundles", report)
    assert EC.poisoned_step_of(b, "other", a) == ("b.bundles", "a.bundles", None)
    p = _side("b", poisoned=True)
    assert EC.poisoned_step_of(p, "other", a) == (("b.bundles", "a.bundles", None), frozenset({5, 6}),
                                                  frozenset({5, 6}), "b.tickets", "a.tickets")
    same = _side("a", ledger=SimpleNamespace(**{**vars(a.ledger), "holders": b.ledger.holders}))
    assert EC.holders_step_of(b, "act", same) == ()  # an unchanged registry: nothing else read
    assert EC.holders_step_of(b, "act", a) == ("act", {1: "b.h1"}, {1: "a.h1"}, a.ledger.allocations, {},
                                               "a.tickets", "a.pressures", "a.txs", "a.intents")
