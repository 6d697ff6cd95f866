"""The one contract runner (`refimpl.manager.runner.contracted`) through `Views._run_full`.

Each branch of the runner, for the composed operations at level "full":

- a refusal that changed what the caller views is a G4 violation (and the same refusal that changed nothing
  is the operation's own typed error: the negative control);
- an accepted operation's step predicate gets (the view before, the action, the view after, the result);
- its state predicate gets the view after.

The predicates are replaced by recorders here, so each test sees exactly what the runner hands over; the
mutant tests (tests/test_manager_contracts_*.py) show the real predicates
catching real harms through the same runner.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.manager.lock import LedgerLock
from spec import manager_actions as M
from spec.errors import CapacityDenied, InvalidTransition
from spec.manager_actions import Manager
from spec.tickets import TicketState
from spec.types import Tier


class Leaky(ProcessMemoryManager):
    """Refuses a cancel, having used an id first when `leak` is set."""

    leak = True

    def _abandon(self, holder: int, ticket: int) -> int:  # cancel_ticket's body (composed: `_run_full`)
        if self.leak:
            self._next_ticket += 1
        raise InvalidTransition("refused")


def _leaky(leak: bool) -> tuple[Leaky, int, int]:
    pmm = Leaky()
    pmm.leak = leak
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    return pmm, a, pmm.register_holder("kv")


# --- G4: a refusal changes nothing ------------------------------------------------------------------------

@pytest.mark.parametrize("leak", [True, False])
def test_full_refusal_that_changed_the_manager_is_G4(leak: bool) -> None:
    pmm, a, h = _leaky(leak)
    t = pmm.submit(h, a, 10)
    with contracts.contracts(True, level="full"):
        if leak:
            with pytest.raises(InvariantViolation, match=r"G4: CancelTicket\(.*refused but changed the manager"):
                pmm.cancel_ticket(h, t)
        else:
            with pytest.raises(InvalidTransition):
                pmm.cancel_ticket(h, t)
    with contracts.contracts(False), pytest.raises(InvalidTransition):  # off: the body's own error
        pmm.cancel_ticket(h, t)


# --- step and state: what the runner hands to the predicates ----------------------------------------------

def _recorded() -> tuple[ProcessMemoryManager, int, int, list[tuple[Any, ...]]]:
    """A manager whose step and state predicates are recorders: (manager, authority, holder, their calls)."""
    calls: list[tuple[Any, ...]] = []

    def step(before: Any, action: Any, after: Any, *result: Any) -> None:
        assert len(result) == 1
        calls.append(("step", before, action, after, *result))

    pmm = ProcessMemoryManager()
    a, h = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_holder("kv")
    pmm._mchecks = types.SimpleNamespace(check_step=step, check_all=lambda after: calls.append(("state", after)))
    return pmm, a, h, calls  # `_mchecks`: the looked-up invariants.manager


def test_full_step_and_state_get_the_views_before_and_after() -> None:
    pmm, a, h, calls = _recorded()
    with contracts.contracts(True, level="full"):
        t = pmm.submit(h, a, 10)  # granted at once: its reservation is a new allocation
    (kind, before, action, after, result), (kind2, after2) = calls
    assert (kind, kind2) == ("step", "state") and after2 is after
    assert isinstance(before, Manager) and action == M.Submit(h, a, 10)
    assert result == t and t not in before.tickets and after.tickets[t].state is TicketState.GRANTED
    grant = after.tickets[t].allocation
    assert grant not in before.ledger.allocations and after.ledger.allocations[grant].charge == 10


def test_full_refusal_runs_no_step_or_state_check() -> None:
    pmm, a, h, calls = _recorded()
    with contracts.contracts(True, level="full"), pytest.raises(CapacityDenied):
        pmm.submit(h, a, 200)  # can never fit its limit
    assert calls == []


# --- the pool runner's wake-ups ---------------------------------------------------------------------------

class _CountingLock(LedgerLock):
    __slots__ = ("entries",)

    def __enter__(self) -> bool:
        self.entries += 1
        return super().__enter__()


def test_composed_operation_takes_the_lock_again_only_to_wake_waiters() -> None:
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    h = pmm.register_holder("kv")
    lock = pmm._lock = _CountingLock()
    lock.entries = 0
    big = pmm.claim(h, pmm.submit(h, a, 60))
    waiter = pmm.submit(h, a, 60)  # pending: 40 B free
    ev = pmm._tickets[waiter].event = threading.Event()  # as a parked `wait` leaves it
    lock.entries = 0
    with contracts.contracts(False):
        pmm.set_use(h, big, False, False)  # grants nothing: one lock entry, no wake-up pass
        assert lock.entries == 1
        pmm.release(h, big)  # the round grants the waiter: its event is set after the lock is released
    assert lock.entries == 2 and ev.is_set()  # one entry each: the wake-up needs no second one
