# Each clause of the local contract (refimpl.manager.local_contract) pinned by a bug only it names.
#
# A case runs a short clean scenario on a fresh manager with contracts on; its last operation's body is wrapped
# (an instance attribute over the bound method) or a guard is off, so that one harm happens. The contract must
# raise InvariantViolation from exactly that clause. Negative control: the same scenario with the body intact
# raises no violation (each case also runs clean). Disabling any one clause by hand makes its case fail
# (another clause, or none, reports the harm).

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.mutation import applied
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.mutants import MUTANTS
from spec.errors import CapacityDenied, GovernorError
from spec.guards import GuardSet
from spec.types import AllocState, Origin, Role, Tier

DEV, KV = Tier.DEVICE, Role.KV


class W(NamedTuple):
    pmm: ProcessMemoryManager
    a: int  # gpu0, 1000 B
    b: int  # gpu1, 1000 B
    v: int  # a view of gpu0
    h: int
    g: int


def _world(guards: GuardSet | None = None) -> W:
    pmm = ProcessMemoryManager(guards=guards or GuardSet())
    a, b = pmm.register_authority("gpu0", DEV, 1000), pmm.register_authority("gpu1", DEV, 1000)
    return W(pmm, a, b, pmm.register_alias(a, "uvm"), pmm.register_holder("kv"), pmm.register_holder("weights"))


def _lease(w: W, n: int = 10) -> int:
    x = w.pmm.reserve(w.h, w.a, DEV, n, KV)
    w.pmm.commit(w.h, x, n)
    return x


def _granted(w: W, n: int = 10) -> int:
    return w.pmm.submit(w.h, w.a, n)


class Case(NamedTuple):
    clause: str
    setup: Callable[[W], Any]  # clean operations; returns what `op` needs
    op: Callable[[W, Any], Any]  # the operation whose body is broken
    body: str | None = None  # the body method to wrap
    wrap: Callable[..., Any] | None = None  # wrap(w, orig, *args) -> result
    guards: GuardSet | None = None  # or a guard off instead of a wrapper


def _rec(w: W, i: int) -> Any:
    return w.pmm._allocs[i]


def _after(f: Callable[[W, Any], None]) -> Callable[..., Any]:
    """A body that runs, then corrupts what it produced (f(w, result)) and returns the result."""
    def wrap(w: W, orig: Callable[..., Any], *args: Any) -> Any:
        r = orig(*args)
        f(w, r if r is not None else args[1])
        return r
    return wrap


def _set(obj: Any, **fields: Any) -> None:
    for k, v in fields.items():
        setattr(obj, k, v)


def _refuse_after(f: Callable[..., None], run_body: bool = False) -> Callable[..., Any]:
    """A body that changes something (f(w, *args), after the real body if `run_body`), then refuses."""
    def wrap(w: W, orig: Callable[..., Any], *args: Any) -> Any:
        if run_body:
            orig(*args)
        f(w, *args)
        raise CapacityDenied("refused after the fact")
    return wrap


_none = lambda w: None  # noqa: E731
_OFF = GuardSet.without

