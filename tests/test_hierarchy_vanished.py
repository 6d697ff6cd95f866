"""Hierarchy step clauses judge a worker whose record is gone from the next state (C10, I11).

A governor's state may lose a worker's record (a restart that forgets it, a bug that drops it). Every step clause
of `invariants.hierarchy` must judge such a step, never raise KeyError: a record gone with quota is quota that left
its worker with no exit observed; one gone with nothing is no harm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from spec import hierarchy as H
from test_hierarchy_clauses import STEP, UP, _step, held, problems, put


def _vanish(wid: int) -> Callable[[H.HierarchyState], H.HierarchyState]:
    return lambda n: attrs.evolve(n, workers=n.workers.delete(wid))


#: A worker whose record is gone from the next state: each step clause judges it, none raises KeyError.
#: name -> ((prev, action, next), every step clause it breaks with what each names)
VANISHED: dict[str, tuple[tuple[H.HierarchyState, Any, H.HierarchyState], dict[str, str]]] = {
    "charged_worker_vanishes": (_step((*UP, H.Arbitrate()), _vanish(1)),
                                {"no_return_before_exit": "worker 1 vanished holding 4 units of quota"}),
    "worker_with_one_unit_vanishes": (_step((H.Spawn(), H.Hello(1), H.Request(1, 1, 1, 1), H.Arbitrate()), _vanish(1)),
                                      {"no_return_before_exit": "worker 1 vanished holding 1 units of quota"}),
    # an exited, credited worker's record goes (no harm) while a later worker loses quota its slice still holds
    "exited_record_goes_then_quota_taken": (_step((*UP, H.Kill(1), H.ObserveExit(1), H.Spawn(), H.Hello(2),
                                                   H.Request(2, 1, 1, 3), H.Arbitrate()),
                                                  lambda n: put(_vanish(1)(n), 2, quota=0)),
        {"no_return_before_exit": "worker 2 lost 3 units of quota (now 0) while its own slice still holds 3"}),
    "charged_worker_vanishes_under_its_reserve": (_step((*UP, H.Reserve(1, 2)), _vanish(1)),
                                                  {"no_return_before_exit": "worker 1 vanished holding 4 units"}),
    "charged_worker_vanishes_under_outside_usage": (_step((*UP, H.Outside("db", 3)), _vanish(1)),
        {"no_return_before_exit": "worker 1 vanished holding 4 units",
         "outside_only_lowers_ceiling": "outside program 'db' changed the quota of worker 1"}),
    "charged_worker_vanishes_in_a_restart": (_step((*UP, H.Restart()), _vanish(1)),
        {"no_return_before_exit": "worker 1 vanished holding 4 units",
         "restart_loses_nothing": "worker 1's journaled"}),
}


@pytest.mark.parametrize("name", sorted(VANISHED))
def test_a_vanished_worker_is_judged_by_every_step_clause(name: str) -> None:
    (p, act, n), expected = VANISHED[name]
    found = problems(STEP, p, act, n)  # no KeyError from any clause
    assert set(found) == set(expected), found
    assert all(found[k].startswith(expected[k]) for k in expected), found
    assert set(found) <= held(STEP, p, act, n)  # a harm is a case of the clause it breaks


def test_an_exited_workers_record_may_go_with_nothing_left() -> None:
    # Near miss: worker 1 exited and was credited (quota 0); its record going takes no unit with it.
    p, act, n = _step((*UP, H.Kill(1), H.ObserveExit(1), H.Arbitrate()), _vanish(1))
    assert problems(STEP, p, act, n) == {}
    assert "no_return_before_exit" not in held(STEP, p, act, n)  # no quota left it: nothing to judge


def test_a_reserve_by_an_identity_never_spawned_is_out_of_budget() -> None:
    # The budget clause reads the reserving worker in both states: one absent before has no slice to reserve in.
    p, act, n = _step((*UP, H.Reserve(1, 2)))
    p = attrs.evolve(p, workers=p.workers.delete(1))
    assert problems(STEP, p, act, n)["reserve_within_budget"] == \
        "worker 1 reserved 2 B with 0 B left of min(slice, OS ceiling)"
