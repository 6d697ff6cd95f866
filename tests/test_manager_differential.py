# Differential refinement of refimpl's composed manager against spec.manager (issue #10).
#
# Random action sequences (valid and invalid ids, every part on shared authorities) go through
# `spec.manager.step` and through refimpl's `ProcessMemoryManager`; after every step the result (or the
# error type) must agree and `abstract_manager()` must equal the spec's state. The spec is only the
# oracle here: refimpl never imports it.

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest

from invariants import contracts
from invariants.trace_format import kind_of
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import operation
from refimpl.verify.manager_hooks import abstract_manager
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import GuardSet
from spec.types import Role, Tier

manager = pytest.importorskip("spec.manager")

_METHOD = {M.Press: "open_pressure"}  # `press` also calls the holder's callback; the action is the open


def call(pmm: ProcessMemoryManager, act: Any) -> Any:
    name = _METHOD.get(type(act), kind_of(type(act)))
    return operation(pmm, name)(*(getattr(act, f.name) for f in attrs.fields(type(act))))


SETUP = [A.RegisterAuthority("gpu0", Tier.DEVICE, 100), A.RegisterAuthority("host", Tier.HOST, 80),
         A.RegisterAlias(1, "uvm"), A.RegisterHolder("kv"), A.RegisterHolder("weights"), A.RegisterHolder("state"),
         A.RegisterHolder("spare")]  # 4: named by no generated action but its own unregistration
TIERS = {1: Tier.DEVICE, 2: Tier.HOST, 3: Tier.DEVICE}


