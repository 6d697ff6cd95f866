# The local contract (contracts level "local", refimpl.manager.local_contract) against every manager mutant.
#
# Each mutant of refimpl/verify/mutants.py whose module is refimpl/manager/* is applied with the mutation harness
# (invariants.mutation.applied) and one deterministic workload runs with contracts on: the contract must raise
# InvariantViolation. The same workload runs clean on the real code at both levels (the negative control), and a
# seeded random workload of the hot operations gives the same outcome at level "local" and level "full", on the
# real code and under each hot-path mutant.

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.mutation import applied
from invariants.ledger import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.manager import local_contract
from refimpl.manager.contract_books import checkpoint
from refimpl.verify.manager_adapter import commit_limit, prepare_limit
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.errors import GovernorError
from spec.types import Role, Tier
from refimpl_manager_harness import lease

DEV, KV = Tier.DEVICE, Role.KV
#: Tracing mutants (`submodel="replay"`, `refimpl.verify.mutants_replay`) change what a trace records, not the
#: governor's state: no contract can see them; the replay controls catch them (tests/test_replay_mutants.py).
MANAGER_MUTANTS = sorted(n for n, m in MUTANTS.items()
                         if m.module.startswith("refimpl.manager.") and m.submodel != "replay")
#: The composed workload below drives the composed operations; the pressure model's mutants (tickets, arbitration,
#: holder pressure) are found by the pressure checker's composed restriction (`invariants/manager_pressure.py`).
#: The transaction mutants (model "transactions": intents, loss, views, bundles) are found by the transactions
#: checker's composed restriction and the scripts of tests/test_manager_tx.py.
#: Composed mutants whose harm the local contract does not check (it checks the records a hot operation touched;
#: a limit commit's lowering below what the ledger granted is not one of them): the full level catches each, with
#: this clause (`test_what_the_local_contract_cannot_see_the_full_one_does`), as does the manager checker.
LOCAL_CANNOT_SEE = {"limit_commit_checks_old_limit": "step_I2_manager.limit_backs_every_grant"}
#: A process quota's room is a whole tier's: while one is set, every operation runs the full contract
#: (`refimpl.manager.views`), never the local one; this workload sets none. `quota_ignored` is caught by the
#: manager checker (I1's `step_I1_quota.tier_charge_within_quota`) and the refused grants of
#: tests/test_manager_quota.py.
QUOTA_MUTANTS = {"quota_ignored"}
COMPOSED_MUTANTS = [n for n in MANAGER_MUTANTS if MUTANTS[n].model not in ("pressure", "transactions")
                    and n not in LOCAL_CANNOT_SEE and n not in QUOTA_MUTANTS]


def _try(f: Callable[..., Any], *args: Any) -> Any:
    """Run one operation; a typed refusal is part of the workload (an InvariantViolation is not)."""
    try:
        return f(*args)
    except GovernorError:
        return None


