"""Retry intents (C4) and the poisoned manager (I5) in the composed model (issue #21), on the spec and refimpl.

An abort leaves the transaction's place (submit sequence, priority, age) as a zero-byte intent; a retry naming
it takes the place back. A corrupt shared ledger (the test hook `refimpl.verify.manager_hooks.corrupt_ledger`)
poisons the whole manager: its waiters fail and nothing new is granted. Each harm clause of
`invariants.manager_tx` is shown to fail: a guard switched off (spec) or a planted bug (refimpl, spec).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from invariants import contracts
from invariants import manager as MP
from invariants._violation import InvariantViolation
from invariants.clauses import CLAUSES, collecting
from invariants.manager_replay import replay_manager_lines
from invariants.mutation import Mutant, applied
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import ManagerAdapter
from refimpl.verify.mutants import MUTANTS as REGISTRY
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import ForeignHolder, GovernorError, InvalidTransition, ManagerPoisoned, UnknownIntent
from spec.guards import ALL_ON, GuardSet, Layer
from spec.records import evolve
from spec.tickets import TicketState
from spec.types import Role, Tier
from trace_harness import lines_of, replaced, traced

DEV, H1, H2 = 1, 1, 2
_SETUP = (A.RegisterHolder("h1"), A.RegisterHolder("h2"), A.RegisterAuthority("dev", Tier.DEVICE, 4))
#: h1's transaction (priority 2) reserves, aborts; a newcomer of h2 plans; h1 retries its intent.
_RETRY = (M.PlanTx(H1, ((DEV, 3),), 2), M.ReserveTx(1), M.AbortTx(1), M.PlanTx(H2, ((DEV, 1),)),
          M.PlanTx(H1, ((DEV, 3),), 0, 1))
#: A waiter, a granted ticket and a transaction; then the ledger is found corrupt.
_POISON = (M.Submit(H1, DEV, 3), M.Submit(H2, DEV, 3), M.PlanTx(H2, ((DEV, 1),)), M.CorruptLedger())


def _spec(actions: tuple[Any, ...], guards: GuardSet = ALL_ON) -> M.Manager:
    m = M.initial()
    for act in _SETUP + actions:
        before = m
        m, result = MG.step(m, act, guards)
        MP.check_step(before, act, m, result)
        MP.check_all(m)
    return m


def _refimpl(actions: tuple[Any, ...]) -> tuple[ManagerAdapter, M.Manager]:
    """Run on refimpl with the spec beside it: every result and whole abstraction equal, every clause checked."""
    ad, m = ManagerAdapter(), M.initial()
    for act in _SETUP + actions:
        before = m
        m, result = MG.step(m, act)
        assert ad.execute(act) == result, act
        got = ad.abstract()
        assert got == m, act
        MP.check_step(before, act, got, result)
        MP.check_all(got)
    return ad, m


def test_abort_leaves_the_place_and_a_retry_takes_it_back() -> None:
    m = _spec(_RETRY)
    assert m.txs[3] == M.Tx(3, H1, ((DEV, 3),), (), None, seq=1, priority=2, age=1)  # not behind newcomer 2
    assert m.txs[2].seq == 2 and not m.intents  # the intent is spent
    assert m.ledger.authorities[DEV].used == 0  # an intent holds nothing


def test_refimpl_keeps_the_place_as_the_spec_does() -> None:
    _, m = _refimpl(_RETRY)
    assert (m.txs[3].seq, m.txs[3].priority, m.txs[3].age) == (1, 2, 1)


@pytest.mark.parametrize(("retry", "holder", "error"), [(9, H1, UnknownIntent), ("1", H1, UnknownIntent),
                                                        (1, H1, InvalidTransition), (2, H1, UnknownIntent)],
                         ids=["never", "not-an-int", "spent", "live-tx"])
def test_PlanTx_rejects_a_retry_of_no_intent(retry: Any, holder: int, error: type) -> None:
    m = _spec(_RETRY)
    for step in (lambda: MG.step(m, M.PlanTx(holder, ((DEV, 1),), 0, retry)),):
        with pytest.raises(error, match="intent"):
            step()
    ad, _ = _refimpl(_RETRY)
    snap = ad.abstract()
    with pytest.raises(error, match="intent"):
        ad.execute(M.PlanTx(holder, ((DEV, 1),), 0, retry))
    assert ad.abstract() == snap


def test_PlanTx_rejects_a_retry_of_another_holders_intent() -> None:
    ad, m = _refimpl(_RETRY[:3])
    snap = ad.abstract()
    with pytest.raises(ForeignHolder, match="intent 1 belongs to holder 1"):
        MG.step(m, M.PlanTx(H2, ((DEV, 1),), 0, 1))
    with pytest.raises(ForeignHolder, match="intent 1 belongs to holder 1"):
        ad.execute(M.PlanTx(H2, ((DEV, 1),), 0, 1))
    assert ad.abstract() == snap == m


def test_a_poisoned_manager_fails_its_waiters_and_grants_nothing() -> None:
    ad, m = _refimpl(_POISON)
    assert m.poisoned and set(m.tickets) == {1} and m.tickets[1].state is TicketState.GRANTED  # waiter 2 failed
    snap = ad.abstract()
    for act in (M.Submit(H1, DEV, 1), M.TryReserve(H1, DEV, 1), M.PlanTx(H1, ((DEV, 1),)), M.ReserveTx(1),
                A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING), A.RecordCommitted(H1, DEV, Tier.DEVICE, 1, Role.STAGING)):
        with pytest.raises(ManagerPoisoned, match="grants nothing"):
            MG.step(m, act)
        with pytest.raises(ManagerPoisoned, match="grants nothing"):
            ad.execute(act)
        assert ad.abstract() == snap
    # What it granted before still settles: the claim, the abort (its place kept), the release.
    _, m2 = _refimpl(_POISON + (M.Claim(H1, 1), M.AbortTx(1), A.Release(H1, 1)))
    assert m2.ledger.authorities[DEV].used == 0 and m2.intents[1].seq == 1



def test_a_poisoned_manager_refuses_every_charging_action_and_changes_nothing() -> None:
    """Every action `spec.manager_tx.CHARGING` names, allowance growth and a lease's growth included (the composed
    campaign found refimpl reserving allowance growth on a poisoned manager once it issued CorruptLedger)."""
    from spec.manager import refusals
    from spec.manager_tx import CHARGING
    ad, m = _refimpl((A.OpenAllowance(H1, DEV, 1), M.Submit(H1, DEV, 1), M.Claim(H1, 1), M.PlanTx(H2, ((DEV, 1),)),
                      M.CorruptLedger()))
    snap = ad.abstract()
    acts = (M.Submit(H1, DEV, 1), M.TryReserve(H1, DEV, 1), M.GrowLease(H1, 1, 1), M.PlanTx(H1, ((DEV, 1),)),
            M.ReserveTx(1), A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING),
            A.RecordCommitted(H1, DEV, Tier.DEVICE, 1, Role.STAGING), A.ReserveGrowth(H1, 1, 1))
    assert {type(a) for a in acts} == set(CHARGING)
    for act in acts:
        assert ManagerPoisoned in {type(e) for e in refusals(m, act)}, act
        with pytest.raises(ManagerPoisoned, match="grants nothing"):
            ad.execute(act)
        assert ad.abstract() == snap, act

# --- each clause can fail ----------------------------------------------------------------------------------


def _clause(e: pytest.ExceptionInfo[InvariantViolation]) -> str:
    return f"{e.value.id}:{(e.value.clause or '').split('.')[-1]}"


def test_control_retry_keeps_identity_off_loses_the_place() -> None:
    with pytest.raises(InvariantViolation) as e:
        _spec(_RETRY, GuardSet.without("retry_keeps_identity"))
    assert _clause(e) == "C4:retry_keeps_place"


def test_control_poisoned_manager_refuses_off_grants_from_a_corrupt_ledger() -> None:
    with pytest.raises(InvariantViolation) as e:
        _spec(_POISON + (M.ReserveTx(1),), GuardSet.without("poisoned_manager_refuses"))
    assert _clause(e) == "I5:poisoned_grants_nothing"


_S = Layer.SPEC
HOST = 2
_HOST = A.RegisterAuthority("host", Tier.HOST, 8)
#: A committed 2 B lease on dev, then dev's context lost (its charge stranded until termination).
_LOST = (M.PlanTx(H1, ((DEV, 2),)), M.ReserveTx(1), M.CommitTx(1), A.LoseDevice(DEV))
#: A 1 B transaction reserved and its provisional view (1) published.
_VIEW = (M.PlanTx(H1, ((DEV, 1),)), M.ReserveTx(1), M.PublishView(1))
#: Registered mutants (`refimpl.verify.mutants_tx`, hunted by `ortmem verify`) with a fixed script that shows
#: each (intents, device loss, views, bundles), plus one the composed restriction cannot reach (it issues no
#: tickets): the poisoning keeps a waiter.
MUTANTS: dict[str, tuple[Mutant, tuple[Any, ...], str]] = {
    "retry_takes_a_fresh_place": (REGISTRY["retry_takes_a_fresh_place"], _RETRY, "C4:retry_keeps_place"),
    "abort_forgets_the_place": (REGISTRY["abort_forgets_the_place"], _RETRY[:3], "C4:abort_leaves_place"),
    "fresh_tx_reuses_a_sequence": (REGISTRY["fresh_tx_reuses_a_sequence"], _RETRY[:4], "C4:one_place_per_request"),
    "spec_retry_leaves_the_intent": (REGISTRY["spec_retry_leaves_the_intent"], _RETRY, "C4:retry_keeps_place"),
    "poisoned_still_reserves": (REGISTRY["poisoned_still_reserves"], _POISON + (M.ReserveTx(1),),
                                "I5:poisoned_grants_nothing"),
    "poisoned_ledger_still_reserves": (REGISTRY["poisoned_ledger_still_reserves"],
                                       _POISON + (A.Reserve(H1, DEV, Tier.DEVICE, 1, Role.STAGING),),
                                       "I5:poisoned_grants_nothing"),
    "spec_poisoned_still_grants": (REGISTRY["spec_poisoned_still_grants"], _POISON + (M.ReserveTx(1),),
                                   "I5:poisoned_grants_nothing"),
    "retry_keeps_intent": (REGISTRY["retry_keeps_intent"], _RETRY, "C4:retry_keeps_place"),
    "reserve_charges_first_need": (REGISTRY["reserve_charges_first_need"],
                                   (_HOST, M.PlanTx(H1, ((HOST, 3), (DEV, 1))), M.ReserveTx(1)),
                                   "I1:tx_held_reserved"),
    "plan_on_lost_context": (REGISTRY["plan_on_lost_context"], (A.LoseDevice(DEV), M.PlanTx(H1, ((DEV, 1),))),
                             "C3:lost_context_gets_no_work"),
    "loss_refunds_committed": (REGISTRY["loss_refunds_committed"], _LOST, "C3:lost_charge_kept"),
    "termination_keeps_stranded": (REGISTRY["termination_keeps_stranded"], _LOST + (A.ConfirmTermination(DEV),),
                                   "C3:termination_refunds_once"),
    "termination_forgets_refund": (REGISTRY["termination_forgets_refund"], _LOST + (A.ConfirmTermination(DEV),),
                                   "C3:termination_refunds_once"),
    "commit_keeps_users": (REGISTRY["commit_keeps_users"], _VIEW + (M.ExecuteView(1, 1, 1), M.CommitTx(1)),
                           "C6:users_are_running"),
    "view_id_not_advanced": (REGISTRY["view_id_not_advanced"], _VIEW, "C6:view_names_fresh"),
    "one_bit_generation": (REGISTRY["one_bit_generation"], _VIEW + (M.RemapView(1), M.RemapView(1)),
                           "I9:generation_never_back"),
    "abort_keeps_partial_step": (REGISTRY["abort_keeps_partial_step"],
                                 (M.OpenBundle(), M.PlanTx(H1, ((DEV, 1),)), M.JoinBundle(1, 1), M.ReserveTx(1),
                                  M.AbortTx(1)), "I10:bundle_moves_with_its_leases"),
    "mismatch_poisons_all": (REGISTRY["mismatch_poisons_all"], (M.OpenBundle(), M.OpenBundle(), M.ReportMismatch(1)),
                             "I5:mismatch_poisons_one_bundle"),
    "poison_keeps_waiters": (Mutant(
        "poison_keeps_waiters", ("I5",), "manager", _S, "spec.manager_tx",
        "            tickets = tickets.delete(t.id)  # a waiter fails: it would be granted from a corrupt ledger (I5)\n",
        "            pass\n", "the spec's poisoning leaves the waiters pending: the next release grants one"),
        _POISON + (M.Claim(H1, 1), A.Release(H1, 1)), "I5:poisoned_grants_nothing"),
}


def test_every_registered_composed_tx_mutant_has_a_script() -> None:
    assert {n for n, m in REGISTRY.items() if m.submodel == "composed"} == set(MUTANTS) - {"poison_keeps_waiters"}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_caught_by_its_harm_clause(name: str) -> None:
    """The script breaks the mutant's harm clause (a clause of another ID may break first on the same step, as
    the ledger's I1 does when a termination mis-refunds); unmutated, it breaks none (its last step may be refused)."""
    mutant, script, clause = MUTANTS[name]
    run = (lambda: _spec(script)) if mutant.layer is _S else (lambda: _refimpl_checked(script))
    with contracts.contracts(False), collecting() as intact:  # the hunt's setting: only the clauses judge
        with contextlib.suppress(GovernorError):  # intact, the script's bad step is refused
            run()
    with applied(mutant), contracts.contracts(False), collecting() as found:
        run()
    assert not intact
    assert clause in {f"{CLAUSES[k].id}:{k.split('.')[-1]}" for k in found}, found


