"""The runtime's abstraction is read from the ledger (issue #11 item 2; C8).

Every charge in `GovernedRuntime.abstract()` comes from the manager's
allocations by holder and role: model admission from the weight and arena
leases, KV capacity from each bundle's lease, the cache from the weight
holder's cache leases, and the ledger's per-role totals beside them. The
clause `state_C8_sessions.ledger_matches_records` compares the two; a KV
growth that leaks the old lease must fail it (the mutant here; its campaign control in test_ort_depth.py).
"""

from __future__ import annotations

import pytest
from ort_harness import runtime

from invariants import InvariantViolation
from invariants.mutation import applied
from invariants.sessions import check_state
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.sessions_checker import BUCKET
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.arith import kv_bytes
from spec.types import Role


def _grown(world):
    rt = runtime(world, models={"a": "dec"}, prefetch=True)
    rid = rt.execute(S.Open("a"))
    for _ in range(BUCKET + 1):  # one growth
        rt.execute(S.Decode(rid))
    return rt, rid, world.facts["dec"]


def test_abstraction_reads_every_charge_from_the_ledger(world) -> None:
    rt, rid, f = _grown(world)
    s = rt.abstract()
    allocs = abstract_ledger(rt.pmm).allocations
    kv = [a for a in allocs.values() if a.holder == rt.kv.id and a.charge]
    assert [a.role for a in kv] == [Role.KV] and kv[0].charge == kv_bytes(2 * BUCKET, f.bytes_per_token)
    assert s.requests[rid].kv_tokens == 2 * BUCKET
    assert s.ledger["kv"] == kv[0].charge
    assert sum(s.ledger.values()) == rt.used()  # the per-role totals are the whole pool's charge
    assert s.cache == sum(a.charge for a in allocs.values() if a.holder == rt.weights.id) - \
        rt.abstract().models["a"].admitted + f.transient_peak
    check_state(s)
    rt.close()


def test_kv_growth_leaking_the_old_lease_fails_ledger_matches_records(world) -> None:
    with applied(MUTANTS["kv_growth_leaks_old_lease"]):
        rt, rid, f = _grown(world)
        s = rt.abstract()
        assert s.ledger["kv"] == kv_bytes(BUCKET, f.bytes_per_token) + kv_bytes(2 * BUCKET, f.bytes_per_token)
        with pytest.raises(InvariantViolation, match="^C8: the ledger charges") as e:
            check_state(s)
        assert e.value.clause == "state_C8_sessions.ledger_matches_records"