def workload(pmm: ProcessMemoryManager, background: int = 0) -> list[str]:
    """Every part's operations once, in an order that reaches each manager mutant's bug. Returns the steps run.

    `background`: gpu0 and gpu1 already hold that many 1-byte leases of another holder (`prefill`), and their
    capacities are larger by as much, so every step sees the same headroom (the registrations below return
    the existing ledgers; tests/test_manager_contracts_local_scale.py)."""
    done: list[str] = []

    def step(label: str, f: Callable[..., Any], *args: Any) -> Any:
        done.append(label)
        return _try(f, *args)

    a = step("register gpu0", pmm.register_authority, "gpu0", DEV, 1000 + background)
    b = step("register gpu1", pmm.register_authority, "gpu1", DEV, 1000 + background)
    step("re-register gpu0 bigger (refused)", pmm.register_authority, "gpu0", DEV, 2000 + background)
    v = step("alias of gpu0", pmm.register_alias, a, "uvm")
    step("alias through the alias", pmm.register_alias, v, "uvm2")
    h = step("holder kv", pmm.register_holder, "kv")
    g = step("holder weights", pmm.register_holder, "weights")
    x = step("reserve 100", pmm.reserve, h, a, DEV, 100, KV)
    step("commit 60 of 100", pmm.commit, h, x, 60)
    step("release", pmm.release, h, x)
    step("reserve 50", pmm.reserve, h, a, DEV, 50, KV)
    z = step("reserve 10 through the alias", pmm.reserve, h, v, DEV, 10, KV)
    step("cancel it", pmm.cancel, h, z)
    step("record 30", pmm.record_committed, h, a, DEV, 30, KV)
    q = step("reserve 40", pmm.reserve, h, a, DEV, 40, KV)
    step("commit 40 as another holder (refused)", pmm.commit, g, q, 40)
    step("commit 40", pmm.commit, h, q, 40)
    step("quarantine, 10 released", pmm.quarantine, h, q, 10)
    s = step("snapshot", pmm.snapshot, a)
    step("reserve one byte too many (refused)", pmm.reserve, h, a, DEV, s.limit - s.used + 1, KV)
    over = step("record one byte past the limit", pmm.record_committed, h, a, DEV, s.limit - s.used + 1, KV)
    step("snapshot oversubscribed", pmm.snapshot, a)
    step("release the recorded bytes", pmm.release, h, over)
    w = step("open allowance 100", pmm.open_allowance, h, a, 100)
    w2 = step("open another holder's allowance 50", pmm.open_allowance, g, a, 50)
    step("reserve growth 80", pmm.reserve_growth, h, w, 80)
    step("map 60", pmm.map_allowance, h, w, 60)
    step("unmap 10", pmm.unmap_allowance, h, w, 10)
    step("transfer 5 to it", pmm.transfer_allowance, h, w, w2, 5)
    step("snapshot with allowances", pmm.snapshot, a)
    step("close another holder's allowance (refused)", pmm.close_allowance, h, w2)
    step("close it", pmm.close_allowance, g, w2)
    step("snapshot after close", pmm.snapshot, a)
    # lease shrink (I1): part of an idle lease goes back; all that is left of it is refused (that is a release)
    sx = step("try-reserve 20 on gpu0", pmm.try_reserve, h, a, 20, 0, KV)
    step("shrink it by 15", pmm.shrink_lease, h, sx, 15)
    step("shrink it by all it has left (refused)", pmm.shrink_lease, h, sx, 5)
    # lease grow (I1, I2, I13): a charge admitted as a try-reserve; past the headroom it is refused
    step("grow it by 4", pmm.grow_lease, h, sx, 4)
    step("grow it past the headroom (refused)", pmm.grow_lease, h, sx, 10**9)
    # holder lifetime (I4a): a holder named by nothing but its waiting ticket stays registered until it retires
    spare = step("holder spare", pmm.register_holder, "spare")
    s = step("snapshot before the spare's ticket", pmm.snapshot, a)
    st = step("spare's ticket of the headroom plus one (waits)", pmm.submit, spare, a, s.limit - s.used + 1, 0, KV)
    step("grow the lease by a byte behind it (refused: I13)", pmm.grow_lease, h, sx, 1)
    step("unregister spare (refused: its ticket names it)", pmm.unregister_holder, spare)
    step("cancel spare's ticket", pmm.cancel_ticket, spare, st)
    step("unregister spare", pmm.unregister_holder, spare)
    step("release the grown lease", pmm.release, h, sx)
    # model views on gpu0 (C4, C6, I9): each refusal below is one a view mutant lets through
    vx = step("plan a transaction of 5 on gpu0", pmm.plan_tx, h, ((a, 5),))
    step("publish its view before its need is held (refused: C4)", pmm.publish_view, vx)
    step("reserve it", pmm.reserve_all, vx)
    view = step("publish its view", pmm.publish_view, vx)
    vy = step("plan another holder's transaction of 5 on gpu0", pmm.plan_tx, g, ((a, 5),))
    step("reserve that one", pmm.reserve_all, vy)
    step("publish its own view", pmm.publish_view, vy)
    step("it executes the first one's provisional view (refused: C6)", pmm.execute_view, vy, view, 1)
    step("execute the view at a generation it is not at (refused: C6)", pmm.execute_view, vx, view, 2)
    step("execute the view", pmm.execute_view, vx, view, 1)
    step("remap the view under that execution (refused: I9)", pmm.remap_view, view)
    leases = step("commit the first transaction", pmm.commit_tx, vx)
    step("abort the second", pmm.abort_tx, vy)
    vz = step("plan a third transaction of 5 on gpu0", pmm.plan_tx, g, ((a, 5),))
    step("reserve the third", pmm.reserve_all, vz)
    step("publish the third's view", pmm.publish_view, vz)
    step("the third executes the committed view", pmm.execute_view, vz, view, 1)
    step("drop the committed view under that execution (refused: I9)", pmm.drop_view, view)
    step("abort the third", pmm.abort_tx, vz)
    step("release the lease under the committed view (refused: C6)", pmm.release, h, leases[0])
    step("drop the committed view", pmm.drop_view, view)
    step("release its lease", pmm.release, h, leases[0])
    # tickets on gpu1 (aging bound 1: a misfit matures on its first round)
    fill = step("reserve 900 on gpu1", pmm.reserve, g, b, DEV, 900, KV)
    step("commit it", pmm.commit, g, fill, 900)
    big = step("submit 150 (a matured misfit)", pmm.submit, h, b, 150)
    small = step("submit 33 (waits behind it)", pmm.submit, h, b, 33)
    step("try_reserve 1 (refused: tickets wait, I13)", pmm.try_reserve, g, b, 1)
    step("cancel the misfit: the round grants 33", pmm.cancel_ticket, h, big)
    step("claim 33", pmm.claim, h, small)
    t3 = step("submit 21 (granted at once)", pmm.submit, h, b, 21)
    step("cancel it (21 B credited)", pmm.cancel_ticket, h, t3)
    t4 = step("submit 17 (granted, unclaimed)", pmm.submit, h, b, 17)
    tx = step("plan a transaction of 17", pmm.plan_tx, h, ((b, 17),))
    bundle = step("open a state bundle", pmm.open_bundle)
    step("the transaction commits its next step", pmm.join_bundle, tx, bundle)
    step("reserve it", pmm.reserve_all, tx)
    step("commit it", pmm.commit_tx, tx)
    lease17 = step("claim the 17 B ticket", pmm.claim, h, t4)
    pr = step("open pressure", pmm.open_pressure, h, b, 10)
    step("answer with another holder's lease (refused)", pmm.answer, h, pr, (fill,))
    step("cancel pressure", pmm.cancel_pressure, pr)
    pp = step("open pressure", pmm.open_pressure, h, b, 10)
    step("pin the 17 B lease", pmm.set_use, h, lease17, True, False)
    step("answer with the pinned lease (refused: I6)", pmm.answer, h, pp, (lease17,))
    step("unpin it", pmm.set_use, h, lease17, False, False)
    step("cancel that pressure", pmm.cancel_pressure, pp)
    due = step("open pressure of priority 1, due at 5", pmm.open_pressure, h, b, 10, 1, 5)
    step("answer it at 6 with the 17 B lease (refused: late, C5)", pmm.answer, h, due, (lease17,), 6)
    step("expire it at 6", pmm.expire_pressure, due, 6)
    step("submit 100 on gpu1 (waits)", pmm.submit, h, b, 100)
    old = step("open pressure on the other holder", pmm.open_pressure, g, b, 10)
    step("reconfigure gpu1: the waiter fails", pmm.reconfigure, b)
    step("answer the older pressure (refused: StaleGeneration, C5)", pmm.answer, g, old, (fill,))
    step("cancel it", pmm.cancel_pressure, old)
    # limits (I2): a lowering below what gpu1 granted keeps the old limit; a limit past its capacity is refused
    step("prepare gpu1's limit at 100 (used is above it)", partial(prepare_limit, pmm), b, 100)  # checkers' steps
    step("commit it: the old limit stays", partial(commit_limit, pmm), b)
    step("lower gpu1's limit past its capacity (refused)", pmm.lower_limit, b, 1500 + background)
    step("commit it (refused: nothing pending)", partial(commit_limit, pmm), b)
    step("lose gpu1", pmm.lose_device, b)
    step("confirm termination", pmm.confirm_termination, b)
    return done