def _refimpl_checked(actions: tuple[Any, ...]) -> None:
    """refimpl alone, each abstraction judged by the clauses (no spec beside it: the bug must show as a harm)."""
    ad = ManagerAdapter()
    before = ad.abstract()
    for act in _SETUP + actions:
        result = ad.execute(act)
        after = ad.abstract()
        MP.check_step(before, act, after, result)
        MP.check_all(after)
        before = after


def test_one_place_per_request_fails_on_two_holders_of_one_sequence() -> None:
    m = _spec(_RETRY[:3])  # intent 1 holds sequence 1
    twin = M.Tx(4, H1, ((DEV, 3),), (), None, seq=1)
    with pytest.raises(InvariantViolation, match="transaction 4 and intent 1|intent 1 and transaction 4") as e:
        MP.check_all(evolve(m, txs=m.txs.set(4, twin), next_tx=5))
    assert _clause(e) == "C4:one_place_per_request"


def _traced_retry() -> list[bytes]:
    pmm, buf = traced()
    h1, h2 = pmm.register_holder("h1"), pmm.register_holder("h2")
    dev = pmm.register_authority("dev", Tier.DEVICE, 4)
    first = pmm.plan_tx(h1, ((dev, 3),), 2)
    pmm.reserve_all(first)
    pmm.abort_tx(first)
    second = pmm.plan_tx(h2, ((dev, 1),))
    pmm.abort_tx(second)
    retry = pmm.plan_tx(h1, ((dev, 3),), 0, first)  # the retry takes back the first attempt's place
    pmm.reserve_all(retry)
    pmm.commit_tx(retry)
    return lines_of(buf)


