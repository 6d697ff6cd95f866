"""invariants/explore_memo.py pinned (its mutation run, benchmarks/mutation.py): a bug in successor memoization makes
the explorer miss or invent states. The memoized successors equal the plain step's on every state of a quick scope
(results and refusals included); a step is computed once per (action, read parts) and rebuilt on the current state;
a refusal is raised again fresh; a wrong footprint is refused or caught, with whole messages."""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs
import immutables
import pytest

from invariants import explore_memo as EM
from invariants.explore_memo import FOOTPRINTS, Footprint, FootprintError, MemoStep
from invariants.manager_scope import QUICK_SCOPE, manager_actions, manager_start
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError, InvalidArgument


def outcome(step: Any, s: Any, act: Any) -> tuple:
    try:
        nxt, result = step(s, act)
    except GovernorError as e:
        return ("rejected", type(e), e.args)
    return ("accepted", nxt, type(result), result)


def test_memoized_successors_are_the_plain_ones_on_every_state_of_a_quick_scope() -> None:
    memo = MemoStep(MG.step, (GovernorError,))
    start = manager_start(QUICK_SCOPE)
    seen, frontier, pairs = {start}, deque([(start, 0)]), 0
    while frontier:
        s, d = frontier.popleft()
        for act in manager_actions(QUICK_SCOPE, s):
            pairs += 1
            want = outcome(MG.step, s, act)
            assert outcome(memo, s, act) == want, (s, act)
            if want[0] == "accepted" and want[1] not in seen and d < 1:
                seen.add(want[1])
                frontier.append((want[1], d + 1))
    assert len(seen) > 5 and memo.hits > 100 and memo.misses > 10 and memo.hits + memo.misses == pairs


PRESS = M.Press(1, 1, 10)


class Plain:
    """A stand-in step for `Press` (its footprint: reads ledger pressures next_pressure generations, writes pressures
    next_pressure) that counts its calls; `wrong` names a part it also changes, `copy` one it replaces by an equal
    copy."""

    def __init__(self, wrong: str | None = None, copy: str | None = None, refuse: bool = False) -> None:
        self.calls, self.wrong, self.copy, self.refuse = 0, wrong, copy, refuse

    def __call__(self, s: Any, a: Any) -> tuple[Any, Any]:
        self.calls += 1
        if self.refuse:
            raise InvalidArgument("no", s.next_pressure)
        nxt = attrs.evolve(s, pressures=s.pressures.set(s.next_pressure, a), next_pressure=s.next_pressure + 1)
        if self.wrong:
            nxt = attrs.evolve(nxt, **{self.wrong: s.aging_bound + 1 if self.wrong == "aging_bound" else 99})
        if self.copy:
            nxt = attrs.evolve(nxt, **{self.copy: immutables.Map(dict(getattr(s, self.copy)))})
        return nxt, ("r", s.next_pressure)


def test_a_step_is_computed_once_per_action_and_read_parts_and_rebuilt_on_the_current_state() -> None:
    plain = Plain()
    memo = MemoStep(plain, (GovernorError,))
    s0 = manager_start(QUICK_SCOPE)
    n1, r1 = memo(s0, PRESS)
    assert (plain.calls, memo.hits, memo.misses) == (1, 0, 1) and (n1, r1) == plain.__class__()(s0, PRESS)
    other = attrs.evolve(s0, tickets=immutables.Map({7: None}), next_ticket=8)  # parts Press does not read
    n2, r2 = memo(other, PRESS)
    assert (plain.calls, memo.hits, memo.misses) == (1, 1, 1) and r2 == ("r", s0.next_pressure)
    assert n2 == attrs.evolve(n1, tickets=other.tickets, next_ticket=8) and n2.ledger is other.ledger
    n3, r3 = memo(n1, PRESS)  # the read parts differ: computed
    assert (plain.calls, memo.hits, memo.misses) == (2, 1, 2) and r3 == ("r", s0.next_pressure + 1)
    assert n3.next_pressure == s0.next_pressure + 2
    # an action type without a footprint is stepped plainly, every time, and not counted
    memo2 = MemoStep(plain, (GovernorError,), {})
    assert memo2(s0, PRESS) == Plain()(s0, PRESS) and memo2(s0, PRESS)[0].pressures[s0.next_pressure] == PRESS
    assert plain.calls == 4 and (memo2.hits, memo2.misses) == (0, 0)


def test_a_memoized_refusal_is_raised_again_fresh_with_the_same_type_and_arguments() -> None:
    plain = Plain(refuse=True)
    memo = MemoStep(plain, (GovernorError,))
    s0 = manager_start(QUICK_SCOPE)
    errors = []
    for _ in range(3):
        with pytest.raises(InvalidArgument) as e:
            memo(s0, PRESS)
        errors.append(e.value)
    assert plain.calls == 1 and (memo.hits, memo.misses) == (2, 1)
    assert [e.args for e in errors] == [("no", s0.next_pressure)] * 3 and len({id(e) for e in errors}) == 3
    assert type(errors[2]) is InvalidArgument
    with pytest.raises(KeyError):  # not a refusal: raised, and not cached
        MemoStep(lambda s, a: {}[a], (GovernorError,))(s0, PRESS)


def test_a_step_that_changes_a_part_outside_its_writes_is_caught() -> None:
    s0 = manager_start(QUICK_SCOPE)
    with pytest.raises(FootprintError) as e:
        MemoStep(Plain(wrong="next_ticket"), (GovernorError,))(s0, PRESS)
    assert str(e.value) == f"{PRESS!r} changed next_ticket, outside its declared writes ('pressures', 'next_pressure')"
    with pytest.raises(FootprintError, match="changed aging_bound"):
        MemoStep(Plain(wrong="aging_bound"), (GovernorError,))(s0, PRESS)
    memo = MemoStep(Plain(copy="tickets"), (GovernorError,))  # an equal copy of a part is no change
    assert memo(s0, PRESS)[0].tickets == s0.tickets


def test_a_footprint_must_write_among_its_reads_and_read_only_manager_parts() -> None:
    with pytest.raises(ValueError) as e:
        MemoStep(MG.step, (GovernorError,), {M.Press: Footprint(("ledger",), ("pressures",))})
    assert str(e.value) == ("footprint of Press: writes ('pressures',) must be among reads ('ledger',) "
                            "(Manager fields)")
    with pytest.raises(ValueError, match="footprint of Press: writes"):
        MemoStep(MG.step, (GovernorError,), {M.Press: Footprint(("ledger", "nothing"), ("ledger",))})
    MemoStep(MG.step, (GovernorError,), {M.Press: Footprint(("ledger", "pressures"), ("pressures",))})
    every = tuple(f.name for f in attrs.fields(M.Manager))
    MemoStep(MG.step, (GovernorError,), {M.Press: Footprint(every, every)})  # reading every part is allowed
    assert EM._fp("ledger  tickets", "tickets") == Footprint(("ledger", "tickets"), ("tickets",))
    assert EM._fp("uses", "") == Footprint(("uses",), ())
    fp = FOOTPRINTS[M.Submit]
    assert fp == Footprint(("ledger", "tickets", "aging_bound", "quotas", "next_ticket", "generations", "poisoned"),
                           ("ledger", "tickets", "next_ticket"))
