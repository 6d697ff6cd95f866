"""Survivors of invariants/explore_checks.py's mutation run, killed (benchmarks/mutation.py).

Each projection's partition of the quick scopes' states and steps is pinned (how many distinct inputs each
predicate group passed on), so a projection that reads less (merges inputs) or more (splits them) fails here
even where the verdicts agree; each incremental check agrees with the full one, runs in full while clauses
are counted, runs an undeclared predicate every time, and reports a planted violation every time."""

from __future__ import annotations

import pytest

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, collecting, recording
from invariants import explore_checks as EC
from invariants.explore_checks import READS, IncrementalChecks
from invariants.manager_scope import QUOTA_SCOPE, VIEW_SCOPE, manager_start
from spec import manager as MG
from spec.guards import ALL_ON, GUARDS, GuardSet
from test_explore_fast import _judge_scope, _verdict

_GUARDS = [ALL_ON, *(GuardSet.without(g.name) for g in GUARDS if g.model == "manager")]


def _sizes(inc: IncrementalChecks) -> dict[str, int]:
    return {f"{kind}:{proj.__name__}": len(passed) for kind, plan in (("state", inc._state), ("step", inc._step))
            for proj, passed in zip(plan.projections, plan.passed_sets)}


def _partitions() -> tuple[dict[str, int], int, int]:
    reads = EC._reads()  # built afresh: READS was built at import, before a mutant (benchmarks/mutation.py) is active
    total: dict[str, int] = {}
    evaluated = skipped = 0
    for guards, scope, depth in [*((g, None, 3) for g in _GUARDS), (ALL_ON, VIEW_SCOPE, 4), (ALL_ON, QUOTA_SCOPE, 4)]:
        full, inc_flags, inc = _judge_scope(guards, depth, reads, scope)
        assert inc_flags == full
        for k, n in _sizes(inc).items():
            total[k] = total.get(k, 0) + n
        evaluated, skipped = evaluated + inc.evaluated, skipped + inc.skipped
    return total, evaluated, skipped


def test_each_projection_partitions_the_quick_scopes_as_pinned() -> None:
    total, evaluated, skipped = _partitions()
    assert total == PINNED and (evaluated, skipped) == PINNED_COUNTS


#: Distinct inputs each projection passed on, summed over the scopes above (in evaluation order).
PINNED = {
    "state:ledger_of": 3077, "state:parts_of": 7640, "state:tickets_of": 729, "state:generations_of": 729,
    "state:views_of": 162, "state:holds_of": 1110, "state:intents_of": 177, "step:ledger_step_of": 15766,
    "step:parts_step_of": 16328, "step:quota_step_of": 5695, "step:holders_step_of": 157,
    "step:parts_uses_step_of": 16328, "step:removal_step_of": 16618, "step:bundles_step_of": 2664,
    "step:pressure_step_of": 15882, "step:answers_step_of": 29375, "step:tickets_step_of": 19417,
    "step:order_step_of": 19203, "step:views_step_of": 2452, "step:view_bytes_step_of": 384,
    "step:intents_step_of": 3731, "step:abort_step_of": 144, "step:poisoned_step_of": 9,
}
PINNED_COUNTS = (198195, 805373)  # predicate groups evaluated, skipped


def test_the_table_built_afresh_declares_every_predicate_as_read_names() -> None:
    reads, every = EC._reads(), {p for preds in (*IM.STATE_PREDICATES.values(), *IM.STEP_PREDICATES.values()) for p in preds}
    assert set(reads) == every and reads == READS
    wrapped = {p for p in every if hasattr(p, "__wrapped__")}  # the ledger's own predicates, on the ledger part
    assert wrapped and {reads[p] for p in wrapped} == {EC.ledger_of, EC.ledger_step_of}
    assert {p for p in wrapped if reads[p] is EC.ledger_of} == {p for ps in IM.STATE_PREDICATES.values() for p in ps
                                                                if p in wrapped}
    assert reads[IM.step_I2_manager] is EC.ledger_step_of and reads[IM.step_C3_manager] is EC.removal_step_of


def _two_states():
    m = manager_start(VIEW_SCOPE)
    return m, MG.step(m, MG.M.PlanTx(1, ((1, 1),)))[0]


def _plant(monkeypatch: pytest.MonkeyPatch, step: bool = False) -> list:
    """A planted predicate (state, or step) that fails on any state with a transaction, and logs each call."""
    calls: list = []

    def planted(*args) -> None:
        calls.append(len(args))
        if args[-1 if not step else 2].txs:
            raise InvariantViolation("PLANT", "a transaction")
    table = IM.STEP_PREDICATES if step else IM.STATE_PREDICATES
    monkeypatch.setitem(table, "PLANT", (planted,))
    return calls


@pytest.mark.parametrize("declared", [False, True])
def test_a_planted_state_violation_is_reported_every_time(monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    calls = _plant(monkeypatch)
    planted = IM.STATE_PREDICATES["PLANT"][0]
    inc = IncrementalChecks({**READS, planted: lambda m: m.txs} if declared else READS)
    a, b = _two_states()
    inc.check_state(a)
    inc.check_state(a)  # passed before: a declared planted predicate is skipped, an undeclared one runs again
    assert len(calls) == (1 if declared else 2)
    for _ in range(2):
        assert _verdict(inc.check_state, b) == _verdict(IM.check_all, b) == "PLANT"
    assert len(calls) == (5 if declared else 6)  # each check above ran it, the full one too
    assert _verdict(inc.check_state, a) is None


def test_a_planted_step_violation_is_reported_and_an_undeclared_one_always_runs(monkeypatch) -> None:
    calls = _plant(monkeypatch, step=True)
    a, b = _two_states()
    act = MG.M.PlanTx(1, ((1, 1),))
    inc = IncrementalChecks({})  # nothing declared: every predicate runs every time, nothing is skipped
    for _ in range(2):
        assert _verdict(inc.check_step, a, act, b, None) == "PLANT"
    inc.check_step(a, act, a, None)
    inc.check_step(a, act, a, None)
    assert calls == [4, 4, 4, 4] and inc.evaluated == inc.skipped == 0


@pytest.mark.parametrize("mode", ["recording", "collecting"])
def test_while_clauses_are_counted_the_full_check_runs(monkeypatch, mode: str) -> None:
    calls = _plant(monkeypatch)
    a, b = _two_states()
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
