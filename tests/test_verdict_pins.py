"""Deterministic pins for clauses the verdict once left unfalsified (R3): I2, I4a and I12.

(I10's, an abort that keeps its bundle's step, is pinned with the other composed transaction mutants in
tests/test_manager_tx.py.)

Each mutant below is the control that makes one clause fail in `ortmem verify`;
the campaigns find them by search, so these scripts pin the harm without
Hypothesis: the intact code refuses the step (and the clause holds), the
mutant accepts it and exactly the named clause fails.
"""

from __future__ import annotations

import contextlib
import importlib

import pytest
from clause_harness import verdict

from invariants import contracts
from invariants.admission import state_I12_batch, step_I12_coresidency
from invariants.ledger import step_I4a
from invariants.mutation import applied
from invariants.replay_predicates import step_I2_grant_charges
from refimpl.verify.admission_checker import _CO_CONFIGS
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.manager_hooks import abstract_ledger
from spec import admission as S
from spec import ledger_actions as A
from spec.errors import CapacityDenied, GovernorError, InvalidTransition
from spec.types import Role, Tier


def _mutant(name: str | None):
    return applied(MUTANTS[name]) if name else contextlib.nullcontext()


@pytest.mark.parametrize("mutant", [None, "grant_rounds_charge_down"])
def test_I2_grant_charged_pinned(mutant: str | None) -> None:
    with _mutant(mutant), contracts.contracts(False):
        from refimpl.manager import ProcessMemoryManager

        pmm = ProcessMemoryManager()
        a, h = pmm.register_authority("gpu0", Tier.DEVICE, 64), pmm.register_holder("kv")
        prev = abstract_ledger(pmm)
        pmm.reserve(h, a, Tier.DEVICE, 8, Role.KV)
        got = verdict(step_I2_grant_charges, prev, A.Reserve(h, a, Tier.DEVICE, 8, Role.KV), abstract_ledger(pmm))
        before = abstract_ledger(pmm)
        pmm.record_committed(h, a, Tier.DEVICE, 5, Role.KV)
        recorded = abstract_ledger(pmm).authorities[a].used - before.authorities[a].used
    assert got == (None if mutant is None else "step_I2_grant_charges.grant_charged")
    assert recorded == 5  # the slip is on the grant path only: a recording is charged in full either way


@pytest.mark.parametrize("mutant", [None, "commit_rehomes_lease"])
def test_I4a_holder_fixed_pinned(mutant: str | None) -> None:
    with _mutant(mutant), contracts.contracts(False):
        from refimpl.manager import ProcessMemoryManager

        pmm = ProcessMemoryManager()
        a = pmm.register_authority("gpu0", Tier.DEVICE, 64)
        producer, consumer = pmm.register_holder("producer"), pmm.register_holder("consumer")
        x = pmm.reserve(producer, a, Tier.DEVICE, 8, Role.KV)
        prev = abstract_ledger(pmm)
        try:
            pmm.commit(consumer, x, 8)
            accepted = True
        except GovernorError:
            accepted = False
        now = abstract_ledger(pmm)
    if mutant is None:
        assert not accepted and now == prev  # another holder's commit is refused and changes nothing
    else:
        assert accepted and now.allocations[x].holder == consumer
        assert verdict(step_I4a, prev, A.Commit(consumer, x, 8), now) == "step_I4a.holder_fixed"


@pytest.mark.parametrize("mutant", [None, "last_entries_skip_fit"])
def test_I12_kv_within_capacity_pinned(mutant: str | None) -> None:
    with _mutant(mutant), contracts.contracts(False):
        b = importlib.import_module("refimpl.admission.batching").KvBatcher(6)
        first, second = b.submit(4), b.submit(3)
        b.advance(first, 2)  # needs 4, 6 free
        b.advance(second, 3)  # its last entries: 1 free after
        if mutant is None:
            with pytest.raises(CapacityDenied):
                b.advance(first, 2)  # 2 asked, 1 free
        else:
            b.advance(first, 2)  # booked as written without a fit check
        s = b.abstract()
    assert verdict(state_I12_batch, s) == (None if mutant is None else "state_I12_batch.kv_within_capacity")


@pytest.mark.parametrize("mutant", [None, "evict_without_need"])
def test_I12_evict_only_for_need_pinned(mutant: str | None) -> None:
    capacity, models = _CO_CONFIGS[-1]  # every model fits at once: no eviction is ever needed
    with _mutant(mutant), contracts.contracts(False):
        co = importlib.import_module("refimpl.admission.coresidency").CoResidencyScheduler(
            capacity, {n: (size, p) for n, size, p in models})
        for act in (S.Want("b"), S.Load("b"), S.Serve("b"), S.Want("c")):
            co.execute(act)
        prev = co.abstract()
        if mutant is None:
            with pytest.raises(InvalidTransition, match="no pending model needs"):
                co.execute(S.Evict("b"))
            assert co.abstract() == prev
            return
        co.execute(S.Evict("b"))
        now = co.abstract()
    assert verdict(step_I12_coresidency, prev, S.Evict("b"), now) == "step_I12_coresidency.evict_only_for_need"