def prefill(pmm: ProcessMemoryManager, background: int) -> None:
    """gpu0 and gpu1 as `workload(pmm, background)` registers them, each holding `background` live 1-byte leases
    of a holder of their own (reserved, then committed), booked with contracts off."""
    with contracts.contracts(False):
        auths = [pmm.register_authority(name, DEV, 1000 + background) for name in ("gpu0", "gpu1")]
        bg = pmm.register_holder("background")
        reserve, commit = pmm.reserve, pmm.commit
        for a in auths:
            for _ in range(background):
                commit(bg, reserve(bg, a, DEV, 1, KV), 1)


def _manager() -> ProcessMemoryManager:
    return ProcessMemoryManager(aging_bound=1)


@pytest.mark.parametrize("level", contracts.LEVELS)
def test_workload_is_clean_on_the_real_code(level: str) -> None:
    """Negative control: without a mutant the workload raises no InvariantViolation, and reaches its end."""
    pmm = _manager()
    with contracts.contracts(True, level=level):
        done = workload(pmm)
    assert done[-1] == "confirm termination" and len(done) == 106


def test_every_manager_mutant_is_listed() -> None:
    assert len(COMPOSED_MUTANTS) >= 27  # the registry's refimpl.manager mutants (ledger, allowances, tickets, ...)


