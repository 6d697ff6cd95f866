"""The env arena: ONE lease in the host pool, each managed model's peak lent within it (issue #11; C1, I8).

The runtime registers ORT's env arena once per process (registering it again
would reach only sessions created later, docs/ort-claims.md), so the
runtime's topology carries its cap (`Topology.arena`) and
`GovernedRuntime` leases exactly that cap through an `ArenaHolder` on the
host authority every other holder uses: no second authority of the host
tier. Each managed model's measured transient peak is lent within that
lease (an allowance of the ArenaHolder, mapped, no charge moves), so the
arena's bytes are charged once; a peak that does not fit the arena's
remaining room is refused (AllowanceExceeded) with the ledger unchanged, in
the spec and in the runtime alike. A runtime asking for another cap in the
same process is refused (InvalidTransition, naming both caps).
"""

from __future__ import annotations

import attrs
import pytest
from ort_harness import runtime

from invariants._violation import InvariantViolation
from invariants.mutation import applied
from invariants.sessions import check_state, state_I8_sessions
from refimpl.ort import governed
from refimpl.verify.mutants import MUTANTS
from refimpl.verify.sessions_checker import BUCKET, ENV_ARENA_CAP, MAX_CONTEXT
from refimpl.ort.governed import GovernedRuntime
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import AllowanceExceeded, CapacityDenied, InvalidTransition
from spec.types import Role, Tier

LIMIT = 256 * 1024


def _frozen(rt):
    view = abstract_ledger(rt.pmm)
    return rt.abstract(), view.allocations, view.allowances, rt.used(), rt.env_arena.lent


def test_env_arena_is_one_lease_in_the_host_pool(world) -> None:
    rt = runtime(world)
    env = rt.env_arena
    view = abstract_ledger(rt.pmm)
    rec = view.allocations[env.lease]
    assert rec.charge == env.grant == ENV_ARENA_CAP and rec.role is Role.ARENA and rec.authority == rt.auth
    # C1: the host tier has one authority, the pool's own; the arena is a lease in it, not a second ledger.
    assert [a.id for a in view.authorities.values() if a.tier is Tier.HOST] == [rt.auth]
    assert rt.used() == ENV_ARENA_CAP and rt.abstract().ledger["arena"] == ENV_ARENA_CAP
    f = world.facts["dec"]
    rt.execute(world.load("a", "dec"))
    view = abstract_ledger(rt.pmm)
    [loan] = view.allowances.values()
    assert (loan.holder, loan.authority, loan.limit, loan.mapped) == (env.id, rt.auth, f.transient_peak,
                                                                      f.transient_peak)
    arena = [a for a in view.allocations.values() if a.role is Role.ARENA and a.charge]
    assert [a.id for a in arena] == [env.lease]  # the peak is lent, not charged a second time
    weights = abstract_ledger(rt.pmm).allocations[rt.models["a"].weights_lease].charge
    assert rt.used() == ENV_ARENA_CAP + weights  # the load charged its weights only
    assert rt.abstract().models["a"].admitted == weights + f.transient_peak  # I8 as before: weights + peak
    rid = rt.execute(S.Open("a"))
    for _ in range(MAX_CONTEXT):  # every Run allocates from that arena (session.use_env_allocators)
        rt.execute(S.Decode(rid))
    assert rt.models["a"].session.get_session_options().get_session_config_entry("session.use_env_allocators") == "1"
    check_state(rt.abstract())
    rt.close()
    assert len(abstract_ledger(rt.pmm).allowances) == 0 and env.lent == 0  # every loan repaid
    assert rt.used() == ENV_ARENA_CAP  # the lease stays: ORT's cap outlives the runtime


