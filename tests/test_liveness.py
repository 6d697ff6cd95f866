"""Liveness under fairness (`invariants.liveness`, `invariants.liveness_props`): I13, I12, I8c and C4 checked on
whole scopes, each with a negative control whose lasso (prefix, then a cycle forever) replays step by step.
"""

from __future__ import annotations

import pytest

from invariants import liveness_props as LP
from invariants import manager_tx_scope as TS
from invariants.liveness import Graph, Lasso, build_graph, fair_cycle, render_lasso, sccs
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.catalog import entry
from spec.guards import ALL_ON, GuardSet
from spec.records import evolve
from spec.tickets import TicketState

PIDS = list(LP.PROPERTIES)


def test_sccs_finds_each_component() -> None:
    edges = {0: [1], 1: [2], 2: [0, 3], 3: [4], 4: [3], 5: []}
    comps = sorted(sorted(c) for c in sccs(lambda v: edges[v], range(6)))
    assert comps == [[0, 1, 2], [3, 4], [5]]


@pytest.mark.parametrize("pid", PIDS)
def test_property_holds_on_the_whole_scope_with_every_guard_on(pid: str) -> None:
    r = LP.check_liveness(pid)
    assert r.status == "verified" and r.complete and r.lasso is None, r.reason
    assert r.states > 40 and r.transitions > r.states and r.diameter > 5
    assert r.fairness == entry(pid).liveness and "Fairness:" in r.fairness  # the catalog states it


def _replays(pid: str, guards: GuardSet, lasso: Lasso) -> None:
    """The lasso is a run of the scope: each listed state is the step's successor; the cycle closes."""
    model = LP.PROPERTIES[pid][1](guards)
    s = lasso.initial
    assert s == model.initial
    for a, listed in (*lasso.prefix, *lasso.cycle):
        s = model.step(s, a)
        assert s == listed, (a, s, listed)
    if lasso.cycle:
        start = lasso.prefix[-1][1] if lasso.prefix else lasso.initial
        assert lasso.cycle[-1][1] == start


@pytest.mark.parametrize("pid", PIDS)
def test_guard_off_yields_a_lasso_printed_with_states(pid: str) -> None:
    guard = LP.PROPERTIES[pid][3]
    r = LP.check_liveness(pid, GuardSet.without(guard))
    assert r.status == "violated" and r.lasso is not None
    _replays(pid, GuardSet.without(guard), r.lasso)
    text = render_lasso(r.lasso)
    steps = len(r.lasso.prefix) + len(r.lasso.cycle)
    assert text.count("\n     -> ") == steps and text.startswith(" 0. (initial)\n     ")
    assert ("-- cycle: steps" in text) == bool(r.lasso.cycle)


def test_aging_off_starves_a_ticket_in_a_cycle_that_returns_capacity() -> None:
    r = LP.check_liveness("I13", GuardSet.without("aging"))
    assert r.lasso is not None and r.lasso.cycle
    start = r.lasso.prefix[-1][1] if r.lasso.prefix else r.lasso.initial
    cycle = [start, *(s for _, s in r.lasso.cycle)]
    # The watched ticket is pending in every state of the cycle, and a lease is released in it: the harm.
    assert all(s.watched is not None and s.m.tickets[s.watched].state is TicketState.PENDING for s in cycle)
    assert any(isinstance(a, A.Release) for a, _ in r.lasso.cycle)


def test_kv_admission_off_leaves_a_request_that_can_never_finish() -> None:
    r = LP.check_liveness("I12", GuardSet.without("kv_admission_fits"))
    end = (r.lasso.cycle or r.lasso.prefix)[-1][1]
    assert any(q.held < q.peak and q.peak - q.held > end.free for q in end.requests.values())


def test_without_the_fairness_condition_aging_on_would_be_flagged() -> None:
    # The fairness antecedent carries weight: a cycle in which nobody returns a lease (submit, cancel) keeps
    # a ticket pending with aging on; only a cycle that returns capacity is a starvation.
    g = build_graph(LP.starvation_model(ALL_ON))
    assert fair_cycle(g, LP.pending_watched, lambda s, a, n: True) is not None
    assert fair_cycle(g, LP.pending_watched, LP.capacity_returns) is None


def _c4_cycle(lasso: Lasso) -> list[tuple[LP.Client, M.Manager, M.Manager]]:
    """The cycle's steps as (action, state before, state after)."""
    start = lasso.prefix[-1][1] if lasso.prefix else lasso.initial
    states = [start, *(s for _, s in lasso.cycle)]
    return [(a, states[i], states[i + 1]) for i, (a, _) in enumerate(lasso.cycle)]


