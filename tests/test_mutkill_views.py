"""What a checker loses when the refinement mappings of `refimpl/manager/views.py` go wrong.

`abstract_ledger(pmm)` and `abstract_manager(pmm)` reuse each concrete record's last frozen record while the fields code can
change are unchanged (`_auth_rec`, `_alloc_rec`, `_allow_rec`, `_ticket_rec`). A stale record hides the
governor's real state from every check that reads the mapping: after each step of a script that changes every
such field, the mapping equals the one built with every cached record thrown away.

The trace hooks (`touched`, `observed`) choose the figures each ledger event carries: a trace of every kind of
ledger operation (an alias, allowances, a loss and its termination) must replay clean, since replay rejects an
event that hides a changed figure. A bad id (unhashable) in any id field is a typed refusal that changes
nothing, traced or checked, never a TypeError from the hooks' own lookups.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import lease, make, parked, published

from invariants._violation import InvariantViolation
from invariants.contracts import contracts
from invariants.manager_replay import replay_manager_lines
from refimpl import tracing
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_adapter import prepare_limit
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager, ledger_lock, wake_waiters
from spec.errors import CapacityDenied, GovernorError, TraceSinkFailed
from spec import manager_actions as M
from spec.guards import GuardSet
from spec.types import Role, Tier
from trace_harness import traced


def _uncached(pmm: ProcessMemoryManager) -> tuple[Any, Any]:
    """Both mappings built afresh: every record's cached frozen record dropped first."""
    with ledger_lock(pmm):
        for table in (pmm._auths, pmm._allocs, pmm._allows, pmm._tickets):
            for r in table.values():
                r.rec = None
        pmm._holder_recs.clear()
    return abstract_ledger(pmm), abstract_manager(pmm)


