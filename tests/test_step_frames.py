"""`invariants.step_frames`: `check_step` skips only the step predicates a step cannot make fail (issue #21).

The corpus is every clause mutation of a step: the composed manager's
(`test_manager_clauses`) and the ledger's (`test_ledger_clauses`, each lifted
onto a manager). Each predicate a mutated step breaks must be selected for
that step, and each part and action class of each frame must be what selects
it for some mutation (the negative control of that entry: without it, the
mutation passes). (C1 C3 C4 C5 C6 I1 I2 I4a I4b I5 I6 I9 I10 I13)
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from manager_harness import DEV, H1, H2, lease, run, start
from test_ledger_clauses import ALLOWANCES, OPEN, STEP_HARMS, _auth, real
from test_manager_clauses import _STEP_MUTATIONS, _step_mut, _with_tx

from invariants import manager as IM
from invariants import step_frames as F
from invariants._violation import InvariantViolation
from invariants.clauses import Coverage, collecting, conjunction, recording
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.guards import GuardSet
from spec.manager_actions import initial
from spec.tickets import TicketState
from spec.types import Role, Tier

_ALL = tuple(p for preds in IM.STEP_PREDICATES.values() for p in preds)


def _on(m: M.Manager, **ledger: Any) -> M.Manager:
    return evolve(m, ledger=evolve(m.ledger, **ledger))


def _allowance_moves_charge(*acts: Any) -> tuple[Any, Any, Any, Any]:
    """An allowance action whose step also charges the gpu 1 B (I4b: allowance actions move no charge)."""
    p, act, n = real(*acts)
    m = initial()
    return evolve(m, ledger=p), act, evolve(m, ledger=_auth(n, 1, used=n.authorities[1].used + 1)), None


def _waiter() -> tuple[M.Manager, int]:
    """3 B of the gpu's 4 leased, and a 4 B ticket waiting."""
    return run(lease(start(), H1, DEV, 3)[0], M.Submit(H2, DEV, 4))


#: Mutated steps this file adds: each makes a frame entry the only thing that selects its predicate.
_EXTRA = {
    # the release credits the charge but leaves used as it was (only the allocations are replaced)
    "release_keeps_used": lambda: (lambda m, a: (lambda n: (m, A.Release(H1, a), _on(n, authorities=m.ledger.authorities),
                                                            None))(MG.step(m, A.Release(H1, a))[0]))(
        *lease(start(), H1, DEV, 2)),
    # the allocation id counter goes back while no record changes
    "id_counter_back": lambda: (lambda m: (m, M.Press(H1, DEV, 1), _on(m, next_allocation=1), None))(
        lease(start(), H1, DEV, 2)[0]),
    # an accepted removal of a charged authority that removes nothing
    "removal_removes_nothing": lambda: (lambda m: (m, M.RemoveAuthority(DEV), m, None))(lease(start(), H1, DEV, 2)[0]),
    # a waiting ticket's age falls
    "age_falls": lambda: (lambda m, t: (evolve(m, tickets=m.tickets.set(t, evolve(m.tickets[t], age=2))),
                                        M.Press(H1, DEV, 1), m, None))(*_waiter()),
    # a bundle is poisoned by a step that reported no mismatch
    "poisoned_unreported": lambda: (lambda m, b: (m, M.OpenBundle(), evolve(
        m, bundles=m.bundles.set(b, evolve(m.bundles[b], poisoned=True))), None))(*run(start(), M.OpenBundle())),
    # a poisoned manager reserves, or grants a waiting ticket
    "poisoned_reserves": lambda: (lambda m, act: (evolve(m, poisoned=True), act,
                                                  evolve(MG.step(m, act)[0], poisoned=True), None))(
        start(), A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.KV)),
    # a poisoned manager grows a lease (the poisoned refusal off)
    "poisoned_grows": lambda: (lambda m, a: (lambda p: (p, M.GrowLease(H1, a, 1), MG.step(
        p, M.GrowLease(H1, a, 1), GuardSet.without("poisoned_manager_refuses"))[0], None))(evolve(m, poisoned=True)))(
        *lease(start(), H1, DEV, 2)),
    # a reserve past the device tier's 2 B process quota (the quota refusal waived): only `used` moved (I1)
    "reserve_past_quota": lambda: (lambda m, act: (m, act, MG.step(m, act, GuardSet().waive("quota"))[0], None))(
        run(start(), M.SetProcessQuota(Tier.DEVICE, 2))[0], A.Reserve(H1, DEV, Tier.DEVICE, 3, Role.KV)),
    # a quota set below the tier's 2 B charge (its refusal removed): nothing but the quota changed (I1)
    "quota_below_charge": lambda: (lambda m: (m, M.SetProcessQuota(Tier.DEVICE, 1), evolve(
        m, quotas=m.quotas.set(Tier.DEVICE, 1)), None))(lease(start(), H1, DEV, 2)[0]),
    "poisoned_grants": lambda: (lambda m, t: (evolve(m, poisoned=True), M.Press(H1, DEV, 1), evolve(
        m, poisoned=True, tickets=m.tickets.set(t, evolve(m.tickets[t], state=TicketState.GRANTED))), None))(
        *_waiter()),
    # a timeout, an abort and an answer report a credit other than what they retired
    "timeout_credit_wrong": lambda: (lambda m: (m, M.TimeoutTicket(H1, 1), *MG.step(m, M.TimeoutTicket(H1, 1))[:1],
                                                99))(run(start(), M.Submit(H1, DEV, 3))[0]),
    # an abort that retires nothing, leaves no intent and reports a credit
    "abort_does_nothing": lambda: (lambda m: (m, M.AbortTx(1), m, 2))(_with_tx()),
    "answer_credit_wrong": lambda: (lambda b, a, n, r: (b, a, n, r + 1))(*_step_mut("late_answer")[:1],
                                                                        M.Answer(H1, 1, (1,), 5),
                                                                        *_step_mut("late_answer")[2:]),
    # an answer naming a pinned victim whose record is not live, in a step that changes no allocation
    "answer_names_a_pinned_gone_lease": lambda: (lambda b, a: (lambda m: (m, a, m, 0))(
        _on(b, allocations=b.ledger.allocations.delete(a.victims[0]))))(*_step_mut("pinned_victim")[:2]),
    # a retry that does not take its intent's place
    "retry_loses_place": lambda: (lambda m: (m, M.PlanTx(H2, ((DEV, 1),), 0, 1), m, None))(
        run(_with_tx(), M.AbortTx(1))[0]),
    **{f"{type(a).__name__}_moves_charge": (lambda acts: lambda: _allowance_moves_charge(*acts))(acts)
       for acts in [(OPEN,), (OPEN, A.ReserveGrowth(1, 1, 2)), (OPEN, A.ReserveGrowth(1, 1, 2), A.MapAllowance(1, 1, 2)),
                    (OPEN, A.ReserveGrowth(1, 1, 2), A.MapAllowance(1, 1, 2), A.UnmapAllowance(1, 1, 1)),
                    (OPEN, A.CloseAllowance(1, 1))] for a in acts[-1:]},
}