def test_ordered_reservation_off_livelocks_in_aborts_with_no_commit() -> None:
    r = LP.check_liveness("C4", GuardSet.without("ordered_reservation"))
    assert r.status == "violated" and r.lasso is not None and r.lasso.cycle
    steps = _c4_cycle(r.lasso)
    # The harm: forever, reservations miss and their transactions abort, and no transaction ever commits
    # (none even holds every reservation), while both clients keep moving (the cycle is fair to each).
    assert not any(isinstance(a.act, M.CommitTx) for a, _, _ in steps)
    aborted = {a.client for a, p, n in steps if TS.aborts(p, a, n)}
    assert aborted == {0, 1}
    assert all(any(i.holder == a.client + 1 for i in n.intents.values()) for a, p, n in steps if TS.aborts(p, a, n))
    assert all(len(t.held) < len(t.needs) for _, p, _ in steps for t in p.txs.values())
    # Each retry names its intent and keeps its place: the livelock is the order's, not a lost identity.
    assert any(isinstance(a.act, M.PlanTx) and a.act.retry is not None for a, _, _ in steps)
    assert "cycle" in render_lasso(r.lasso)


def test_weak_fairness_of_each_client_carries_weight() -> None:
    # With ordered reservation on, a cycle of aborts without a commit exists: one client holds the first
    # authority and never moves while the other misses it forever. Only weak fairness rules it out.
    g = build_graph(LP.retry_model(ALL_ON))
    unfair = fair_cycle(g, lambda s: True, TS.aborts, (), TS.no_commit)
    assert unfair is not None and {a.client for a, _ in unfair.cycle} == {1}
    assert LP._c4(g) is None


def _spread(m: M.Manager) -> tuple[M.Manager, dict[int, int], dict[int, int]]:
    """The same manager with transaction/intent ids, sequences and allocation ids spread out (order kept)."""
    ids = {x: 2 * x + 3 for x in {*m.txs, *m.intents}}
    seq = {q: 4 * q + 1 for q in {r.seq for r in (*m.txs.values(), *m.intents.values())}}
    allocs = {a: 3 * a + 1 for a in m.ledger.allocations}
    txs = {ids[x.id]: evolve(x, id=ids[x.id], seq=seq[x.seq], held=tuple(allocs[a] for a in x.held))
           for x in m.txs.values()}
    intents = {ids[i.id]: evolve(i, id=ids[i.id], seq=seq[i.seq]) for i in m.intents.values()}
    records = {allocs[r.id]: evolve(r, id=allocs[r.id]) for r in m.ledger.allocations.values()}
    ledger = evolve(m.ledger, allocations=m.ledger.allocations.__class__(records),
                    next_allocation=max(allocs.values(), default=0) + 5)
    wide = evolve(m, ledger=ledger, txs=m.txs.__class__(txs), intents=m.intents.__class__(intents),
                  next_tx=max(ids.values(), default=0) + 4)
    return wide, ids, allocs


def _renamed(act: LP.Client, ids: dict[int, int], allocs: dict[int, int]) -> LP.Client:
    a = act.act
    if isinstance(a, M.PlanTx):
        a = evolve(a, retry=None if a.retry is None else ids[a.retry])
    elif isinstance(a, A.Release):
        a = evolve(a, allocation=allocs[a.allocation])
    else:
        a = evolve(a, tx=ids[a.tx])
    return LP.Client(act.client, a)


@pytest.mark.parametrize("guards", [ALL_ON, GuardSet.without("ordered_reservation")], ids=["all-on", "order-off"])
def test_recycled_tx_ids_step_as_the_original_ids_do(guards: GuardSet) -> None:
    model = LP.retry_model(guards)
    g = build_graph(model)
    assert g.complete and any(i.age == 2 for s in g.states for i in s.intents.values())  # the capped age is reached
    _steps_as_the_original_ids(model, g, _spread, LP.canonical_retry, _renamed)


def _steps_as_the_original_ids(model, g: Graph, spread, canonical, rename) -> None:
    """Every state of `g` with its ids spread out canonicalises back to it, and each action, renamed, steps it
    (or is refused) as the original action steps the original state."""
    for s in g.states:
        wide, ids, allocs = spread(s)
        assert canonical(wide) == s
        for a in model.actions(s):
            try:
                want = model.step(s, a)
            except model.rejects as e:
                with pytest.raises(type(e)):
                    model.step(wide, rename(a, ids, allocs))
                continue
            assert model.step(wide, rename(a, ids, allocs)) == want, (s, a)


