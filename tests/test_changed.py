"""`invariants.changed`: a step's changed records in O(change), and the step predicates still judge every one (#21).

The composed replay keeps its record maps as `Tracked` maps so that the step
predicates read only what a step changed. These tests check the diff against
a brute-force comparison, that a chain of derivations is walked rather than
the whole map, and that a bad step changing a record no id of the action
names (a round granting another holder's ticket, a device loss moving many
allocations) is still rejected by the predicates on tracked states.
"""

from __future__ import annotations

import io
import random

import immutables
import pytest

from invariants._violation import InvariantViolation
from invariants.changed import Tracked, changed, changes, track
from invariants.manager import check_step
from invariants.manager_replay import _tracked, replay_manager_lines
from refimpl.manager import ProcessMemoryManager as Composed
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_hooks import abstract_manager
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.manager import step
from spec.manager_actions import initial
from spec.records import evolve
from spec.types import AllocState, Role, Tier


def _brute(prev: dict, nxt: dict) -> set:
    return {k for k in set(prev) | set(nxt) if prev.get(k, "absent") != nxt.get(k, "absent")}


@pytest.mark.parametrize("seed", range(6))
def test_changed_equals_a_full_comparison_along_a_chain(seed: int) -> None:
    rng = random.Random(seed)
    m = track(immutables.Map({i: i for i in range(50)}))
    for _ in range(5):
        prev, nxt = m, m
        for _ in range(rng.randint(0, 6)):
            op, k = rng.choice(("set", "set-same", "delete", "update")), rng.randrange(60)
            if op == "set":
                nxt = nxt.set(k, rng.randrange(1000))
            elif op == "set-same" and k in nxt:
                nxt = nxt.set(k, nxt[k])  # derived, but unchanged: not reported
            elif op == "delete" and k in nxt:
                nxt = nxt.delete(k)
            elif op == "update":
                nxt = nxt.update({k: -1, k + 1: -2})
        want = _brute(dict(prev.items()), dict(nxt.items()))
        # Either question first (the second is answered from the memo): keys, and the records in key order.
        if seed % 2:
            moved = changes(prev, nxt)
            assert changed(prev, nxt) == want
        else:
            assert changed(prev, nxt) == want
            moved = changes(prev, nxt)
        assert moved == tuple((k, prev.get(k), nxt.get(k)) for k in sorted(want))
        m = nxt


def test_changed_walks_the_chain_not_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    prev = track(immutables.Map({i: i for i in range(100_000)}))
    nxt = prev.set(7, -7).delete(8).set(100_001, 1)

    def whole(self: Tracked) -> None:
        raise AssertionError("compared the whole map")
    monkeypatch.setattr(Tracked, "keys", whole)
    assert changed(prev, nxt) == {7, 8, 100_001}


@pytest.mark.parametrize("how", ["plain", "fresh", "mutate", "older"])
def test_changed_falls_back_to_a_full_comparison_off_the_chain(how: str) -> None:
    base = {i: i for i in range(20)}
    prev = track(immutables.Map(base))
    if how == "plain":
        prev, nxt = immutables.Map(base), immutables.Map(base).set(3, -3)
    elif how == "fresh":  # equal content, but not derived from prev: no chain to trust
        nxt = Tracked(immutables.Map({**base, 3: -3}))
    elif how == "mutate":
        mut = prev.mutate()
        mut[3] = -3
        nxt = mut.finish()
    else:  # a diff from an ancestor older than the last diff's base: that link was dropped
        mid = prev.set(5, -5)
        changed(mid, mid.set(6, -6))
        changed(prev, mid)
        nxt = mid.set(3, -3)
        assert changed(prev, nxt) == {3, 5}
        return
    assert changed(prev, nxt) == {3}


# --- the predicates on tracked states still see what no id of the action names ----------------------------


def _run(m: M.Manager, *acts: object) -> tuple[M.Manager, object]:
    result = None
    for act in acts:
        m, result = step(m, act)
    return m, result


