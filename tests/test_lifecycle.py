# Lifecycle tables (I4a allocation, C3 context) and the paths through them.
#
# First the tables alone: every (state, event) pair either yields the table's
# next state or raises InvalidTransition naming both. Then each lifecycle path
# is walked on the spec (`spec.ledger.step`) and on refimpl
# (`ProcessMemoryManager` through its adapter), asserting the WHOLE abstract
# state after every step (h11 style), including that an illegal event changes
# nothing; then both are run in lockstep and must agree step for step.

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import immutables
import pytest

from spec import ledger_actions as A
from spec.errors import DeviceLost, InvalidTransition
from spec.lifecycle import (
    ALLOCATION_TABLE,
    CONTEXT_TABLE,
    TERMINAL,
    mermaid,
    next_alloc_state,
    next_context_state,
)
from spec.ledger import step as spec_step
from spec.ledger_state import EMPTY, Allocation, Allowance, Authority, Holder, State
from spec.types import AllocEvent, AllocState, ContextEvent, ContextState, Origin, Role, Tier
from refimpl.verify.manager_adapter import ManagerAdapter

DEV, HOST = Tier.DEVICE, Tier.HOST
P, L, Q = AllocState.PROVISIONAL, AllocState.LIVE, AllocState.QUARANTINED
LOST_ALLOC = AllocState.DEVICE_LOST


# --- the tables ----------------------------------------------------------------

#: Every (state, event) pair of both tables, with the step function and the table that judge it.
PAIRS = ([(next_alloc_state, ALLOCATION_TABLE, p) for p in itertools.product(AllocState, AllocEvent)]
         + [(next_context_state, CONTEXT_TABLE, p) for p in itertools.product(ContextState, ContextEvent)])


@pytest.mark.parametrize("step, table, pair", PAIRS, ids=[f"{p[0].value}+{p[1].value}" for _, _, p in PAIRS])
def test_each_pair_steps_as_its_table_says_or_is_refused(step, table, pair):
    state, event = pair
    if pair in table:
        assert step(state, event) is table[pair]
    else:
        with pytest.raises(InvalidTransition, match=rf"event '{event.value}' in state '{state.value}'"):
            step(state, event)


def test_invalid_transition_message_names_the_record():
    with pytest.raises(InvalidTransition, match=r"^allocation 7: .*'release'.*'provisional'"):
        next_alloc_state(P, AllocEvent.RELEASE, "allocation 7")


# The documented lifecycle (I4a / C3), written out independently of the module,
# so an edit to either table has to be made here too (catalog and tests in step).
DOCUMENTED_ALLOCATION = {
    (P, AllocEvent.COMMIT): L,
    (P, AllocEvent.CANCEL): AllocState.RELEASED,
    (P, AllocEvent.LOSE): LOST_ALLOC,
    (L, AllocEvent.RELEASE): AllocState.RELEASED,
    (L, AllocEvent.QUARANTINE): Q,
    (L, AllocEvent.SHRINK): L,
    (L, AllocEvent.GROW): L,
    (L, AllocEvent.LOSE): LOST_ALLOC,
    (Q, AllocEvent.LOSE): LOST_ALLOC,
    (LOST_ALLOC, AllocEvent.TERMINATE): AllocState.CONTEXT_TERMINATED,
}
DOCUMENTED_CONTEXT = {
    (ContextState.ACTIVE, ContextEvent.LOSE): ContextState.LOST,
    (ContextState.LOST, ContextEvent.LOSE): ContextState.LOST,
    (ContextState.LOST, ContextEvent.CONFIRM_TERMINATION): ContextState.TERMINATED,
    (ContextState.TERMINATED, ContextEvent.CONFIRM_TERMINATION): ContextState.TERMINATED,
    (ContextState.TERMINATED, ContextEvent.LOSE): ContextState.TERMINATED,
}


def test_allocation_table_is_the_documented_lifecycle():
    assert dict(ALLOCATION_TABLE) == DOCUMENTED_ALLOCATION
    assert TERMINAL == {AllocState.RELEASED, AllocState.CONTEXT_TERMINATED}


def test_context_table_is_the_documented_lifecycle():
    assert dict(CONTEXT_TABLE) == DOCUMENTED_CONTEXT


def test_terminal_states_have_no_exits():
    assert not [pair for pair in ALLOCATION_TABLE if pair[0] in TERMINAL]


def _node(state: Any) -> str:
    return state.value.replace("-", "_")