CASES: dict[str, Case] = {
    # reserve / record_committed
    "reserve_unknown_accepted": Case("local.unknown_accepted", _none, lambda w, _: w.pmm.reserve(w.h, 999, DEV, 5, KV),
                                     "_admit", lambda w, orig, *a: 1),
    "reserve_not_booked": Case("local.booked", _none, lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV),
                               "_admit", lambda w, orig, *a: orig(*a) + 1000),
    "reserve_on_another_ledger": Case("local.canonical", _none, lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV),
                                      "_admit", lambda w, orig, h, a, *rest: orig(h, w.b, *rest)),
    "reserve_tier": Case("local.tier", _none, lambda w, _: w.pmm.reserve(w.h, w.a, Tier.HOST, 5, KV),
                         guards=_OFF("tier_match")),
    "reserve_owner": Case("local.owner", _none, lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV),
                          "_admit", _after(lambda w, r: _set(_rec(w, r), holder=w.g))),
    "reserve_reserved_size": Case("local.charged_in_full", _none, lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV),
                                  "_admit", _after(lambda w, r: _set(_rec(w, r), reserved=6))),
    "reserve_born_live": Case("local.lifecycle", _none, lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV),
                              "_admit", _after(lambda w, r: _set(_rec(w, r), state=AllocState.LIVE))),
    "reserve_id_reused": Case("local.fresh_id", lambda w: w.pmm.cancel(w.h, w.pmm.reserve(w.h, w.a, DEV, 5, KV)),
                              lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV), guards=_OFF("fresh_ids")),
    "reserve_over_limit": Case("local.granted_within_limit", _none,
                               lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 1001, KV), guards=_OFF("limit_check")),
    # commit
    "commit_unknown_accepted": Case("local.unknown_accepted", _none, lambda w, _: w.pmm.commit(w.h, 999, 5),
                                    "_commit", lambda w, orig, *a: None),
    "commit_foreign": Case("local.own_action", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                           lambda w, x: w.pmm.commit(w.g, x, 10), guards=_OFF("owner_only")),
    "commit_changes_holder": Case("local.owner", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                                  lambda w, x: w.pmm.commit(w.h, x, 10), "_commit",
                                  _after(lambda w, x: _set(_rec(w, x), holder=w.g))),
    "commit_twice": Case("local.lifecycle", _lease, lambda w, x: w.pmm.commit(w.h, x, 10),
                         guards=_OFF("lifecycle_table")),
    "commit_size": Case("local.committed", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                        lambda w, x: w.pmm.commit(w.h, x, 8), "_commit",
                        _after(lambda w, x: _set(_rec(w, x), nbytes=10))),
    "commit_past_reservation": Case("local.within_reservation", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                                    lambda w, x: w.pmm.commit(w.h, x, 12), guards=_OFF("commit_within_reservation")),
    "commit_unlisted": Case("local.booked", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                            lambda w, x: w.pmm.commit(w.h, x, 10), "_commit",
                            _after(lambda w, x: w.pmm._allocs.pop(x))),
    "commit_row_elsewhere": Case("local.one_ledger", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                                 lambda w, x: w.pmm.commit(w.h, x, 10), "_commit",
                                 _after(lambda w, x: _set(_rec(w, x), auth=w.pmm._auths[w.b]))),
    # G4: a refused operation changed the ledger (its figures, or the named record, or a ticket)
    "reserve_refused_after_booking": Case("local.refusal_changes_nothing", _none,
                                          lambda w, _: w.pmm.reserve(w.h, w.a, DEV, 5, KV), "_admit",
                                          _refuse_after(lambda w, *a: None, run_body=True)),
    "reserve_unknown_refused_takes_an_id": Case("local.refusal_changes_nothing", _none,
                                                lambda w, _: w.pmm.reserve(w.h, 999, DEV, 5, KV), "_admit",
                                                _refuse_after(lambda w, *a: _set(w.pmm, _next_alloc=50))),
    "commit_refused_changes_holder": Case("local.refusal_changes_nothing", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                                          lambda w, x: w.pmm.commit(w.h, x, 10), "_commit",
                                          _refuse_after(lambda w, h, x, n: _set(_rec(w, x), holder=w.g))),
    "release_refused_moves_limit": Case("local.refusal_changes_nothing", _lease, lambda w, x: w.pmm.release(w.h, x),
                                        "_finish", _refuse_after(lambda w, *a: _set(w.pmm._auths[w.a], limit=999))),
    "release_unknown_refused_takes_an_id": Case("local.refusal_changes_nothing", _none,
                                                lambda w, _: w.pmm.release(w.h, 999), "_finish",
                                                _refuse_after(lambda w, *a: _set(w.pmm, _next_alloc=50))),
    "claim_refused_ages_ticket": Case("local.refusal_changes_nothing", _granted, lambda w, t: w.pmm.claim(w.h, t),
                                      "_claim", _refuse_after(lambda w, h, t: _set(w.pmm._tickets[t], age=9))),
    # cancel / release
    "release_unknown_accepted": Case("local.unknown_accepted", _none, lambda w, _: w.pmm.release(w.h, 999),
                                     "_finish", lambda w, orig, *a: None),
    "release_provisional": Case("local.lifecycle", lambda w: w.pmm.reserve(w.h, w.a, DEV, 10, KV),
                                lambda w, x: w.pmm.release(w.h, x), guards=_OFF("lifecycle_table")),
    "release_foreign": Case("local.own_action", _lease, lambda w, x: w.pmm.release(w.g, x),
                            guards=_OFF("owner_only")),
    "release_changes_holder": Case("local.owner", _lease, lambda w, x: w.pmm.release(w.h, x), "_finish",
                                   lambda w, orig, h, x, ev: _retire_then(w, orig, h, x, ev, holder=True)),
    "release_still_listed": Case("local.credit_exactly_once", _lease, lambda w, x: w.pmm.release(w.h, x), "_finish",
                                 lambda w, orig, h, x, ev: _retire_then(w, orig, h, x, ev, listed=True)),
    # alias: the named view's own records
    "alias_used": Case("local.conserved", _none, lambda w, _: w.pmm.reserve(w.h, w.v, DEV, 5, KV), "_admit",
                       _after(lambda w, r: _set(w.pmm._auths[w.v], used=5))),
    "alias_row_elsewhere": Case("local.one_ledger", _none, lambda w, _: w.pmm.reserve(w.h, w.v, DEV, 5, KV), "_admit",
                                _after(lambda w, r: w.pmm._auths[w.v].allocs.__setitem__(r, _rec(w, r)))),
    "alias_charged": Case("local.alias_no_charge", _none, lambda w, _: w.pmm.reserve(w.h, w.v, DEV, 5, KV), "_admit",
                          _after(lambda w, r: _alias_row(w, r))),
    # submit
    "submit_unknown_accepted": Case("local.unknown_accepted", _none, lambda w, _: w.pmm.submit(w.h, 999, 5),
                                    "_submit", lambda w, orig, *a: 1),
    "submit_not_issued": Case("local.ticket_issued", _none, lambda w, _: w.pmm.submit(w.h, w.a, 5), "_submit",
                              lambda w, orig, *a: orig(*a) + 100),
    "submit_fields": Case("local.ticket_fields", _none, lambda w, _: w.pmm.submit(w.h, w.a, 5), "_submit",
                          _after(lambda w, t: _set(w.pmm._tickets[t], nbytes=6))),
    "grant_unbooked": Case("local.grant_reserved", _none, lambda w, _: w.pmm.submit(w.h, w.a, 5),
                           guards=_OFF("grant_charges_ledger")),
    # claim
    "claim_unknown_accepted": Case("local.unknown_accepted", _none, lambda w, _: w.pmm.claim(w.h, 999), "_claim",
                                   lambda w, orig, *a: 1),
    "claim_unbooked": Case("local.grant_reserved", lambda w: _unbooked_grant(w), lambda w, t: w.pmm.claim(w.h, t),
                           guards=_OFF("grant_charges_ledger")),
    "claim_stays_live": Case("local.claimed_once", _granted, lambda w, t: w.pmm.claim(w.h, t), "_claim",
                             lambda w, orig, h, t: _keep_ticket(w, orig, h, t)),
    "claim_other_lease": Case("local.lifecycle", _granted, lambda w, t: w.pmm.claim(w.h, t), "_claim",
                              lambda w, orig, *a: orig(*a) + 1),
    "claim_still_owned": Case("local.claimed_lease", _granted, lambda w, t: w.pmm.claim(w.h, t), "_claim",
                              _after(lambda w, r: _set(_rec(w, r), part="a transaction"))),
    "claim_unlisted": Case("local.claimed_lease", _granted, lambda w, t: w.pmm.claim(w.h, t), "_claim",
                           _after(lambda w, r: w.pmm._allocs.pop(r))),
    # cancel_ticket / timeout_ticket
    "drop_retired_credited": Case("local.credit_exactly_once", lambda w: _retired_ticket(w),
                                  lambda w, t: w.pmm.cancel_ticket(w.h, t), "_abandon", lambda w, orig, *a: 5),
    "drop_foreign": Case("local.own_action", _granted, lambda w, t: w.pmm.cancel_ticket(w.g, t), "_abandon",
                         lambda w, orig, h, t: orig(w.pmm._tickets[t].holder, t)),
    "drop_stays_live": Case("local.credit_exactly_once", _granted, lambda w, t: w.pmm.timeout_ticket(w.h, t),
                            "_abandon", lambda w, orig, h, t: _keep_ticket(w, orig, h, t)),
    "drop_keeps_reservation": Case("local.credit_exactly_once", _granted, lambda w, t: w.pmm.cancel_ticket(w.h, t),
                                   "_abandon", lambda w, orig, h, t: _keep_reservation(w, orig, h, t)),
    "drop_credit_wrong": Case("local.credit_exactly_once", _granted, lambda w, t: w.pmm.cancel_ticket(w.h, t),
                              "_abandon", lambda w, orig, *a: orig(*a) + 1),
}


