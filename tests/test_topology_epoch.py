"""The topology epoch in the trace envelope (issue #21 item 4; docs/trace-format.md, "The topology epoch").

Every `ortmem-manager/2` event carries the governor's number of the topology it was decided against. Replay maps
the numbers one to one and increasing onto the spec's topology versions: an event naming an earlier version's
epoch is stale, a new epoch with no topology change since the last is refused, any increasing renumbering is
free. refimpl numbers them itself (`ProcessMemoryManager._topology_epoch`), advanced by the operations that
changed the topology, never by a diff of the spec.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from invariants.manager_replay import replay_manager_lines
from invariants.manager_trace import topology_changed
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.manager import step
from spec.types import Role, Tier
from trace_harness import traced

_D = Tier.DEVICE


def _record(script: Callable[[ProcessMemoryManager], None]) -> list[dict[str, Any]]:
    pmm, buf = traced()
    script(pmm)
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def _lines(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e).encode() + b"\n" for e in events]


def _register(p: ProcessMemoryManager) -> tuple[int, int, int]:
    return p.register_holder("kv"), p.register_authority("gpu0", _D, 64, "cuda:0"), \
        p.register_authority("gpu1", _D, 64, "cuda:1")


def _alias(p: ProcessMemoryManager) -> None:
    h, a, _ = _register(p)
    p.register_alias(a, "uma")
    p.register_holder("after")


def _remove(p: ProcessMemoryManager) -> None:
    _register(p)
    p.remove_authority(p.register_authority("spare", Tier.HOST, 64))
    p.register_holder("after")


def _lose(p: ProcessMemoryManager) -> None:
    h, a, _ = _register(p)
    p.lose_device(a)
    p.register_holder("after")


def _confirm(p: ProcessMemoryManager) -> None:
    h, a, _ = _register(p)
    p.lose_device(a)
    p.confirm_termination(a)
    p.register_holder("after")


#: kind -> a script whose last topology change is an accepted event of that kind, then one more event.
CHANGES = {"register_authority": lambda p: (_register(p), p.register_holder("after")), "register_alias": _alias,
           "remove_authority": _remove, "lose_device": _lose, "confirm_termination": _confirm}


def _last(events: list[dict[str, Any]], kind: str) -> int:
    return max(i for i, e in enumerate(events) if e["kind"] == kind)


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_refimpl_advances_the_epoch_after_each_topology_change_and_the_trace_replays_clean(kind: str) -> None:
    events = _record(CHANGES[kind])
    i = _last(events, kind)
    assert events[i + 1]["topology_epoch"] == events[i]["topology_epoch"] + 1  # decided in the old, then the new
    assert [e["topology_epoch"] for e in events] == sorted(e["topology_epoch"] for e in events)
    r = replay_manager_lines(_lines(events))
    assert r.ok, r.describe()


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_an_event_still_in_the_old_epoch_after_a_change_is_stale_at_that_line(kind: str) -> None:
    events = _record(CHANGES[kind])
    i = _last(events, kind)
    old = events[i]["topology_epoch"]
    events[i + 1]["topology_epoch"] = old
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line, r.failure) == (False, i + 2, "refinement"), r.describe()
    assert r.message == f"topology epoch {old} is stale: {kind} at line {i + 1} changed the topology (a new epoch due)"


def test_an_earlier_epoch_after_the_new_one_was_carried_is_stale_naming_the_current() -> None:
    events = _record(lambda p: (_lose(p), p.register_holder("later")))
    i = _last(events, "lose_device")
    old, new = events[i]["topology_epoch"], events[i + 1]["topology_epoch"]
    events[i + 2]["topology_epoch"] = old
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line) == (False, i + 3), r.describe()
    assert r.message == f"topology epoch {old} is stale: lose_device at line {i + 1} changed the topology " \
                        f"(epoch {new} since)"


def test_an_epoch_advanced_without_a_topology_change_is_refused_at_that_line() -> None:
    events = _record(lambda p: (_register(p), p.register_holder("a"), p.register_holder("b")))
    i = len(events) - 1  # register_holder "b": no topology change since "a" carried the last registration's epoch
    cur = events[i]["topology_epoch"]
    since = next(k for k, e in enumerate(events) if e["topology_epoch"] == cur)
    for e in events[i:]:
        e["topology_epoch"] = cur + 1
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line, r.failure) == (False, i + 1, "refinement"), r.describe()
    assert r.message == f"topology epoch {cur + 1} advanced without a topology change (epoch {cur} since line " \
                        f"{since + 1})"


def test_an_epoch_that_goes_back_before_any_topology_change_is_refused_at_that_line() -> None:
    """No version of the topology is older than the first: an earlier epoch there names none (and the message says
    so, rather than naming a change that never happened)."""
    events = _record(lambda p: (p.register_holder("a"), p.register_holder("b")))
    assert {e["topology_epoch"] for e in events} == {0}
    for e in events[:-1]:
        e["topology_epoch"] = 5
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line, r.failure) == (False, len(events), "refinement"), r.describe()
    assert r.message == "topology epoch 0 went back: epoch 5 since line 1, and no topology change since the trace began"


def test_a_re_registration_answered_with_the_existing_id_changes_no_topology() -> None:
    """refimpl leaves its epoch (the spec, its version) as it was; a governor that advanced it is refused."""
    events = _record(lambda p: (_register(p), p.register_authority("gpu0", _D, 64, "cuda:0"), p.register_holder("x")))
    assert events[-1]["topology_epoch"] == events[-2]["topology_epoch"]
    assert replay_manager_lines(_lines(events)).ok
    events[-1]["topology_epoch"] += 1
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line) == (False, len(events)) and "advanced without a topology change" in r.message, r.describe()


@pytest.mark.parametrize("seed", [0, 1])
def test_any_increasing_renumbering_of_the_epochs_replays_clean(seed: int) -> None:
    """The values are the governor's: x -> 10 x + 7, and a gap after every change, both clean."""
    events = _record(lambda p: run_manager_workload(p, seed=seed, operations=300))
    assert len({e["topology_epoch"] for e in events}) > 3  # the workload changes its topology
    for renumber in (lambda x: 10 * x + 7, lambda x: x * x + 3 * x):
        moved = [{**e, "topology_epoch": renumber(e["topology_epoch"])} for e in events]
        r = replay_manager_lines(_lines(moved))
        assert r.ok, r.describe()