EDGES = [("alloc", k, v) for k, v in ALLOCATION_TABLE.items()] + [("context", k, v) for k, v in CONTEXT_TABLE.items()]


@pytest.mark.parametrize(
    "table, edge", [(t, (k, v)) for t, k, v in EDGES],
    ids=[f"{t}:{k[0].value}-{k[1].value}->{v.value}" for t, k, v in EDGES],
)
def test_mermaid_contains_edge(table, edge):
    (src, event), dst = edge
    text = mermaid(ALLOCATION_TABLE if table == "alloc" else CONTEXT_TABLE)
    assert f"    {_node(src)} --> {_node(dst)}: {event.value}" in text.splitlines()


@pytest.mark.parametrize("table", [ALLOCATION_TABLE, CONTEXT_TABLE], ids=["alloc", "context"])
def test_mermaid_has_exactly_the_table_edges(table):
    lines = mermaid(table).splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert len(lines[1:]) == len(table)
    assert len(set(lines[1:])) == len(table)


# --- expected abstract states ----------------------------------------------------


def _auth(id: int, pool: str, tier: Tier, cap: int, used: int = 0,
          context: ContextState = ContextState.ACTIVE) -> Authority:
    return Authority(id, pool, tier, cap, cap, None, None, context, used)


def _alloc(id: int, state: AllocState, reserved: int, nbytes: int | None = None, charge: int | None = None, *,
           authority: int = 1, tier: Tier = DEV, role: Role = Role.KV, origin: Origin = Origin.GRANTED) -> Allocation:
    nbytes = reserved if nbytes is None else nbytes
    charge = nbytes if charge is None else charge
    return Allocation(id, authority, 1, tier, role, reserved, nbytes, charge, state, origin)


def _state(gpu_used: int = 0, host_used: int = 0, allocs: tuple[Allocation, ...] = (), next_allocation: int = 1,
           gpu_context: ContextState = ContextState.ACTIVE) -> State:
    """The whole abstract state of the fixture world: gpu0 (1), host0 (2), holder alice (1)."""
    return State(
        authorities=immutables.Map({
            1: _auth(1, "gpu0", DEV, 1000, gpu_used, gpu_context),
            2: _auth(2, "host0", HOST, 500, host_used),
        }),
        holders=immutables.Map({1: Holder(1, "alice")}),
        allocations=immutables.Map({r.id: r for r in allocs}),
        allowances=immutables.Map(),
        next_authority=3,
        next_holder=2,
        next_allocation=next_allocation,
        next_allowance=1,
    )


SETUP = [
    (A.RegisterAuthority("gpu0", DEV, 1000), 1),
    (A.RegisterAuthority("host0", HOST, 500), 2),
    (A.RegisterHolder("alice"), 1),
]

# Each step: (action, outcome, whole expected state). An outcome that is an
# exception class means the step is refused and the state must equal the
# previous expected state (which the step repeats, to be read on its own).

