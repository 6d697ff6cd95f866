"""The runtime's env arena grant is the cap in force in this process (issue #11 item 4; I2, C7).

ORT's env arena is registered once per process and cannot be re-capped, so
`GovernedRuntime(arena_cap=...)` leases exactly that cap through an
`ArenaHolder` on an authority of its manager; a runtime asking for another
cap in the same process is refused (InvalidTransition, naming both caps).
"""

from __future__ import annotations

import pytest

from refimpl.verify.sessions_checker import BUCKET, ENV_ARENA_CAP, MAX_CONTEXT, OrtWorld
from refimpl.ort.governed import GovernedRuntime
from spec import sessions as S
from spec.errors import InvalidTransition
from spec.types import Role


@pytest.fixture(scope="module")
def world():
    return OrtWorld()


def test_env_arena_lease_is_the_cap_in_force(world) -> None:
    rt = GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET, arena_cap=ENV_ARENA_CAP)
    env = rt.env_arena
    rec = rt.pmm.abstract().allocations[env.lease]
    assert rec.charge == env.grant == ENV_ARENA_CAP and rec.role is Role.ARENA and rec.authority != rt.auth
    assert rt.pmm.snapshot(rec.authority).used == rt.pmm.snapshot(rec.authority).limit == ENV_ARENA_CAP
    f = world.facts["dec"]
    rt.execute(S.LoadModel("a", "dec", f, f.loop_carried))
    rid = rt.execute(S.Open("a"))
    for _ in range(MAX_CONTEXT):  # every Run allocates from that arena (session.use_env_allocators)
        rt.execute(S.Decode(rid))
    assert rt.models["a"].session.get_session_options().get_session_config_entry("session.use_env_allocators") == "1"
    rt.close()
    assert rt.used() == 0


def test_runtime_asking_another_cap_is_refused_naming_both(world) -> None:
    GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET, arena_cap=ENV_ARENA_CAP)
    with pytest.raises(InvalidTransition, match=f"capped at {ENV_ARENA_CAP} B; a holder granted {ENV_ARENA_CAP // 2} B"):
        GovernedRuntime(world.topology(0), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET,
                        arena_cap=ENV_ARENA_CAP // 2)
