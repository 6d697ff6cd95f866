"""What the liveness checkers' mutants (benchmarks/mutation.py) showed test_liveness leaves unstated: the
starvation scope's exact states and steps, each property's exact lasso (prefix and cycle states), the property
and fairness named, and the SCC / fair-cycle / trap searches on small hand-made graphs where a weakened
fairness condition or component test changes the verdict.
"""

from __future__ import annotations

import random
import time

import pytest

from invariants import liveness_props as LP
from invariants import manager_starvation as MS
from invariants.explore import Model, explore
from invariants.liveness import Lasso, build_graph, fair_cycle, lasso_itf, render_lasso, sccs, trap
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.catalog import LIVENESS
from spec.guards import ALL_ON, GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, Tier


# --- invariants/manager_starvation.py: I13's scope -----------------------------------------------------------------


def test_starvation_scope_starts_with_one_holder_and_a_2_byte_device() -> None:
    model = MS.starvation_model()
    assert model.name == "starvation" and model.initial.watched is None
    m = model.initial.m
    assert m.aging_bound == 2 and not m.tickets and not m.ledger.allocations
    assert [(h.id, h.name) for h in m.ledger.holders.values()] == [(1, "h")]
    assert [(a.id, a.pool, a.tier, a.capacity, a.limit) for a in m.ledger.authorities.values()] == [
        (1, "dev", Tier.DEVICE, 2, 2)]
    # It is a Model the explorer can run too: its checks are callables that find nothing.
    r = explore(model, max_depth=3)
    assert r.violated is None and r.states > 20


def _subs(prios: tuple[int, ...] = (0, 1)) -> list[M.Submit]:
    return [M.Submit(1, 1, n, p) for n in (1, 2) for p in prios]


def test_actions_submit_each_size_and_priority_watch_one_ticket_and_keep_three_in_the_table() -> None:
    model = MS.starvation_model()
    s0 = model.initial
    assert list(model.actions(s0)) == [x for sub in _subs() for x in (sub, MS.Watch(sub))]
    s1 = model.step(s0, MS.Watch(M.Submit(1, 1, 1, 1)))  # a pending-then-granted ticket, watched
    assert s1.watched == 1 and s1.m.tickets[1].state is TicketState.GRANTED and s1.m.tickets[1].priority == 1
    assert list(model.actions(s1)) == [*_subs(), M.Claim(1, 1), M.CancelTicket(1, 1)]  # no second watch
    s2 = model.step(s1, M.Claim(1, 1))  # claimed: the ticket retires, its lease is live, the watch clears
    assert s2.watched is None and not s2.m.tickets
    assert list(model.actions(s2)) == [x for sub in _subs() for x in (sub, MS.Watch(sub))] + [A.Release(1, 1)]
    s3 = model.step(model.step(s2, M.Submit(1, 1, 1, 0)), M.Submit(1, 1, 2, 0))  # table full: 2 tickets + 1 lease
    assert list(model.actions(s3)) == [M.Claim(1, 1), M.CancelTicket(1, 1), M.Claim(1, 2), M.CancelTicket(1, 2),
                                       A.Release(1, 1)]
    s4 = model.step(s3, M.CancelTicket(1, 1))
    assert s4.watched is None and list(s4.m.tickets) == [1] and s4.m.tickets[1].nbytes == 2  # renamed 2 -> 1
    assert M.Submit(1, 1, 1, 0) in list(model.actions(s4))