def _script(pmm: ProcessMemoryManager, ids: dict[str, int]) -> list[tuple[str, Callable[[], Any]]]:
    h, g, a, b = ids["h"], ids["g"], ids["a"], ids["b"]

    def keep(name: str, f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            ids[name] = f()
            return ids[name]
        return run

    return [
        ("reserve", keep("r", lambda: pmm.reserve(h, a, Tier.DEVICE, 60, Role.KV))),  # used, a new row
        ("commit less", lambda: pmm.commit(h, ids["r"], 50)),  # charge, nbytes, state; used refunded
        ("submit pending", keep("t", lambda: pmm.submit(g, a, 80))),  # a pending ticket
        ("submit again", lambda: pmm.submit(g, a, 90)),  # a round: the first ticket ages
        ("release", lambda: pmm.release(h, ids["r"])),  # the first ticket granted: state, allocation
        ("open allowance", keep("w", lambda: pmm.open_allowance(h, b, 40))),
        ("reserve growth", lambda: pmm.reserve_growth(h, ids["w"], 35)),  # the allowance's reserved bytes
        ("second allowance", keep("w2", lambda: pmm.open_allowance(h, b, 20))),
        ("transfer", lambda: pmm.transfer_allowance(h, ids["w"], ids["w2"], 5)),  # moves reserved bytes
        ("map", lambda: pmm.map_allowance(h, ids["w"], 30)),  # its mapped bytes
        ("unmap", lambda: pmm.unmap_allowance(h, ids["w"], 10)),
        ("lower limit", lambda: pmm.lower_limit(b, 90)),  # the authority's limit
        ("lose device", lambda: pmm.lose_device(a)),  # context; tickets and rows on it
    ]


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_the_mappings_never_show_a_stale_record(on: bool) -> None:
    with contracts(on=on):
        pmm = ProcessMemoryManager()
        ids = {"h": pmm.register_holder("kv"), "g": pmm.register_holder("weights"),
               "a": pmm.register_authority("gpu0", Tier.DEVICE, 100),
               "b": pmm.register_authority("host", Tier.HOST, 100)}
        for name, step in _script(pmm, ids):
            step()
            cached = (abstract_ledger(pmm), abstract_manager(pmm))
            assert cached == _uncached(pmm), f"after {name}: the mapping shows a record as it was"


def _every_ledger_kind(pmm: ProcessMemoryManager) -> None:
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    b = pmm.register_authority("host", Tier.HOST, 100)
    alias = pmm.register_alias(a, "unified")
    r = pmm.reserve(h, alias, Tier.DEVICE, 10, Role.KV)  # through the alias: the canonical ledger is charged
    pmm.commit(h, r, 8)
    pmm.record_committed(h, a, Tier.DEVICE, 5, Role.KV)
    c = pmm.reserve(h, a, Tier.DEVICE, 7, Role.STAGING)
    pmm.cancel(h, c)
    q = lease(pmm, h, a, 6)
    pmm.quarantine(h, q, 2)
    w1, w2 = pmm.open_allowance(h, b, 40), pmm.open_allowance(h, b, 40)
    pmm.reserve_growth(h, w1, 20)
    pmm.transfer_allowance(h, w1, w2, 5)
    pmm.reserve_growth(h, w2, 10)
    pmm.map_allowance(h, w2, 5)
    pmm.unmap_allowance(h, w2, 5)
    pmm.close_allowance(h, w1)
    pmm.lose_device(a)
    pmm.confirm_termination(a)


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_trace_of_every_ledger_kind_replays_clean(on: bool) -> None:
    with contracts(on=on):
        pmm, buf = traced()
        _every_ledger_kind(pmm)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 23  # configure, then one event per call
    r = replay_manager_lines([x.encode() + b"\n" for x in lines])
    # Every event replays clean; with no declared boundary the allowance's reserved growth is left over.
    assert (r.events, r.failure, r.message) == (23, "leftover", "trace ended with active items and no declared "
                                                "boundary: allowance 2 still reserves 5 B of growth"), r.describe()


BAD = [1]  # an id that cannot even be a dict key


@pytest.mark.parametrize("on, level", [(True, "local"), (True, "full"), (False, None)],
                         ids=["contracts-local", "contracts-full", "contracts-off"])
@pytest.mark.parametrize("traced", [True, False], ids=["traced", "untraced"])
@pytest.mark.parametrize("op", ["reserve", "commit", "map", "transfer-source", "transfer-target", "cancel-ticket",
                                "submit", "commit-tx", "plan-tx-authority", "plan-tx-need"])
def test_an_unhashable_id_is_a_typed_refusal_that_changes_nothing(on: bool, level: Any, traced: bool,
                                                                  op: str) -> None:
    with contracts(on=on, level=level):
        pmm = ProcessMemoryManager(trace=JsonlSink(io.StringIO()) if traced else None)
        h = pmm.register_holder("kv")
        a = pmm.register_authority("host", Tier.HOST, 100)
        w = pmm.open_allowance(h, a, 40)
        calls: dict[str, Callable[[], Any]] = {
            "reserve": lambda: pmm.reserve(h, BAD, Tier.HOST, 5, Role.KV),  # type: ignore[arg-type]
            "commit": lambda: pmm.commit(h, BAD, 5),  # type: ignore[arg-type]
            "map": lambda: pmm.map_allowance(h, BAD, 5),  # type: ignore[arg-type]
            "transfer-source": lambda: pmm.transfer_allowance(h, BAD, w, 5),  # type: ignore[arg-type]
            "transfer-target": lambda: pmm.transfer_allowance(h, w, BAD, 5),  # type: ignore[arg-type]
            "cancel-ticket": lambda: pmm.cancel_ticket(h, BAD),  # type: ignore[arg-type]
            "submit": lambda: pmm.submit(h, BAD, 5),  # type: ignore[arg-type]
            "commit-tx": lambda: pmm.commit_tx(BAD),  # type: ignore[arg-type]
            "plan-tx-authority": lambda: pmm.plan_tx(h, ((BAD, 5),)),  # type: ignore[arg-type]
            "plan-tx-need": lambda: pmm.plan_tx(h, (5,)),  # type: ignore[arg-type]
        }
        before = abstract_manager(pmm)
        with pytest.raises(GovernorError):
            calls[op]()
        assert abstract_manager(pmm) == before


def test_the_ledger_mapping_holds_every_record_under_its_own_id() -> None:
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    w = pmm.open_allowance(h, a, 40)
    pmm.reconfigure(a)  # generation 1
    pmm.try_reserve(h, a, 90)  # the next tickets wait
    t = pmm.submit(h, a, 30, priority=3, role=Role.KV)
    s, m = abstract_ledger(pmm), abstract_manager(pmm)
    assert dict(s.allowances) == {w: s.allowances[w]} and s.allowances[w].id == w and s.next_allowance == w + 1
    assert m.ledger == s
    r = m.tickets[t]
    assert (r.id, r.priority, r.role, r.generation, r.nbytes, r.state.name) == (t, 3, Role.KV, 1, 30, "PENDING")


def test_a_composed_operation_under_the_held_ledger_lock_keeps_earlier_wake_ups() -> None:
    # As test_mutkill_arbitration's submit: `_run`'s hot path (contracts off, no recorder) nested in a lock hold.
    with contracts(on=False):
        pmm, w = make()
        blocker = lease(pmm, w.h2, w.a, 100)
        waiter, got = parked(pmm, w.h1, w.a, 40)
        with ledger_lock(pmm):
            pmm.release(w.h2, blocker)  # grants the parked ticket: its wake-up waits for the lock's release
            pmm.try_reserve(w.h2, w.b, 8)  # a composed operation on another ledger, through `_run`
        wake_waiters(pmm)
        waiter.join(10)
        assert not waiter.is_alive() and len(got) == 1 and got[0] is not None


def test_a_composed_operation_on_a_traced_manager_is_traced_with_contracts_off() -> None:
    with contracts(on=False):
        pmm, buf = traced()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("host", Tier.HOST, 100)
        got = pmm.try_reserve(h, a, 8)
    kinds = [json.loads(x)["kind"] for x in buf.getvalue().splitlines()]
    assert kinds == ["configure", "register_holder", "register_authority", "try_reserve"] and got == 1


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_sink_failing_on_a_composed_event_is_a_trace_sink_failure_that_names_it(on: bool) -> None:
    def sink(event: dict[str, Any]) -> None:
        if event["kind"] == "try_reserve":
            raise OSError("pipe closed")

    with contracts(on=on):
        pmm = ProcessMemoryManager()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("host", Tier.HOST, 100)
        tracing.attach(pmm, sink)
        with pytest.raises(TraceSinkFailed, match=r"^TryReserve was applied \(result 1\) but the trace sink raised "
                                                  r"OSError on event 2: pipe closed$"):
            pmm.try_reserve(h, a, 8)
        assert abstract_ledger(pmm).allocations[1].charge == 8  # it stands


def test_a_waiter_on_a_ticket_a_composed_operation_granted_wakes_at_once() -> None:
    # `wait` has no recheck: the wake-up `_run` delivers after the lock is released is its only way out.
    with contracts(on=False):
        pmm, w = make()
        held = pmm.submit(w.h2, w.a, 100)  # granted at once: the ledger is full
        waiting = pmm.submit(w.h1, w.a, 40)
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(pmm.wait(waiting, 20.0)), daemon=True)
        waiter.start()
        while pmm._tickets[waiting].event is None:  # parked on the ticket's own event
            threading.Event().wait(0.001)
        pmm.cancel_ticket(w.h2, held)  # a composed operation: its credit's round grants the waiter
        waiter.join(10)  # well before the waiter's own 20 s deadline
        assert not waiter.is_alive() and got == [True]
        assert abstract_manager(pmm).tickets[waiting].state.name == "GRANTED"


