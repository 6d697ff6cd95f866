"""Issues #10 / #11: the ORT runtime reaches capacity only through the one manager (C1, C5, C8).

No mirror pool beside the manager's ledger; the governed limit is the host
authority's limit in the manager (plus the headroom, which that limit keeps
free), set at construction and changed only by its limits part: prepare
opens the tickets, the holders answer them, commit (or the old limit stays).
"""

from __future__ import annotations

import os
import re

import pytest
from ort_harness import runtime

from refimpl.verify.sessions_checker import HEADROOM
from refimpl.verify.manager_hooks import abstract_manager
from spec import sessions as S
from spec.errors import BudgetBelowFloor, InvalidBytes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_mirror_pool_in_refimpl() -> None:
    hits = []
    for d, _, files in os.walk(os.path.join(ROOT, "refimpl")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(d, name)
                rel = os.path.relpath(path, ROOT)
                text = open(path, encoding="utf-8").read()
                if re.search(r"ReclaimChannel|PressureGovernor\(|refimpl\.reclaim\b", text):
                    hits.append(rel)
    assert hits == []
    assert not os.path.exists(os.path.join(ROOT, "refimpl", "reclaim.py"))
    assert not os.path.exists(os.path.join(ROOT, "refimpl", "pressure.py"))  # the focused pool is a manager ledger


def test_limit_is_the_authoritys_limit_in_the_manager(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    assert "limit" not in vars(rt)  # no field: a read of the manager's authority
    assert rt.limit == rt.pmm.snapshot(rt.auth).limit + HEADROOM == 96 * 1024 == rt.abstract().limit
    rep = rt.execute(S.LowerLimit(rt.used() + HEADROOM))
    assert rep.ok and rt.pmm.snapshot(rt.auth).limit + HEADROOM == rep.new_limit == rt.abstract().limit
    assert not abstract_manager(rt.pmm).changes  # the change was committed, nothing pending
    rt.close()


def test_failed_lowering_leaves_the_managers_limit(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    rep = rt.execute(S.LowerLimit(HEADROOM))
    assert not rep.ok and rt.pmm.snapshot(rt.auth).limit + HEADROOM == rep.old_limit
    assert not abstract_manager(rt.pmm).changes and not abstract_manager(rt.pmm).pressures
    rt.close()


def test_manager_refuses_a_grant_into_the_headroom(world) -> None:
    """The manager's limit keeps the headroom free (I8c): a reserve past limit - headroom is its refusal."""
    from spec.errors import CapacityDenied
    from spec.types import Role, Tier

    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    room = rt.pmm.snapshot(rt.auth).limit - rt.used()
    assert rt.limit - rt.used() - room == HEADROOM
    with pytest.raises(CapacityDenied):
        rt.pmm.reserve(rt.kv.id, rt.auth, Tier.HOST, room + 1, Role.KV)
    rt.close()


def test_lowering_is_answered_by_the_holders_on_the_managers_tickets(world) -> None:
    """LowerLimit: prepare_limit opens one ticket per holder with a live lease; each answers its own (the
    weight holder with cache buckets, KV and arena with zero); commit sets the limit. No ticket of its own."""
    events = []
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True, trace=events.append)
    rt.execute(S.Open("a"))
    cache, opened = rt.weights.cache_bytes, rt.weights.opened
    del events[:]
    rep = rt.execute(S.LowerLimit(rt.limit - 8192))
    assert rep.ok and rep.completed == (("reclaim weight cache", 8192),)
    assert rt.weights.cache_bytes == cache - 8192 and rt.weights.opened == opened  # no ticket of its own
    kinds = [e["kind"] for e in events if e["payload"]["outcome"] == "accepted"]
    assert kinds[0] == "prepare_limit" and kinds[-1] == "commit_limit", kinds
    answers = {e["ids"]["holder"]: e for e in events if e["kind"] == "answer"}
    assert set(answers) == {rt.weights.id, rt.kv.id, rt.arena}, answers
    assert not abstract_manager(rt.pmm).pressures and not abstract_manager(rt.pmm).changes
    rt.close()


@pytest.mark.parametrize("bad, err, match", [(-1, InvalidBytes, None), ("x", InvalidBytes, None),
                                             (HEADROOM - 1, BudgetBelowFloor, "below the headroom")])
def test_bad_lowering_changes_nothing_in_the_manager(world, bad, err, match) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    before, mgr = rt.abstract(), abstract_manager(rt.pmm)
    with pytest.raises(err, match=match):
        rt.execute(S.LowerLimit(bad))
    assert rt.abstract() == before and abstract_manager(rt.pmm) == mgr
    rt.close()


def test_arena_pressure_is_a_manager_ticket_answered_at_the_run_boundary(world) -> None:
    rt = runtime(world, 96 * 1024, {"a": "dec"}, prefetch=True)
    rid = rt.execute(S.Open("a"))
    rt.execute(S.Decode(rid))
    rt.execute(S.Pressure(1))
    [pid] = [p.id for p in abstract_manager(rt.pmm).pressures.values() if p.holder == rt.arena]
    rt.execute(S.Decode(rid))
    assert pid not in abstract_manager(rt.pmm).pressures
    assert [(a.pressure, a.released) for a in rt.arena_answers] == [(pid, 0)]
    rt.close()