@pytest.mark.parametrize("guards", [ALL_ON, GuardSet.without("aging")], ids=["all-on", "aging-off"])
def test_every_state_is_renamed_from_one_and_watches_a_live_ticket(guards: GuardSet) -> None:
    g = build_graph(MS.starvation_model(guards))
    for s in g.states:
        m = s.m
        assert list(m.tickets) == list(range(1, len(m.tickets) + 1)) and m.next_ticket == len(m.tickets) + 1
        assert sorted(m.ledger.allocations) == list(range(1, len(m.ledger.allocations) + 1))
        assert m.ledger.next_allocation == len(m.ledger.allocations) + 1
        assert all(t.allocation in m.ledger.allocations for t in m.tickets.values() if t.allocation is not None)
        assert s.watched is None or s.watched in m.tickets
        live = [r for r in m.ledger.allocations.values() if r.state is AllocState.LIVE]
        assert len(m.tickets) + len(live) <= 3 and all(r.nbytes in (1, 2) for r in live)
    assert any(s.watched is not None and s.m.tickets[s.watched].state is TicketState.PENDING for s in g.states)
    # Both the watched ticket granted and pending are reached; only pending counts.
    assert {MS.pending_watched(s) for s in g.states if s.watched is not None} == {True, False}
    assert not any(MS.pending_watched(s) for s in g.states if s.watched is None)


# --- invariants/liveness.py on hand-made graphs ------------------------------------------------------------------


def _toy(adj: dict[int, list[tuple[str, int]]]) -> Model:
    """A model whose states are ints and whose steps are `adj`'s labelled edges; each state also offers "x",
    which its step rejects (KeyError)."""
    table = {(s, a): n for s, out in adj.items() for a, n in out}
    return Model("toy", 0, lambda s, a: table[(s, a)], lambda s: [*(a for a, _ in adj[s]), "x"],
                 lambda s: None, lambda s, a, n: None, (KeyError,))


_G1 = {0: [("a", 1), ("b", 2)], 1: [("c", 2), ("d", 0)], 2: [("e", 3)], 3: []}


def test_build_graph_numbers_states_breadth_first_with_edges_parents_and_diameter() -> None:
    g = build_graph(_toy(_G1))
    assert g.model == "toy" and g.states == (0, 1, 2, 3) and g.complete
    assert g.edges == ((("a", 1), ("b", 2)), (("c", 2), ("d", 0)), (("e", 3),), ())  # rejected "x" left out
    assert g.parent == (None, (0, "a"), (0, "b"), (2, "e"))
    assert g.diameter == 2 and g.transitions == 5


def test_state_bound_keeps_that_many_states_and_drops_the_steps_into_the_rest() -> None:
    g = build_graph(_toy(_G1), max_states=2)
    assert g.states == (0, 1) and not g.complete and g.diameter == 1
    assert g.edges == ((("a", 1),), (("d", 0),))
    g = build_graph(_toy(_G1), max_states=3)
    assert g.states == (0, 1, 2) and not g.complete and g.edges[2] == ()
    assert build_graph(_toy(_G1), max_states=4).complete


