"""The fast explorers give the full, serial verdicts: incremental checks (`invariants.explore_checks`) flag exactly
the transitions and states the full registries flag, and the parallel explorer (`invariants.explore_parallel`)
counts the serial explorer's states and finds its shortest counterexamples. (C3 I1 I2 I6 I13)"""

from __future__ import annotations

from collections import deque

import pytest
from clause_harness import verdict as _verdict  # test_mutkill_explore_checks imports it from here

from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.explore import explore
from invariants.explore_checks import READS, IncrementalChecks, bundles_step_of, generations_of, ledger_of, \
    ledger_step_of, parts_of, parts_step_of, parts_uses_step_of, pressure_step_of, removal_step_of, tickets_step_of, \
    views_of, views_step_of, view_bytes_step_of, order_step_of, answers_step_of, intents_of, intents_step_of, \
    poisoned_step_of, holds_of, abort_step_of, holders_step_of, quota_step_of, tickets_of
from invariants.manager_answers import step_C5_answers
from invariants.manager_holders import step_I4a_holders
from invariants.manager_quota import step_I1_quota
from invariants.manager_tickets import state_I1_tickets
from invariants.manager_tx import state_C4_holds, state_C4_intents, step_C4_intents, step_I5_abort, step_I5_poisoned
from invariants.manager_order import step_I13_order
from invariants.explore_parallel import explore_parallel
from invariants.ledger_scope import CONTROL_SCOPE as LEDGER_CONTROL_SCOPE
from invariants.ledger_scope import QUICK_SCOPE as LEDGER_QUICK_SCOPE
from invariants.ledger_scope import ledger_model
from invariants.manager_scope import CONTROL_SCOPE, CONTROLS, manager_model
from spec import manager as MG
from spec.errors import GovernorError
from spec.guards import GUARDS, ALL_ON, GuardSet

_MANAGER_GUARDS = sorted(g.name for g in GUARDS if g.model == "manager")
_LEDGER_GUARDS = [g.name for g in GUARDS if g.model == "ledger"]


def _judge_scope(guards: GuardSet, depth: int, reads=READS, scope=None) -> tuple[list, list, IncrementalChecks]:
    """Every transition and state of `scope` (default: the guard's control scope, CONTROL_SCOPE with every guard on)
    within `depth`, judged by the full and the incremental checks (not stopping at a violation): the list of
    (where, full verdict) and of (where, incremental verdict)."""
    scope = CONTROLS.get(next(iter(guards.off), ""), CONTROL_SCOPE) if scope is None else scope
    model = manager_model(guards, scope, incremental=False)
    inc = IncrementalChecks(reads)
    full_flags, inc_flags = [], []
    seen = {model.initial}
    frontier = deque([(model.initial, 0)])
    while frontier:
        m, d = frontier.popleft()
        full_flags.append((m, _verdict(IM.check_all, m)))
        inc_flags.append((m, _verdict(inc.check_state, m)))
        if d == depth:
            continue
        for act in model.actions(m):
            try:
                nxt, result = MG.step(m, act, guards)
            except model.rejects:
                continue
            full_flags.append(((m, act), _verdict(IM.check_step, m, act, nxt, result)))
            inc_flags.append(((m, act), _verdict(inc.check_step, m, act, nxt, result)))
            if nxt not in seen:
                seen.add(nxt)
                frontier.append((nxt, d + 1))
    return full_flags, inc_flags, inc


@pytest.mark.parametrize("guards", [ALL_ON, *(GuardSet.without(g) for g in _MANAGER_GUARDS)],
                         ids=["all_on", *_MANAGER_GUARDS])
def test_incremental_checks_flag_exactly_what_the_full_checks_flag(guards: GuardSet) -> None:
    full, inc, checks = _judge_scope(guards, 3)
    assert inc == full
    assert checks.skipped > checks.evaluated > 0  # the scope repeats ledgers: the skip is exercised
    if guards != ALL_ON:
        assert any(v is not None for _, v in full)  # the guard's harm occurs in the scope