@pytest.mark.parametrize("name", COMPOSED_MUTANTS)
def test_local_contract_catches_manager_mutant(name: str) -> None:
    m = MUTANTS[name]
    pmm = _manager()
    with applied(m), contracts.contracts(True, level="local"), pytest.raises(InvariantViolation) as exc:
        workload(pmm)
    assert exc.value.id in (*m.ids, "G4") or exc.value.id in _ALSO.get(name, ()), (name, exc.value)


@pytest.mark.parametrize("name", sorted(LOCAL_CANNOT_SEE))
def test_what_the_local_contract_cannot_see_the_full_one_does(name: str) -> None:
    m = MUTANTS[name]
    with applied(m), contracts.contracts(True, level="local"):
        assert workload(_manager())[-1] == "confirm termination"  # runs clean: out of the local contract's reach
    with applied(m), contracts.contracts(True, level="full"), pytest.raises(InvariantViolation) as exc:
        workload(_manager())
    assert exc.value.clause == LOCAL_CANNOT_SEE[name], exc.value


#: Mutants the local contract names by another ID than the registry's (the harm shows there first).
_ALSO: dict[str, tuple[str, ...]] = {
    "grant_rounds_charge_down": ("I1",),  # used falls short of the rows' charges: conservation, before I2
    "recorded_bytes_not_charged": ("I1",),
    "growth_charges_ledger": ("I1",),  # level "full" (allowances): used moved, charges did not
}


# --- local and full agree on a seeded random workload of the hot operations ---------------------

HOT_MUTANTS = sorted(n for n in COMPOSED_MUTANTS
                     if MUTANTS[n].module in ("refimpl.manager.ledger", "refimpl.manager.arbitration"))


def random_workload(pmm: ProcessMemoryManager, seed: int, steps: int = 120) -> list[Any]:
    """Seeded random hot operations (valid and invalid arguments); returns each step's outcome."""
    rng = random.Random(seed)
    a = pmm.register_authority("gpu0", DEV, 300)
    hs = [pmm.register_holder("kv"), pmm.register_holder("weights")]
    allocs: list[int] = []
    tickets: list[int] = []
    out: list[Any] = []
    for _ in range(steps):
        h = rng.choice(hs + [99])
        op = rng.randrange(9)
        n = rng.choice([1, 7, 32, 33, 100, 250, 301, 0])
        if op == 0:
            f, args = pmm.reserve, (h, rng.choice([a, a, 7]), DEV, n, KV)
        elif op == 1:
            f, args = pmm.record_committed, (h, a, DEV, n, KV)
        elif op in (2, 3, 4):
            f = (pmm.commit, pmm.cancel, pmm.release)[op - 2]
            i = rng.choice(allocs + [12345]) if allocs else 12345
            args = (h, i, n) if op == 2 else (h, i)
        elif op == 5:
            f, args = pmm.submit, (h, a, n, rng.randrange(3))
        elif op in (6, 7):
            f = pmm.claim if op == 6 else rng.choice([pmm.cancel_ticket, pmm.timeout_ticket])
            args = (h, rng.choice(tickets + [999]) if tickets else 999)
        else:
            f, args = pmm.snapshot, (a,)
        try:
            r = f(*args)
        except GovernorError as e:
            out.append(type(e).__name__)
            continue
        out.append(r if type(r) is int or r is None else repr(r))
        if f in (pmm.reserve, pmm.record_committed, pmm.claim):
            allocs.append(r)
        elif f == pmm.submit:
            tickets.append(r)
    return out