def _brute_sccs(n: int, adj: dict[int, list[int]]) -> set[frozenset[int]]:
    reach = []
    for v in range(n):
        seen, todo = {v}, [v]
        while todo:
            for w in adj[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        reach.append(seen)
    return {frozenset(w for w in range(n) if w in reach[v] and v in reach[w]) for v in range(n)}


def test_sccs_agree_with_mutual_reachability_on_many_graphs() -> None:
    rnd = random.Random(7)
    for _ in range(300):
        n = rnd.randint(1, 8)
        adj = {v: [rnd.randrange(n) for _ in range(rnd.randint(0, 3))] for v in range(n)}
        comps = sccs(lambda v: adj[v], range(n))
        assert sorted(len(c) for c in comps) == sorted(len(c) for c in _brute_sccs(n, adj))
        assert {frozenset(c) for c in comps} == _brute_sccs(n, adj), adj


def test_sccs_lists_components_sinks_first_each_root_last() -> None:
    # A cross edge (3 -> 1) into a finished component must not merge it into 3's.
    edges = {0: [1, 3], 1: [2], 2: [1], 3: [1, 4], 4: [3]}
    assert sccs(lambda v: edges[v], range(5)) == [[2, 1], [4, 3], [0]]
    assert sccs(lambda v: edges[v], [3]) == [[2, 1], [4, 3]]  # only what `nodes` reaches


# G2: 0 -a-> 1 -p-> 2 -r-> 1, 1 -t-> 5 -u-> 1, 2 -w-> 4 (4 has no step), 1 -w-> 4, 0 -b-> 3 -s-> 3.
_G2 = {0: [("a", 1), ("b", 3)], 1: [("p", 2), ("t", 5), ("w", 4)], 2: [("r", 1), ("w", 4)], 3: [("s", 3)],
       4: [], 5: [("u", 1)]}


def _fair_cycle(fair: set[str], weak: tuple[str, ...] = (), stay=lambda s: True, along=lambda s, a, n: True,
                adj=_G2):
    g = build_graph(_toy(adj))
    return fair_cycle(g, stay, lambda s, a, n: a in fair, tuple((lambda a, p=p: a == p) for p in weak), along)


def test_fair_cycle_takes_the_fair_step_from_the_components_first_state() -> None:
    g = build_graph(_toy(_G2))
    assert g.states == (0, 1, 3, 2, 5, 4)
    lasso = _fair_cycle({"r"})
    assert lasso == Lasso(0, (("a", 1),), (("p", 2), ("r", 1)))
    # Two fair steps: the one from the component's first state in breadth-first order is the one taken.
    assert _fair_cycle({"r", "u"}) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1)))
    assert _fair_cycle({"u"}) == Lasso(0, (("a", 1),), (("t", 5), ("u", 1)))
    assert _fair_cycle({"s"}) == Lasso(0, (("b", 3),), (("s", 3),))
    assert _fair_cycle(set()) is None and _fair_cycle({"a", "w"}) is None  # no fair step inside a cycle


def test_fair_cycle_keeps_to_stay_states_and_along_steps() -> None:
    assert _fair_cycle({"r"}, stay=lambda s: s != 2) is None
    assert _fair_cycle({"r", "u"}, stay=lambda s: s != 2) == Lasso(0, (("a", 1),), (("t", 5), ("u", 1)))
    assert _fair_cycle({"r"}, along=lambda s, a, n: a != "p") is None
    assert _fair_cycle({"u"}, along=lambda s, a, n: a != "p") == Lasso(0, (("a", 1),), (("t", 5), ("u", 1)))
    assert _fair_cycle({"u"}, along=lambda s, a, n: (s, n) != (5, 1)) is None  # `along` sees the states


def test_weak_fairness_a_process_offered_everywhere_in_the_cycle_must_move() -> None:
    # "w" is offered in 1 and 2 and leaves the cycle; 5 offers it nothing, so the fair cycle passes through 5.
    assert _fair_cycle({"r"}, weak=("w",)) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1), ("t", 5), ("u", 1)))
    # "t" moves inside the component: the cycle takes it.
    assert _fair_cycle({"r"}, weak=("t",)) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1), ("t", 5), ("u", 1)))
    # Without 5, "w" is offered in every state of {1, 2} and never taken there: no fair cycle.
    assert _fair_cycle({"r"}, weak=("w",), stay=lambda s: s != 5) is None
    assert _fair_cycle({"r"}, weak=("t", "w"), stay=lambda s: s != 5) is None
    assert _fair_cycle({"r"}, weak=("w", "t"), stay=lambda s: s != 5) is None
    # "s" is offered only in 3: idle everywhere in {1, 2}.
    assert _fair_cycle({"r"}, weak=("s",), stay=lambda s: s != 5) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1)))


def test_fair_cycle_passes_an_idle_state_then_the_fair_step() -> None:
    # The fair step (u: 5 -> 1) comes first, then the idle state for "w" (5 again: reached by t), then home.
    lasso = _fair_cycle({"p"}, weak=("w",))
    assert lasso == Lasso(0, (("a", 1),), (("p", 2), ("r", 1), ("t", 5), ("u", 1)))
    assert _fair_cycle({"u"}, weak=("p",)) == Lasso(0, (("a", 1),), (("t", 5), ("u", 1), ("p", 2), ("r", 1)))