def test_the_composed_mapping_shows_every_parts_record_as_it_is() -> None:
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100, device="cuda:0")
    alias = pmm.register_alias(a, "unified")
    b = pmm.register_authority("host", Tier.HOST, 100)
    pinned, flying = pmm.try_reserve(h, b, 10), pmm.try_reserve(h, b, 10)
    pmm.set_use(h, pinned, True, False)
    pmm.set_use(h, flying, False, True)
    bundle = pmm.open_bundle()
    pmm.reconfigure(b)
    prepare_limit(pmm, a, 60)  # a change left pending: the checkers' step alone
    m = abstract_manager(pmm)
    ledger = m.ledger.authorities
    assert (ledger[a].device, ledger[alias].view, ledger[alias].alias_of) == ("cuda:0", "unified", a)
    assert dict(m.uses) == {pinned: (True, False), flying: (False, True)}
    assert (m.bundles[bundle].id, m.bundles[bundle].poisoned) == (bundle, False)
    assert dict(m.generations) == {b: 1}
    assert (m.changes[a].authority, m.changes[a].target) == (a, 60)


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_a_traced_bundle_names_its_versions_in_each_event_and_replays_clean(on: bool) -> None:
    with contracts(on=on):
        pmm, buf = traced()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
        b = pmm.open_bundle()
        x = pmm.plan_tx(h, ((a, 10),))
        pmm.join_bundle(x, b)
        pmm.reserve_all(x)
        pmm.commit_tx(x)
        pmm.report_mismatch(b)
        assert abstract_manager(pmm).bundles[b].poisoned is True
    events = [json.loads(x) for x in buf.getvalue().splitlines()]
    commit = next(e for e in events if e["kind"] == "commit_tx")
    assert commit["payload"]["bundles"] == {str(b): {"versions": [1, 1, 1, 1], "poisoned": False}}
    r = replay_manager_lines([json.dumps(e).encode() + b"\n" for e in events])
    assert r.ok, r.describe()



@pytest.mark.parametrize("level", ["local", "full"])
def test_a_broken_allowance_operation_is_caught_on_the_ledger_it_touched(level: str) -> None:
    # Negative control: the I4b guard off, mapping past the reserved bytes is the harm; the contract must see
    # the allowance's ledger (`_scope_allow`) to name it.
    pmm = ProcessMemoryManager(guards=GuardSet.without("allowance_bounds"))
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    w = pmm.open_allowance(h, a, 40)
    pmm.reserve_growth(h, w, 10)
    with contracts(on=True, level=level), pytest.raises(InvariantViolation, match="I4b"):
        pmm.map_allowance(h, w, 60)


