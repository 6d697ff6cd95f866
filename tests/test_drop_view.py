"""DropView and the lease under a view (C6, I9; issue #21): the spec and the governor, side by side.

A committed transaction's view stays over its lease until DropView; while it
stands, the lease cannot be released, cancelled, quarantined, pinned or given
up under pressure (InvalidTransition), and a view bound by an execution
cannot be dropped (ViewInUse). Every script runs on `spec.manager` and on
`ProcessMemoryManager` (contracts off and on): the same outcome per step,
the same whole state after each, and a refusal changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from refimpl_manager_harness import published

from invariants import contracts
from invariants import manager as IM
from invariants.clauses import collecting
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.manager_hooks import abstract_manager
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import (InvalidArgument, InvalidTransition, ProviderPinned, UnknownView, ViewInUse)
from spec.types import Tier, ViewState

DEV, HOST, H1, H2 = 1, 2, 1, 2
# A committed view 1 over lease 1 (H1's, 3 B on DEV); transaction 2 (H2, HOST) binds it in its execution.
SETUP = (A.RegisterAuthority("dev", Tier.DEVICE, 8), A.RegisterAuthority("host", Tier.HOST, 8),
         A.RegisterHolder("h1"), A.RegisterHolder("h2"),
         M.PlanTx(H1, ((DEV, 3),)), M.ReserveTx(1), M.PublishView(1), M.ExecuteView(1, 1, 1), M.CommitTx(1),
         M.PlanTx(H2, ((HOST, 1),)), M.ReserveTx(2), M.PublishView(2), M.ExecuteView(2, 1, 1))


class _Both:
    """The spec and the governor driven by the same actions; each step's outcome and state compared."""

    def __init__(self) -> None:
        self.spec, self.gov = M.initial(), ManagerAdapter()

    def do(self, act: Any) -> Any:
        try:
            nxt, expected = MG.step(self.spec, act)
        except Exception as e:  # a typed refusal: the governor refuses with the same class, changing nothing
            before = self.gov.abstract()
            with pytest.raises(type(e)) as got:
                self.gov.execute(act)
            assert type(got.value) is type(e) and self.gov.abstract() == before == self.spec
            return e
        IM.check_step(self.spec, act, nxt, expected)
        IM.check_all(nxt)
        assert self.gov.execute(act) == expected
        self.spec = nxt
        assert self.gov.abstract() == nxt
        return expected


@pytest.fixture(params=[False, True], ids=["contracts-off", "contracts-on"])
def both(request: pytest.FixtureRequest) -> Any:
    with contracts.contracts(request.param):
        b = _Both()
        for act in SETUP:
            assert not isinstance(b.do(act), Exception), act
        yield b


def test_committed_view_is_over_its_lease() -> None:
    m = M.initial()
    for act in SETUP:
        m = MG.step(m, act)[0]
    v = m.views[1]
    assert (v.tx, v.authority, v.allocation, v.state, v.users) == (1, DEV, 1, ViewState.MAPPED, ((2, 1),))
    assert m.ledger.allocations[1].state.value == "live" and 1 not in m.txs


@pytest.mark.parametrize("act, error, match", [
    (M.DropView("1"), InvalidArgument, "int id"),
    (M.DropView(9), UnknownView, "not known"),
    (M.DropView(2), InvalidTransition, "provisional view of open transaction 2"),
    (M.DropView(1), ViewInUse, r"bound to execution\(s\) \[2\]"),
    (A.Release(H1, 1), InvalidTransition, "view 1"),
    (A.Quarantine(H1, 1, 0), InvalidTransition, "view 1"),
    (M.SetUse(H1, 1, True, False), InvalidTransition, "view 1"),
    (M.RemoveAuthority(DEV), ProviderPinned, "view 1"),
], ids=["not-int", "unknown", "provisional", "bound", "release-lease", "quarantine-lease", "pin-lease",
        "remove-authority"])