PATHS: dict[str, list[tuple[Any, Any, State]]] = {
    "provisional-live-released": [
        (A.Reserve(1, 1, DEV, 100, Role.KV), 1, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Commit(1, 1, 60), None, _state(60, allocs=(_alloc(1, L, 100, 60),), next_allocation=2)),
        (A.Release(1, 1), None, _state(0, next_allocation=2)),
        (A.Release(1, 1), InvalidTransition, _state(0, next_allocation=2)),  # double release
        (A.Commit(1, 1, 60), InvalidTransition, _state(0, next_allocation=2)),  # stale id
        (A.Reserve(1, 1, DEV, 10, Role.KV), 2, _state(10, allocs=(_alloc(2, P, 10),), next_allocation=3)),
    ],
    "provisional-cancel": [
        (A.Reserve(1, 1, DEV, 100, Role.KV), 1, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Release(1, 1), InvalidTransition, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Quarantine(1, 1, 0), InvalidTransition, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Cancel(1, 1), None, _state(0, next_allocation=2)),
        (A.Cancel(1, 1), InvalidTransition, _state(0, next_allocation=2)),
        (A.Commit(1, 1, 10), InvalidTransition, _state(0, next_allocation=2)),
    ],
    "live-quarantined-partial-refund": [
        (A.Reserve(1, 1, DEV, 100, Role.KV), 1, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Commit(1, 1, 80), None, _state(80, allocs=(_alloc(1, L, 100, 80),), next_allocation=2)),
        (A.Cancel(1, 1), InvalidTransition, _state(80, allocs=(_alloc(1, L, 100, 80),), next_allocation=2)),
        (A.Commit(1, 1, 80), InvalidTransition, _state(80, allocs=(_alloc(1, L, 100, 80),), next_allocation=2)),
        # Only 30 of the 80 B could be undone: 30 refunded, 50 stay charged.
        (A.Quarantine(1, 1, 30), None, _state(50, allocs=(_alloc(1, Q, 100, 80, 50),), next_allocation=2)),
        (A.Release(1, 1), InvalidTransition, _state(50, allocs=(_alloc(1, Q, 100, 80, 50),), next_allocation=2)),
        (A.Quarantine(1, 1, 50), InvalidTransition, _state(50, allocs=(_alloc(1, Q, 100, 80, 50),), next_allocation=2)),
    ],
    "live-device-lost-terminated": [
        (A.Reserve(1, 1, DEV, 100, Role.KV), 1, _state(100, allocs=(_alloc(1, P, 100),), next_allocation=2)),
        (A.Commit(1, 1, 80), None, _state(80, allocs=(_alloc(1, L, 100, 80),), next_allocation=2)),
        (A.Reserve(1, 1, DEV, 50, Role.WEIGHTS), 2,
         _state(130, allocs=(_alloc(1, L, 100, 80), _alloc(2, P, 50, role=Role.WEIGHTS)), next_allocation=3)),
        (A.Reserve(1, 1, DEV, 40, Role.STATE), 3,
         _state(170, allocs=(_alloc(1, L, 100, 80), _alloc(2, P, 50, role=Role.WEIGHTS),
                             _alloc(3, P, 40, role=Role.STATE)), next_allocation=4)),
        (A.Commit(1, 3, 40), None,
         _state(170, allocs=(_alloc(1, L, 100, 80), _alloc(2, P, 50, role=Role.WEIGHTS),
                             _alloc(3, L, 40, role=Role.STATE)), next_allocation=4)),
        (A.Quarantine(1, 3, 10), None,
         _state(160, allocs=(_alloc(1, L, 100, 80), _alloc(2, P, 50, role=Role.WEIGHTS),
                             _alloc(3, Q, 40, 40, 30, role=Role.STATE)), next_allocation=4)),
        # Another pool's recorded bytes: termination of gpu0 must not touch them.
        (A.RecordCommitted(1, 2, HOST, 40, Role.STAGING), 4,
         _state(160, 40, allocs=(_alloc(1, L, 100, 80), _alloc(2, P, 50, role=Role.WEIGHTS),
                                 _alloc(3, Q, 40, 40, 30, role=Role.STATE),
                                 _alloc(4, L, 40, authority=2, tier=HOST, role=Role.STAGING, origin=Origin.RECORDED)),
                next_allocation=5)),
        # Loss: admission stops, every state moves to device-lost, nothing is refunded.
        (A.LoseDevice(1), None,
         _state(160, 40, allocs=(_alloc(1, LOST_ALLOC, 100, 80), _alloc(2, LOST_ALLOC, 50, role=Role.WEIGHTS),
                                 _alloc(3, LOST_ALLOC, 40, 40, 30, role=Role.STATE),
                                 _alloc(4, L, 40, authority=2, tier=HOST, role=Role.STAGING, origin=Origin.RECORDED)),
                next_allocation=5, gpu_context=ContextState.LOST)),
    ],
}

_LOST = PATHS["live-device-lost-terminated"][-1][2]
_TERMINATED = _state(0, 40, allocs=(_alloc(4, L, 40, authority=2, tier=HOST, role=Role.STAGING,
                                           origin=Origin.RECORDED),),
                     next_allocation=5, gpu_context=ContextState.TERMINATED)
PATHS["live-device-lost-terminated"] += [
    (A.Release(1, 1), DeviceLost, _LOST),
    (A.Commit(1, 2, 50), DeviceLost, _LOST),
    (A.Quarantine(1, 1, 80), DeviceLost, _LOST),
    (A.Reserve(1, 1, DEV, 10, Role.KV), DeviceLost, _LOST),
    (A.LoseDevice(1), None, _LOST),  # a second loss report changes nothing
    # Confirmation refunds every lost charge (80 + 50 + 30), exactly once.
    (A.ConfirmTermination(1), None, _TERMINATED),
    (A.ConfirmTermination(1), None, _TERMINATED),  # idempotent: no second refund
    (A.LoseDevice(1), None, _TERMINATED),
    (A.Release(1, 1), InvalidTransition, _TERMINATED),  # terminated ids are retired
    (A.Reserve(1, 1, DEV, 10, Role.KV), DeviceLost, _TERMINATED),
    (A.ConfirmTermination(2), InvalidTransition, _TERMINATED),  # host0 was never lost
]


