"""The rewritten clauses state harms, and each is made to fail by a named mutant (issue #26 item 5).

For each clause rewritten to state what is lost rather than restate a guard
(I2's new limit, I3's report, I10's bundle, I13's ageing), a deterministic
script runs the mutant from the registry with every guard on and the test
asserts the whole set of clauses the run breaks: exactly the rewritten one
(the mutant is caught by it and by nothing else), while the same script
without the mutant breaks nothing (its negative control).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
from manager_harness import DEV, H1, H2, HOST

from invariants import contracts
from invariants import manager as IM
from invariants import sessions as SP
from invariants.clauses import collecting
from invariants.mutation import applied
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.mutants import MUTANTS
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec import sessions as S
from spec.errors import CapacityDenied, InvalidBytes
from spec.tickets import TicketState
from spec.types import Role, Tier

_WORLD = [A.RegisterAuthority("dev", Tier.DEVICE, 4), A.RegisterAuthority("host", Tier.HOST, 4),
          A.RegisterHolder("h1"), A.RegisterHolder("h2")]


def _manager_breaks(acts: list[Any], mutant: str | None) -> tuple[set[str], Any]:
    """Run `acts` on the refimpl manager (contracts off: the test judges); every clause broken, and the last state."""
    g = ManagerAdapter()
    found: set[str] = set()
    with applied(MUTANTS[mutant]) if mutant else nullcontext(), contracts.contracts(False):
        for act in _WORLD + acts:
            before = g.abstract()
            result = g.execute(act)
            after = g.abstract()
            with collecting() as broken:
                IM.check_step(before, act, after, result)
                IM.check_all(after)
            found |= set(broken)
    return found, after


# --- I2: a lowered limit leaves no granted byte above it ---------------------------------------

_LOWER = [M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.PrepareLimit(DEV, 1), M.Answer(H1, 1, ()), M.CommitLimit(DEV)]


@pytest.mark.parametrize("mutant", [None, "limit_commit_checks_old_limit"])
def test_limit_commit_against_the_old_limit_fails_limit_backs_every_grant(mutant: str | None) -> None:
    """The lowered limit commits under the 3 B lease. The state form of the same harm (the ledger's
    `state_I2.grants_within_limit`) fails too: the step clause names the limit change that caused it."""
    found, m = _manager_breaks(_LOWER, mutant)
    assert m.ledger.authorities[DEV].limit == (1 if mutant else 4)  # the holder kept its 3 B lease
    assert found == ({"step_I2_manager.limit_backs_every_grant", "state_I2.grants_within_limit"}
                     if mutant else set())


_RAISE = [M.PrepareLimit(DEV, 8), M.CommitLimit(DEV), M.Submit(H1, DEV, 6)]


@pytest.mark.parametrize("mutant", [None, "limit_past_capacity"])
def test_limit_past_capacity_fails_limit_backs_every_grant_only(mutant: str | None) -> None:
    if mutant is None:  # the negative control: the 8 B limit on a 4 B pool is refused, nothing changes
        with pytest.raises(InvalidBytes, match="exceeds its 4 B capacity"):
            _manager_breaks(_RAISE[:1], None)
        with pytest.raises(CapacityDenied, match="can never fit its 4 B limit"):
            _manager_breaks(_RAISE[2:], None)
        return
    found, m = _manager_breaks(_RAISE, mutant)
    assert m.ledger.authorities[DEV].limit == 8 and m.tickets[1].state is TicketState.GRANTED
    assert found == {"step_I2_manager.limit_backs_every_grant"}


# --- I10: a bundle moves with the bytes of its step ----------------------------------------------

_BUNDLE = [M.OpenBundle(), M.PlanTx(H1, ((DEV, 1), (HOST, 1))), M.JoinBundle(1, 1), M.ReserveTx(1), M.ReserveTx(1),
           M.CommitTx(1)]


def _spec_manager_breaks(acts: list[Any], mutant: str | None) -> tuple[set[str], Any]:
    m, found = M.initial(), set()
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        for act in _WORLD + acts:
            nxt, result = MG.step(m, act)
            with collecting() as broken:
                IM.check_step(m, act, nxt, result)
                IM.check_all(nxt)
            found |= set(broken)
            m = nxt
    return found, m


@pytest.mark.parametrize(("mutant", "layer"), [(None, "spec"), (None, "refimpl"),
                                               ("commit_publishes_first_part_only", "spec"),
                                               ("composed_commit_skips_bundle", "refimpl")])
def test_a_bundle_out_of_step_with_its_leases_fails_bundle_moves_with_its_leases(mutant: str | None,
                                                                                 layer: str) -> None:
    """A two-part transaction of a bundle commits. Mutants: only the first reservation becomes a lease (the
    bundle claims a step whose host bytes are provisional); the bundle stays behind. (One part advancing is the
    atomic_bundle guard switched off: tests/test_tx_controls.py.)"""
    found, m = (_spec_manager_breaks if layer == "spec" else _manager_breaks)(_BUNDLE, mutant)
    assert found == ({"step_I10_manager.bundle_moves_with_its_leases"} if mutant else set())
    if mutant is None:
        assert m.bundles[1].versions == (1, 1, 1, 1)


# --- I3: what the user reads never binds bytes that are not enforced ---------------------------

_TOPOLOGY = S.Topology(capacity=4096, reserve=0, granule=256, host_mapped_capacity=0, headroom=128, source="test")
_FACTS = S.ModelFacts(1000, 2000, 64, frozenset(), 0, 0, 0)


def _sessions_breaks(acts: list[Any], mutant: str | None) -> tuple[set[str], S.SessionState]:
    s = S.SessionState(_TOPOLOGY, 4096)
    found: set[str] = set()
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        for act in acts:
            nxt, _ = S.step_sessions(s, act)
            with collecting() as broken:
                SP.check_transition(s, act, nxt)
                SP.check_state(nxt)
            found |= set(broken)
            s = nxt
    return found, s


@pytest.mark.parametrize("mutant", [None, "report_hides_declined"])
def test_report_hiding_a_declined_class_fails_report_binds_no_declined_bytes(mutant: str | None) -> None:
    """KV declined, then a compatibility-mode model loaded: the mutated report keeps the model's label and
    drops the declined class's, which the state still records (a clause reading the state saw nothing)."""
    found, s = _sessions_breaks([S.Decline(Role.KV), S.LoadModel("m", "toy", _FACTS, None)], mutant)
    assert s.not_enforced == {"kv", "model:m"}  # the state is the same either way
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        shown = S.report(s).not_enforced  # what the user reads
    assert shown == ({"model:m"} if mutant else {"kv", "model:m"})
    assert found == ({"state_I3_sessions.report_binds_no_declined_bytes"} if mutant else set())