def test_state_bound_makes_the_verdict_partial() -> None:
    r = LP.check_liveness("I13", max_states=100)
    assert r.status == "partial" and not r.complete and "state bound 100" in r.reason


def _shifted(s: LP.Watched) -> tuple[LP.Watched, dict[int, int], dict[int, int]]:
    """The same manager with ticket and allocation ids spread out (order kept), as before any renaming."""
    m = s.m
    ids = {t: 2 * t + 3 for t in m.tickets}
    allocs = {a: 3 * a + 1 for a in m.ledger.allocations}
    tickets = m.tickets.__class__({ids[t.id]: evolve(t, id=ids[t.id], allocation=allocs.get(t.allocation))
                                   for t in m.tickets.values()})
    records = m.ledger.allocations.__class__({allocs[r.id]: evolve(r, id=allocs[r.id])
                                              for r in m.ledger.allocations.values()})
    ledger = evolve(m.ledger, allocations=records, next_allocation=max(allocs.values(), default=0) + 5)
    wide = evolve(m, ledger=ledger, tickets=tickets, next_ticket=max(ids.values(), default=0) + 4)
    return LP.Watched(wide, None if s.watched is None else ids[s.watched]), ids, allocs


def _rename(act: object, ids: dict[int, int], allocs: dict[int, int]) -> object:
    if hasattr(act, "ticket"):
        return evolve(act, ticket=ids[act.ticket])
    return evolve(act, allocation=allocs[act.allocation]) if hasattr(act, "allocation") else act


@pytest.mark.parametrize("guards", [ALL_ON, GuardSet.without("aging")], ids=["all-on", "aging-off"])
def test_recycled_ids_step_as_the_original_ids_do(guards: GuardSet) -> None:
    model = LP.starvation_model(guards)
    g: Graph = build_graph(model)
    _steps_as_the_original_ids(model, g, _shifted, LP.canonical, _rename)


def test_verify_phase_reports_each_property_and_control_lasso_with_states() -> None:
    from refimpl.cli_report import liveness_lines, report_json, report_markdown
    from refimpl.verify import Report

    runs, controls = LP.run_liveness(("pressure", "admission", "transactions"))
    assert LP.liveness_ok(runs, controls) and set(controls) == {"aging", "kv_admission_fits",
                                                               "elastic_guaranteed_path", "ordered_reservation"}
    r = Report(True, "quick", (), {}, {}, (), 0.0, liveness=runs, liveness_controls=controls)
    lines = liveness_lines(r)
    assert lines[0].startswith("liveness I13 (starvation): verified on ") and "complete, diameter" in lines[0]
    assert any(line.startswith("liveness C4 (tx_retry): verified on ") for line in lines)
    assert "liveness control ordered_reservation off (C4): violated, a lasso of " in "\n".join(lines)
    assert "liveness control aging off (I13): violated, a lasso of " in "\n".join(lines)
    md = report_markdown(r)
    assert "### `aging` off (I13): violated" in md and "-- cycle: steps" in md and "     -> Watched(" in md
    j = report_json(r)
    lasso = j["liveness_controls"]["aging"]["lasso"]
    trace = lasso["trace"]
    # ITF lasso: the prefix and the cycle (its closing state left out), `loop` the cycle's first state.
    assert len(trace["states"]) == 1 + lasso["prefix_steps"] + lasso["cycle_steps"] - 1
    assert trace["loop"] == lasso["prefix_steps"] and trace["#meta"]["loop_action"].startswith(("Claim", "Submit",
                                                                                                "Release", "Watch"))
    assert j["liveness"]["C4"]["status"] == "verified" and j["liveness"]["C4"]["complete"]
    assert j["liveness"]["I12"]["complete"] and j["liveness_controls"]["ordered_reservation"]["lasso"]["cycle_steps"]


def test_a_control_without_a_lasso_or_a_violation_fails_the_verdict() -> None:
    runs, controls = LP.run_liveness(("admission",))
    assert LP.liveness_ok(runs, controls)
    assert not LP.liveness_ok(runs, {**controls, "kv_admission_fits": runs["I12"]})  # a control that found nothing
    assert not LP.liveness_ok({**runs, "I12": controls["kv_admission_fits"]}, controls)  # violated, guards on