def test_invalid_drop_or_lease_use_under_a_view_is_refused_unchanged(both: Any, act: Any, error: type,
                                                                    match: str) -> None:
    before = both.spec
    with pytest.raises(error, match=match):
        MG.step(before, act)
    assert isinstance(both.do(act), error)  # the governor: the same class, nothing changed (`_Both.do`)


def test_answer_cannot_give_up_the_lease_under_a_view(both: Any) -> None:
    pid = both.do(M.Press(H1, DEV, 3))
    assert isinstance(both.do(M.Answer(H1, pid, (1,))), InvalidTransition)


def test_drop_after_the_execution_ends_frees_the_lease(both: Any) -> None:
    both.do(M.CommitTx(2))  # its execution ends: view 1 is bound by nobody
    assert both.do(M.DropView(1)) is None and 1 not in both.spec.views
    assert isinstance(both.do(M.DropView(1)), InvalidTransition)  # dropped already
    used = both.spec.ledger.authorities[DEV].used
    assert both.do(A.Release(H1, 1)) is None
    assert both.spec.ledger.authorities[DEV].used == used - 3  # credited once, now


def test_a_lost_devices_view_is_dropped_and_the_provider_removed(both: Any) -> None:
    # Before DropView existed a committed view pinned its authority forever (RemoveAuthority: ProviderPinned).
    both.do(A.LoseDevice(DEV))  # view 1 INVALID, unbound; transaction 2 (bound to it) aborted
    assert both.spec.views[1].state is ViewState.INVALID and 2 not in both.spec.txs
    both.do(A.ConfirmTermination(DEV))
    assert isinstance(both.do(M.RemoveAuthority(DEV)), ProviderPinned)  # the invalid view still pins it
    both.do(M.DropView(1))
    assert both.do(M.RemoveAuthority(DEV)) is None and DEV not in both.spec.ledger.authorities


def test_abort_drops_a_provisional_view_without_drop_view(both: Any) -> None:
    assert both.do(M.AbortTx(2)) == 1 and 2 not in both.spec.views
    assert both.spec.views[1].users == ()  # transaction 2's execution ended with it
    assert both.do(M.DropView(1)) is None


def test_a_view_dropped_under_an_open_execution_breaks_drop_fences_users() -> None:
    # The harm the ViewInUse refusal prevents, as a step: I9 names it; the same drop once unbound is no harm.
    m = M.initial()
    for act in SETUP:
        m = MG.step(m, act)[0]
    with collecting() as found:
        IM.check_step(m, M.DropView(1), evolve(m, views=m.views.delete(1)), None)
    assert found == ["step_I9_views.drop_fences_users"]
    idle = MG.step(m, M.CommitTx(2))[0]
    with collecting() as found:
        IM.check_step(idle, M.DropView(1), MG.step(idle, M.DropView(1))[0], None)
    assert found == []


def test_a_loss_that_aborts_a_transaction_bound_to_its_view_keeps_the_contract_books() -> None:
    # Found by the campaign (main fails it): the loss of hbm1 aborts transaction 2, bound to view 1 over hbm1,
    # and cancels its reservation on hbm0, a ledger the loss's contract scope did not include; the local
    # contract's books then disagreed with the rows (I1). The scope's closure now follows view bindings.
    pmm = ProcessMemoryManager()
    with contracts.contracts(True):
        h = pmm.register_holder("w")
        a1, a2 = pmm.register_authority("hbm0", Tier.DEVICE, 12), pmm.register_authority("host", Tier.HOST, 16)
        a3 = pmm.register_authority("hbm1", Tier.DEVICE, 8)
        x, v = published(pmm, h, ((a3, 1),))
        pmm.commit_tx(x)
        y, _ = published(pmm, h, ((a1, 1),))
        pmm.execute_view(y, v, 1)
        pmm.lose_device(a3)
        assert y not in abstract_manager(pmm).txs and pmm.snapshot(a1).used == 0
        pmm.plan_tx(h, ((a1, 1), (a2, 1)))  # the next operation on hbm0 checks its books: no violation