def test_fair_cycle_judges_the_step_from_its_source_state() -> None:
    g = build_graph(_toy(_G2))
    assert fair_cycle(g, lambda s: True, lambda s, a, n: (s, n) == (2, 1)) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1)))
    assert fair_cycle(g, lambda s: True, lambda s, a, n: s == 5) == Lasso(0, (("a", 1),), (("t", 5), ("u", 1)))


# G2 with two more steps inside the component {1, 2, 5}: 5 -v-> 2 and 2 -y-> 5.
_G2V = {**_G2, 2: [("r", 1), ("w", 4), ("y", 5)], 5: [("u", 1), ("v", 2)]}


def test_every_path_the_cycle_takes_keeps_to_along_steps() -> None:
    # The way to the fair step: p is off `along`, so 1 -> 2 goes round by 5.
    assert _fair_cycle({"r"}, along=lambda s, a, n: a != "p", adj=_G2V) == Lasso(
        0, (("a", 1),), (("t", 5), ("v", 2), ("r", 1)))
    # The way home: u is off `along`, so 5 -> 1 goes by 2.
    assert _fair_cycle({"t"}, along=lambda s, a, n: a != "u", adj=_G2V) == Lasso(
        0, (("a", 1),), (("t", 5), ("v", 2), ("r", 1)))
    # The way to the idle state (5, for "w"): t is off `along`, so 1 -> 5 goes by 2.
    assert _fair_cycle({"r"}, weak=("w",), along=lambda s, a, n: a != "t", adj=_G2V) == Lasso(
        0, (("a", 1),), (("p", 2), ("r", 1), ("p", 2), ("y", 5), ("u", 1)))
    # With every step along, the shortest ways.
    assert _fair_cycle({"r"}, weak=("w",), adj=_G2V) == Lasso(0, (("a", 1),), (("p", 2), ("r", 1), ("t", 5), ("u", 1)))


def test_a_graph_of_one_state_has_diameter_zero() -> None:
    g = build_graph(_toy({0: []}))
    assert (g.states, g.edges, g.parent, g.diameter, g.complete) == ((0,), ((),), (None,), 0, True)


# G3: 0 -a-> 1 -g-> 3 (the goal); 0 -b-> 2 -c-> 4 -d-> 2, 4 -e-> 5 (no step).
_G3 = {0: [("a", 1), ("b", 2)], 1: [("g", 3)], 2: [("c", 4)], 3: [], 4: [("d", 2), ("e", 5)], 5: []}


def _trap(adj=_G3, relevant=lambda s: True, along=lambda s: True):
    return trap(build_graph(_toy(adj)), relevant, lambda s: s == 3, along)


def test_trap_runs_from_the_first_bad_state_into_a_bottom_component() -> None:
    assert _trap() == Lasso(0, (("b", 2), ("c", 4), ("e", 5)), ())  # 5 has no step: the run stutters there
    no_exit = {**_G3, 4: [("d", 2)]}
    assert _trap(no_exit) == Lasso(0, (("b", 2),), (("c", 4), ("d", 2)))
    assert _trap(relevant=lambda s: s not in (0, 2)) == Lasso(0, (("b", 2), ("c", 4), ("e", 5)), ())
    assert _trap(relevant=lambda s: s == 5) == Lasso(0, (("b", 2), ("c", 4), ("e", 5)), ())
    assert _trap(relevant=lambda s: s in (0, 1, 3)) is None
    assert _trap({0: [("a", 1)], 1: [("g", 3), ("h", 1)], 3: []}) is None