@pytest.mark.parametrize(("mutant", "clause"), [
    ("decline_not_reported", "state_I3_sessions.report_binds_no_declined_bytes"),
    ("compat_labelled_weights", "state_I3_sessions.report_binds_no_uncharged_model")])
def test_the_older_I3_mutants_still_fail_the_report_reading_clauses(mutant: str, clause: str) -> None:
    found, _ = _sessions_breaks([S.Decline(Role.KV), S.LoadModel("m", "toy", _FACTS, None)], mutant)
    assert found == {clause}


# --- I8: the same graph with more dead space in its weights file is charged the same -----------


@pytest.mark.parametrize("mutant", [None, "extents_span_to_last_end"])
def test_a_reader_that_charges_dead_space_fails_dead_space_not_charged(mutant: str | None, tmp_path) -> None:
    """Real files: the zoo's decoder (each weight followed by as much dead space) and its padded twin (three
    times the dead space), read by the runtime's own `weight_bytes`. The mutated reader charges up to the last
    referenced byte, so the padded twin costs more; the clause recomputing the charge from that reader's
    facts (`charged_referenced_extents`) cannot see it, the metamorphic one does."""
    from refimpl.ort.measure import weight_bytes
    from refimpl.ort.zoo import build_padded_twins, build_zoo

    sources, twins = build_zoo(str(tmp_path)), build_padded_twins(str(tmp_path))
    with applied(MUTANTS[mutant]) if mutant else nullcontext():
        seen = [SP.PaddedTwin(k, *weight_bytes(sources[k]), *weight_bytes(twins[k])) for k in sorted(twins)]
        with collecting() as found:
            SP.check_observations(seen)
    assert all(t.twin_file_bytes > t.file_bytes for t in seen)  # the padding is real
    assert found == (["observed_I8_padding.dead_space_not_charged"] if mutant else [])


# --- C5: a late or closed pressure's answer credits nothing --------------------------------------

_LATE = [M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.Press(H1, DEV, 3, 1, 5), M.Answer(H1, 1, (1,), 6)]


@pytest.mark.parametrize(("mutant", "layer"), [("spec_late_answer_credited", "spec"),
                                               ("late_answer_credited", "refimpl")])