def _step(name: str) -> tuple[Any, Any, Any, Any]:
    if name in _EXTRA:
        return _EXTRA[name]()
    if name.startswith("ledger:"):
        p, act, n = STEP_HARMS[name.removeprefix("ledger:")][0]()
        m = initial()
        return evolve(m, ledger=p), act, evolve(m, ledger=n), None
    return _step_mut(name)


_CORPUS = sorted(_STEP_MUTATIONS) + sorted(f"ledger:{k}" for k in STEP_HARMS) + sorted(_EXTRA)


def _failing(before: Any, act: Any, after: Any, result: Any) -> set[str]:
    out = set()
    for p in _ALL:
        try:
            p(before, act, after, result)
        except InvariantViolation:
            out.add(p.__name__)
    return out


def _plan(before: Any, act: Any, after: Any, frames: dict[str, Any] | None = None) -> set[str]:
    old = dict(F.FRAMES)
    frames = old if frames is None else frames
    F.FRAMES.clear()
    F.FRAMES.update(frames)
    try:
        return {p.__name__ for p in F.selected(_ALL, type(act), F.replaced(before, after))}
    finally:
        F.FRAMES.clear()
        F.FRAMES.update(old)


@pytest.mark.parametrize("name", _CORPUS)
def test_every_predicate_a_mutated_step_breaks_is_evaluated(name: str) -> None:
    before, act, after, result = _step(name)
    failing = _failing(before, act, after, result)
    assert failing, "the mutation breaks no step predicate"
    assert failing <= _plan(before, act, after)
    with pytest.raises(InvariantViolation):  # outside `collecting`: the selected predicates only
        IM.check_step(before, act, after, result)
    with collecting() as found:
        IM.check_step(before, act, after, result)
    assert found


def test_every_frame_names_a_registered_step_predicate() -> None:
    assert set(F.FRAMES) <= {p.__name__ for p in _ALL}


def _entries() -> list[tuple[str, str]]:
    out = []
    for pred, (bits, kinds) in F.FRAMES.items():
        out += [(pred, f"bit{i}") for i in range(8) if bits & (1 << i)]
        out += [(pred, k.__name__) for k in kinds]
    return out


def _without(pred: str, entry: str) -> dict[str, Any]:
    bits, kinds = F.FRAMES[pred]
    if entry.startswith("bit"):
        return {**F.FRAMES, pred: (bits & ~(1 << int(entry[3:])), kinds)}
    return {**F.FRAMES, pred: (bits, tuple(k for k in kinds if k.__name__ != entry))}


@pytest.mark.parametrize("pred,entry", _entries())
def test_each_frame_entry_selects_its_predicate_for_some_mutation(pred: str, entry: str) -> None:
    missed = []
    for name in _CORPUS:
        before, act, after, result = _step(name)
        if pred in _failing(before, act, after, result) and pred not in _plan(before, act, after,
                                                                              _without(pred, entry)):
            missed.append(name)
    assert missed, f"no mutation needs {entry} in {pred}'s frame"


def test_counted_evaluations_are_those_of_every_step_predicate() -> None:
    """While clauses are counted (a campaign's coverage), every step predicate runs: a skip would count less."""
    m = start()
    act = M.Submit(H1, DEV, 3)
    after, tid = MG.step(m, act)
    counts = []
    for check in (IM.check_step, lambda *a: conjunction(IM.STEP_PREDICATES, *a)):
        cov = Coverage()
        with recording(cov):
            check(m, act, after, tid)
        counts.append(cov.counts)
    assert len(counts[0]) > 30 and counts[0] == counts[1]


def test_a_predicate_judging_some_actions_only_is_selected_for_those_only() -> None:
    """The wrapped ledger I6 judges ledger actions only (it returns at once for a part's): a claim, which replaces
    the allocations, does not select it; a release, which replaces them too, does."""
    m, tid = run(start(), M.Submit(H1, DEV, 2))
    claimed, aid = run(m, M.Claim(H1, tid))
    released = MG.step(claimed, A.Release(H1, aid))[0]
    assert "ledger_step_I6" not in _plan(m, M.Claim(H1, tid), claimed)
    assert "ledger_step_I6" in _plan(claimed, A.Release(H1, aid), released)
    assert {"ledger_step_I1", "ledger_step_I4a", "step_I6_manager"} <= _plan(m, M.Claim(H1, tid), claimed)
