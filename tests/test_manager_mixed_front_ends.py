"""Issue #21: any mix of the manager's front ends on one ledger is legal or refused with a typed error that
changes nothing (C1, G4, I1, I2, I6).

A rule-based machine interleaves the composed verbs (`submit`, `claim`, `reserve` / `commit`, `release`,
`record_committed`, `quarantine`, `register_alias`, allowances, `press` / `answer`, `plan_tx`, `try_reserve`,
`set_use`, `reconfigure`, `expire_pressure`, `drop` ...), model views and state bundles on ONE manager with
contracts on, with ids drawn from live, retired and never-issued ones. After every call: success, or a typed
`GovernorError` with the whole snapshot (`abstract_manager(m)`, `abstract_ledger(m)`) unchanged;
never an `InvariantViolation`. After every call the harms, computed here from the ledger's own rows: each
authority's `used` is the sum of its allocations' charges, and no byte is charged to a dropped ticket.
(Issue #21: the single-pool front end's `pool_try_reserve` on a ledger with a composed lease raised
InvariantViolation after taking effect, leaving 50 B charged with no id returned; that front end is gone.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from invariants import contracts
from invariants import manager as IM
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import operation, reserve_tx
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.errors import GovernorError
from spec.types import AllocState, Role, Tier

BAD = (0, -1, 10**6, None, "1", True)

# (verb, argument kinds); each kind is drawn by `MixedFrontEnds._arg`.
VERBS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # composed
    ("submit", ("holder", "auth", "bytes", "prio")), ("claim", ("ticket!",)),
    ("cancel_ticket", ("ticket!",)), ("timeout_ticket", ("ticket!",)),
    ("reserve", ("holder", "auth", "tier", "bytes", "role")), ("commit", ("prov!", "small")),
    ("cancel", ("prov!",)), ("release", ("alloc!",)),
    ("record_committed", ("holder", "auth", "tier", "bytes", "role")),
    ("quarantine", ("alloc!", "small")), ("register_alias", ("auth", "name")),
    ("open_allowance", ("holder", "auth", "bytes")), ("reserve_growth", ("allow!", "small")),
    ("map_allowance", ("allow!", "tiny")), ("close_allowance", ("allow!",)),
    ("open_pressure", ("holder", "auth", "bytes")), ("answer", ("pressure!", "victims")),
    ("cancel_pressure", ("pressure",)), ("plan_tx", ("holder", "needs")), ("reserve_tx", ("tx",)),
    ("commit_tx", ("tx",)), ("abort_tx", ("tx",)), ("prepare_limit", ("auth", "bytes")),
    ("commit_limit", ("changing",)), ("lose_device", ("auth",)), ("confirm_termination", ("auth",)),
    # the allocator path, use flags, generations, deadlines, the cancellation mailbox
    ("try_reserve", ("holder", "auth", "bytes", "prio")), ("set_use", ("alloc!", "flag", "flag")),
    ("reconfigure", ("auth",)), ("press", ("holder", "auth", "bytes", "prio", "now")),
    ("expire_pressure", ("pressure", "late")), ("drop", ("ticket!",)),
    # model views and state bundles
    ("publish_view", ("tx",)), ("remap_view", ("view",)), ("drop_view", ("view",)), ("open_bundle", ()),
    ("join_bundle", ("tx", "bundle")),
    # whole lives, each call checked as above
    ("~tx_lifecycle", ()), ("~allowance_life", ()), ("~lose_and_confirm", ()),
)
# Building traffic comes more often, so that leases, tickets and transactions meet on the same ledgers.
WEIGHTED = VERBS + tuple(v for v in VERBS if v[0] in {
    "submit", "try_reserve", "reserve", "claim", "plan_tx",
    "reserve_tx", "release", "drop", "commit", "cancel", "press", "expire_pressure", "close_allowance", "answer", "open_pressure", "commit_tx", "commit_limit", "prepare_limit"}) * 2
RARE = {"lose_device", "~lose_and_confirm"}
SEEN: Counter[str] = Counter()  # accepted (and refused) calls per verb, over the whole run


class MixedFrontEnds(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m = ProcessMemoryManager(aging_bound=2, mailbox=16)
        self.dropped: set[int] = set()

    @initialize()
    def setup(self) -> None:
        for name in ("w", "kv", "arena"):
            self.m.register_holder(name)
        self.m.register_authority("hbm", Tier.DEVICE, 100)
        self.m.register_authority("host", Tier.HOST, 64)

    def _id(self, data: st.DataObject, live: Any, nxt: int) -> Any:
        k = data.draw(st.integers(0, 9))
        if k == 0:
            return data.draw(st.sampled_from(BAD))
        if k == 1 and nxt > 1:
            return data.draw(st.integers(1, nxt - 1))  # maybe retired
        live = sorted(live)
        return data.draw(st.sampled_from(live)) if live else nxt

    def _arg(self, data: st.DataObject, kind: str) -> Any:
        m = self.m
        mm = abstract_manager(m)
        if kind == "holder":
            return data.draw(st.sampled_from((1, 2, 3, 1, 2, 3, 9)))
        if kind == "auth":
            return data.draw(st.sampled_from((1, 2, 1, 2, m._next_auth - 1, 99)))
        if kind == "changing":  # mostly an authority with a limit change pending (else any, as `auth`)
            changing = [a.id for a in m._auths.values() if a.change is not None]
            return data.draw(st.sampled_from(changing)) if changing and data.draw(st.booleans()) else \
                self._arg(data, "auth")
        if kind in ("bytes", "small"):
            return data.draw(st.sampled_from((0, -1, 1.5)) if data.draw(st.integers(0, 19)) == 0
                             else st.integers(1, 60 if kind == "bytes" else 8))
        if kind == "prio":
            return data.draw(st.integers(0, 3))
        if kind == "tier":
            return data.draw(st.sampled_from((Tier.DEVICE, Tier.DEVICE, Tier.HOST)))
        if kind == "role":
            return data.draw(st.sampled_from((Role.WEIGHTS, Role.KV)))
        if kind == "name":
            return data.draw(st.sampled_from(("uma", "view", "")))
        if kind == "flag":
            return data.draw(st.booleans())
        if kind == "now":
            return data.draw(st.integers(0, 5))
        if kind == "ticket":
            live = set(mm.tickets) | set(m._leases)
            return self._id(data, live, m._next_ticket)
        if kind in ("alloc", "prov"):
            rows = [r.id for r in m._allocs.values() if kind == "alloc" or r.state is AllocState.PROVISIONAL]
            return self._id(data, rows, m._next_alloc)
        if kind == "tx":
            return self._id(data, mm.txs, m._next_tx)
        if kind == "view":
            return self._id(data, mm.views, m._next_mview)
        if kind == "bundle":
            return self._id(data, mm.bundles, m._next_bundle)
        if kind == "tiny":
            return data.draw(st.integers(1, 2))
        if kind == "late":
            return data.draw(st.integers(5, 7))
        if kind == "allow":
            return self._id(data, mm.ledger.allowances, m._next_allow)
        if kind == "pressure":
            return self._id(data, m._pressure_log, m._next_pressure)
        if kind == "victims":
            pool = sorted(set(m._leases) | set(mm.ledger.allocations))
            if not pool or data.draw(st.integers(0, 2)) == 0:
                return ()  # a legal answer: nothing given back
            return tuple(data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=2)))
        if kind == "needs":
            auths = data.draw(st.lists(st.sampled_from((1, 2)), min_size=1, max_size=2, unique=True))
            return tuple((a, data.draw(st.integers(1, 40))) for a in sorted(auths))
        raise AssertionError(kind)

    def _owned(self, data: st.DataObject, kind: str) -> tuple[Any, Any]:
        """(owner, id): mostly the record's own holder, sometimes another (ForeignHolder)."""
        m = self.m
        rid = self._arg(data, kind)
        table = {"ticket": {**m._tickets, **m._leases}, "alloc": m._allocs, "prov": m._allocs, "allow": m._allows,
                 "pressure": m._pressure_log}[kind]
        rec = table.get(rid) if type(rid) is int else None
        if rec is None or data.draw(st.integers(0, 7)) == 0:
            return self._arg(data, "holder"), rid
        return rec.holder, rid

    def _snapshot(self) -> tuple[Any, ...]:
        m = self.m
        return abstract_manager(m), abstract_ledger(m), dict(m._mailbox)

    @rule(data=st.data(), verb=st.sampled_from(WEIGHTED))
    def call(self, data: st.DataObject, verb: tuple[str, tuple[str, ...]]) -> None:
        name, kinds = verb
        if name in RARE and data.draw(st.integers(0, 4)):
            return  # a lost device refuses nearly everything after it: keep it rare
        if name.startswith("~"):  # a sequence that takes a record through its whole life
            getattr(self, "_" + name[1:])(data)
            return
        args = [x for k in kinds for x in (self._owned(data, k[:-1]) if k.endswith("!") else (self._arg(data, k),))]
        self._checked_call(name, args)

    def _checked_call(self, name: str, args: list[Any]) -> Any:
        """One call: success, or a typed refusal that changed nothing (None then)."""
        posts = dict(self.m._mailbox)
        before = self._snapshot() if not posts else None
        live, result = set(self.m._tickets), None
        try:
            result = operation(self.m, name)(*args)  # a verb, or a checker-only step (reserve_tx)
        except GovernorError as e:
            assert str(e), f"{name}{tuple(args)}: a refusal names its problem"
            if before is not None:
                after = self._snapshot()
                assert after == before, f"{name}{tuple(args)} was refused ({e!r}) but changed the state"
            SEEN[f"refused {name}"] += 1
        else:
            SEEN[name] += 1
            if name == "drop" and args[1] in live:
                self.dropped.add(args[1])
        if posts and name != "drop":
            assert not self.m._mailbox, f"{name} ran with posts waiting and left them: {self.m._mailbox}"
        return result

    def _tx_lifecycle(self, data: st.DataObject) -> None:
        """A transaction taken as far as it goes: reserve every need, publish, execute, commit, remap and drop its view."""
        tx = self._arg(data, "tx")
        t = abstract_manager(self.m).txs.get(tx) if type(tx) is int else None
        for _ in range(0 if t is None else len(t.needs) - len(t.held)):
            if self._checked_call("reserve_tx", [tx]) is None:
                return  # refused (CapacityDenied): the transaction stays open
        view = self._checked_call("publish_view", [tx])
        v = abstract_manager(self.m).views.get(view) if type(view) is int else None
        if v is not None and self._checked_call("execute_view", [tx, view, v.generation]) is None:
            if data.draw(st.integers(0, 3)):
                self._checked_call("commit_tx", [tx])
                self._checked_call("remap_view", [view])  # no execution uses it now (I9)
                self._checked_call("drop_view", [view])

    def _allowance_life(self, data: st.DataObject) -> None:
        holder, aid = self._arg(data, "holder"), self._arg(data, "auth")
        w = self._checked_call("open_allowance", [holder, aid, data.draw(st.integers(2, 8))])
        if w is not None:
            self._checked_call("reserve_growth", [holder, w, 2])
            self._checked_call("map_allowance", [holder, w, data.draw(st.integers(1, 2))])
            if data.draw(st.booleans()):
                self._checked_call("unmap_allowance", [holder, w, 1])
                self._checked_call("close_allowance", [holder, w])

    def _lose_and_confirm(self, data: st.DataObject) -> None:
        aid = self._arg(data, "auth")
        self._checked_call("lose_device", [aid])
        self._checked_call("confirm_termination", [aid])

    @invariant()
    def harms(self) -> None:
        m = self.m
        mm = abstract_manager(m)
        led = mm.ledger
        for a in led.authorities.values():
            if a.alias_of is None:
                charged = sum(r.charge for r in led.allocations.values() if r.authority == a.id)
                assert a.used == charged, f"authority {a.id}: used {a.used} B, its rows charge {charged} B"
        if not m._mailbox:  # every post applied: no dropped ticket is live, granted or charged
            for t in self.dropped:
                assert t not in mm.tickets, f"dropped ticket {t} is still live: {mm.tickets[t]}"
        IM.check_all(mm)