@pytest.mark.parametrize("level", ["local", "full"])
def test_a_ledger_release_whose_round_grants_without_charging_is_caught(level: str) -> None:
    # Negative control: grant_charges_ledger off. A ledger operation (release) runs an arbitration round; while
    # tickets exist the composed predicates judge it too, so the uncharged grant is named at the release.
    pmm, w = make(GuardSet.without("grant_charges_ledger"))
    blocker = lease(pmm, w.h2, w.a, 100)
    pmm.submit(w.h1, w.a, 60)  # pending: a ticket, and no transaction, pressure or view
    with contracts(on=True, level=level), pytest.raises(InvariantViolation):
        pmm.release(w.h2, blocker)


class _RefusesAfterCharging(ProcessMemoryManager):
    """A try_reserve that charges its bytes and then refuses (the harm G4 names: a refusal that changed things)."""

    def _try_lease(self, holder: int, authority: int, nbytes: int, priority: int, role: Role,
                   alignment: int | None = None) -> int:
        a = self._auths[authority]
        self._auths[a.alias_of or a.id].used += nbytes  # the canonical ledger, also when named through an alias
        raise CapacityDenied(f"refused after charging {nbytes} B")


@pytest.mark.parametrize("level", ["local", "full"])
@pytest.mark.parametrize("through_alias", [False, True], ids=["canonical", "alias"])
def test_a_composed_refusal_that_changed_the_manager_is_named_g4(level: str, through_alias: bool) -> None:
    # Through an alias the scope (`_ms_auth_of`) must view the canonical ledger, where the bytes are.
    pmm = _RefusesAfterCharging()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    named = pmm.register_alias(a, "unified") if through_alias else a
    with contracts(on=True, level=level), pytest.raises(InvariantViolation, match=r"was refused but changed the manager"):
        pmm.try_reserve(h, named, 8)


class _RefusesAfterIssuing(ProcessMemoryManager):
    """Once `refusing`, registrations take the next id and then refuse: a skipped id is a change (G4)."""

    refusing = False

    def _register_authority(self, *args: Any) -> int:
        if not self.refusing:
            return super()._register_authority(*args)
        self._next_auth += 1
        raise CapacityDenied("refused after taking an authority id")

    def _register_holder(self, name: str) -> int:
        if not self.refusing:
            return super()._register_holder(name)
        self._next_holder += 1
        raise CapacityDenied("refused after taking a holder id")

    def _open_allowance(self, holder: int, authority: int, limit: int) -> int:
        self._next_allow += 1
        raise CapacityDenied("refused after taking an allowance id")


@pytest.mark.parametrize("level", ["local", "full"])
@pytest.mark.parametrize("op", ["authority", "holder", "allowance"])
def test_a_refusal_that_took_an_id_is_named_g4(level: str, op: str) -> None:
    pmm = _RefusesAfterIssuing()
    h, a = pmm.register_holder("kv"), pmm.register_authority("host", Tier.HOST, 100)
    pmm.refusing = True
    calls: dict[str, tuple[Callable[[], Any], str]] = {
        "authority": (lambda: pmm.register_authority("gpu0", Tier.DEVICE, 100),
                      "RegisterAuthority(pool='gpu0', tier=Tier.DEVICE, capacity=100)"),
        "holder": (lambda: pmm.register_holder("weights"), "RegisterHolder(name='weights')"),
        "allowance": (lambda: pmm.open_allowance(h, a, 10), f"OpenAllowance(holder={h}, authority={a}, limit=10)")}
    call, action = calls[op]
    with contracts(on=True, level=level), pytest.raises(InvariantViolation) as e:
        call()
    assert str(e.value) == f"G4: {action} was refused but changed the ledger"


class _PlanCharges(ProcessMemoryManager):
    """A plan_tx that charges its first need on its ledger at once (a plan holds nothing: C4, I1)."""

    def _plan(self, holder: int, needs: tuple[tuple[int, int], ...], *rest: object) -> int:
        tx = super()._plan(holder, needs, *rest)
        aid, n = needs[0]
        self._auths[aid].used += n
        return tx


@pytest.mark.parametrize("on, level", [(True, "local"), (True, "full")], ids=["contracts-local", "contracts-full"])
def test_a_plan_that_charges_its_needs_is_caught_on_the_ledgers_it_names(on: bool, level: str) -> None:
    pmm = _PlanCharges()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    b = pmm.register_authority("host", Tier.HOST, 100)
    with contracts(on=on, level=level), pytest.raises(InvariantViolation):
        pmm.plan_tx(h, ((a, 10), (b, 20)))