def gen(rnd: random.Random, m: M.Manager) -> Any:
    """One action, usually plausible, sometimes not (unknown ids, wrong owners, bad bytes)."""
    led = m.ledger

    def pick(ids: Any, nxt: int) -> int:
        pool = list(ids)
        if pool and rnd.random() < 0.85:
            return rnd.choice(pool)
        return rnd.randint(0, nxt + 1)

    h = rnd.randint(1, 3) if rnd.random() < 0.95 else rnd.choice([0, 5])
    a = rnd.choice([1, 2, 1, 2, 3]) if rnd.random() < 0.95 else 7
    n = rnd.choice([1, 5, 10, 20, 30, 40, 60, 90, 120]) if rnd.random() < 0.95 else rnd.choice([0, -1])
    alloc = pick(led.allocations, led.next_allocation)
    owner = led.allocations[alloc].holder if alloc in led.allocations and rnd.random() < 0.8 else h
    tk = pick(m.tickets, m.next_ticket)
    t_owner = m.tickets[tk].holder if tk in m.tickets and rnd.random() < 0.8 else h
    pr = pick(m.pressures, m.next_pressure)
    p_owner = m.pressures[pr].holder if pr in m.pressures and rnd.random() < 0.8 else h
    tx = pick(m.txs, m.next_tx)
    kind = rnd.choices(
        ["reserve", "commit", "cancel", "release", "quarantine", "record", "lose", "terminate",
         "submit", "claim", "cancel_t", "timeout_t", "press", "answer", "cancel_p",
         "plan", "reserve_tx", "commit_tx", "abort_tx", "prepare", "commit_limit", "bundle", "join", "mismatch", "remove",
         "expire_p", "try", "use", "reconfigure", "publish", "execute", "remap", "drop", "unregister", "shrink",
         "grow", "quota"],
        weights=[6, 5, 2, 6, 1, 1, 0.1, 0.3, 8, 5, 2, 2, 3, 4, 1, 3, 5, 3, 2, 1.5, 1.5, 0.4, 2, 0.3, 0.12, 1, 2, 2, 0.3,
                 2, 3, 1, 1.5, 0.1, 2, 2, 1])[0]
    if kind == "quota":  # the device tier's process quota (I1): near what it charges, at times below it, or none
        charged = sum(x.used for x in led.authorities.values() if x.alias_of is None and x.tier is Tier.DEVICE)
        return M.SetProcessQuota(Tier.DEVICE, None if rnd.random() < 0.3 else max(0, charged + rnd.randint(-5, 40)))
    if kind == "reserve":
        return A.Reserve(h, a, TIERS.get(a, Tier.DEVICE), n, Role.KV)
    if kind == "commit":
        return A.Commit(owner, alloc, rnd.choice([n, 1, 5]))
    if kind == "cancel":
        return A.Cancel(owner, alloc)
    if kind == "release":
        return A.Release(owner, alloc)
    if kind == "shrink":  # part of a lease; at times all of it or more (InvalidBytes: that is a release)
        return M.ShrinkLease(owner, alloc, rnd.choice([1, 1, 5, n]))
    if kind == "grow":  # a charge: accepted within the headroom, else refused as a try-reserve (I2, I13)
        return M.GrowLease(owner, alloc, rnd.choice([1, 1, 5, n]))
    if kind == "quarantine":
        return A.Quarantine(owner, alloc, rnd.choice([0, 1, 5]))
    if kind == "record":
        return A.RecordCommitted(h, a, TIERS.get(a, Tier.DEVICE), n, Role.WEIGHTS)
    if kind == "lose":
        return A.LoseDevice(a)
    if kind == "terminate":
        return A.ConfirmTermination(a)
    if kind == "submit":
        return M.Submit(h, a, n, rnd.choice([0, 0, 1, 5]), rnd.choice([Role.STAGING, Role.KV]))
    if kind == "claim":
        return M.Claim(t_owner, tk)
    if kind == "cancel_t":
        return M.CancelTicket(t_owner, tk)
    if kind == "timeout_t":
        return M.TimeoutTicket(t_owner, tk)
    if kind == "press":
        return M.Press(h, a, n, rnd.choice([0, 2]), rnd.choice([None, 0, 3]))
    if kind == "answer":
        mine = [i for i, r in led.allocations.items() if r.holder == p_owner]
        victims = tuple(rnd.sample(mine, rnd.randint(0, min(2, len(mine)))))
        if rnd.random() < 0.1:
            victims = (alloc,)
        return M.Answer(p_owner, pr, victims, rnd.choice([None, 0, 3, 4]))
    if kind == "cancel_p":
        return M.CancelPressure(pr)
    if kind == "reconfigure":
        return M.Reconfigure(a)
    if kind == "try":
        return M.TryReserve(h, a, n, rnd.choice([0, 1]), rnd.choice([Role.STAGING, Role.KV]))
    if kind == "use":
        return M.SetUse(owner, alloc, rnd.random() < 0.5, rnd.random() < 0.3)
    if kind == "expire_p":
        return M.ExpirePressure(pr, rnd.choice([0, 3, 4]))
    if kind == "plan":
        auths = rnd.sample([1, 2, 3], rnd.randint(1, 2)) if rnd.random() < 0.9 else [1, 1]
        return M.PlanTx(h, tuple((x, rnd.choice([5, 10, 30, 50])) for x in auths))
    if kind == "reserve_tx":
        return M.ReserveTx(tx)
    if kind == "commit_tx":
        return M.CommitTx(tx)
    if kind == "abort_tx":
        return M.AbortTx(tx)
    if kind == "prepare":
        return M.PrepareLimit(a, rnd.choice([0, 20, 40, 60, 80, 100, 120]))
    if kind == "bundle":
        return M.OpenBundle()
    if kind == "join":
        return M.JoinBundle(tx, pick(m.bundles, m.next_bundle))
    if kind == "mismatch":
        return M.ReportMismatch(pick(m.bundles, m.next_bundle))
    ready = [x.id for x in m.txs.values() if len(x.held) == len(x.needs)]
    published = [x for x in ready if any(v.tx == x for v in m.views.values())]
    if kind == "publish":
        return M.PublishView(rnd.choice(ready) if ready and rnd.random() < 0.8 else tx)
    if kind in ("execute", "remap"):
        tx = rnd.choice(published) if published and rnd.random() < 0.8 else tx
        usable = [v.id for v in m.views.values() if v.tx == tx or v.tx not in m.txs]  # its own, or a committed one
        v = rnd.choice(usable) if usable and rnd.random() < 0.8 else pick(m.views, m.next_view)
        gen = m.views[v].generation if v in m.views else 1
        return M.ExecuteView(tx, v, gen + (rnd.random() < 0.15)) if kind == "execute" else M.RemapView(v)
    if kind == "drop":  # mostly a committed view (refused while an execution binds it); steered: commit one first
        done = [v.id for v in m.views.values() if v.tx not in m.txs]
        if published and (not done or rnd.random() < 0.3):
            return M.CommitTx(rnd.choice(published))
        return M.DropView(rnd.choice(done) if done and rnd.random() < 0.8 else pick(m.views, m.next_view))
    if kind == "unregister":  # the spare goes (once; unknown after), a holder in use is refused (HolderInUse)
        return M.UnregisterHolder(rnd.choice([4, h]))
    if kind == "remove":
        return M.RemoveAuthority(rnd.choice([a, 3]))  # the alias (3) has nothing of its own: removable
    return M.CommitLimit(a)