def test_a_late_answer_that_releases_bytes_fails_stale_answer_credits_nothing(mutant: str, layer: str) -> None:
    """The holder answers at 6 a pressure due at 5: mutated, its 3 B lease is released for nothing."""
    found, m = (_spec_manager_breaks if layer == "spec" else _manager_breaks)(_LATE, mutant)
    assert found == {"step_C5_manager.stale_answer_credits_nothing"}
    assert m.ledger.authorities[DEV].used == 0


@pytest.mark.parametrize("layer", ["spec", "refimpl"])
def test_a_late_answer_is_refused_and_changes_nothing(layer: str) -> None:
    """Unmutated, the late answer is StaleAnswer and the whole state is unchanged (the lease stays charged)."""
    from spec.errors import StaleAnswer

    if layer == "spec":
        _, m = _spec_manager_breaks(_LATE[:-1], None)
        with pytest.raises(StaleAnswer, match="due at 5; answered at 6"):
            MG.step(m, _LATE[-1])
        return
    g = ManagerAdapter()
    for act in _WORLD + _LATE[:-1]:
        g.execute(act)
    before = g.abstract()
    with pytest.raises(StaleAnswer, match="due at 5; answered at 6"):
        g.execute(_LATE[-1])
    assert g.abstract() == before and before.ledger.authorities[DEV].used == 3


def test_an_answer_to_a_closed_pressure_that_releases_bytes_fails_stale_answer_credits_nothing() -> None:
    """The clause's other half: a step whose answer names a pressure not open before it, yet releases a lease."""
    _, m = _spec_manager_breaks([M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.Press(H1, DEV, 3), M.CancelPressure(1)],
                                None)
    released = MG.step(m, A.Release(H1, 1))[0]  # the bytes leave as an answer would release them
    with collecting() as broken:
        IM.check_step(m, M.Answer(H1, 1, (1,)), released, 3)
    assert "step_C5_manager.stale_answer_credits_nothing" in broken


# --- I6: a pinned or in-flight lease is never a victim; I13: the allocator path never overtakes a waiter ----

_PINNED = [M.TryReserve(H1, DEV, 3), M.SetUse(H1, 1, True, False), M.Press(H1, DEV, 3), M.Answer(H1, 1, (1,))]
_OVERTAKE = [M.TryReserve(H1, DEV, 3), M.Submit(H2, DEV, 2), M.TryReserve(H1, DEV, 1)]


@pytest.mark.parametrize("layer", ["spec", "refimpl"])
@pytest.mark.parametrize(("acts", "error", "match"), [(_PINNED, "PinnedVictim", "allocation 1 is pinned"),
                                                      (_OVERTAKE, "CapacityDenied", "try-only")],
                         ids=["pinned-victim", "try-reserve-behind-a-waiter"])
def test_a_pinned_victim_or_an_overtaking_try_reserve_is_refused_and_changes_nothing(
        layer: str, acts: Any, error: str, match: str) -> None:
    from spec import errors as E

    if layer == "spec":
        _, m = _spec_manager_breaks(acts[:-1], None)
        with pytest.raises(getattr(E, error), match=match):
            MG.step(m, acts[-1])
        return
    g = ManagerAdapter()
    for act in _WORLD + acts[:-1]:
        g.execute(act)
    before = g.abstract()
    with pytest.raises(getattr(E, error), match=match):
        g.execute(acts[-1])
    assert g.abstract() == before


# --- I13: a matured waiter is never overtaken ----------------------------------------------------------

# A 4 B ticket waits behind 1 B grants; each submit's round ages it, so by the fourth 1 B submit it has matured
# (aging bound 4): the intact round stops at it, a round that stops only past the bound grants the 1 B ticket.
_MATURE = [M.Submit(H1, DEV, 1), M.Submit(H2, DEV, 4), M.Submit(H1, DEV, 1), M.Submit(H1, DEV, 1),
           M.Submit(H1, DEV, 1)]


@pytest.mark.parametrize(("mutant", "layer"), [(None, "spec"), (None, "refimpl"),
                                               ("spec_matured_compare_strict", "spec"),
                                               ("matured_compare_strict", "refimpl")])
def test_a_round_past_a_matured_waiter_fails_matured_not_overtaken(mutant: str | None, layer: str) -> None:
    found, m = (_spec_manager_breaks if layer == "spec" else _manager_breaks)(_MATURE, mutant)
    assert m.tickets[2].state is TicketState.PENDING and m.tickets[2].age == 4
    assert m.tickets[5].state is (TicketState.GRANTED if mutant else TicketState.PENDING)
    assert found == ({"step_I13_manager.matured_not_overtaken"} if mutant else set())


# --- I1: a retired ticket leaves the table ------------------------------------------------------------------