@pytest.mark.parametrize("edit, message", [
    (lambda e: e.pop("topology_epoch"), "envelope keys must be exactly ['contract_revision', 'topology_epoch', "
                                        "'source', 'source_sequence', 'kind', 'ids', 'payload'], got "
                                        "['contract_revision', 'ids', 'kind', 'payload', 'source', 'source_sequence']"),
    (lambda e: e.update(topology_epoch=-1), "topology_epoch must be an integer >= 0, got '-1'"),
    (lambda e: e.update(topology_epoch=True), "topology_epoch must be an integer >= 0, got 'True'"),
    (lambda e: e.update(topology_epoch=1.0), "topology_epoch must be an integer >= 0, got '1.0'"),
])
def test_an_event_without_a_well_formed_epoch_is_malformed(edit: Any, message: str) -> None:
    events = _record(_lose)
    edit(events[2])
    r = replay_manager_lines(_lines(events))
    assert (r.ok, r.line, r.failure, r.message) == (False, 3, "malformed", message), r.describe()


def test_the_topology_is_identities_and_physical_facts_not_used_nor_limit() -> None:
    m0 = M.initial()
    m1, a = step(m0, A.RegisterAuthority("p", _D, 64, "cuda:0"))
    assert topology_changed(m0, m1)
    m2, h = step(m1, A.RegisterHolder("kv"))
    assert not topology_changed(m1, m2)  # the authority map kept
    m3, r = step(m2, A.Reserve(h, a, _D, 8, Role.KV))
    assert m3.ledger.authorities is not m2.ledger.authorities and not topology_changed(m2, m3)  # used moved only
    m4, _ = step(m3, M.Reconfigure(a))
    assert not topology_changed(m3, m4)  # a generation, not the authority's record
    low, _ = step(step(m4, M.PrepareLimit(a, 32))[0], M.CommitLimit(a))
    assert low.ledger.authorities[a].limit == 32 and not topology_changed(m4, low)  # a limit is no topology
    m5, _ = step(m4, A.RegisterAuthority("p", _D, 64, "cuda:0"))
    assert not topology_changed(m4, m5)  # the existing authority
    m6, _ = step(m5, A.RegisterAlias(a, "uma"))
    m7, _ = step(m6, A.LoseDevice(a))
    m8, _ = step(m7, A.ConfirmTermination(a))
    assert topology_changed(m5, m6) and topology_changed(m6, m7) and topology_changed(m7, m8)
    m9, _ = step(m8, A.ConfirmTermination(a))  # again: terminated stays terminated
    assert not topology_changed(m8, m9)