def _diff(mine: M.Manager, spec: M.Manager) -> str:
    """The differing parts only (readable counterexamples)."""
    out = []
    for f in attrs.fields(M.Manager):
        x, y = getattr(mine, f.name), getattr(spec, f.name)
        if f.name == "ledger":
            for g in attrs.fields(type(x)):
                u, v = getattr(x, g.name), getattr(y, g.name)
                if u != v:
                    out.append(f"ledger.{g.name}: refimpl {u}\n    spec {v}")
        elif x != y:
            out.append(f"{f.name}: refimpl {x}\n    spec {y}")
    return "\n".join(out)


HOSTILE = (True, False, None, 1.0, -1, 0, 2**63, "1", [1], (1,), ((1, 1),), Role.KV, Tier.DEVICE)


def spoil(rnd: random.Random, act: Any) -> Any:
    """Now and then one field of the action becomes a hostile value (wrong type, bound, shape)."""
    if rnd.random() > 0.08 or not attrs.fields(type(act)):
        return act
    f = rnd.choice(attrs.fields(type(act)))
    return attrs.evolve(act, **{f.name: rnd.choice(HOSTILE)})


def run(seed: int, steps: int, guards: GuardSet) -> dict[str, int]:
    rnd = random.Random(seed)
    pmm = ProcessMemoryManager(guards=guards)
    spec = M.initial()
    counts = {"accepted": 0, "rejected": 0}
    for i, act in enumerate([*SETUP, *(None for _ in range(steps))]):
        if act is None:
            act = spoil(rnd, gen(rnd, spec))
        try:
            spec, want = manager.step(spec, act, guards)
            want_err = None
        except GovernorError as e:
            want, want_err = None, type(e)
        try:
            got, got_err = call(pmm, act), None
        except GovernorError as e:
            got, got_err = None, type(e)
        where = f"seed {seed}, step {i}: {act!r}"
        assert got_err is want_err, f"{where}: refimpl {got_err and got_err.__name__}, spec {want_err and want_err.__name__}"
        assert got == want, f"{where}: refimpl returned {got!r}, spec {want!r}"
        mine = abstract_manager(pmm)
        assert mine == spec, f"{where}: states diverge\n{_diff(mine, spec)}"
        counts["rejected" if want_err else "accepted"] += 1
        key = f"{type(act).__name__}:{want_err.__name__ if want_err else 'ok'}"
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("seed", range(12))
def test_refimpl_refines_the_composed_spec(seed: int) -> None:
    with contracts.contracts(False):
        counts = run(seed, 300, GuardSet())
    assert counts["accepted"] > 30 and counts["rejected"] > 20, counts


def test_the_random_sequences_accept_every_action_kind() -> None:
    """No vacuous pass: across a few seeds every action is accepted at least once (and refused at least once)."""
    total: dict[str, int] = {}
    with contracts.contracts(False):
        for seed in range(16):
            for k, v in run(seed, 300, GuardSet()).items():
                total[k] = total.get(k, 0) + v
    kinds = [*{type(a) for a in SETUP}, A.Reserve, A.Commit, A.Cancel, A.Release, A.Quarantine, A.RecordCommitted,
             A.LoseDevice, *M.MANAGER_ACTIONS]
    assert [k.__name__ for k in kinds if not total.get(f"{k.__name__}:ok")] == []
    # An action without arguments (OpenBundle) has nothing to refuse.
    assert [k.__name__ for k in M.MANAGER_ACTIONS if attrs.fields(k) and not any(
        n.startswith(k.__name__ + ":") and not n.endswith(":ok") for n in total)] == []


@pytest.mark.parametrize("seed", range(3))
def test_refimpl_refines_the_composed_spec_with_contracts_on(seed: int) -> None:
    with contracts.contracts(True):
        run(100 + seed, 200, GuardSet())


@pytest.mark.parametrize("guard", ["grant_charges_ledger", "tx_counts_granted", "loss_keeps_charge",
                                   "limit_after_reclaim"])
def test_refimpl_refines_the_spec_with_a_cross_cutting_guard_off(guard: str) -> None:
    with contracts.contracts(False):
        for seed in range(4):
            run(200 + seed, 200, GuardSet.without(guard))


@pytest.mark.parametrize("guard, harm", [("grant_charges_ledger", "^I1"), ("tx_counts_granted", "^I2"),
                                         ("loss_keeps_charge", "^I6"), ("limit_after_reclaim", "^I2"),
                                         ("provider_pinned", "^C3")])
def test_a_cross_cutting_guard_off_is_caught_by_refimpl_contracts(guard: str, harm: str) -> None:
    """The refimpl negative control: with contracts on, the composed predicates catch the harm."""
    pytest.importorskip("invariants.manager")
    from invariants._violation import InvariantViolation

    with contracts.contracts(True), pytest.raises(InvariantViolation, match=harm):
        for seed in range(150):  # stops at the first counterexample (a device loss is rare: a few seeds)
            run(seed, 300, GuardSet.without(guard))