class SpecDriver:
    def __init__(self) -> None:
        self.state = EMPTY

    def execute(self, action: Any) -> Any:
        self.state, result = spec_step(self.state, action)
        return result

    def abstract(self) -> State:
        return self.state


class RefimplDriver(ManagerAdapter):
    """The implementation, read as the ledger's state (what `SpecDriver` holds)."""

    def abstract(self) -> State:
        return super().abstract().ledger


IMPLS: dict[str, Callable[[], Any]] = {"spec": SpecDriver, "refimpl": RefimplDriver}


def _started(make: Callable[[], Any]) -> Any:
    driver = make()
    for action, result in SETUP:
        assert driver.execute(action) == result
    assert driver.abstract() == _state()
    return driver


def _outcome(driver: Any, action: Any) -> tuple[str, Any]:
    try:
        return "ok", driver.execute(action)
    except InvalidTransition as e:  # narrowest first: InvalidTransition is a CallerError
        return "err", type(e)
    except DeviceLost as e:
        return "err", type(e)


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("path", sorted(PATHS))
def test_lifecycle_path(path, impl):
    driver = _started(IMPLS[impl])
    for i, (action, outcome, expected) in enumerate(PATHS[path]):
        where = f"step {i}: {action!r}"
        if isinstance(outcome, type) and issubclass(outcome, Exception):
            before = driver.abstract()
            with pytest.raises(outcome):
                driver.execute(action)
            assert driver.abstract() == before, f"{where} was refused but changed the state"
        else:
            assert driver.execute(action) == outcome, where
        assert driver.abstract() == expected, where


@pytest.mark.parametrize("path", sorted(PATHS))
def test_lifecycle_path_spec_and_refimpl_agree(path):
    spec, ref = _started(SpecDriver), _started(RefimplDriver)
    for i, (action, _, _) in enumerate(PATHS[path]):
        assert _outcome(ref, action) == _outcome(spec, action), f"step {i}: {action!r}"
        assert ref.abstract() == spec.abstract(), f"step {i}: {action!r}"


def test_paths_cover_every_allocation_edge():
    """Every table edge is taken by some accepted step of some path (run on the spec)."""
    taken = set()
    for steps in PATHS.values():
        driver = _started(SpecDriver)
        for action, outcome, _ in steps:
            before = driver.abstract().allocations
            try:
                driver.execute(action)
            except (InvalidTransition, DeviceLost):
                continue
            after = driver.abstract().allocations
            for aid, rec in before.items():
                new = after.get(aid)
                if new is None:
                    taken.add((rec.state, "gone"))
                elif new.state is not rec.state:
                    taken.add((rec.state, new.state))
    # The self-loops are the composed manager's actions (ShrinkLease, GrowLease): test_*_is_a_live_self_loop.
    expected = {(src, dst if dst not in TERMINAL else "gone") for (src, e), dst in ALLOCATION_TABLE.items()
                if e not in (AllocEvent.SHRINK, AllocEvent.GROW)}
    assert expected <= taken


def _composed(impl: str) -> tuple[Callable[[Any], Any], Callable[[], State]]:
    """(do, ledger) of the composed manager (spec.manager or refimpl's), in the fixture world."""
    if impl == "spec":
        from spec import manager as MG
        from spec import manager_actions as MA
        box = [MA.initial()]

        def do(act: Any) -> Any:
            box[0], result = MG.step(box[0], act)
            return result
        return do, lambda: box[0].ledger
    from refimpl.verify.manager_adapter import ManagerAdapter
    ad = ManagerAdapter()
    return ad.execute, lambda: ad.abstract().ledger


@pytest.mark.parametrize("impl", ["spec", "refimpl"])
def test_shrink_is_a_live_self_loop(impl):
    """A live lease shrinks and stays live (bytes and charge fall, its reservation stays); giving back all of it,
    or shrinking a quarantined one, is refused and changes nothing."""
    from spec import manager_actions as MA
    from spec.errors import InvalidBytes
    do, ledger = _composed(impl)
    for action, result in SETUP:
        assert do(action) == result
    assert do(A.Reserve(1, 1, DEV, 100, Role.KV)) == 1 and do(A.Commit(1, 1, 80)) is None
    assert do(MA.ShrinkLease(1, 1, 30)) is None
    assert ledger() == _state(50, allocs=(_alloc(1, L, 100, 50),), next_allocation=2)
    shrunk = ledger()
    with pytest.raises(InvalidBytes, match="leaves"):
        do(MA.ShrinkLease(1, 1, 50))
    assert ledger() == shrunk
    do(A.Quarantine(1, 1, 0))
    quarantined = ledger()
    with pytest.raises(InvalidTransition, match="shrink"):
        do(MA.ShrinkLease(1, 1, 1))
    assert ledger() == quarantined
    assert ledger() == _state(50, allocs=(_alloc(1, Q, 100, 50),), next_allocation=2)