MixedFrontEnds.TestCase.settings = settings(max_examples=300, stateful_step_count=50, report_multiple_bugs=False, deadline=None,
                                            suppress_health_check=list(HealthCheck), derandomize=True)


def test_any_mix_of_front_ends_is_legal_or_refused_with_nothing_changed() -> None:
    SEEN.clear()
    with contracts.contracts(True):
        MixedFrontEnds.TestCase().runTest()
    print(sorted(SEEN.items()))
    # Not vacuous: every verb was accepted at least once, so every front end acted on the shared ledgers.
    assert not [v for v, _ in VERBS if not SEEN[v] and not v.startswith("~")], sorted(SEEN.items())


@pytest.mark.parametrize("verb", ["try_reserve", "reserve_tx"])
def test_a_verb_on_a_ledger_holding_a_composed_lease_is_checked_and_keeps_its_bytes(verb: str) -> None:
    """Issue #21's case: with contracts on, a `pool_try_reserve` on a ledger holding a composed lease raised
    InvariantViolation after it took effect (50 B charged, no id returned). Now it returns, and the ledger
    charges exactly the lease and the new reservation."""
    m = ProcessMemoryManager()
    h = m.register_holder("w")
    a = m.register_authority("hbm", Tier.DEVICE, 100)
    with contracts.contracts(True):
        m.commit(h, m.reserve(h, a, Tier.DEVICE, 30, Role.WEIGHTS), 30)  # a composed lease
        if verb == "try_reserve":
            assert m.try_reserve(h, a, 50) in abstract_ledger(m).allocations
        else:
            tx = m.plan_tx(h, ((a, 50),))
            assert reserve_tx(m, tx) in abstract_ledger(m).allocations  # held
        rows = abstract_ledger(m).allocations.values()
        assert m.snapshot(a).used == 80 == sum(r.charge for r in rows)
        assert sorted(r.charge for r in rows) == [30, 50]