def test_incremental_checks_skip_only_declared_predicates() -> None:
    # The ledger's own predicates read the ledger part; each cross-cutting one its declared parts.
    own = {IM.step_C3_manager: removal_step_of, IM.step_I2_manager: ledger_step_of,
           IM.state_I1_manager: parts_of, IM.state_I13_manager: parts_of, IM.state_C3_manager: parts_of,
           IM.step_I1_manager: parts_step_of, IM.step_I6_manager: parts_uses_step_of, IM.step_I10_manager: bundles_step_of,
           IM.step_C5_manager: pressure_step_of, IM.step_I13_manager: tickets_step_of,
           IM.state_I13_generation: generations_of, IM.state_C4_views: views_of, IM.state_C6_views: views_of,
           IM.step_I9_views: views_step_of, IM.step_C6_views: view_bytes_step_of, step_I13_order: order_step_of,
           step_C5_answers: answers_step_of, step_C4_intents: intents_step_of, state_C4_intents: intents_of,
           state_C4_holds: holds_of, step_I5_abort: abort_step_of, step_I5_poisoned: poisoned_step_of,
           step_I4a_holders: holders_step_of, step_I1_quota: quota_step_of, state_I1_tickets: tickets_of}
    for p, proj in READS.items():
        assert proj is own[p] if p in own else (hasattr(p, "__wrapped__") and proj in (ledger_of, ledger_step_of)), p
    every = {p for preds in (*IM.STATE_PREDICATES.values(), *IM.STEP_PREDICATES.values()) for p in preds}
    assert set(READS) == every  # today every predicate is declared; one added later runs always (the default)


# Negative controls: a projection that leaves out a part its predicate reads lets a harm through, because the
# predicate passed on the same projection earlier, with another value of the omitted part.
_WRONG_READS = [
    ("I1 partition on the ledger only", IM.state_I1_manager, ledger_of, "grant_charges_ledger"),
    ("I1 partition without the tickets", IM.state_I1_manager, lambda m: (m.ledger, m.txs, m.aging_bound),
     "grant_charges_ledger"),
    ("I2 on the action only", IM.step_I2_manager, lambda before, act, after, result=None: act, "limit_after_reclaim"),
    ("C3 removal on the ledgers only", IM.step_C3_manager, ledger_step_of, "provider_pinned"),
    ("I4a on the registries only", step_I4a_holders,
     lambda before, act, after, result=None: (before.ledger.holders, after.ledger.holders), "holder_in_use"),
]


@pytest.mark.parametrize(("what", "pred", "proj", "guard"), _WRONG_READS, ids=[w[0] for w in _WRONG_READS])
def test_a_projection_missing_a_read_part_is_caught(what: str, pred, proj, guard: str) -> None:
    full, inc, _ = _judge_scope(GuardSet.without(guard), 3, {**READS, pred: proj})
    assert inc != full, what


def test_incremental_checks_report_a_failure_seen_before() -> None:
    # A failure is never remembered as a pass: the same bad state is flagged every time.
    model = manager_model(GuardSet.without("grant_charges_ledger"), CONTROL_SCOPE, incremental=True)
    r = explore(model, max_depth=3)
    assert r.found
    s = model.initial
    for a in r.counterexample:
        s = model.step(s, a)
    inc = IncrementalChecks()
    assert _verdict(inc.check_state, s) == _verdict(inc.check_state, s) == r.clause


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_incremental_explorer_finds_each_control_as_the_full_one(name: str) -> None:
    full = explore(manager_model(GuardSet.without(name), CONTROLS[name], incremental=False), max_depth=6)
    inc = explore(manager_model(GuardSet.without(name), CONTROLS[name], incremental=True), max_depth=6)
    assert full.found
    assert (inc.counterexample, inc.clause, inc.clauses, inc.states) == (
        full.counterexample, full.clause, full.clauses, full.states)