@pytest.mark.parametrize("impl", ["spec", "refimpl"])
def test_grow_is_a_live_self_loop(impl):
    """A live lease grows and stays live (bytes and charge rise together, the reservation as far as it must to cover
    them, no id is issued); a grow past the limit, or of a quarantined lease, is refused and changes nothing."""
    from spec import manager_actions as MA
    from spec.errors import CapacityDenied
    do, ledger = _composed(impl)
    for action, result in SETUP:
        assert do(action) == result
    assert do(A.Reserve(1, 1, DEV, 100, Role.KV)) == 1 and do(A.Commit(1, 1, 80)) is None
    assert do(MA.GrowLease(1, 1, 10)) is None  # within the reservation: it stays
    assert ledger() == _state(90, allocs=(_alloc(1, L, 100, 90),), next_allocation=2)
    assert do(MA.GrowLease(1, 1, 20)) is None  # past it: the reservation rises to cover the lease (C2)
    assert ledger() == _state(110, allocs=(_alloc(1, L, 110, 110),), next_allocation=2)
    grown = ledger()
    with pytest.raises(CapacityDenied, match="try-only"):
        do(MA.GrowLease(1, 1, 891))
    assert ledger() == grown
    do(A.Quarantine(1, 1, 0))
    quarantined = ledger()
    with pytest.raises(InvalidTransition, match="grow"):
        do(MA.GrowLease(1, 1, 1))
    assert ledger() == quarantined
    assert ledger() == _state(110, allocs=(_alloc(1, Q, 110, 110),), next_allocation=2)


# --- I4a: ids are never reused ---------------------------------------------------


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_allocation_ids_never_reused(impl):
    d = _started(IMPLS[impl])
    a = d.execute(A.Reserve(1, 1, DEV, 10, Role.KV))
    b = d.execute(A.Reserve(1, 1, DEV, 10, Role.KV))
    d.execute(A.Cancel(1, a))
    c = d.execute(A.Reserve(1, 1, DEV, 10, Role.KV))
    d.execute(A.Commit(1, c, 10))
    d.execute(A.Release(1, c))
    d.execute(A.Cancel(1, b))
    e = d.execute(A.RecordCommitted(1, 2, HOST, 5, Role.STAGING))
    d.execute(A.Release(1, e))
    f = d.execute(A.Reserve(1, 1, DEV, 10, Role.KV))
    assert [a, b, c, e, f] == [1, 2, 3, 4, 5]
    assert d.abstract() == _state(10, allocs=(_alloc(5, P, 10),), next_allocation=6)


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("retired", [1, 2, 3])
def test_invalid_retired_allocation_id(impl, retired):
    d = _started(IMPLS[impl])
    for _ in range(3):
        aid = d.execute(A.Reserve(1, 1, DEV, 10, Role.KV))
        d.execute(A.Cancel(1, aid))
    before = d.abstract()
    with pytest.raises(InvalidTransition, match="already released"):
        d.execute(A.Commit(1, retired, 10))
    assert d.abstract() == before


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_allowance_ids_never_reused(impl):
    d = _started(IMPLS[impl])
    w1 = d.execute(A.OpenAllowance(1, 1, 100))
    d.execute(A.CloseAllowance(1, w1))
    w2 = d.execute(A.OpenAllowance(1, 1, 100))
    assert (w1, w2) == (1, 2)
    assert d.abstract() == attrs.evolve(
        _state(), allowances=immutables.Map({2: Allowance(2, 1, 1, 100, 0, 0)}), next_allowance=3)


def test_a_misspelled_guard_name_is_refused_where_it_is_read() -> None:
    """Found by mutation testing (issue #9): `on()` accepted any name, so a typo made a guard impossible to switch off."""
    from spec.guards import ALL_ON, GUARDS

    assert all(ALL_ON.on(g.name) for g in GUARDS)
    with pytest.raises(ValueError, match="unknown guard 'limit_chek'"):
        ALL_ON.on("limit_chek")