# A granted ticket cancelled (its 3 B credited), a pending one timed out: each is retired, and a table that keeps it
# lets its holder cancel or claim it again (in the thorough profile, a second cancel retired its reservation twice).
# Kept, the pending one is also no longer read as pending: its timeout reports its 2 B credited (I1's credit clause).
_GONE = "state_I1_tickets.retired_ticket_gone"
_RETIRE = {"cancel granted": ([M.Submit(H1, DEV, 3), M.CancelTicket(H1, 1)], {_GONE}),
           "time out pending": ([M.Submit(H1, DEV, 3), M.Submit(H2, DEV, 2), M.TimeoutTicket(H2, 2)],
                                {_GONE, "step_I1_manager.credit_exactly_once"})}


@pytest.mark.parametrize("mutant", [None, "retired_ticket_kept"])
@pytest.mark.parametrize("how", sorted(_RETIRE))
def test_a_retired_ticket_kept_in_the_table_fails_retired_ticket_gone(how: str, mutant: str | None) -> None:
    acts, broken = _RETIRE[how]
    found, m = _manager_breaks(acts, mutant)
    assert m.ledger.authorities[DEV].used == (0 if how == "cancel granted" else 3)  # the ledger's credit is right
    assert (acts[-1].ticket in m.tickets) is bool(mutant)
    assert found == (broken if mutant else set())


# --- Reconfigure: generations (C5, I13) ----------------------------------------------------------

_GEN_ANSWER = [M.Submit(H1, DEV, 3), M.Claim(H1, 1), M.Press(H1, DEV, 3), M.Reconfigure(DEV), M.Answer(H1, 1, (1,))]
_GEN_WAIT = [M.Submit(H1, DEV, 3), M.Submit(H2, DEV, 2), M.Reconfigure(DEV)]


@pytest.mark.parametrize(("acts", "mutant", "layer", "clause"), [
    # a pinned lease given back to a pressure; a try-only 1 B taken while a 2 B ticket waits
    (_PINNED, "spec_pinned_lease_reclaimed", "spec", "step_I6_manager.pinned_never_reclaimed"),
    (_PINNED, "pinned_lease_reclaimed", "refimpl", "step_I6_manager.pinned_never_reclaimed"),
    (_OVERTAKE, "spec_try_reserve_overtakes_waiters", "spec", "step_I13_manager.allocator_never_overtakes_a_waiter"),
    (_OVERTAKE, "try_reserve_overtakes_waiters", "refimpl", "step_I13_manager.allocator_never_overtakes_a_waiter"),
    # an answer after a reconfigure releases the lease; a reconfigure leaves the 2 B waiter pending
    (_GEN_ANSWER, "stale_generation_answer_credited", "refimpl", "step_C5_manager.stale_answer_credits_nothing"),
    (_GEN_WAIT, "composed_reconfigure_keeps_waiters", "refimpl",
     "state_I13_generation.no_waiter_of_an_older_generation"),
    (_GEN_WAIT, "spec_reconfigure_keeps_waiters", "spec", "state_I13_generation.no_waiter_of_an_older_generation"),
], ids=lambda v: v if type(v) is str else None)
def test_a_mutant_fails_its_harm_clause(acts: Any, mutant: str, layer: str, clause: str) -> None:
    found, _ = (_spec_manager_breaks if layer == "spec" else _manager_breaks)(acts, mutant)
    assert found == {clause}


@pytest.mark.parametrize("layer", ["spec", "refimpl"])
def test_reconfigure_fails_the_waiters_and_stales_the_pressure(layer: str) -> None:
    """Unmutated: the waiter is gone, the granted ticket stays; the old pressure's answer is StaleGeneration, unchanged."""
    from spec.errors import StaleGeneration

    if layer == "spec":
        _, m = _spec_manager_breaks(_GEN_ANSWER[:-1] + [M.Submit(H2, DEV, 2), M.Reconfigure(DEV)], None)
        assert len(m.tickets) == 0 and dict(m.generations) == {DEV: 2}
        with pytest.raises(StaleGeneration, match="generation 0"):
            MG.step(m, _GEN_ANSWER[-1])
        return
    g = ManagerAdapter()
    for act in _WORLD + _GEN_ANSWER[:-1] + [M.Submit(H2, DEV, 2), M.Reconfigure(DEV)]:
        g.execute(act)
    before = g.abstract()
    assert len(before.tickets) == 0 and dict(before.generations) == {DEV: 2}
    with pytest.raises(StaleGeneration, match="generation 0"):
        g.execute(_GEN_ANSWER[-1])
    assert g.abstract() == before