def _retire_then(w: W, orig: Callable[..., Any], h: int, x: int, ev: str, holder: bool = False,
                 listed: bool = False) -> None:
    rec = w.pmm._allocs[x]
    orig(h, x, ev)
    if holder:
        rec.holder = w.g
    if listed:
        w.pmm._allocs[x] = rec


def _alias_row(w: W, r: int) -> None:
    """A second row on the view itself, charged there (used follows): the canonical ledger stays exact."""
    view = w.pmm._auths[w.v]
    extra = w.pmm._enter(w.h, view, DEV, KV, 3, Origin.RECORDED)  # listed on the view, charged there
    del w.pmm._allocs[extra.id]  # and nowhere else


def _unbooked_grant(w: W) -> int:
    with contracts.contracts(False):
        return w.pmm.submit(w.h, w.a, 5)


def _retired_ticket(w: W) -> int:
    t = w.pmm.submit(w.h, w.a, 5)
    w.pmm.cancel_ticket(w.h, t)
    return t


def _keep_ticket(w: W, orig: Callable[..., Any], h: int, t: int) -> Any:
    tk = w.pmm._tickets[t]
    r = orig(h, t)
    w.pmm._tickets[t] = tk
    return r


def _keep_reservation(w: W, orig: Callable[..., Any], h: int, t: int) -> Any:
    rec = w.pmm._tickets[t].alloc
    r = orig(h, t)
    w.pmm._allocs[rec.id] = rec
    return r


