"""A seeded synthetic workload for `ortmem trace`: exercise every operation, then drain.

Drives a `ProcessMemoryManager` with random (seeded, reproducible) holder and
environment operations, valid and refused alike, and finally settles what is
still in flight (unmaps and closes allowances, cancels reservations), so the
trace it emits ends clean. Used to produce sample traces for `ortmem replay`.
"""

from __future__ import annotations

import random

from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import GovernorError
from spec.types import AllocState, Role, Tier

__all__ = ["run_workload", "drain"]


def run_workload(pmm: ProcessMemoryManager, *, seed: int = 0, operations: int = 200) -> None:
    rng = random.Random(seed)
    holders = [pmm.register_holder(f"h{i}") for i in range(3)]
    auths = [pmm.register_authority("gpu0", Tier.DEVICE, 64), pmm.register_authority("host", Tier.HOST, 128)]
    auths.append(pmm.register_alias(auths[0], "uma"))
    allocs: list[int] = []
    allows: list[int] = []
    for _ in range(operations):
        h, a = rng.choice(holders), rng.choice(auths)
        n = rng.choice((1, 2, 4, 8, 16, 48))
        op = rng.randrange(12)
        try:
            if op < 3:
                allocs.append(pmm.reserve(h, a, rng.choice((Tier.DEVICE, Tier.DEVICE, Tier.HOST)), n, Role.WEIGHTS))
            elif op == 3:
                allocs.append(pmm.record_committed(h, a, Tier.DEVICE, n, Role.KV))
            elif op < 6 and allocs:
                pmm.commit(h, rng.choice(allocs), n)
            elif op == 6 and allocs:
                pmm.release(h, rng.choice(allocs))
            elif op == 7 and allocs:
                pmm.quarantine(h, rng.choice(allocs), rng.choice((0, 1, n)))
            elif op == 8:
                allows.append(pmm.open_allowance(h, a, n))
            elif op == 9 and allows:
                w = rng.choice(allows)
                rng.choice((pmm.reserve_growth, pmm.map_allowance, pmm.unmap_allowance))(h, w, rng.choice((1, 2)))
            elif op == 10 and allocs:
                pmm.cancel(h, rng.choice(allocs))
            elif op == 11 and rng.random() < 0.05:
                pmm.lose_device(a)
                pmm.confirm_termination(a)
        except GovernorError:
            pass  # refusals are part of the trace
    drain(pmm)


def drain(pmm: ProcessMemoryManager) -> None:
    """Settle everything in flight through the public API: unmap and close allowances, cancel reservations."""
    view = abstract_ledger(pmm)
    for w in view.allowances.values():
        if w.mapped:
            pmm.unmap_allowance(w.holder, w.id, w.mapped)
        pmm.close_allowance(w.holder, w.id)
    for r in view.allocations.values():
        if r.state is AllocState.PROVISIONAL:
            pmm.cancel(r.holder, r.id)
