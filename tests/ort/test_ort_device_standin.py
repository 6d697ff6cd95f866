"""The governed device path on a CPU STAND-IN for device memory (no GPU, no CUDA).

`GovernedRuntime(..., device=StandInMemory())` runs the device path's wiring on the CPU EP: a DEVICE
authority beside the host one on the one manager, weights and KV in leased regions that ORT reads
and writes in place (DLPack initializers, pointer IOBinding), the EP arena's caps computed from
the loans, the not-enforced snapshot. The regions are host memory and the sessions CPU sessions:
nothing here exercises CUDA or claims anything about it (tests/ort/test_ort_cuda.py does, on a GPU).
IDs: C1 (one authority per pool), I2 (reserve -> allocate -> commit), I3, I8, C9 (identical results).
"""

from __future__ import annotations

import pytest
from ort_harness import campaign_events, check_weights_read_in_place, decode_identically, runtime

from refimpl.ort.device import StandInMemory
from refimpl.ort.device_arena import OUTSIDE_LEDGER
from refimpl.verify.sessions_checker import BUCKET, MAX_CONTEXT, OrtWorld
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import CalloutFailed, InvalidArgument, InvalidBytes, SessionCreationFailed
from spec.types import Role, Tier

LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def world():
    return OrtWorld("stand-in")


def _runtime(world, memory=None, models=None):
    return runtime(world, LIMIT, models, device=memory or StandInMemory())


def _device_leases(rt):
    return [a for a in abstract_ledger(rt.pmm).allocations.values() if a.authority == rt.auth and a.charge]


def test_standin_device_authority_is_one_device_ledger_beside_the_one_host_ledger(world) -> None:
    rt = _runtime(world, models={"a": "dec"})
    rid = rt.execute(S.Open("a"))
    auths = abstract_ledger(rt.pmm).authorities
    tiers = sorted(a.tier.value for a in auths.values() if a.alias_of is None)
    assert tiers == ["device", "host"] and auths[rt.auth].tier is Tier.DEVICE
    leases = _device_leases(rt)
    # weights, the EP arenas' one lease, KV: all on the device authority, tier DEVICE
    assert sorted((a.holder, a.role) for a in leases) == sorted(
        [(rt.weights.id, Role.WEIGHTS), (rt.env_arena.id, Role.ARENA), (rt.kv.id, Role.KV)])
    assert all(a.tier is Tier.DEVICE for a in leases)
    host = [a for a in abstract_ledger(rt.pmm).allocations.values() if a.authority == rt.host_auth and a.charge]
    ints = sum(a.nbytes for a in (rt.weights.regions["a"][1][i][2] for i in range(len(rt.weights.regions["a"][1])))
               if a.dtype.kind == "i")
    # the host env arena (CPU side of every session) and the host copies of the int64 shape tensors
    assert sorted(a.charge for a in host) == sorted([rt.host_arena.grant, ints]) and ints == 56
    assert rt.abstract().host_authorities == 1  # C1: still one host ledger
    rt.execute(S.Close(rid))
    rt.close()


def test_standin_weights_are_read_in_place_from_the_leased_region(world) -> None:
    rt = _runtime(world, models={"a": "dec"})
    check_weights_read_in_place(world, rt)
    rt.close()


def test_standin_kv_is_bound_by_pointer_into_the_kv_lease(world) -> None:
    rt = _runtime(world, models={"a": "dec"})
    rid = rt.execute(S.Open("a"))
    for _ in range(BUCKET + 1):  # past one growth
        rt.execute(S.Decode(rid))
    b = rt.kv.bundles[rid]
    t = b.tokens - 1  # the binding the last decode ran
    outs = b.bindings[t].get_outputs()  # y, present_key, present_value
    side = b.cur  # the present of the last step is now the past
    assert outs[1].data_ptr() == b.region.ptr + b.offset("key", side)
    assert outs[2].data_ptr() == b.region.ptr + b.offset("value", side)
    assert outs[0].data_ptr() == b.y.ctypes.data  # the token's output comes back to the host, nothing else
    lease = next(a for a in _device_leases(rt) if a.holder == rt.kv.id)
    assert b.region.nbytes == lease.charge == 16 * 4 * 8 * b.cap  # K,V x two sides x heads x dh x 4 B
    rt.close()