def test_peak_past_the_arena_room_is_refused_with_the_ledger_unchanged(world) -> None:
    rt = runtime(world, LIMIT, {"a": "dec", "b": "dec_wide"})
    peaks = world.facts["dec"].transient_peak + world.facts["dec_wide"].transient_peak
    assert rt.env_arena.lent == peaks and peaks + world.facts["dec_wide"].transient_peak > ENV_ARENA_CAP
    before = _frozen(rt)
    with pytest.raises(AllowanceExceeded, match="env arena"):
        rt.execute(world.load("c", "dec_wide"))
    assert _frozen(rt) == before and "c" not in rt.models
    rt.execute(world.load("c", "mlp"))  # a peak that fits the room that is left is lent
    assert rt.env_arena.lent == peaks + world.facts["mlp"].transient_peak <= ENV_ARENA_CAP
    rt.close()


def test_spec_refuses_the_same_peak_and_keeps_its_state(world) -> None:
    s = S.new_sessions(world.topology(0, ENV_ARENA_CAP), LIMIT)
    assert s.ledger["arena"] == ENV_ARENA_CAP and s.used == ENV_ARENA_CAP
    for name, src in (("a", "dec"), ("b", "dec_wide")):
        s, _ = S.step_sessions(s, world.load(name, src))
    with pytest.raises(AllowanceExceeded):
        S.step_sessions(s, world.load("c", "dec_wide"))
    assert s.ledger["arena"] == ENV_ARENA_CAP
    assert s.lent == world.facts["dec"].transient_peak + world.facts["dec_wide"].transient_peak
    check_state(s)


def test_arena_that_does_not_fit_the_limit_is_refused_in_both(world) -> None:
    small = ENV_ARENA_CAP + world.topology(0).headroom - 1
    with pytest.raises(CapacityDenied, match="env arena"):
        S.new_sessions(world.topology(0, ENV_ARENA_CAP), small)
    with pytest.raises(CapacityDenied, match="env arena"):
        runtime(world, small)


def test_runtime_asking_another_cap_is_refused_naming_both(world) -> None:
    runtime(world)
    with pytest.raises(InvalidTransition, match=f"capped at {ENV_ARENA_CAP} B; a holder granted {ENV_ARENA_CAP // 2} B"):
        GovernedRuntime(world.topology(0, ENV_ARENA_CAP // 2), LIMIT, world.sources, MAX_CONTEXT, BUCKET)


def test_clause_catches_the_arena_booked_twice(world) -> None:
    """The harm, on a state: the peaks charged as ARENA leases beside the arena's own lease."""
    s = S.new_sessions(world.topology(0, ENV_ARENA_CAP), LIMIT)
    f = world.facts["dec"]
    s, _ = S.step_sessions(s, S.LoadModel("a", "dec", f, f.loop_carried))
    state_I8_sessions(s)
    twice = attrs.evolve(s, ledger=s.ledger.set("arena", ENV_ARENA_CAP + f.transient_peak))
    with pytest.raises(InvariantViolation, match="^I8") as e:
        state_I8_sessions(twice)
    assert e.value.clause == "state_I8_sessions.arena_charged_once"


@pytest.mark.parametrize("name, clause", [
    ("arena_peak_charged_twice", "state_I8_sessions.arena_charged_once"),
    ("arena_on_second_authority", "state_C1_sessions.one_authority_per_tier"),
])
def test_mutant_double_booking_the_arena_is_caught(world, name, clause) -> None:
    """Each mutant re-introduces the double booking; the runtime's state shows it by the first load."""
    with applied(MUTANTS[name]):
        rt = governed.GovernedRuntime(world.topology(0, ENV_ARENA_CAP), LIMIT, world.sources, MAX_CONTEXT,
                                      BUCKET)
        try:
            with pytest.raises(InvariantViolation) as e:
                check_state(rt.abstract())
                rt.execute(world.load("a", "dec"))
                check_state(rt.abstract())
            if name == "arena_on_second_authority":  # the host pool's books miss the arena too (I8)
                with pytest.raises(InvariantViolation, match="arena role"):
                    state_I8_sessions(rt.abstract())
        finally:
            rt.close()
    assert e.value.clause == clause and e.value.id in MUTANTS[name].ids
