# Real threads against one ProcessMemoryManager (one ledger lock, I2, I7).
#
# Eight threads start together on a Barrier and race `reserve` on one
# authority: exactly floor(limit / size) grants may succeed, every other try
# gets CapacityDenied, and used == grants * size. After every thread releases
# its own leases the ledger is back at zero and the full invariant check
# passes. A second test mixes reserve/commit/release/cancel/quarantine from
# many threads (some through an alias) while an observer thread checks
# snapshots and the full invariant on consistent abstractions.
#
# Join timeouts are only a safety net against a hang; they are never the
# assertion. The switch interval is shortened so threads interleave often.

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest
from threads_harness import fast_switching, run_together  # noqa: F401  (fixture)

from invariants import contracts
from invariants.ledger import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import CapacityDenied, InvalidTransition
from spec.types import Role, Tier

DEV, KV = Tier.DEVICE, Role.KV
THREADS = 8
ITERATIONS = 20


pytestmark = pytest.mark.usefixtures("fast_switching")



@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("limit, size", [(100, 10), (1000, 7), (64, 64), (10, 3), (5, 8), (512, 1)])
def test_racing_reserves_grant_exactly_what_fits(limit, size, on):
    fits = limit // size
    for seed in range(ITERATIONS):
        rng = random.Random(seed)
        # Enough tries that some are always denied; uneven per thread, varied by seed.
        tries = [fits // THREADS + 1 + rng.randrange(3) for _ in range(THREADS)]
        with contracts.contracts(on):
            pmm = ProcessMemoryManager()
            a = pmm.register_authority("gpu0", DEV, limit)
            holders = [pmm.register_holder(f"t{i}") for i in range(THREADS)]
            granted: list[list[int]] = [[] for _ in range(THREADS)]
            denied = [0] * THREADS

            def reserver(i: int) -> Callable[[], None]:
                def run() -> None:
                    for _ in range(tries[i]):
                        try:
                            granted[i].append(pmm.reserve(holders[i], a, DEV, size, KV))
                        except CapacityDenied:
                            denied[i] += 1
                return run

            run_together([reserver(i) for i in range(THREADS)])
            grants = sum(len(g) for g in granted)
            assert grants == min(fits, sum(tries)), f"seed {seed}"
            assert grants + sum(denied) == sum(tries), f"seed {seed}"
            assert pmm.snapshot(a).used == grants * size, f"seed {seed}"
            ids = [x for g in granted for x in g]
            assert sorted(ids) == list(range(1, grants + 1)), f"seed {seed}: ids not fresh and dense"
            check_all(abstract_ledger(pmm))

            def releaser(i: int) -> Callable[[], None]:
                def run() -> None:
                    for x in granted[i]:
                        pmm.commit(holders[i], x, size)
                        pmm.release(holders[i], x)
                return run

            run_together([releaser(i) for i in range(THREADS)])
            state = abstract_ledger(pmm)
            assert state.authorities[a].used == 0, f"seed {seed}"
            assert not state.allocations, f"seed {seed}"
            check_all(state)


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
@pytest.mark.parametrize("seed", range(5))
def test_concurrent_cycles_end_at_zero(seed, on):
    limit, workers, cycles = 1000, 12, 150
    with contracts.contracts(on):
        pmm = ProcessMemoryManager()
        a = pmm.register_authority("gpu0", DEV, limit)
        uva = pmm.register_alias(a, "uva")
        holders = [pmm.register_holder(f"w{i}") for i in range(workers)]
        seen: list[int] = []
        granted = [0] * workers

        def worker(i: int) -> Callable[[], None]:
            rng = random.Random(seed * 1000 + i)

            def run() -> None:
                h, held = holders[i], []
                for _ in range(cycles):
                    via = a if rng.random() < 0.5 else uva
                    n = rng.randint(1, 200)
                    try:
                        x = pmm.reserve(h, via, DEV, n, KV)
                    except CapacityDenied:
                        x = None
                    if x is not None:
                        granted[i] += 1
                        roll = rng.random()
                        if roll < 0.15:
                            pmm.cancel(h, x)
                        else:
                            pmm.commit(h, x, rng.randint(1, n))
                            held.append(x)
                    if held and rng.random() < 0.6:
                        pmm.release(h, held.pop(rng.randrange(len(held))))
                for x in held:
                    pmm.release(h, x)
            return run

        def observer(done: threading.Event) -> None:
            while not seen or not done.is_set():  # at least one look, however fast the workers are
                snap = pmm.snapshot(uva)  # an alias reports its canonical ledger
                seen.append(snap.used)
                assert snap.authority == a and snap.used <= limit, snap
                check_all(abstract_ledger(pmm))

        run_together([worker(i) for i in range(workers)], [observer])
        state = abstract_ledger(pmm)
        assert state.authorities[a].used == 0
        assert state.authorities[uva].used == 0
        assert not state.allocations
        assert state.next_allocation == sum(granted) + 1
        assert sum(granted) > workers  # the run did real work, not only denials
        assert seen  # the observer actually looked
        check_all(state)


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_racing_releases_refund_each_lease_once(on):
    """Every thread tries to release every lease; each lease is refunded exactly once."""
    for seed in range(ITERATIONS):
        with contracts.contracts(on):
            pmm = ProcessMemoryManager()
            a = pmm.register_authority("gpu0", DEV, 1000)
            h = pmm.register_holder("shared")
            leases = [pmm.reserve(h, a, DEV, 10, KV) for _ in range(50)]
            for x in leases:
                pmm.commit(h, x, 10)
            wins = [0] * THREADS
            order = [random.Random(seed * 100 + i).sample(leases, len(leases)) for i in range(THREADS)]

            def releaser(i: int) -> Callable[[], None]:
                def run() -> None:
                    for x in order[i]:
                        try:
                            pmm.release(h, x)
                            wins[i] += 1
                        except InvalidTransition:
                            pass
                return run

            run_together([releaser(i) for i in range(THREADS)])
            assert sum(wins) == len(leases), f"seed {seed}"
            assert pmm.snapshot(a).used == 0, f"seed {seed}"
            check_all(abstract_ledger(pmm))
