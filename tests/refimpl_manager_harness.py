"""Shared world and checks of the composed-manager suites (tests/test_manager_refimpl.py, _bad_input.py, _threads.py)."""

from __future__ import annotations

import threading
import types
from typing import Any

from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_manager
from invariants import manager as IM
from spec import manager_actions as M
from spec.guards import GuardSet
from spec.tickets import TicketState
from spec.types import AllocState, Role, Tier

__all__ = ["make", "lease", "parked", "published", "used", "conserved", "idle", "one_pool", "settled"]

G = TicketState.GRANTED


def make(guards: GuardSet = GuardSet(), aging_bound: int = 4, limit: int = 100,
         trace: Any = None) -> tuple[ProcessMemoryManager, Any]:
    pmm = ProcessMemoryManager(guards=guards, aging_bound=aging_bound, trace=trace)
    w = types.SimpleNamespace()
    w.a = pmm.register_authority("gpu0", Tier.DEVICE, limit)
    w.b = pmm.register_authority("host", Tier.HOST, limit)
    w.h1 = pmm.register_holder("kv")
    w.h2 = pmm.register_holder("weights")
    return pmm, w


def lease(pmm: ProcessMemoryManager, h: int, a: int, n: int, tier: Tier = Tier.DEVICE) -> int:
    i = pmm.reserve(h, a, tier, n, Role.KV)
    pmm.commit(h, i, n)
    return i


def parked(pmm: ProcessMemoryManager, h: int, a: int, n: int, timeout: float | None = None) -> tuple[threading.Thread, list[Any]]:
    """A thread of `h` acquiring `n` B of `a`, its ticket pending when this returns: (the thread, what acquire returned)."""
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(pmm.acquire(h, a, n, timeout=timeout)), daemon=True)
    t.start()
    while not abstract_manager(pmm).tickets:  # parked: its ticket is pending
        threading.Event().wait(0.001)
    return t, got


def published(pmm: ProcessMemoryManager, h: int, needs: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """A transaction of `h` planned for `needs`, every need held, and a view published over it: (transaction, view)."""
    tx = pmm.plan_tx(h, needs)
    pmm.reserve_all(tx)
    return tx, pmm.publish_view(tx)


def used(pmm: ProcessMemoryManager, a: int) -> int:
    return abstract_manager(pmm).ledger.authorities[a].used


def conserved(m: M.Manager) -> None:
    """Independent of the manager's own `used`: per ledger, used == sum of charges of its allocations (I1)."""
    for a in m.ledger.authorities.values():
        assert a.used == sum(r.charge for r in m.ledger.allocations.values() if r.authority == a.id), a
    for t in m.tickets.values():  # a granted ticket's bytes are a provisional allocation of its holder
        if t.state is G:
            r = m.ledger.allocations[t.allocation]
            assert (r.holder, r.authority, r.charge, r.state) == (t.holder, t.authority, t.nbytes, AllocState.PROVISIONAL)
        else:
            assert t.allocation is None


def idle(pmm: ProcessMemoryManager, holder: int, authority: int) -> tuple[int, ...]:
    """`holder`'s live leases on `authority` that no ticket or transaction holds: what it may give back."""
    m = abstract_manager(pmm)
    parts = {t.allocation for t in m.tickets.values()} | {i for t in m.txs.values() for i in t.held}
    return tuple(i for i, r in m.ledger.allocations.items() if r.holder == holder and r.authority == authority
                 and r.state is AllocState.LIVE and i not in parts)


def one_pool(limit: int, holders: int, aging_bound: int = 4,
             guards: GuardSet = GuardSet()) -> tuple[ProcessMemoryManager, int, list[int]]:
    """A manager with `holders` holders and one device authority of `limit` B: (manager, authority, holders)."""
    pmm = ProcessMemoryManager(aging_bound=aging_bound, guards=guards)
    hs = [pmm.register_holder(f"h{i}") for i in range(holders)]
    return pmm, pmm.register_authority("dev", Tier.DEVICE, limit), hs


def settled(pmm: ProcessMemoryManager, a: int) -> None:
    """Everything returned: no live ticket, nothing charged on `a`, the composed invariants hold."""
    m = abstract_manager(pmm)
    assert not m.tickets, m.tickets
    assert m.ledger.authorities[a].used == 0
    IM.check_all(m)