def test_a_reissued_allocation_id_is_caught_at_level_full() -> None:
    # Negative control: fresh_ids off, a reserve reissues a retired allocation's id (I4a); the full check must
    # view the id the reserve returned even though it is below the next-id counter.
    pmm = ProcessMemoryManager(guards=GuardSet.without("fresh_ids"))
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    pmm.cancel(h, pmm.reserve(h, a, Tier.HOST, 5, Role.KV))
    with contracts(on=True, level="full"), pytest.raises(InvariantViolation, match="I4a"):
        pmm.reserve(h, a, Tier.HOST, 5, Role.KV)


def test_a_holder_reads_its_own_records_by_id_and_an_unknown_holder_is_refused_unchanged() -> None:
    """`leases(holder)` / `allowances(holder)`: exactly that holder's records, stated field by field, in id
    order, over every allocation state; another holder's and none for a holder with none; a bad holder is
    UnknownHolder with its whole message, and the ledger is unchanged."""
    from spec.errors import UnknownHolder
    from spec.ledger_state import Allocation, Allowance
    from spec.types import AllocState, Origin

    pmm = ProcessMemoryManager()
    host, gpu = pmm.register_authority("host", Tier.HOST, 64), pmm.register_authority("gpu", Tier.DEVICE, 64)
    h, other, idle = pmm.register_holder("reader"), pmm.register_holder("other"), pmm.register_holder("idle")
    other_w = pmm.open_allowance(other, host, 8)
    prov = pmm.reserve(other, host, Tier.HOST, 4, Role.KV)
    late = pmm.try_reserve(h, host, 3)  # issued after `prov`, read first for `h` only by id
    quar = pmm.try_reserve(other, host, 6)
    pmm.quarantine(other, quar, 2)
    lost = pmm.try_reserve(other, gpu, 5, role=Role.WEIGHTS)
    pmm.lose_device(gpu)
    w1, w2 = pmm.open_allowance(h, host, 16), pmm.open_allowance(h, host, 5)
    before = abstract_ledger(pmm)
    live = AllocState.LIVE
    assert pmm.leases(h) == (Allocation(late, host, h, Tier.HOST, Role.STAGING, 3, 3, 3, live, Origin.GRANTED),)
    assert pmm.leases(other) == (
        Allocation(prov, host, other, Tier.HOST, Role.KV, 4, 4, 4, AllocState.PROVISIONAL, Origin.GRANTED),
        Allocation(quar, host, other, Tier.HOST, Role.STAGING, 6, 6, 4, AllocState.QUARANTINED, Origin.GRANTED),
        Allocation(lost, gpu, other, Tier.DEVICE, Role.WEIGHTS, 5, 5, 5, AllocState.DEVICE_LOST, Origin.GRANTED))
    assert pmm.allowances(h) == (Allowance(w1, host, h, 16, 0, 0), Allowance(w2, host, h, 5, 0, 0))
    assert pmm.allowances(other) == (Allowance(other_w, host, other, 8, 0, 0),)
    assert pmm.leases(idle) == () and pmm.allowances(idle) == ()
    for bad in (999, "1", None):
        for read in (pmm.leases, pmm.allowances):
            with pytest.raises(UnknownHolder) as e:
                read(bad)
            assert str(e.value) == f"holder {bad!r} is not registered"
    assert abstract_ledger(pmm) == before


def _observed(buf: io.StringIO) -> list[tuple[str, dict[str, Any]]]:
    """(kind, observed figures with integer ids) of each ledger event of a trace (those carrying charges)."""
    out = []
    for line in buf.getvalue().splitlines():
        p = json.loads(line)["payload"]
        if "charges" in p:
            out.append((json.loads(line)["kind"], {part: {int(k): v for k, v in p[part].items()}
                                                   for part in ("used", "charges")}))
    return out


