# The local contract at scale (issue #24): what it costs depends on what an operation touched, not on how many
# rows the ledger holds, and it still catches every composed manager mutant with 10,000 leases on the ledger.
#
# - Every composed `refimpl.manager` mutant is caught at level "local" with 10,000 background leases on each
#   ledger the workload touches (negative control: the same workload runs clean on the real code).
# - Row reads per operation, counted (no clock): the frozen records the checks build and the books counted from
#   every row are the same with 0 and with 10,000 leases on the ledger, for the ledger, ticket, pressure and
#   transaction paths; the first checked operation on a ledger counts its book once.
# - The books (refimpl.manager.contract_books) stay exact across the paths that keep none (tx_*, drain,
#   contracts switched off, the other level), and `checkpoint` names what an O(touched) check cannot see at once.

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.mutation import applied
from refimpl.manager import ProcessMemoryManager
from refimpl.manager import contract_books, views
from refimpl.manager.contract_books import checkpoint
from refimpl.verify.mutants import MUTANTS
from spec.types import Role, Tier

from test_manager_contracts_local import _ALSO, COMPOSED_MUTANTS, _manager, prefill, workload

DEV, KV = Tier.DEVICE, Role.KV
BACKGROUND = 10_000


# --- every composed mutant, 10,000 leases on the touched ledgers ------------------------------------------

def test_workload_is_clean_with_background_leases() -> None:
    """Negative control: on the real code the workload raises nothing, and the background is really there."""
    pmm = _manager()
    prefill(pmm, BACKGROUND)
    with contracts.contracts(True, level="local"):
        done = workload(pmm, BACKGROUND)
        checkpoint(pmm)  # every row recounted: the books the contract kept through 106 operations were exact
    assert done[-1] == "confirm termination" and len(done) == 106
    assert len(pmm._auths[1].allocs) >= BACKGROUND  # gpu0's background leases, untouched by the workload


@pytest.mark.parametrize("name", COMPOSED_MUTANTS)
def test_local_contract_catches_manager_mutant_at_scale(name: str) -> None:
    m = MUTANTS[name]
    pmm = _manager()
    prefill(pmm, BACKGROUND)  # with the real code: the mutant meets a sound ledger of 10,000 leases
    with applied(m), contracts.contracts(True, level="local"), pytest.raises(InvariantViolation) as exc:
        workload(pmm, BACKGROUND)
    assert exc.value.id in (*m.ids, "G4") or exc.value.id in _ALSO.get(name, ()), (name, exc.value)


# --- row reads per operation: the same at 0 and at 10,000 leases -----------------------------------------

class _Reads:
    """Counts the frozen allocation records the checks build and the rows the books count from scratch."""

    def __init__(self) -> None:
        self.records = self.counted = 0


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Reads]:
    r = _Reads()
    alloc_rec, recount = views._alloc_rec, contract_books.recount

    def counting_rec(x: Any) -> Any:
        r.records += 1
        return alloc_rec(x)

    def counting_recount(a: Any) -> Any:
        r.counted += len(a.allocs)
        return recount(a)

    monkeypatch.setattr(views, "_alloc_rec", counting_rec)
    monkeypatch.setattr(contract_books, "recount", counting_recount)
    yield r


def _ledger(pmm: ProcessMemoryManager, a: int, h: int) -> None:
    x = pmm.reserve(h, a, DEV, 4096, KV)
    pmm.commit(h, x, 2048)
    pmm.release(h, x)


def _tickets(pmm: ProcessMemoryManager, a: int, h: int) -> None:
    pmm.release(h, pmm.claim(h, pmm.submit(h, a, 4096)))
    pmm.cancel_ticket(h, pmm.submit(h, a, 4096))


def _pressure(pmm: ProcessMemoryManager, a: int, h: int) -> None:
    x = pmm.reserve(h, a, DEV, 4096, KV)
    pmm.commit(h, x, 4096)
    pmm.answer(h, pmm.open_pressure(h, a, 4096), (x,))
    pmm.cancel_pressure(pmm.open_pressure(h, a, 1))


def _transaction(pmm: ProcessMemoryManager, a: int, h: int) -> None:
    t = pmm.plan_tx(h, ((a, 4096),))
    pmm.reserve_all(t)
    (x,) = pmm.commit_tx(t)
    pmm.release(h, x)
    u = pmm.plan_tx(h, ((a, 4096),))
    pmm.reserve_all(u)
    pmm.abort_tx(u)


def _under_pressure(pmm: ProcessMemoryManager, a: int, h: int) -> None:
    """The hot operations while a pressure ticket is open: the frozen-view path, on the touched rows."""
    p = pmm.open_pressure(h, a, 1)
    _ledger(pmm, a, h)
    _tickets(pmm, a, h)
    pmm.cancel_pressure(p)


PATHS: dict[str, Callable[[ProcessMemoryManager, int, int], None]] = {
    "ledger": _ledger, "tickets": _tickets, "pressure": _pressure, "transaction": _transaction,
    "under_pressure": _under_pressure}


def _reads_per_round(reads: _Reads, path: str, background: int) -> tuple[int, int, int]:
    """(rows counted by the first round, records built by the second, rows counted by the second)."""
    reads.records = reads.counted = 0
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("gpu0", DEV, 1 << 40)
    h = pmm.register_holder("kv")
    with contracts.contracts(False):
        for _ in range(background):
            pmm.commit(h, pmm.reserve(h, a, DEV, 64, KV), 64)
    with contracts.contracts(True, level="local"):
        PATHS[path](pmm, a, h)
        first = reads.counted
        reads.records = reads.counted = 0
        PATHS[path](pmm, a, h)
        second = reads.records, reads.counted
        checkpoint(pmm)  # and the books kept through both rounds were exact
    return first, *second


@pytest.mark.parametrize("path", sorted(PATHS))
def test_reads_per_operation_do_not_grow_with_the_ledger(reads: _Reads, path: str) -> None:
    small = _reads_per_round(reads, path, 0)
    large = _reads_per_round(reads, path, BACKGROUND)
    assert (small[0], large[0]) == (0, BACKGROUND)  # the first checked operation counts the ledger's book once
    assert large[1:] == small[1:] and large[2] == 0, (small, large)  # then: no row beyond those touched


def test_level_full_still_reads_every_row(reads: _Reads) -> None:
    """Control for the test above: it can fail. Level "full" reads the whole ledger on every operation."""
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("gpu0", DEV, 1 << 40)
    h = pmm.register_holder("kv")
    with contracts.contracts(False):
        for _ in range(1000):
            pmm.commit(h, pmm.reserve(h, a, DEV, 64, KV), 64)
    with contracts.contracts(True, level="full"):
        _ledger(pmm, a, h)
        _transaction(pmm, a, h)
    assert reads.counted >= 3 * 1000 and reads.records >= 4 * 1000