def _run(seed: int, level: str) -> tuple[Any, ...]:
    """(outcomes, the index of the step that raised InvariantViolation or None, its ID, final manager view)."""
    pmm = ProcessMemoryManager(aging_bound=2)
    outcomes: list[Any] = []
    with contracts.contracts(True, level=level):
        try:
            outcomes = random_workload(pmm, seed)
        except InvariantViolation as e:
            return None, e.id
    return outcomes, None, abstract_manager(pmm)


SEEDS = range(6)


@pytest.mark.parametrize("seed", SEEDS)
def test_local_and_full_agree_on_the_real_code(seed: int) -> None:
    local, full = _run(seed, "local"), _run(seed, "full")
    assert local[1] is None and full[1] is None  # neither level raises on the real code
    assert local == full  # same outcome for every step, same final records
    assert any(type(o) is str for o in local[0]) and any(type(o) is int for o in local[0])  # both kinds occur


#: Hot mutants the seeded random workload reaches (on some seed); the others need the scripted workload above.
REACHED = {"cancel_forgets_round", "cancel_keeps_reservation", "commit_grows_lease", "commit_rehomes_lease", "grant_rounds_charge_down",
           "grant_rounds_up", "id_counter_not_advanced", "limit_check_off_by_request", "misfit_prebooked",
           "oversubscription_off_by_one", "recorded_bytes_not_charged", "reissue_ids_after_release",
           "release_without_refund"}


@pytest.mark.parametrize("name", HOT_MUTANTS)
def test_local_and_full_agree_under_hot_mutants(name: str) -> None:
    """Seed by seed, the local contract raises exactly where the full check does, naming the same ID."""
    ids = {}
    with applied(MUTANTS[name]):
        for level in contracts.LEVELS:
            ids[level] = [_run(seed, level)[1] for seed in SEEDS]
    assert ids["local"] == ids["full"], ids
    assert any(ids["local"]) == (name in REACHED), ids


# --- pinned: each conservation clause catches a bug the other cannot see ------------------------


class _TakesAnotherCharge(ProcessMemoryManager):
    """Broken on purpose: a release also zeroes another lease of the ledger, and books it as refunded."""

    def _finish(self, holder: int, allocation: int, event: str) -> None:
        victim = next(r for r in self._allocs[allocation].auth.allocs.values() if r.id != allocation)
        victim.auth.used -= victim.charge
        victim.charge = 0
        super()._finish(holder, allocation, event)


class _DriftsAnotherRow(ProcessMemoryManager):
    """Broken on purpose: a commit also adds a byte to another lease's charge, and not to the ledger."""

    def _commit(self, holder: int, allocation: int, nbytes: int) -> None:
        super()._commit(holder, allocation, nbytes)
        other = next((r for r in self._allocs[allocation].auth.allocs.values() if r.id != allocation), None)
        if other is not None:
            other.charge += 1


def _two_leases(pmm: ProcessMemoryManager) -> tuple[int, int, int]:
    a, h = pmm.register_authority("gpu0", DEV, 1000), pmm.register_holder("kv")
    x = lease(pmm, h, a, 10)
    return h, x, pmm.reserve(h, a, DEV, 20, KV)


def test_release_taking_another_charge_breaks_the_conservation_step() -> None:
    pmm = _TakesAnotherCharge()
    with contracts.contracts(True):
        h, x, y = _two_leases(pmm)
        pmm.commit(h, y, 20)
        with pytest.raises(InvariantViolation, match=r"^I1:.*records moved") as exc:
            pmm.release(h, y)  # rows and used agree: only the step (used moved by the named charge) sees it
    assert exc.value.clause == "local.conserved_step"