def test_standin_generation_is_identical_and_regions_match_the_device_charge_at_every_step(world) -> None:
    memory = StandInMemory()
    rt = _runtime(world, memory, {"a": "dec", "b": "dec_wide"})
    rt.execute(S.Prefetch())  # device cache bytes too: borrowed regions, reclaimed by growth
    rids = [rt.execute(S.Open(m)) for m in ("a", "b", "a")]

    def regions_match(r, step):  # every device byte charged outside the EP arenas' lease is one live region
        snap = rt.device_snapshot()
        assert snap.allocated == memory.allocated == snap.device.used - rt.env_arena.grant, (r, step)

    decode_identically(world, rt, rids, MAX_CONTEXT, regions_match)
    assert all(rt.kv.bundles[r].cap == MAX_CONTEXT for r in rids)
    assert rt.weights.credited > 0  # growth took borrowed device cache back through pressure tickets
    for r in rids:
        rt.execute(S.Close(r))
    rt.close()
    assert memory.allocated == 0 and rt.pmm.snapshot(rt.auth).used == 0  # the arena's lease went back too


def test_standin_caps_are_the_loans_and_sum_within_the_arena_lease(world) -> None:
    rt = _runtime(world, models={"a": "dec", "b": "dec_wide"})
    snap = rt.device_snapshot()
    assert dict(snap.arena_caps) == {"a": world.facts["dec"].transient_peak, "b": world.facts["dec_wide"].transient_peak}
    assert sum(dict(snap.arena_caps).values()) == rt.env_arena.lent <= rt.env_arena.grant
    rt.close()


def test_standin_snapshot_reports_what_no_limit_binds(world) -> None:
    rt = _runtime(world)
    snap = rt.device_snapshot()
    assert set(OUTSIDE_LEDGER) < set(snap.not_enforced)  # I3: every class outside the ledger, by name
    assert any(n.what == "stand-in EP arena caps" for n in snap.not_enforced)
    assert snap.driver_used is None and "stand-in" in snap.memory  # no device figure is invented
    rt.close()


def test_device_snapshot_on_the_host_path_is_refused(world) -> None:
    host = runtime(world, LIMIT)
    with pytest.raises(InvalidArgument, match="no device pool"):
        host.device_snapshot()
    host.close()


class _FailingMemory(StandInMemory):
    """A stand-in whose allocations fail after `ok` successes (an allocator out of memory)."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    def alloc(self, nbytes: int):
        if self.ok <= 0:
            raise CalloutFailed("stand-in: out of device memory (injected; CudaMemory raises this type)")
        self.ok -= 1
        return super().alloc(nbytes)


def test_standin_failed_weight_allocation_leaves_nothing_charged(world) -> None:
    memory = _FailingMemory(ok=0)
    rt = _runtime(world, memory)
    before, dev, host = rt.abstract(), rt.pmm.snapshot(rt.auth), rt.pmm.snapshot(rt.host_auth)
    with pytest.raises(SessionCreationFailed, match="out of device memory"):
        rt.execute(world.load("a", "dec"))
    # I2: the reservation was cancelled, nothing allocated, nothing lent, the state as before
    assert rt.abstract() == before and rt.pmm.snapshot(rt.auth) == dev and rt.pmm.snapshot(rt.host_auth) == host
    assert memory.allocated == 0 and rt.env_arena.lent == 0
    rt.close()


def test_standin_failed_kv_allocation_refuses_the_open_and_changes_nothing(world) -> None:
    memory = _FailingMemory(ok=1)  # the weights get their region, the KV bucket does not
    rt = _runtime(world, memory, {"a": "dec"})
    before, dev = rt.abstract(), rt.pmm.snapshot(rt.auth)
    with pytest.raises(CalloutFailed, match="injected"):
        rt.execute(S.Open("a"))
    assert rt.abstract() == before and rt.pmm.snapshot(rt.auth) == dev and not rt.requests
    rt.close()


def test_standin_runs_the_same_campaign_and_invariants_as_the_host_path(world) -> None:
    events = campaign_events(world)
    assert events["run_failures_injected"] > 0
    assert events.get("replicas_placed", 0) == 0  # the device path places no replicas


def test_invalid_host_capacity_is_refused_before_anything(world) -> None:
    with pytest.raises(InvalidArgument, match="host_capacity is for the device path"):
        runtime(world, LIMIT, host_capacity=1 << 20)
    with pytest.raises(InvalidBytes, match="host_capacity must be a positive int"):
        runtime(world, LIMIT, device=StandInMemory(), host_capacity=0)