def test_a_traced_retry_replays_against_the_spec() -> None:
    r = replay_manager_lines(_traced_retry())
    assert r.ok, r


def test_replay_rejects_a_retry_that_names_another_attempts_intent() -> None:
    lines = _traced_retry()
    i = max(n for n, raw in enumerate(lines) if json.loads(raw)["kind"] == "plan_tx")
    ev = json.loads(lines[i])
    ev["ids"]["retry"] = 2  # h2's intent: a foreign place (C4)
    r = replay_manager_lines(replaced(lines, i, ev))
    assert not r.ok


def _held_tx(guards: GuardSet = ALL_ON) -> tuple[ProcessMemoryManager, int, int, int, int]:
    """gpu0 and gpu1 (device, 100 B each); holder kv's transaction holds 4 B on each (gpu0's first)."""
    pmm = ProcessMemoryManager(guards=guards)
    a, b = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_authority("gpu1", Tier.DEVICE, 100, "cuda:1")
    h = pmm.register_holder("kv")
    tx = pmm.plan_tx(h, ((a, 4), (b, 4)))
    pmm.reserve_all(tx)
    return pmm, h, a, b, tx


def _used(pmm: ProcessMemoryManager, *auths: int) -> tuple[int, ...]:
    return tuple(pmm.snapshot(x).used for x in auths)