def test_commit_drifting_another_row_is_named_when_that_row_is_next_touched() -> None:
    """An O(touched) check does not read the row the commit drifted (used did not move, the books did not): the
    next operation that touches it finds it charged otherwise than the books last saw it."""
    pmm = _DriftsAnotherRow()
    with contracts.contracts(True):
        h, x, y = _two_leases(pmm)
        pmm.commit(h, y, 15)  # x drifts 10 -> 11 B, unseen
        with pytest.raises(InvariantViolation, match=r"^I1: allocation 1 is charged 11 B before this operation, "
                                                     r"but 10 B when the contract last saw it") as exc:
            pmm.release(h, x)
    assert exc.value.clause == "local.row_as_booked"


def test_checkpoint_names_the_drifted_row_at_once() -> None:
    pmm = _DriftsAnotherRow()
    with contracts.contracts(True):
        h, x, y = _two_leases(pmm)
        pmm.commit(h, y, 15)
        with pytest.raises(InvariantViolation, match=r"^I1: allocation 1 is charged 11 B now, but 10 B") as exc:
            checkpoint(pmm)
    assert exc.value.clause == "local.row_as_booked"


def test_level_full_names_the_drifted_row_at_the_commit() -> None:
    """Level "full" recomputes each touched ledger's conservation from every row, on every operation."""
    pmm = _DriftsAnotherRow()
    with contracts.contracts(True, level="full"):
        h, x, y = _two_leases(pmm)
        with pytest.raises(InvariantViolation, match=r"^I1:.*its allocations charge") as exc:
            pmm.commit(h, y, 15)
    assert exc.value.clause == "local.conserved"


# --- the books: each hot kind checks `used` against them, and its named row against what they saw ------------

#: op(pmm, h, x, y, t): x a 10 B lease, y a 20 B reservation, t a granted 5 B ticket (its reservation: row 3).
HOT_OPS: dict[str, Callable[..., Any]] = {
    "reserve": lambda pmm, h, x, y, t: pmm.reserve(h, 1, DEV, 5, KV),
    "record_committed": lambda pmm, h, x, y, t: pmm.record_committed(h, 1, DEV, 5, KV),
    "commit": lambda pmm, h, x, y, t: pmm.commit(h, y, 20),
    "cancel": lambda pmm, h, x, y, t: pmm.cancel(h, y),
    "release": lambda pmm, h, x, y, t: pmm.release(h, x),
    "submit": lambda pmm, h, x, y, t: pmm.submit(h, 1, 5),
    "claim": lambda pmm, h, x, y, t: pmm.claim(h, t),
    "cancel_ticket": lambda pmm, h, x, y, t: pmm.cancel_ticket(h, t),
    "timeout_ticket": lambda pmm, h, x, y, t: pmm.timeout_ticket(h, t),
}
#: The row each op names (by the argument order above), for the row-drift case; reserve, record and submit name none.
NAMED_ROW = {"commit": "y", "cancel": "y", "release": "x", "claim": "t", "cancel_ticket": "t", "timeout_ticket": "t"}


def _three(pmm: ProcessMemoryManager) -> tuple[int, int, int, int]:
    h, x, y = _two_leases(pmm)
    return h, x, y, pmm.submit(h, 1, 5)


@pytest.mark.parametrize("op", sorted(HOT_OPS))
def test_used_drifting_between_operations_breaks_the_books(op: str) -> None:
    """`used` moved by no operation (the rows did not): the next operation moves it by exactly its own rows, so only
    the books (the rows' charges as the contract saw them) tell the ledger's figure is off."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        h, x, y, t = _three(pmm)
        pmm._auths[1].used += 1
        with pytest.raises(InvariantViolation, match=r"^I1: authority 1: used \d+ B, its allocations charge \d+ B "
                                                     r"\(the rows as the contract booked them\)") as exc:
            HOT_OPS[op](pmm, h, x, y, t)
    assert exc.value.clause == "local.conserved"


@pytest.mark.parametrize("op", sorted(NAMED_ROW))
def test_a_row_changed_between_operations_is_named_at_its_next_touch(op: str) -> None:
    """A row's charge and `used` both moved by no operation (so conservation still adds up): the next operation
    that names the row finds it charged otherwise than the books last saw it."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        h, x, y, t = _three(pmm)
        row = {"x": x, "y": y, "t": pmm._tickets[t].alloc.id}[NAMED_ROW[op]]
        pmm._allocs[row].charge += 1
        pmm._auths[1].used += 1
        with pytest.raises(InvariantViolation, match=rf"^I1: allocation {row} is charged \d+ B before this "
                                                     r"operation, but \d+ B when the contract last saw it") as exc:
            HOT_OPS[op](pmm, h, x, y, t)
    assert exc.value.clause == "local.row_as_booked"