def test_each_ledger_event_observes_exactly_the_figures_its_action_may_move() -> None:
    """`_touched` / `_observed`: the ledger named (and its canonical one through an alias), the allocation named,
    the allowances named (a refused transfer's other end unknown), a new allocation's charge; a loss through an
    alias observes every row of the canonical ledger. No other figure: an open_allowance whose id is also a live
    allocation's observes no charge."""
    with contracts(on=False):
        pmm, buf = traced()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
        alias = pmm.register_alias(a, "unified")
        b = pmm.register_authority("host", Tier.HOST, 100)
        r = pmm.reserve(h, alias, Tier.DEVICE, 10, Role.KV)
        w = pmm.open_allowance(h, b, 40)
        assert w == r  # the same number as a live allocation's id
        pmm.commit(h, r, 8)
        pmm.reserve_growth(h, w, 5)
        w2 = pmm.open_allowance(h, b, 20)
        for src, dst in ((w, 999), (999, w2)):
            with pytest.raises(GovernorError):
                pmm.transfer_allowance(h, src, dst, 1)
        pmm.lose_device(alias)
        pmm.confirm_termination(alias)
    assert _observed(buf)[4:] == [
        ("reserve", {"used": {a: 10, alias: 0}, "charges": {r: 10}}),
        ("open_allowance", {"used": {b: 0}, "charges": {}}),
        ("commit", {"used": {a: 8}, "charges": {r: 8}}),
        ("reserve_growth", {"used": {b: 0}, "charges": {}}),
        ("open_allowance", {"used": {b: 0}, "charges": {}}),
        ("transfer_allowance", {"used": {b: 0}, "charges": {}}),
        ("transfer_allowance", {"used": {b: 0}, "charges": {}}),
        ("lose_device", {"used": {a: 8, alias: 0}, "charges": {r: 8}}),
        ("confirm_termination", {"used": {a: 0, alias: 0}, "charges": {}})]


def test_a_loss_observes_the_other_ledgers_of_the_transactions_it_aborts() -> None:
    with contracts(on=False):
        pmm, buf = traced()
        h = pmm.register_holder("kv")
        a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
        b = pmm.register_authority("host", Tier.HOST, 100)
        x = pmm.plan_tx(h, ((a, 10), (b, 20)))
        on_a, _ = pmm.reserve_all(x)
        pmm.lose_device(a)  # aborts the transaction: its reservation on b is refunded
    assert _observed(buf)[-1] == ("lose_device", {"used": {a: 10, b: 0}, "charges": {on_a: 10}})


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_the_ledger_replay_finds_every_figure_a_trace_of_every_ledger_kind_moves(on: bool) -> None:
    # The replay of a ledger-only trace requires the governor's figure for each used and charge the spec moves;
    # the trace ends at a declared boundary (an allowance still reserves growth).
    with contracts(on=on):
        pmm, buf = traced()
        _every_ledger_kind(pmm)
        tracing.boundary(pmm)
    r = replay_manager_lines([x.encode() + b"\n" for x in buf.getvalue().splitlines()])
    assert r.ok, r.describe()


def test_the_mappings_show_a_charge_or_a_ticket_state_that_moved_alone() -> None:
    """The cached records again, on the two changes the main script cannot make: with lifecycle_table off a
    quarantined lease is quarantined again (its charge moves alone), and with grant_charges_ledger off a grant
    books nothing (the ticket's state moves, its allocation stays None, its age stays at the bound of 1)."""
    with contracts(on=False):
        pmm = ProcessMemoryManager(guards=GuardSet.without("lifecycle_table", "grant_charges_ledger"), aging_bound=1)
        h, g = pmm.register_holder("kv"), pmm.register_holder("weights")
        a = pmm.register_authority("host", Tier.HOST, 100)
        r = pmm.try_reserve(h, a, 60)
        steps = [("quarantine", lambda: pmm.quarantine(h, r, 10)),
                 ("quarantine again", lambda: pmm.quarantine(h, r, 20)),  # the charge alone: 50 -> 30 B
                 ("submit", lambda: pmm.submit(g, a, 80)),  # pending at age 1: 80 B do not fit beside 30 B
                 ("release", lambda: pmm.release(h, r))]  # the round grants it, booking nothing
        for name, step in steps:
            step()
            cached = (abstract_ledger(pmm), abstract_manager(pmm))
            assert cached == _uncached(pmm), f"after {name}: the mapping shows a record as it was"
        (t,) = cached[1].tickets.values()
        assert (t.state.name, t.allocation, t.age) == ("GRANTED", None, 1)


def test_the_composed_mapping_shows_pressures_quotas_and_the_next_bundle() -> None:
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    pmm.try_reserve(h, a, 10)
    pmm.reconfigure(a)  # generation 1
    p = pmm.open_pressure(h, a, 5, priority=2, deadline=7)
    pmm.set_process_quota(Tier.HOST, 90)
    pmm.open_bundle()
    m = abstract_manager(pmm)
    assert m.pressures[p] == M.Pressure(p, h, a, 5, False, 2, 7, 1)
    assert dict(m.quotas) == {Tier.HOST: 90} and m.next_bundle == 2


@pytest.mark.parametrize("level", ["local", "full"])
def test_a_partial_view_holds_the_generations_and_model_views_of_its_ledgers_only(level: str) -> None:
    # The frozen partial views (level "full", and any operation while a transaction is open): a reconfigured
    # ledger's tickets are judged against its own generation (a submit there is checked on that view), and
    # another ledger's published view is out of view.
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    c = pmm.register_authority("gpu1", Tier.DEVICE, 100)
    _, v = published(pmm, h, ((c, 10),))
    pmm.reconfigure(a)
    with contracts(on=True, level=level):
        t = pmm.submit(h, a, 30)
    with ledger_lock(pmm):
        views = [pmm._manager_view(frozenset({i}), ()) for i in (a, c)]
    assert dict(views[0].generations) == {a: 1} and dict(views[0].views) == {}
    assert dict(views[1].generations) == {} and list(views[1].views) == [v]
    assert abstract_manager(pmm).tickets[t].generation == 1