def test_parallel_counts_the_serial_states_on_the_composed_scope() -> None:
    serial = explore(manager_model(), max_depth=3)
    par = explore_parallel(manager_model(), max_depth=3, workers=2)
    assert not serial.found and not par.found and par.exhausted
    assert (par.states, par.transitions, par.rejected, par.depth) == (
        serial.states, serial.transitions, serial.rejected, serial.depth)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_counts_the_serial_states_on_the_ledger_scope(workers: int) -> None:
    serial = explore(ledger_model(LEDGER_QUICK_SCOPE), max_depth=5)
    par = explore_parallel(ledger_model(LEDGER_QUICK_SCOPE), max_depth=5, workers=workers)
    assert not par.found and par.exhausted
    assert (par.states, par.transitions, par.rejected, par.depth) == (
        serial.states, serial.transitions, serial.rejected, serial.depth)


@pytest.mark.parametrize("name", _MANAGER_GUARDS)
def test_parallel_finds_each_manager_control_shortest_as_serial(name: str) -> None:
    serial = explore(manager_model(GuardSet.without(name), CONTROLS[name]), max_depth=6)
    par = explore_parallel(manager_model(GuardSet.without(name), CONTROLS[name]), max_depth=6, workers=2)
    assert serial.found and par.found
    assert (par.counterexample, par.violated, par.clause, par.clauses, par.message) == (
        serial.counterexample, serial.violated, serial.clause, serial.clauses, serial.message)


@pytest.mark.parametrize("name", _LEDGER_GUARDS)
def test_parallel_finds_each_ledger_control_shortest_as_serial(name: str) -> None:
    serial = explore(ledger_model(LEDGER_CONTROL_SCOPE, GuardSet.without(name)), max_depth=8)
    par = explore_parallel(ledger_model(LEDGER_CONTROL_SCOPE, GuardSet.without(name)), max_depth=8, workers=2)
    assert serial.found and par.found
    assert (par.counterexample, par.violated, par.clause, par.clauses) == (
        serial.counterexample, serial.violated, serial.clause, serial.clauses)


def test_parallel_dedup_numbers_a_state_by_its_least_arrival() -> None:
    # Fingerprint 7 arrives from worker 0 by (5, 0) and from worker 1 by (2, 1): the serial explorer meets it
    # first by (2, 1), so that is its parent pointer; fingerprint 4, seen before, is dropped.
    from array import array

    from invariants.explore_parallel import _dedup

    def reply(fps, par, act):
        return (None, 0, 0, None, array("q", fps), array("q", par), array("q", act), 0.0)

    seen = {4}
    keep, parents = _dedup([reply([7, 9, 4], [5, 5, 0], [0, 1, 0]), reply([7], [2], [1])], seen, 2)
    assert parents == [(2, 1), (5, 1)]
    assert keep == [[(1, 1)], [(0, 0)]]  # 7 is held by worker 7 % 2 == 1 (its index 0), 9 by its only maker
    assert seen == {4, 7, 9}


def _toy(fail_at: int | None, crash_at: int | None = None):
    # A counter stepping +1 or +2 up to 9; the invariant says it never equals fail_at.
    from invariants.explore import Model

    def step(s: int, a: int) -> int:
        if s + a == crash_at:
            raise ValueError(f"model bug at {s + a}")
        if s + a > 9:
            raise OverflowError
        return s + a

    def check(s: int) -> None:
        if s == fail_at:
            raise InvariantViolation("TOY", f"counter reached {s}")

    return Model("toy", 0, step, lambda s: (1, 2), check, lambda s, a, n: None, rejects=(OverflowError,))


def test_parallel_reports_the_serial_shortest_counterexample_on_a_toy() -> None:
    serial, par = explore(_toy(5), max_depth=9), explore_parallel(_toy(5), max_depth=9, workers=2)
    assert serial.counterexample == par.counterexample == (1, 2, 2)  # lexicographically least of the shortest
    assert par.violated == "TOY" and par.message == serial.message


def test_parallel_reraises_a_model_error_instead_of_hanging() -> None:
    with pytest.raises(ValueError, match="model bug at 4"):
        explore_parallel(_toy(None, crash_at=4), max_depth=9, workers=2)