def _run(name: str, broken: bool) -> None:
    c = CASES[name]
    w = _world(c.guards if broken else None)
    with contracts.contracts(True):
        arg = c.setup(w)
        if broken and c.body is not None:
            orig = getattr(w.pmm, c.body)
            setattr(w.pmm, c.body, lambda *args: c.wrap(w, orig, *args))
        try:
            c.op(w, arg)
        except GovernorError:
            pass  # the intact body may refuse (an unknown id); the broken one must not get this far


@pytest.mark.parametrize("name", sorted(CASES))
def test_clause_names_the_harm(name: str) -> None:
    with pytest.raises(InvariantViolation) as exc:
        _run(name, broken=True)
    assert exc.value.clause == CASES[name].clause, exc.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_scenario_is_clean_with_the_body_intact(name: str) -> None:
    _run(name, broken=False)  # negative control: no InvariantViolation


def test_snapshot_available_names_growth() -> None:
    """`available` forgetting growth (the shared arithmetic's mutant) is named by the snapshot contract."""
    w = _world()
    with contracts.contracts(True):
        aw = w.pmm.open_allowance(w.h, w.a, 100)
        w.pmm.reserve_growth(w.h, aw, 40)
        assert w.pmm.snapshot(w.a).available == 960  # clean
        with applied(MUTANTS["available_ignores_growth"]), pytest.raises(InvariantViolation) as exc:
            w.pmm.snapshot(w.a)
    assert exc.value.clause == "local.snapshot_available"


def test_every_local_clause_is_pinned() -> None:
    """Every clause name the module can raise has a case here (or the snapshot / conservation tests)."""
    import re
    from pathlib import Path

    import refimpl.manager.contract_books as B
    import refimpl.manager.local_contract as L
    named = {c for m in (L, B) for c in re.findall(r'_fail\("\w+", "(\w+)"', Path(m.__file__).read_text())}
    pinned = {c.clause.removeprefix("local.") for c in CASES.values()}
    # conserved, row_as_booked: tests/test_manager_contracts_local.py (drift between operations, an unnamed row)
    elsewhere = {"conserved_step", "no_idle_fitting_waiter", "pending_holds_nothing", "snapshot_oversubscribed",
                 "snapshot_promised", "snapshot_available", "refusal_changes_nothing", "conserved", "row_as_booked"}
    assert {"one_ledger", "alias_no_charge", "row_as_booked"} <= named  # both modules were read
    assert named <= pinned | elsewhere, named - pinned - elsewhere