def test_trap_keeps_to_along_states() -> None:
    # The goal only through 1: with 1 off `along`, 0 is stuck, and its run keeps to along states.
    lasso = _trap(along=lambda s: s != 1)
    assert lasso == Lasso(0, (("b", 2), ("c", 4), ("e", 5)), ())
    # A goal off `along` is no goal: 0 is stuck, and the first bottom component below it is 1 (its step leaves).
    assert _trap(along=lambda s: s != 3) == Lasso(0, (("a", 1),), ())
    lasso = _trap(along=lambda s: s not in (1, 5))
    assert lasso == Lasso(0, (("b", 2),), (("c", 4), ("d", 2)))
    assert _trap(relevant=lambda s: s in (1, 2, 4), along=lambda s: s != 2) == Lasso(0, (("b", 2), ("c", 4), ("e", 5)), ())


_LOOP = Lasso(0, (("a", 1),), (("p", 2), ("q", 3), ("r", 1)))
_STUCK = Lasso(0, (("b", 2), ("c", 4)), ())


def test_render_lasso_numbers_every_step_and_marks_the_cycle_or_the_stutter() -> None:
    assert render_lasso(_LOOP) == (" 0. (initial)\n     0\n 1. 'a'\n     -> 1\n"
                                   "-- cycle: steps 2..4 repeat forever --\n 2. 'p'\n     -> 2\n 3. 'q'\n     -> 3\n"
                                   " 4. 'r'\n     -> 1\n")
    assert render_lasso(_STUCK) == (" 0. (initial)\n     0\n 1. 'b'\n     -> 2\n 2. 'c'\n     -> 4\n"
                                    "-- no step here keeps to the property's states: the run stutters in this state"
                                    " forever --\n")


def test_lasso_itf_loops_to_the_cycles_first_state_or_stutters_in_the_last() -> None:
    t = lasso_itf(_LOOP, {"property": "P"})
    assert t["loop"] == 1 and t["#meta"]["property"] == "P" and t["#meta"]["loop_action"] == "'r'"
    assert [(x["action"], x["state"]) for x in t["states"]] == [("init", 0), ("'a'", 1), ("'p'", 2), ("'q'", 3)]
    t = lasso_itf(_STUCK, {"property": "P"})
    assert t["loop"] == 2 and t["#meta"] == {**t["#meta"], "property": "P", "loop_action": "stutter"}
    assert [(x["action"], x["state"]) for x in t["states"]] == [("init", 0), ("'b'", 2), ("'c'", 4)]


# --- invariants/liveness_props.py: each property's exact verdict and lasso -----------------------------------------


#: pid -> (states, transitions, diameter) of its scope, guards on, then with its guard off.
_FIGURES = {"I13": ((1068, 5588, 6), (1184, 6208, 6)), "I12": ((1623, 4039, 12), (1655, 4499, 12)),
            "I8c": ((44, 204, 12), (28, 128, 11)), "C4": ((175, 350, 18), (257, 514, 16))}


def _short(act: object) -> str:
    """An action as its class and numbers: Client(0, ReserveTx(tx=1)) -> '0:ReserveTx1'."""
    if isinstance(act, LP.Client):
        a = act.act
        return f"{act.client}:{type(a).__name__}{getattr(a, 'tx', '') or getattr(a, 'retry', '') or ''}"
    return repr(act)


_I13_PREFIX = ["Submit(holder=1, authority=1, nbytes=1, priority=0, role=Role.STAGING)",
               "Watch(submit=Submit(holder=1, authority=1, nbytes=2, priority=0, role=Role.STAGING))",
               "Submit(holder=1, authority=1, nbytes=1, priority=0, role=Role.STAGING)", "Claim(holder=1, ticket=1)"]
_I13_CYCLE = ["Release(holder=1, allocation=1)", "Submit(holder=1, authority=1, nbytes=1, priority=0, role=Role.STAGING)",
              "Claim(holder=1, ticket=2)", "Claim(holder=1, ticket=2)", "Release(holder=1, allocation=1)",
              "Submit(holder=1, authority=1, nbytes=1, priority=0, role=Role.STAGING)"]