def test_a_view_is_closed_under_quota_tiers_and_transactions() -> None:
    """`_closed`: with a process quota, every canonical ledger of its tier (not an alias, not another tier's);
    with transactions, the ledgers of each one that needs a viewed ledger, to a fixed point."""
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    gpu, host, host2 = (pmm.register_authority(p, t, 100) for p, t in
                        (("gpu0", Tier.DEVICE), ("host", Tier.HOST), ("host2", Tier.HOST)))
    pmm.register_alias(host, "unified")
    c, d, e = (pmm.register_authority(p, Tier.DEVICE, 100) for p in ("gpu1", "gpu2", "gpu3"))
    with ledger_lock(pmm):
        assert pmm._closed({gpu}) == {gpu}
    pmm.set_process_quota(Tier.HOST, 100)
    with ledger_lock(pmm):
        assert pmm._closed({gpu}) == {gpu, host, host2} and pmm._closed(()) == {host, host2}
    pmm.set_process_quota(Tier.HOST, None)
    pmm.plan_tx(h, ((c, 10), (d, 10)))
    pmm.plan_tx(h, ((d, 10), (e, 10)))  # reached from c only through d
    pmm.plan_tx(h, ((gpu, 10),))
    with ledger_lock(pmm):
        assert pmm._closed({c}) == {c, d, e} and pmm._closed({host}) == {host}


@pytest.mark.parametrize("level", ["local", "full"])
@pytest.mark.parametrize("part", ["view", "transaction"])
def test_a_ledger_operation_on_a_parts_forgotten_reservation_is_caught_by_the_composed_predicates(
        level: str, part: str) -> None:
    # Fault injection: the part's claim on its reservation is forgotten, so the holder's own release / cancel
    # goes through. Only the composed predicates see the harm (C6: a mapped view over credited bytes; I1: a
    # transaction holding a row that is gone), so a ledger operation runs them while only that part is open.
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    x = pmm.plan_tx(h, ((a, 10),))
    (r,) = pmm.reserve_all(x)
    if part == "view":
        pmm.publish_view(x)
        pmm.commit_tx(x)  # the view stays, over the holder's lease; no transaction is open
    pmm._allocs[r].part = None
    settle = pmm.release if part == "view" else pmm.cancel
    with contracts(on=True, level=level), pytest.raises(InvariantViolation, match=r"^C6: Release" if part == "view"
                                                         else r"^I1: transaction 1 \(holder 1\) holds 1"):
        settle(h, r)


def test_a_view_is_closed_under_the_executions_bound_to_its_model_views() -> None:
    # `_closed`: a transaction executing a model view over a viewed ledger is viewed too (a loss there aborts
    # it); one bound to a view over another ledger is not.
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a, c, d = (pmm.register_authority(p, Tier.DEVICE, 100) for p in ("gpu0", "gpu1", "gpu2"))
    x, v = published(pmm, h, ((c, 1),))
    pmm.commit_tx(x)
    y, _ = published(pmm, h, ((d, 1),))
    pmm.execute_view(y, v, 1)  # y needs d and reads the view over c
    with ledger_lock(pmm):
        assert pmm._closed({c}) == {c, d} and pmm._closed({a}) == {a}


@pytest.mark.parametrize("level", ["local", "full"])
def test_a_ledger_operation_beside_untouched_rows_passes_its_partial_views(level: str) -> None:
    # While a ticket is open a ledger operation is judged on partial views of the rows it touches and the parts'
    # rows (level "local": the books carry the rest); rows it did not touch must stay out of both views alike.
    pmm = ProcessMemoryManager()
    h, g = pmm.register_holder("kv"), pmm.register_holder("weights")
    a = pmm.register_authority("host", Tier.HOST, 100)
    keep = [pmm.try_reserve(h, a, 10) for _ in range(3)]
    r = pmm.try_reserve(h, a, 40)
    t = pmm.submit(g, a, 45)  # pending: 30 B free
    with contracts(on=True, level=level):
        pmm.quarantine(h, r, 5)  # 35 B free
        pmm.release(h, keep[0])  # 45 B free: its round grants the ticket, a row the ledger operation did not name
    m = abstract_manager(pmm)
    assert m.ledger.authorities[a].used == 100 and m.tickets[t].state.name == "GRANTED"


