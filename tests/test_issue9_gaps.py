"""Issue 9, remaining gaps: clauses no control made fail, and bugs no check caught.

Each test runs what `ortmem verify --quick` runs for one mutation control
(`refimpl.verify._job`, the quick budget) and names the clause that must
fail, so a clause shown able to fail stays shown; plus the harness fix a
spec-layer mutant of an action handler needs.
"""

from __future__ import annotations

import pytest

from invariants.mutation import applied
from refimpl.verify.mutants import MUTANTS
from refimpl.verify import _job
from refimpl.verify.manager_hooks import abstract_manager
from spec import manager as MG
from spec import manager_actions as M
from spec import manager_views as MV


def test_applied_repoints_a_handler_table_entry_and_restores_it() -> None:
    original = MG._HANDLERS[M.DropView]
    with applied(MUTANTS["spec_drop_under_execution"]):  # the tables run the mutated handler
        assert MG._HANDLERS[M.DropView] is MV.VIEW_HANDLERS[M.DropView] is MV._drop_view is not original
    assert MG._HANDLERS[M.DropView] is MV.VIEW_HANDLERS[M.DropView] is MV._drop_view is original


#: mutant -> the clause its quick-profile control must make fail (rule R3).
KILLS = {
    "spec_lease_under_view_unpinned": "step_C6_views.view_bytes_kept",
    "spec_provisional_view_shared": "state_C6_views.provisional_view_private",
    "kv_growth_releases_old_first": "observed_I8c_kv_leased.kv_in_use_leased",
    "decode_past_capacity": "state_I8c_sessions.kv_covers_tokens",
    "reregister_grows_capacity": "step_C1.ledger_identity_stable",
    # Leases an admission model no longer holds, left charged: only the books (`check_observations`) see them.
    "finish_forgets_kv_leases": "observed_I12_admission.ledger_charges_what_is_held",
    "evict_keeps_weights_charged": "observed_I12_admission.ledger_charges_what_is_held",
}


@pytest.mark.parametrize("name", sorted(KILLS))
def test_quick_mutation_control_breaks_its_clause(name: str) -> None:
    r = _job("mutant", name, MUTANTS[name].layer.value, "quick")
    assert r.found, r.message
    assert KILLS[name] in (r.clause, *r.clauses), r.message


def _woken_after_reconfigure(wait_s: float) -> tuple[bool, bool]:
    """(the parked requester was woken, its ticket is gone): a ticket waits, its authority is reconfigured."""
    import threading

    from refimpl.manager import ProcessMemoryManager
    from spec.types import Tier

    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("dev", Tier.DEVICE, 8)
    pmm.submit(h, a, 6)  # granted at once
    t = pmm.submit(h, a, 6)  # pending: a requester thread parks on it
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(pmm.wait(t, wait_s)), daemon=True)
    th.start()
    while pmm._tickets[t].event is None:
        pass
    pmm.reconfigure(a)  # fails the pending ticket
    th.join(wait_s + 5)
    return got == [True], t not in abstract_manager(pmm).tickets


def test_reconfigure_wakes_the_requester_parked_on_a_failed_ticket() -> None:
    assert _woken_after_reconfigure(5.0) == (True, True)


def test_reconfigure_that_forgets_its_waiters_leaves_one_parked() -> None:
    from invariants.mutation import Mutant
    from spec.guards import Layer

    forgets = Mutant("reconfigure_forgets_waiters", ("I13",), "pressure", Layer.REFIMPL, "refimpl.manager.arbitration",
                     "            del self._tickets[t.id]\n            if t.event is not None:\n"
                     "                self._wake.append(t.event)\n        a.pending.clear()\n",
                     "            del self._tickets[t.id]\n        a.pending.clear()\n",
                     "reconfigure fails the pending tickets but never wakes their waiters")
    with applied(forgets):
        assert _woken_after_reconfigure(0.3) == (False, True)  # retired, and its requester sleeps to its timeout


def _kv_growth_observations(mutant: str | None) -> list:
    import contextlib

    from invariants.sessions import KvCover
    from refimpl.verify.sessions_checker import LIMITS, OrtAdapter, OrtWorld
    from spec import sessions as S
    from spec.guards import ALL_ON

    w = OrtWorld()
    f = w.facts["dec"]
    seen = []
    with applied(MUTANTS[mutant]) if mutant else contextlib.nullcontext():
        a = OrtAdapter(w, (LIMITS[2], 0), ALL_ON)
        for act in [S.LoadModel("a", "dec", f, f.loop_carried, False), S.Open("a")] + [S.Decode(1)] * (f.bucket + 1):
            a.execute(act)
            seen += a.take_observations()
        a.close()
    return [c for c in seen if isinstance(c, KvCover)]  # the load's I8 padded-twin reading aside


def test_kv_growth_keeps_every_kv_byte_in_use_leased() -> None:
    from invariants.sessions import observed_I8c_kv_leased

    seen = _kv_growth_observations(None)
    assert [c.event.split("(")[0] for c in seen[-3:]] == ["reserve", "commit", "release"]  # the growth
    assert all(c.held <= c.leased for c in seen) and seen[-1].held > 0
    observed_I8c_kv_leased(seen)


def test_kv_growth_that_releases_the_old_lease_first_is_caught() -> None:
    from invariants import InvariantViolation
    from invariants.sessions import observed_I8c_kv_leased

    seen = _kv_growth_observations("kv_growth_releases_old_first")
    assert seen[-3].event.startswith("release") and seen[-3].held > seen[-3].leased  # in use, charged to no one
    with pytest.raises(InvariantViolation, match="^I8c.*KV leases charge only"):
        observed_I8c_kv_leased(seen)


@pytest.mark.parametrize("profile", ["quick", "thorough"])
@pytest.mark.parametrize("name", ["provisional_view_shared", "spec_provisional_view_shared"])
def test_binding_another_transactions_provisional_view_is_found_in_both_profiles(name: str, profile: str) -> None:
    """C6's provisional_view_private, made to fail in either layer under either budget: the composed campaign's
    steered `execute_foreign_provisional` has one open transaction bind another's provisional view. (Without it,
    once the campaign also steered `burst`, the thorough profile found neither mutant: C6 partial.)"""
    r = _job("mutant", name, MUTANTS[name].layer.value, profile)
    assert r.found, r.message
    assert "state_C6_views.provisional_view_private" in (r.clause, *r.clauses), r.message
