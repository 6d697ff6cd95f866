"""The ArenaHolder in every managed session (issue #11 item 1): one env arena per process, capped at its grant.

Every `GovernedRuntime` has an ArenaHolder: a topology without an env arena
(arena = 0) is refused, typed, before anything is leased or registered; every
managed session it creates (primary or cache replica) opts into the env arena
(`session.use_env_allocators=1`), so every Run of a managed model allocates
from the one arena ORT caps at the holder's grant; the ledger holds exactly
one ARENA lease, the holder's, of the cap. Compatibility-mode sessions
(unmanaged, their bytes unattributed and reported as not enforced, I3) keep
their own ORT arena: drawing on the capped arena without a loan would let
them take room lent to managed peaks.
"""

from __future__ import annotations

import pytest
from ort_harness import runtime

from refimpl.ort import arena
from refimpl.ort.governed import GovernedRuntime
from refimpl.verify.sessions_checker import BUCKET, ENV_ARENA_CAP, MAX_CONTEXT
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import InvalidArgument
from spec.types import Role

KEY = "session.use_env_allocators"


def _uses_env_arena(session) -> bool:
    try:
        return session.get_session_options().get_session_config_entry(KEY) == "1"
    except RuntimeError:  # ORT: the options have no such entry (the session keeps its own arena)
        return False


def test_a_runtime_without_an_env_arena_is_refused_before_anything(world) -> None:
    registered = dict(arena._ENV)
    with pytest.raises(InvalidArgument, match=r"no env arena \(arena = 0\)"):
        GovernedRuntime(world.topology(0, 0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET)
    assert arena._ENV == registered  # the process's env arena: neither registered nor re-capped
    assert world.topology(0).arena == ENV_ARENA_CAP  # the campaign's pool names the one cap by default


def test_every_managed_session_and_run_uses_the_one_env_arena(world) -> None:
    rt = runtime(world, models={name: name for name in ("dec", "dec_wide", "mlp")})
    try:
        fc = world.facts["dec"]
        rt.execute(S.LoadModel("compat", "dec", fc, None))  # undeclared: compatibility mode, unmanaged
        rt.execute(S.Prefetch())  # replicas in the weight cache: managed sessions too
        managed = {n: r for n, r in rt.models.items() if r.mode is S.Mode.MANAGED}
        assert sorted(managed) == ["dec", "dec_wide", "mlp"]
        replicas = [r.session for r in rt.replicas.by_model.values()]
        assert replicas  # the check below covers replica sessions, not only primaries
        assert all(_uses_env_arena(r.session) for r in managed.values())
        assert all(_uses_env_arena(s) for s in replicas)
        assert not _uses_env_arena(rt.models["compat"].session)
        # Every Run of a managed model: on a session of the env arena (the decode's bundle's session).
        for name in ("dec", "dec_wide"):
            rid = rt.execute(S.Open(name))
            for _ in range(BUCKET + 1):  # one growth: the grown bucket's binding too
                rt.execute(S.Decode(rid))
            assert _uses_env_arena(rt.kv.bundles[rid].session)
        # The ledger: ONE arena lease, the holder's, of exactly the cap ORT enforces (and registered).
        allocs = abstract_ledger(rt.pmm).allocations
        leases = [a for a in allocs.values() if a.role is Role.ARENA]
        assert [(a.holder, a.charge) for a in leases] == [(rt.env_arena.id, ENV_ARENA_CAP)]
        assert arena._ENV["grant"] == rt.env_arena.grant == ENV_ARENA_CAP
        assert rt.env_arena.lent == sum(world.facts[n].transient_peak for n in managed)
    finally:
        rt.close()
    assert rt.env_arena.lent == 0 and rt.used() == ENV_ARENA_CAP  # the cap outlives the runtime