_LASSOS = {
    "I13": (_I13_PREFIX, _I13_CYCLE),
    "I12": (["Submit(peak=3)", "Submit(peak=3)", "Advance(rid=1, n=2)", "Advance(rid=2, n=2)", "Submit(peak=1)"], []),
    "I8c": (["Prefetch()"], ["Decode(answer=None)", "Retire()"]),
    "C4": (["0:PlanTx", "0:ReserveTx1", "1:PlanTx", "1:ReserveTx2", "0:ReserveTx1", "0:PlanTx1", "0:ReserveTx2",
            "0:ReserveTx2", "0:PlanTx2", "0:ReserveTx2", "1:ReserveTx1", "1:PlanTx1", "1:ReserveTx2", "1:ReserveTx2"],
           ["1:PlanTx2", "1:ReserveTx2", "0:ReserveTx1", "0:PlanTx1", "0:ReserveTx2", "1:ReserveTx1", "1:PlanTx1",
            "1:ReserveTx2", "1:ReserveTx2", "1:PlanTx2", "1:ReserveTx2", "1:ReserveTx2"]),
}


@pytest.mark.parametrize("pid", list(_FIGURES))
def test_each_property_names_its_scope_fairness_figures_and_control_lasso(pid: str) -> None:
    scope = {"I13": "starvation", "I12": "kv_batch", "I8c": "elastic", "C4": "tx_retry"}[pid]
    on = LP.check_liveness(pid)
    assert (on.id, on.scope, on.fairness, on.status, on.reason) == (pid, scope, LIVENESS[pid][0], "verified", "")
    assert (on.states, on.transitions, on.diameter) == _FIGURES[pid][0] and on.complete and on.seconds > 0
    off = LP.check_liveness(pid, GuardSet.without(LP.PROPERTIES[pid][3]))
    assert (off.id, off.status, off.complete, off.reason) == (pid, "violated", True, "")
    assert (off.states, off.transitions, off.diameter) == _FIGURES[pid][1]
    assert ([_short(a) for a, _ in off.lasso.prefix], [_short(a) for a, _ in off.lasso.cycle]) == _LASSOS[pid]


def test_a_state_bound_hit_with_a_lasso_found_is_still_a_violation() -> None:
    r = LP.check_liveness("I8c", GuardSet.without("elastic_guaranteed_path"), max_states=27)
    assert (r.status, r.complete, r.reason, r.states) == ("violated", False, "", 27) and r.lasso is not None
    r = LP.check_liveness("I8c", max_states=43)
    assert (r.status, r.complete, r.states, r.lasso) == ("partial", False, 43, None)
    assert r.reason == "state bound 43 hit: the graph is not whole"
    assert LP.check_liveness("I8c", max_states=44).status == "verified"


def test_the_tables_name_each_property_once_with_the_catalogs_text() -> None:
    assert LP.FAIRNESS == {pid: text for pid, (text, _) in LIVENESS.items()} and set(LP.FAIRNESS) == set(LP.PROPERTIES)
    assert LP.CHECKER == {"I13": "pressure", "I12": "admission", "I8c": "admission", "C4": "transactions"}
    runs, controls = LP.run_liveness(("transactions",))
    assert set(runs) == {"C4"} and set(controls) == {"ordered_reservation"}
    assert controls["ordered_reservation"].status == "violated" and runs["C4"].status == "verified"
    assert LP.run_liveness(()) == ({}, {})


def test_seconds_reported_are_the_time_the_work_took() -> None:
    t0 = time.perf_counter()
    g = build_graph(_toy(_G1))
    r = LP.check_liveness("I8c")
    spent = time.perf_counter() - t0
    assert 0 <= g.seconds <= spent and 0 < r.seconds <= spent
