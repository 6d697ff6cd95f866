"""Fused step verdicts (`invariants.explore_fused`) give the full checks' verdicts: over every step of the composed
scopes the fused judge flags exactly what `invariants.manager.check_step` flags; the fused explorer counts the
plain explorer's states and finds its shortest counterexamples, for every manager guard's control and the quick
scope; and the proof that a memo key decides the projections is checked, not trusted: a projection that reads a
part outside the footprint, uses the state as a whole, or reads different parts on different states is caught, and
a judge that skips the proof lets a harm through. (C3 I1 I2 I6 I10 I13)"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

import attrs
import pytest

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.explore import explore
from invariants.explore_checks import IncrementalChecks
from invariants.explore_fused import FusedSteps
from invariants.explore_memo import MemoStep
from invariants.manager_scope import CONTROLS, QUICK_SCOPE, ManagerScope, manager_actions, \
    manager_model, manager_start
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, GUARDS, GuardSet

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")
#: A small scope with one state bundle (CONTROL_SCOPE opens none), so I10's projection is exercised.
_BUNDLE_SCOPE = ManagerScope(tickets=1, pressures=1, txs=1, needs=(((1, 1),),), losses=False, limits=False)


def _verdict(check: Callable[..., None], *args: Any) -> str | None:
    try:
        check(*args)
    except InvariantViolation as e:
        return e.clause or e.id
    return None


def _judge_walk(scope: ManagerScope, guards: GuardSet, depth: int, fused: FusedSteps | None = None,
                memo: MemoStep | None = None, full: Callable[..., None] = IM.check_step) -> tuple[list, list, FusedSteps]:
    """Every accepted step of `scope` within `depth`, in breadth-first order, judged by `full` and by the fused
    judge (not stopping at a violation): the lists of (state, action, verdict)."""
    if memo is None:
        memo = MemoStep(lambda s, a: MG.step(s, a, guards), (GovernorError,))
    if fused is None:
        fused = FusedSteps(IncrementalChecks(), memo)
    start = manager_start(scope)
    seen, frontier = {start}, deque([(start, 0)])
    want, got = [], []
    while frontier:
        s, d = frontier.popleft()
        if d >= depth:
            continue
        for act in manager_actions(scope, s):
            try:
                nxt, result = memo(s, act)
            except GovernorError:
                continue
            entry = memo.entry
            want.append((s, act, _verdict(full, s, act, nxt, result)))
            got.append((s, act, _verdict(fused.check_step, entry, s, act, nxt, result)))
            if nxt not in seen:
                seen.add(nxt)
                frontier.append((nxt, d + 1))
    return want, got, fused


_CASES = [("quick all_on", QUICK_SCOPE, ALL_ON, 3), ("bundles all_on", _BUNDLE_SCOPE, ALL_ON, 5),
          *((f"{g} off", CONTROLS[g], GuardSet.without(g), 4) for g in _MANAGER_GUARDS)]


@pytest.mark.parametrize(("what", "scope", "guards", "depth"), _CASES, ids=[c[0] for c in _CASES])
def test_fused_verdicts_are_the_full_checks_verdicts(what: str, scope: ManagerScope, guards: GuardSet,
                                                     depth: int) -> None:
    want, got, fused = _judge_walk(scope, guards, depth)
    assert got == want, what
    assert fused.fused > 0 and fused.judged > 0 and not fused.refuted  # the reuse is exercised, every type proven
    if guards != ALL_ON:
        assert any(v is not None for *_, v in want)  # the guard's harm occurs in the walk


def test_every_scope_action_type_is_proven_with_the_parts_it_reads_besides() -> None:
    _, _, fused = _judge_walk(QUICK_SCOPE, ALL_ON, 3)
    # The step projections read the ledger, the bundles and (for a CommitTx) the transactions: a part a footprint
    # does not read is an extra part of the fused key, and no extra part is one the action writes.
    assert M.CommitTx in fused.extra and fused.extra[M.CommitTx] == ()
    assert fused.extra[M.Submit] == ("bundles",) and fused.extra[M.JoinBundle] == ("ledger",)
    memo = MemoStep(lambda s, a: MG.step(s, a), (GovernorError,))
    for kind, extra in fused.extra.items():
        assert not set(extra) & set(memo.footprints[kind].writes), kind


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_fused_explorer_finds_each_control_as_the_full_one(name: str) -> None:
    want = explore(manager_model(GuardSet.without(name), CONTROLS[name], incremental=False), max_depth=6)
    got = explore(manager_model(GuardSet.without(name), CONTROLS[name], memo=True, fused=True), max_depth=6)
    assert want.found
    assert attrs.evolve(got, seconds=0, cpu_seconds=0, critical_cpu_seconds=0) == \
        attrs.evolve(want, seconds=0, cpu_seconds=0, critical_cpu_seconds=0), name


def test_fused_explorer_counts_the_full_ones_states_on_the_quick_scope() -> None:
    want = explore(manager_model(incremental=False), max_depth=3)
    got = explore(manager_model(memo=True, fused=True), max_depth=3)
    assert not got.found and got.complete
    assert (got.states, got.transitions, got.rejected, got.depth) == \
        (want.states, want.transitions, want.rejected, want.depth)


def test_fused_needs_memo_and_incremental() -> None:
    with pytest.raises(ValueError, match="memo=True and incremental=True"):
        manager_model(fused=True)
    with pytest.raises(ValueError, match="memo=True and incremental=True"):
        manager_model(memo=True, incremental=False, fused=True)


# --- negative controls: the proof obligation is checked --------------------------------------------------------


@attrs.define
class _Checks:
    """A stand-in for `IncrementalChecks` with one projected step predicate (what `FusedSteps` reads)."""

    pred: Callable[..., None]
    proj: Callable[..., Hashable]
    passed: set = attrs.field(factory=set)

    @property
    def step_projections(self) -> tuple:
        return (self.proj,)

    step_always: tuple = ()

    def check_step(self, before: Any, act: Any, after: Any, result: Any = None) -> None:
        self.check_step_keys([self.proj(before, act, after, result)], before, act, after, result)

    def check_step_keys(self, keys: list, before: Any, act: Any, after: Any, result: Any = None) -> None:
        if keys[0] not in self.passed:
            self.pred(before, act, after, result)
            self.passed.add(keys[0])


def _no_press_during_a_change(before: Any, act: Any, after: Any, result: Any = None) -> None:
    # A harm that reads a part (the pending limit changes) outside Press's footprint (ledger, pressures, next id).
    if isinstance(act, M.Press) and before.changes:
        raise InvariantViolation("TOY", f"{act!r} pressed during a limit change", clause="toy.press_during_change")


def _reads_changes(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
    return act, before.changes


def _toy_walk(proj: Callable[..., Hashable], trusting: bool = False) -> tuple[list, list, FusedSteps]:
    memo = MemoStep(lambda s, a: MG.step(s, a), (GovernorError,))
    fused = FusedSteps(_Checks(_no_press_during_a_change, proj), memo)  # type: ignore[arg-type]
    if trusting:  # the proof skipped: every projection taken to read only its action's footprint
        fused._outside = lambda *args: ()  # type: ignore[method-assign]
    return _judge_walk(QUICK_SCOPE, ALL_ON, 3, fused, memo, _no_press_during_a_change)


def test_a_part_read_outside_the_footprint_joins_the_fused_key() -> None:
    want, got, fused = _toy_walk(_reads_changes)
    assert any(v is not None for *_, v in want)  # the toy harm occurs in the walk
    assert got == want
    assert fused.extra[M.Press] == ("changes",) and fused.fused > 0


def test_a_judge_that_skips_the_proof_lets_a_harm_through() -> None:
    # Negative control for the differential: trusting the footprint alone reuses a Press's pass on a state whose
    # pending changes differ, and the walk's verdicts then differ from the full ones.
    want, got, _ = _toy_walk(_reads_changes, trusting=True)
    assert got != want
    missed = [(a, w, g) for (_, a, w), (_, _, g) in zip(want, got) if w != g]
    assert missed and all(isinstance(a, M.Press) and w is not None and g is None for a, w, g in missed)


def test_a_projection_that_uses_the_whole_state_is_refuted() -> None:
    def whole(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
        return act, before.changes, before

    want, got, fused = _toy_walk(whole)
    assert got == want and fused.fused == 0
    assert "whole state" in fused.refuted[M.Submit]


def test_a_projection_whose_reads_depend_on_values_is_refuted() -> None:
    def branching(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
        # Outside Press's footprint, the transactions decide whether the bundles are read too (a projection still
        # right for its predicate, which reads the changes).
        return (act, before.changes, before.bundles) if before.txs else (act, before.changes)

    want, got, fused = _toy_walk(branching)
    assert got == want
    assert "read" in fused.refuted[M.Press] and "earlier state" in fused.refuted[M.Press]


def test_a_projection_reading_a_non_part_is_refuted() -> None:
    def odd(before: Any, act: Any, after: Any, result: Any = None) -> Hashable:
        return act, before.changes, getattr(before, "__attrs_attrs__")

    want, got, fused = _toy_walk(odd)
    assert got == want and fused.fused == 0 and fused.refuted