def test_the_explorers_run_without_the_cyclic_gc_and_restore_it() -> None:
    import gc

    from invariants.explore import Model

    seen: list[bool] = []

    def check(s: int) -> None:
        seen.append(gc.isenabled())

    toy = Model("toy", 0, lambda s, a: s + a if s + a <= 5 else (_ for _ in ()).throw(OverflowError()),
                lambda s: (1,), check, lambda s, a, n: None, rejects=(OverflowError,))
    assert gc.isenabled()
    r = explore(toy, max_depth=9)
    assert r.states == 6 and seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        explore(toy, max_depth=9)
        assert not gc.isenabled()  # restored as it was
    finally:
        gc.enable()
    assert explore_parallel(toy, max_depth=9, workers=2).states == 6 and gc.isenabled()


def _bundle_start():
    from invariants.manager_scope import ManagerScope, manager_start

    return manager_start(ManagerScope(tickets=1, pressures=1, txs=1, needs=(((1, 1),),), losses=False, limits=False))


def test_bundle_projection_flags_a_bundle_moved_without_its_commit() -> None:
    # I10's projection (`bundles_step_of`) keeps both bundles maps: a Press that passed once is judged again when it
    # moves a bundle, and a projection of the action alone (negative control) skips that harm.
    from spec import manager_actions as M
    from spec.records import evolve

    m = _bundle_start()
    act = M.Press(1, 1, 1)
    good, result = MG.step(m, act)
    (bid, b), = m.bundles.items()
    bad = evolve(good, bundles=m.bundles.set(bid, evolve(b, versions=tuple(v + 1 for v in b.versions))))
    right, wrong = IncrementalChecks(), IncrementalChecks({**READS, IM.step_I10_manager: lambda *a, **k: act})
    for checks in (right, wrong):
        assert _verdict(checks.check_step, m, act, good, result) is None
    assert _verdict(IM.check_step, m, act, bad, result) == "step_I10_manager.bundle_moves_with_its_leases"
    assert _verdict(right.check_step, m, act, bad, result) == "step_I10_manager.bundle_moves_with_its_leases"
    assert _verdict(wrong.check_step, m, act, bad, result) is None


def test_incremental_checks_flag_exactly_what_the_full_checks_flag_with_a_bundle() -> None:
    # CONTROL_SCOPE opens no bundle; I10's projection is compared here, every step of a scope with one.
    from invariants.manager_scope import ManagerScope, manager_actions

    scope = ManagerScope(tickets=1, pressures=1, txs=1, needs=(((1, 1),),), losses=False, limits=False)
    m0 = _bundle_start()
    from spec import manager_actions as M

    inc, seen, frontier, n, moved = IncrementalChecks(), {m0}, deque([(m0, 0)]), 0, 0
    while frontier:
        m, d = frontier.popleft()
        if d == 5:
            continue
        for act in manager_actions(scope, m):
            try:
                nxt, result = MG.step(m, act)
            except GovernorError:
                continue
            n += 1
            moved += nxt.bundles != m.bundles and isinstance(act, M.CommitTx)
            assert _verdict(inc.check_step, m, act, nxt, result) == _verdict(IM.check_step, m, act, nxt, result)
            if nxt not in seen:
                seen.add(nxt)
                frontier.append((nxt, d + 1))
    assert n > 1000 and inc.skipped > inc.evaluated and moved > 0  # a bundle moves with a commit in the walk


def test_parallel_level_records_add_up_to_the_result() -> None:
    # The per-level record (coordinator vs workers) counts each level's new states once and sums to the CPU totals.
    levels: list[dict] = []
    r = explore_parallel(ledger_model(LEDGER_QUICK_SCOPE), max_depth=5, workers=2, levels=levels)
    assert [lv["level"] for lv in levels] == list(range(6))
    assert 1 + sum(lv["new"] for lv in levels) == r.states
    assert [lv["expanded"] for lv in levels[1:5]] == [lv["new"] for lv in levels[:4]]
    # The result's critical path is the coordinator's own CPU plus each level's busiest worker (records rounded).
    assert 0 < sum(lv["worker_cpu_max"] for lv in levels) <= r.critical_cpu_seconds + 1e-3 * len(levels)
    assert sum(lv["worker_cpu_sum"] for lv in levels) <= r.cpu_seconds + 1e-3 * len(levels)
    assert all(lv["worker_cpu_sum"] >= lv["worker_cpu_max"] >= 0 and lv["coordinator_cpu_seconds"] >= 0 for lv in levels)