class _StopsAfterQuarantine(ProcessMemoryManager):
    """A quarantine whose body completes and then stops with a non-governor error (half way, for the books)."""

    def _quarantine(self, holder: int, allocation: int, released: int) -> None:
        super()._quarantine(holder, allocation, released)
        raise RuntimeError("stopped after the quarantine")


def test_a_checked_body_that_stopped_leaves_the_books_to_be_counted_again() -> None:
    pmm = _StopsAfterQuarantine()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("host", Tier.HOST, 100)
    r = pmm.try_reserve(h, a, 10)
    with contracts(on=True, level="local"):
        pmm.reserve(h, a, Tier.HOST, 5, Role.KV)  # the books of a are counted
        with pytest.raises(RuntimeError, match="^stopped after the quarantine$"):
            pmm.quarantine(h, r, 4)
        pmm.reserve(h, a, Tier.HOST, 5, Role.KV)  # on books counted afresh: no byte looks lost
    assert abstract_ledger(pmm).authorities[a].used == 16



def test_a_composed_operation_at_level_full_is_judged_on_its_own_ledgers() -> None:
    # The frozen views of `_run_full` hold the ledgers the action may touch: a harm standing on another ledger
    # (bytes counted with no row) is reported by the next operation there, not by one elsewhere.
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    a, c = pmm.register_authority("gpu0", Tier.DEVICE, 100), pmm.register_authority("gpu1", Tier.DEVICE, 100)
    with contracts(on=False):
        pmm._auths[c].used += 5
    with contracts(on=True, level="full"):
        assert pmm.try_reserve(h, a, 8) == 1
        with pytest.raises(InvariantViolation, match=r"^I1\b"):
            pmm.try_reserve(h, c, 8)


class _QuarantineMovesAnotherRow(ProcessMemoryManager):
    """A quarantine that also charges 3 B more to a lease it did not name, on another ledger (its used unmoved)."""

    other = 0

    def _quarantine(self, holder: int, allocation: int, released: int) -> None:
        super()._quarantine(holder, allocation, released)
        self._allocs[self.other].charge += 3


def test_a_row_moved_unnamed_on_another_ledger_in_view_is_caught_at_once() -> None:
    # Level "local", a transaction planned over a and b: a ledger operation on a views b too. b's book, absent so
    # far, is counted from b's rows when check_state first needs it (after the body), so the moved row shows as
    # a ledger whose rows no longer sum to its used, in this operation (a book counted before the body would
    # hold the old charge and leave the report to the next operation naming the row).
    pmm = _QuarantineMovesAnotherRow()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    b = pmm.register_authority("host", Tier.HOST, 100)
    with contracts(on=False):
        r = pmm.try_reserve(h, a, 10)
        pmm.other = pmm.try_reserve(h, b, 10)
        pmm.plan_tx(h, ((a, 1), (b, 1)))
    with contracts(on=True, level="local"), pytest.raises(InvariantViolation, match=r"^I1\b"):
        pmm.quarantine(h, r, 4)


def test_a_composed_event_observes_the_charges_it_created_and_not_its_grants_nor_others() -> None:
    """`_charge_figures`: a try_reserve's event lists the lease it made (and nothing another operation holds); a
    release that grants a waiter leaves the grant's lease to the `grant` event that follows it (which lists it)."""
    p, buf = traced()
    h, _, a = p.register_holder("kv"), p.register_authority("host", Tier.HOST, 8), p.register_authority(
        "hbm", Tier.DEVICE, 100)  # authority 2: no allocation shares its id
    held = p.claim(h, p.submit(h, a, 60, 0, Role.KV))
    mine = p.try_reserve(h, a, 30, 0, Role.KV)
    t = p.submit(h, a, 50, 0, Role.KV)  # waits: 10 B free
    p.release(h, held)  # 70 B free: ticket t's 50 B granted
    p.claim(h, t)
    events = [json.loads(x) for x in buf.getvalue().splitlines()]
    by_kind = {e["kind"]: e for e in events}
    first_grant = next(i for i, e in enumerate(events) if e["kind"] == "grant")  # the first submit's, at once
    assert events[first_grant - 1]["kind"] == "submit" and events[first_grant - 1]["payload"]["charges"] == {}
    assert events[first_grant]["payload"]["charges"] == {str(held): 60}
    assert by_kind["try_reserve"]["payload"]["charges"] == {str(mine): 30}
    assert by_kind["release"]["payload"]["charges"] == {}
    grant = by_kind["grant"]
    assert grant["ids"] == {"ticket": t} and grant["payload"]["charges"] == {str(grant["payload"]["result"]): 50}
    assert replay_manager_lines(buf.getvalue().encode().splitlines()).ok