def _corrupt(m: M.Manager, rid: int, **changes: object) -> M.Manager:
    allocs = m.ledger.allocations
    assert isinstance(allocs, Tracked)  # the bad state is derived along the chain: the fast path judges it
    return evolve(m, ledger=evolve(m.ledger, allocations=allocs.set(rid, evolve(allocs[rid], **changes))))


def _two_holders() -> M.Manager:
    m, _ = _run(_tracked(initial()), A.RegisterHolder("a"), A.RegisterHolder("b"),
                A.RegisterAuthority("hbm0", Tier.DEVICE, 100), A.RegisterAuthority("hbm1", Tier.DEVICE, 100))
    return m


def test_round_granting_a_ticket_is_judged_on_the_granted_record() -> None:
    m, _ = _run(_two_holders(), M.Submit(1, 1, 60, 0, Role.KV), M.Submit(2, 1, 60, 0, Role.KV))  # b waits
    act = M.CancelTicket(1, 1)  # names holder a's ticket; the round grants b's
    after, result = step(m, act)
    granted = [r for r in after.ledger.allocations.values() if r.holder == 2]
    assert len(granted) == 1 and granted[0].id not in m.ledger.allocations
    check_step(m, act, after, result)  # the good step passes
    bad = _corrupt(after, granted[0].id, charge=50)  # b's grant charged 50 B while used says 60 B
    with pytest.raises(InvariantViolation, match="conserv|moved"):
        check_step(m, act, bad, result)


def test_device_loss_is_judged_on_every_record_it_moves() -> None:
    m = _two_holders()
    for h in (1, 2, 1, 2):
        m, rid = _run(m, A.Reserve(h, 1, Tier.DEVICE, 10, Role.KV))
        m, _ = _run(m, A.Commit(h, rid, 10))
    m, keep = _run(m, A.Reserve(2, 2, Tier.DEVICE, 10, Role.KV))  # on the other device
    act = A.LoseDevice(1)
    after, result = step(m, act)
    moved = sorted(changed(m.ledger.allocations, after.ledger.allocations))
    assert len(moved) == 4 and all(after.ledger.allocations[i].state is AllocState.DEVICE_LOST for i in moved)
    check_step(m, act, after, result)
    with pytest.raises(InvariantViolation, match="holder"):  # one lost lease handed to another holder
        check_step(m, act, _corrupt(after, moved[2], holder=1 if after.ledger.allocations[moved[2]].holder == 2
                                    else 2), result)
    with pytest.raises(InvariantViolation, match="charge|moved"):  # a reservation no id of the action names
        check_step(m, act, _corrupt(after, keep, charge=3), result)


# --- no cap on live records --------------------------------------------------------------------------


def test_composed_trace_with_5000_live_leases_replays_clean() -> None:
    out = io.StringIO()
    pmm = Composed(trace=JsonlSink(out))
    h = pmm.register_holder("kv")
    a = pmm.register_authority("hbm0", Tier.DEVICE, 2**40)
    for _ in range(5000):
        pmm.claim(h, pmm.submit(h, a, 4096, 0, Role.KV))
    m = abstract_manager(pmm)
    assert sum(r.state is AllocState.LIVE for r in m.ledger.allocations.values()) == 5000
    r = replay_manager_lines(out.getvalue().encode().splitlines())
    assert r.ok and r.events == 3 + 3 * 5000, r.describe()  # configure, holder, authority, then per page: submit, grant, claim


def test_changed_answers_again_for_the_same_maps_and_never_from_a_mutable_one() -> None:
    """The last answers are remembered (the step predicates ask for one step's diff several times): asked
    again, the same maps give the same keys; a plain dict, which can change in place, is compared afresh."""
    prev = track(immutables.Map({1: 1, 2: 2}))
    nxt = prev.set(1, -1)
    assert changed(prev, nxt) == {1} and changed(prev, nxt) == {1}
    was, now = {1: 1}, {1: 1}
    assert changed(was, now) == set()
    now[1] = 2
    assert changed(was, now) == {1}