@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_a_loss_unwinding_a_transaction_keeps_the_lost_ledgers_charge_and_credits_the_rest(on: bool) -> None:
    """`_unwind(t, keep)`: the reservation on the lost gpu0 (held first) stays charged until termination (C3);
    the one after it, on gpu1, is credited all the same."""
    with contracts.contracts(on):
        pmm, _, a, b, _ = _held_tx()
        pmm.lose_device(a)
        assert _used(pmm, a, b) == (4, 0)


def test_an_abort_with_full_abort_off_credits_only_the_first_reservation() -> None:
    """The `full_abort` negative control (I5): an abort returns the first held reservation only."""
    with contracts.contracts(False):
        pmm, _, a, b, tx = _held_tx(GuardSet.without("full_abort"))
        assert pmm.abort_tx(tx) == 4 and _used(pmm, a, b) == (0, 4)


def test_an_abort_with_full_abort_off_hands_every_reservation_back_to_its_holder() -> None:
    """`full_abort` off: the reservations after the first stay charged, but none is the dead transaction's any
    more: the holder cancels the third itself."""
    with contracts.contracts(False):
        pmm = ProcessMemoryManager(guards=GuardSet.without("full_abort"))
        auths = [pmm.register_authority(f"gpu{i}", Tier.DEVICE, 100, f"cuda:{i}") for i in range(3)]
        h = pmm.register_holder("kv")
        tx = pmm.plan_tx(h, tuple((x, 4) for x in auths))
        held = pmm.reserve_all(tx)
        assert pmm.abort_tx(tx) == 4
        pmm.cancel(h, held[2])
        assert _used(pmm, *auths) == (0, 4, 0)