@pytest.mark.parametrize("op, body", [("reserve", "_admit"), ("record_committed", "_admit"), ("commit", "_commit"),
                                      ("cancel", "_finish"), ("release", "_finish")])
def test_the_step_is_checked_even_where_the_books_balance(op: str, body: str) -> None:
    """Two faults that cancel in the books: `used` drifted up a byte between operations, and the operation moves it
    a byte short of its records. `used` equals the books again; only the step (used moved by the records' change)
    names the harm."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        h, x, y, t = _three(pmm)
        pmm._auths[1].used += 1
        orig = getattr(pmm, body)

        def short(*args: Any) -> Any:
            r = orig(*args)
            pmm._auths[1].used -= 1
            return r

        setattr(pmm, body, short)
        with pytest.raises(InvariantViolation, match=r"^I1: authority 1: used \d+ -> \d+ B, but the records moved") as exc:
            HOT_OPS[op](pmm, h, x, y, t)
    assert exc.value.clause == "local.conserved_step"


@pytest.mark.parametrize("op", ["commit", "cancel", "release"])
def test_a_refund_runs_the_round_its_waiters_need(op: str) -> None:
    """A commit's refund, a cancel or a release that returns bytes but runs no round leaves a waiter that now
    fits pending (I13): the check reads the ledger's waiters whenever it has any, whatever `used` did."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        a, h = pmm.register_authority("gpu0", DEV, 100), pmm.register_holder("kv")
        x = pmm.reserve(h, a, DEV, 60, KV)
        if op == "release":
            pmm.commit(h, x, 60)
        t = pmm.submit(h, a, 50)  # 40 B free: it waits
        rec = pmm._allocs[x]
        if op == "commit":
            pmm._commit = lambda holder, allocation, n: pmm._commit_rec(rec, n)  # refunds 50 B, no round
            call = lambda: pmm.commit(h, x, 10)  # noqa: E731
        else:
            pmm._finish = lambda holder, allocation, event: pmm._retire(rec)  # refunds 60 B, no round
            call = lambda: getattr(pmm, op)(h, x)  # noqa: E731
        with pytest.raises(InvariantViolation, match=rf"^I13: authority 1: ticket {t} \(50 B\) is first in grant "
                                                     r"order and fits") as exc:
            call()
    assert exc.value.clause == "local.no_idle_fitting_waiter"


@pytest.mark.parametrize("op", ["commit", "cancel", "release"])
def test_a_refund_grants_the_waiter_on_the_real_code(op: str) -> None:
    """Negative control for the test above: the intact body's round grants the waiter; nothing is raised."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        a, h = pmm.register_authority("gpu0", DEV, 100), pmm.register_holder("kv")
        x = pmm.reserve(h, a, DEV, 60, KV)
        if op == "release":
            pmm.commit(h, x, 60)
        t = pmm.submit(h, a, 50)
        pmm.commit(h, x, 10) if op == "commit" else getattr(pmm, op)(h, x)
        assert pmm._tickets[t].state.value == "granted"
        checkpoint(pmm)


@pytest.mark.parametrize("op", sorted(HOT_OPS))
def test_hot_ops_keep_the_books_exact(op: str) -> None:
    """Negative control for the two tests above: each op on a sound ledger, then a checkpoint, raise nothing."""
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        HOT_OPS[op](pmm, *_three(pmm))
        checkpoint(pmm)


def test_broken_subclasses_go_unnoticed_with_contracts_off() -> None:
    """Negative control for the tests above: the harms are real; only the contract reports them."""
    for cls in (_TakesAnotherCharge, _DriftsAnotherRow):
        pmm = cls()
        with contracts.contracts(False):
            h, x, y = _two_leases(pmm)
            pmm.commit(h, y, 15)
            if cls is _TakesAnotherCharge:
                pmm.release(h, y)
        with pytest.raises(InvariantViolation, match=r"^(I1|C2):"):  # the full state check sees the harm
            check_all(abstract_ledger(pmm))
