# Device loss in the composed manager (refimpl.manager.devices) where the mutation run found it unpinned:
# a loss touches only the lost ledger's records (other ledgers' transactions, open or committed, keep their
# charges, also with the C3 negative control off), a pressure ticket it shuts shows CANCELLED, a granted
# ticket's reservation it drops is the holder's DEVICE_LOST lease, and the checked path (contracts on)
# views the lost ledger, so a guard switched off there is caught (C3, I6).

from __future__ import annotations

import pytest
from refimpl_manager_harness import conserved, make, published, used

from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import DeviceLost, InvalidTransition, StaleAnswer
from spec.guards import GuardSet
from spec.types import AllocState, Tier

CONTROLS = ["", "loss_keeps_charge"]


@pytest.mark.parametrize("off", CONTROLS, ids=["guards-on", *CONTROLS[1:]])
def test_loss_leaves_other_ledgers_transactions_charged(off: str) -> None:
    pmm, w = make(GuardSet.without(off) if off else GuardSet())
    open_b = pmm.plan_tx(w.h1, ((w.b, 30),))
    (r_open,) = pmm.reserve_all(open_b)
    done_b = pmm.plan_tx(w.h2, ((w.b, 20),))
    (r_done,) = pmm.reserve_all(done_b)
    pmm.commit_tx(done_b)
    with contracts.contracts(False):
        pmm.lose_device(w.a)  # no record on a: nothing of b's may move
    m = abstract_manager(pmm)
    assert set(m.txs) == {open_b}  # the open transaction on b is not aborted
    assert used(pmm, w.b) == 50
    assert m.ledger.allocations[r_open].state is AllocState.PROVISIONAL
    assert m.ledger.allocations[r_done].state is AllocState.LIVE
    conserved(m)


def test_loss_aborts_an_open_transaction_that_binds_a_view_on_the_lost_device() -> None:
    pmm = ProcessMemoryManager()
    a, b = pmm.register_authority("gpu0", Tier.DEVICE, 64), pmm.register_authority("gpu1", Tier.DEVICE, 64)
    h = pmm.register_holder("kv")
    done, view = published(pmm, h, ((a, 8),))  # a view over bytes of a
    pmm.execute_view(done, view, 1)
    pmm.commit_tx(done)
    binds, _ = published(pmm, h, ((b, 8),))  # needs only b, executes on the view on a
    pmm.execute_view(binds, view, 1)
    apart = pmm.plan_tx(h, ((b, 4),))  # touches nothing of a
    (r_apart,) = pmm.reserve_all(apart)
    pmm.lose_device(a)
    m = abstract_manager(pmm)
    assert binds not in m.txs  # aborted: it ran on bytes of the lost device
    assert m.txs[apart].held == (r_apart,) and used(pmm, b) == 4  # binds' 8 B credited


def test_a_pressure_ticket_shut_by_the_loss_is_closed_and_its_answer_stale() -> None:
    pmm = ProcessMemoryManager(aging_bound=2, mailbox=8)
    h = pmm.register_holder("kv")
    dev = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    lease = pmm.try_reserve(h, dev, 10)
    pid = pmm.open_pressure(h, dev, 5, 0, 9)
    pmm.lose_device(dev)
    assert pid not in abstract_manager(pmm).pressures
    with pytest.raises(StaleAnswer):
        pmm.answer(h, pid, (lease,), 0)


def test_a_granted_tickets_reservation_dropped_by_the_loss_is_a_device_lost_lease() -> None:
    pmm, w = make()
    granted = pmm.submit(w.h2, w.a, 20)
    alloc = abstract_manager(pmm).tickets[granted].allocation
    pmm.lose_device(w.a)
    assert abstract_manager(pmm).ledger.allocations[alloc].state is AllocState.DEVICE_LOST
    # no part owns it now: the holder's own settling is refused for the loss, not as a part's reservation
    with pytest.raises(DeviceLost, match=r"^allocation 1 is on a lost device; its charge stays until termination$"):
        pmm.release(w.h2, alloc)
    pmm.confirm_termination(w.a)
    assert used(pmm, w.a) == 0 and alloc not in abstract_manager(pmm).ledger.allocations


def test_the_checked_loss_names_the_lost_authority_in_its_violation() -> None:
    pmm, w = make(GuardSet.without("loss_keeps_charge"))
    pmm.reserve_all(pmm.plan_tx(w.h1, ((w.a, 30),)))
    with contracts.contracts(True), pytest.raises(InvariantViolation, match=r"^I6: LoseDevice\(authority=1\) reduced"):
        pmm.lose_device(w.a)


def test_the_checked_termination_views_the_named_ledger() -> None:
    # Fault injection: a termination body that moves the ledger and then is refused (the context is live).
    # The checked path must view authority a and name the action (G4); with contracts off the refusal passes.
    for on in (False, True):
        pmm, w = make()
        real = pmm._terminate

        def broken(authority: int, pmm: ProcessMemoryManager = pmm, real=real) -> None:
            pmm._auths[authority].used += 1  # the harm: a refused operation changed the ledger
            real(authority)

        pmm._terminate = broken  # type: ignore[method-assign]
        with contracts.contracts(on):
            if on:
                with pytest.raises(InvariantViolation,
                                   match=r"^G4: ConfirmTermination\(authority=1\) was refused but changed"):
                    pmm.confirm_termination(w.a)
            else:
                with pytest.raises(InvalidTransition, match="never lost"):
                    pmm.confirm_termination(w.a)
