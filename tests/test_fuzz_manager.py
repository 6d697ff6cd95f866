"""Issues #14 and #21: the composed `ProcessMemoryManager` fuzzer, plain and traced: any mix of its verbs on one
manager, hostile values among them, is legal or refused typed with nothing changed (C1 C3 C4 C5 C8 G4 I1 I2 I6 I7 I13).

A rule-based machine interleaves every verb of arbitration (`submit`, `claim`, `cancel_ticket`,
`timeout_ticket`, `acquire`, `try_reserve`, `drop`), the ledger (`reserve` / `commit` / `cancel`, `release`,
`record_committed`, `quarantine`, `register_alias`, `register_authority`, `set_use`), allowances, pressure
(`press`, `open_pressure`, `answer`, `cancel_pressure`, `expire_pressure`, `register_callback`), transactions
(`plan_tx`, `reserve_all`, `commit_tx`, `abort_tx`), model views and state bundles, limits (`lower_limit`,
`reconfigure`), the checkers' single steps (`reserve_tx`, `prepare_limit`, `commit_limit`,
`refimpl.verify.manager_adapter`) and devices (`lose_device`, `confirm_termination`), plus whole lives of a
transaction, a lease, an allowance and a lost device, on ONE manager with contracts on. Arguments are drawn
from live, retired, foreign and never-issued ids, and one in eight is hostile (`fuzz_harness.HOSTILE`; victims
and needs also as lists, duplicates, bools, nested junk). The draws are steered so that every verb is accepted
whatever the seed (`pytest --hypothesis-seed=N` runs seed N): half the live ids drawn are ones the verb accepts
now, and the lives plan what they need (a transaction that fits, a ledger of their own to lose). Holder
callbacks answer, re-enter the manager (answer, submit, press, lower_limit) or raise. After every call: success,
a `CalloutFailed` (the call completed), or a typed `GovernorError` with a message and the whole snapshot
(`abstract_manager`, `abstract_ledger`, the cancellation mailbox) unchanged; a call made with cancels posted
applies them. After every step the composed predicates (`invariants.manager.check_all`), conservation (`used`
is the sum of the charges) and no dropped ticket live.
The traced run replays its own trace clean against `spec.manager`. (Issue #21: the single-pool front end's
`pool_try_reserve` on a ledger with a composed lease raised InvariantViolation after taking effect, leaving
50 B charged with no id returned; that front end is gone.)

`reserve_all` is the one operation whose refusal is documented to change state (a `CapacityDenied` aborts the
transaction): the fuzzer checks that documented outcome instead of an unchanged snapshot.
"""

from __future__ import annotations

import io
import threading
from collections import Counter
from typing import Any

import pytest
from fuzz_harness import HOSTILE, IntSub, replayed, report
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from refimpl_manager_harness import conserved, idle, lease

from invariants import contracts
from invariants import manager as IM
from invariants._violation import InvariantViolation
from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_adapter import operation, reserve_tx
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.errors import CalloutFailed, CapacityDenied, GovernorError
from spec.tickets import TicketState
from spec.types import AllocState, Role, Tier, TxPhase, ViewState
from trace_harness import lines_of, traced

BAD = (0, -1, 10**6, None, "1", True)

# (verb, argument kinds); each kind is drawn by `ManagerFuzz._arg`, "!" names an (owner, id) pair.
OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # arbitration
    ("submit", ("holder", "auth", "bytes", "prio", "role")), ("claim", ("ticket!",)),
    ("cancel_ticket", ("ticket!",)), ("timeout_ticket", ("ticket!",)), ("drop", ("ticket!",)),
    ("acquire", ("holder", "auth", "bytes", "prio", "role", "timeout")), ("try_reserve", ("holder", "auth", "bytes", "prio")),
    # the ledger
    ("reserve", ("holder", "auth", "tier", "bytes", "role")), ("commit", ("prov!", "small")), ("cancel", ("prov!",)),
    ("release", ("alloc!",)), ("record_committed", ("holder", "auth", "tier", "bytes", "role")),
    ("quarantine", ("alloc!", "small")), ("register_alias", ("auth", "name")), ("lease", ("holder", "auth", "bytes")),
    ("register_authority", ("pool", "tier", "capacity")), ("set_use", ("alloc!", "flag", "flag")),
    ("open_allowance", ("holder", "auth", "bytes")), ("reserve_growth", ("allow!", "small")),
    ("map_allowance", ("allow!", "tiny")), ("close_allowance", ("allow!",)),
    # pressure
    ("press", ("holder", "auth", "bytes", "prio", "now")), ("open_pressure", ("holder", "auth", "bytes", "prio", "now")),
    ("answer", ("pressure!", "victims")), ("cancel_pressure", ("pressure",)), ("expire_pressure", ("due", "late")),
    ("register_callback", ("holder", "callback")),
    # transactions, model views and state bundles
    ("plan_tx", ("holder", "needs")), ("reserve_tx", ("tx",)), ("commit_tx", ("ready",)), ("abort_tx", ("tx",)),
    ("reserve_all_checked", ("tx",)), ("publish_view", ("reserved",)), ("remap_view", ("view",)),
    ("drop_view", ("closed_view",)),
    ("open_bundle", ()), ("join_bundle", ("tx", "bundle")),
    # limits and devices
    ("prepare_limit", ("auth", "limit")), ("commit_limit", ("changing",)), ("lower_limit", ("auth", "limit")),
    ("reconfigure", ("auth",)), ("lose_device", ("auth",)), ("confirm_termination", ("lost",)),
    # whole lives, each call checked as above
    ("~tx_lifecycle", ()), ("~allowance_life", ()), ("~lose_and_confirm", ()), ("~lease_life", ()),
)
# Building traffic comes more often, so that leases, tickets, pressures and transactions meet on the same ledgers.
WEIGHTED = OPS + tuple(v for v in OPS if v[0] in {
    "submit", "try_reserve", "reserve", "claim", "plan_tx", "reserve_tx", "release", "drop", "commit", "cancel",
    "press", "expire_pressure", "close_allowance", "answer", "open_pressure", "commit_tx", "commit_limit",
    "prepare_limit", "lease", "reserve_all_checked", "open_bundle", "join_bundle"}) * 2
RARE = {"lose_device", "register_authority"}  # kept rare: a lost device refuses nearly everything (so is losing
# an authority in `_lose_and_confirm`, which otherwise loses a ledger of its own)
COUNTS: Counter = Counter()  # calls, accepted and refused (per error class and, "ok/<verb>", per verb) over a run


def _short(timeout: Any) -> Any:
    """A legal but long timeout (None, 10**9 s) would park the fuzzer: keep its type, shorten its length."""
    if timeout is None:
        return 0.001
    if type(timeout) in (int, float) and timeout == timeout and 0.001 < timeout <= threading.TIMEOUT_MAX:
        return type(timeout)(0.001) if type(timeout) is float else 0
    return timeout


class _Fuzzed(ProcessMemoryManager):
    """The manager with the fuzzer's conveniences; every other operation is the manager's own (or a checker's step,
    `refimpl.verify.manager_adapter.operation`)."""

    def acquire(self, holder, authority, nbytes, priority=0, role=Role.STAGING, timeout=None):
        return super().acquire(holder, authority, nbytes, priority, role, _short(timeout))

    def lease(self, holder, authority, nbytes):
        a = abstract_manager(self).ledger.authorities.get(authority) if type(authority) is int else None
        i = self.reserve(holder, authority, a.tier if a is not None else Tier.DEVICE, nbytes, Role.KV)
        self.commit(holder, i, nbytes)
        return i

    def reserve_all_checked(self, tx):
        """`reserve_all`; its documented CapacityDenied outcome (the transaction aborted, each hold credited) checked."""
        before, posts = abstract_manager(self), bool(self._mailbox)  # posted drops apply first, with their credits
        try:
            return self.reserve_all(tx)
        except CapacityDenied as e:
            after = abstract_manager(self)
            assert f"transaction {tx} aborted" in str(e) and tx in before.txs and tx not in after.txs, (tx, e)
            held = before.txs[tx].held
            assert not set(held) & set(after.ledger.allocations), "an aborted transaction kept a reservation"
            for aid, a in after.ledger.authorities.items():
                credit = sum(before.ledger.allocations[i].charge for i in held
                             if before.ledger.allocations[i].authority == aid)
                assert posts or a.used == before.ledger.authorities[aid].used - credit, (aid, credit)
            return "aborted"


# --- holder callbacks: answer, re-enter, raise ---------------------------------------------------------------

_DEPTH = {"n": 0}
CALLED: Counter = Counter()  # callback name -> deliveries (re-entry must actually happen)


def _counted(fn):
    def callback(m, pid, target):
        CALLED[fn.__name__] += 1
        return fn(m, pid, target)

    callback.__name__ = callback.__qualname__ = fn.__name__
    return callback


def _noop(m, pid, target):
    return None


def _answer_nothing(m, pid, target):
    m.answer(abstract_manager(m).pressures[pid].holder, pid, ())


def _answer_own_idle(m, pid, target):
    p = abstract_manager(m).pressures[pid]
    m.answer(p.holder, pid, idle(m, p.holder, p.authority)[:2])


def _submit_more(m, pid, target):
    p = abstract_manager(m).pressures[pid]
    m.submit(p.holder, p.authority, 1)


def _press_again(m, pid, target):  # nested delivery, bounded
    if _DEPTH["n"] < 2:
        _DEPTH["n"] += 1
        try:
            p = abstract_manager(m).pressures[pid]
            m.press(p.holder, p.authority, 1)
        finally:
            _DEPTH["n"] -= 1


def _lower_from_inside(m, pid, target):  # a limit change from a callback: refused while one is pending
    m.lower_limit(abstract_manager(m).pressures[pid].authority, 50)


def _raises(m, pid, target):
    raise ValueError("holder exploded")


def _raises_typed(m, pid, target):
    m.answer(10**6, pid, ())  # an UnknownHolder from inside: reported as the callback's failure


CALLBACKS = [_counted(f) for f in (_noop, _answer_nothing, _answer_own_idle, _submit_more, _press_again,
                                    _lower_from_inside, _raises, _raises_typed)]


def _world(pmm: ProcessMemoryManager) -> None:
    for name in ("kv", "weights", "arena"):
        pmm.register_holder(name)
    pmm.register_alias(pmm.register_authority("gpu0", Tier.DEVICE, 100), "uvm")  # a view: refused as a ledger
    pmm.register_authority("host", Tier.HOST, 64)


def _harms(pmm: ProcessMemoryManager, dropped: set[int] = frozenset()) -> None:
    m = abstract_manager(pmm)
    IM.check_all(m)
    conserved(m)  # each authority's `used` is the sum of its rows' charges
    assert not any(t.state is TicketState.GRANTED and t.allocation is None for t in m.tickets.values())
    if not pmm._mailbox:  # every post applied: no dropped ticket is live, granted or charged
        for t in dropped:
            assert t not in m.tickets, f"dropped ticket {t} is still live: {m.tickets[t]}"


class ManagerFuzz(RuleBasedStateMachine):
    traced = False

    def __init__(self) -> None:
        super().__init__()
        self.buf = io.StringIO()
        self.m = _Fuzzed(aging_bound=2, mailbox=16, trace=JsonlSink(self.buf) if self.traced else None)
        self.dropped: set[int] = set()
        self.answered: Any = None  # the pressure an answer names: its victims are drawn from its holder

    @initialize(order=st.permutations(range(len(CALLBACKS))))
    def setup(self, order: list[int]) -> None:
        _world(self.m)
        for h, i in zip((1, 2, 3), order):  # a callback on every holder from the start; `register_callback` swaps
            self.m.register_callback(h, CALLBACKS[i])

    def _id(self, data: st.DataObject, live: Any, nxt: int, fit: Any = ()) -> Any:
        """One id in ten hostile, one maybe retired, else a live one (the next, never issued, if none); of those,
        one in two, where there is one, an id the verb accepts now (`fit`): steered, so that every verb is
        accepted whatever the seed."""
        k = data.draw(st.integers(0, 9))
        if k == 0:
            return data.draw(st.sampled_from(BAD))
        if k == 1 and nxt > 1:
            return data.draw(st.integers(1, nxt - 1))  # maybe retired
        ids = sorted(fit if fit and k % 2 else live)
        return data.draw(st.sampled_from(ids)) if ids else nxt

    def _arg(self, data: st.DataObject, kind: str) -> Any:
        m = self.m
        mm = abstract_manager(m)
        if kind == "holder":
            return data.draw(st.sampled_from((1, 2, 3, 1, 2, 3, 1, 9)))
        if kind == "auth":
            return data.draw(st.sampled_from((1, 3, 1, 3, m._next_auth - 1, 99)))
        if kind in ("changing", "lost"):  # mostly an authority with a limit change pending, or lost (else `auth`)
            ids = [a.id for a in mm.ledger.authorities.values()
                   if (a.id in mm.changes if kind == "changing" else a.context.value != "active")]
            return data.draw(st.sampled_from(ids)) if ids and data.draw(st.booleans()) else self._arg(data, "auth")
        if kind in ("bytes", "small"):
            return data.draw(st.sampled_from((0, -1, 1.5)) if data.draw(st.integers(0, 19)) == 0
                             else st.integers(1, 60 if kind == "bytes" else 8))
        if kind == "late":  # past the drawn pressure's deadline, or at it (not yet expired)
            p = mm.pressures.get(self.answered) if type(self.answered) is int else None
            d = p.deadline if p is not None and p.deadline is not None else 5
            return data.draw(st.integers(d, d + 2))
        simple = {"prio": st.integers(0, 3), "tier": st.sampled_from((Tier.DEVICE, Tier.DEVICE, Tier.HOST)),
                  "role": st.sampled_from(list(Role)), "name": st.sampled_from(("uma", "view", "")),
                  "flag": st.booleans(), "now": st.none() | st.integers(0, 5), "tiny": st.integers(1, 2),
                  "timeout": st.sampled_from([0, 0.0, 0.001, None]),
                  "limit": st.integers(0, 120), "capacity": st.integers(1, 300),
                  "pool": st.sampled_from(["gpu1", "gpu2", "pinned"]), "callback": st.sampled_from(CALLBACKS)}
        if kind in simple:
            return data.draw(simple[kind])
        if kind == "ticket":
            return self._id(data, set(mm.tickets) | set(m._leases), m._next_ticket)
        if kind in ("alloc", "prov"):  # fit: the holder's own (no part's), a lease or a reservation
            rows = [r for r in m._allocs.values() if kind == "alloc" or r.state is AllocState.PROVISIONAL]
            fit = [r.id for r in rows if r.part is None and (kind == "prov" or r.state is AllocState.LIVE)]
            return self._id(data, [r.id for r in rows], m._next_alloc, fit)
        if kind in ("tx", "ready", "reserved"):  # fit: every need left fits now (no quota here); all held; unpublished
            free = {i: a.limit - a.used for i, a in mm.ledger.authorities.items() if a.context.value == "active"}
            fit = [i for i, t in mm.txs.items() if {"tx": all(n <= free.get(a, -1) for a, n in t.needs[len(t.held):]),
                                                    "ready": len(t.held) == len(t.needs),
                                                    "reserved": m._txs[i].phase is TxPhase.RESERVED}[kind]]
            return self._id(data, mm.txs, m._next_tx, fit)
        if kind in ("view", "closed_view"):  # fit: mapped, no execution binds it; "closed_view": its tx is closed
            fit = [i for i, v in mm.views.items() if not v.users and v.state is ViewState.MAPPED
                   and (kind == "view" or v.tx not in mm.txs)]
            return self._id(data, mm.views, m._next_mview, fit)
        if kind == "bundle":
            return self._id(data, mm.bundles, m._next_bundle)
        if kind == "allow":
            return self._id(data, mm.ledger.allowances, m._next_allow)
        if kind in ("pressure", "due"):  # fit: open; "due": open with a deadline
            fit = [i for i, p in mm.pressures.items() if kind == "pressure" or p.deadline is not None]
            self.answered = self._id(data, m._pressure_log, m._next_pressure, fit)
            return self.answered
        if kind == "victims":
            p = mm.pressures.get(self.answered) if type(self.answered) is int else None
            vs = idle(m, p.holder, p.authority)[:data.draw(st.integers(0, 2))] if p is not None else ()
            pool = sorted(set(m._leases) | set(mm.ledger.allocations))
            shape = data.draw(st.sampled_from(["own", "own", "own", "any", "list", "duplicate", "foreign", "bool",
                                               "junk"]))
            if shape == "any":  # anyone's leases, or nothing (a legal answer: nothing given back)
                return tuple(data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=2))) if pool else ()
            return {"own": vs, "list": list(vs), "duplicate": vs + vs[:1] if vs else (1, 1),
                    "foreign": vs + (self._id(data, pool, m._next_alloc),), "bool": (True,),
                    "junk": (IntSub(1), 2.0, None)}[shape]
        assert kind == "needs", kind
        ledgers = [i for i, a in mm.ledger.authorities.items() if a.alias_of is None and a.context.value == "active"]
        chosen = data.draw(st.lists(st.sampled_from(ledgers if ledgers and data.draw(st.integers(0, 3))
                                                    else (1, 2, 3, 99)), min_size=1, max_size=3, unique=True))
        ns = tuple((a, data.draw(st.integers(1, 40))) for a in chosen)
        shape = data.draw(st.sampled_from(["ok"] * 10 + ["list", "triple", "empty", "nested", "bool-id"]))
        return {"ok": ns, "list": list(ns), "triple": tuple(n + (1,) for n in ns), "empty": (),
                "nested": (ns,), "bool-id": ((True, 1),)}[shape]

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
        return abstract_manager(self.m), abstract_ledger(self.m), dict(self.m._mailbox)

    @rule(data=st.data(), verb=st.sampled_from(WEIGHTED))
    def call(self, data: st.DataObject, verb: tuple[str, tuple[str, ...]]) -> None:
        name, kinds = verb
        if name in RARE and data.draw(st.integers(0, 4)):
            return
        if name.startswith("~"):  # a sequence that takes a record through its whole life
            getattr(self, "_" + name[1:])(data)
            return
        args = [x for k in kinds for x in (self._owned(data, k[:-1]) if k.endswith("!") else (self._arg(data, k),))]
        # one argument in eight hostile (sampled_from favours its first entries, so "valid" comes first)
        args = [data.draw(HOSTILE) if data.draw(st.sampled_from([False] * 7 + [True])) else x for x in args]
        self._checked_call(name, args)

    def _checked_call(self, name: str, args: list[Any]) -> Any:
        """One call: success, a call-out's typed failure, or a typed refusal that changed nothing (None then)."""
        posts = dict(self.m._mailbox)
        before = self._snapshot() if not posts else None
        live, result = set(self.m._tickets), None
        COUNTS["calls"] += 1
        try:
            result = operation(self.m, name)(*args)  # a verb, a checker-only step (reserve_tx) or a convenience
        except CalloutFailed as e:  # the call completed; the call-out's failure is reported, typed
            COUNTS[f"completed, call-out failed: {type(e).__name__}"] += 1
        except GovernorError as e:
            assert str(e), f"{name}{tuple(args)!r}: a refusal names its problem"
            if before is not None:
                assert self._snapshot() == before, f"{name}{tuple(args)!r} was refused ({e!r}) but changed the state"
            COUNTS["rejected"] += 1
            COUNTS[f"rejected: {type(e).__name__}"] += 1
        except InvariantViolation:
            raise
        except Exception as e:
            raise AssertionError(f"{name}{tuple(args)!r} raised untyped {type(e).__name__}: {e}") from e
        else:
            COUNTS["accepted"] += 1
            COUNTS[f"ok/{name}"] += 1  # per operation, so a part never accepted shows (no ": " in the key)
            if name == "drop" and type(args[1]) is int and args[1] in live:
                self.dropped.add(args[1])
        if posts and name not in ("drop", "register_callback"):  # every verb on spec state applies the posts
            assert not self.m._mailbox, f"{name} ran with posts waiting and left them: {self.m._mailbox}"
        return result

    def _tx_lifecycle(self, data: st.DataObject) -> None:
        """A transaction taken as far as it goes: reserve every need, publish, execute, commit, remap and drop its view."""
        mm = abstract_manager(self.m)
        room = [(a.limit - a.used, i) for i, a in mm.ledger.authorities.items()
                if a.alias_of is None and a.context.value == "active" and a.limit > a.used]
        if room and data.draw(st.booleans()):  # steered: a fresh transaction of one need that fits now
            free, aid = data.draw(st.sampled_from(room))
            tx = self._checked_call("plan_tx", [self._arg(data, "holder"), ((aid, data.draw(st.integers(1, free))),)])
            if data.draw(st.booleans()):  # a step of a state bundle, too
                self._checked_call("join_bundle", [tx, self._checked_call("open_bundle", [])])
        else:
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

    def _lease_life(self, data: st.DataObject) -> None:
        """A reservation taken through its life: cancelled, or committed, flagged, then quarantined or released."""
        holder, aid, n = self._arg(data, "holder"), self._arg(data, "auth"), data.draw(st.integers(1, 40))
        a = abstract_manager(self.m).ledger.authorities.get(aid)
        i = self._checked_call("reserve", [holder, aid, a.tier if a is not None else Tier.DEVICE, n, Role.KV])
        if i is None:
            return
        if not data.draw(st.integers(0, 3)):
            self._checked_call("cancel", [holder, i])
            return
        self._checked_call("commit", [holder, i, data.draw(st.integers(1, n))])
        self._checked_call("set_use", [holder, i, False, data.draw(st.booleans())])
        if data.draw(st.booleans()):
            self._checked_call("quarantine", [holder, i, data.draw(st.integers(0, 1))])
        else:
            self._checked_call("release", [holder, i])

    def _lose_and_confirm(self, data: st.DataObject) -> None:
        """A device lost and its termination confirmed: rarely any authority, else a new ledger with a lease on it."""
        if data.draw(st.booleans()):
            if data.draw(st.integers(0, 4)):
                return
            aid = self._arg(data, "auth")
        else:  # steered: nothing else is lost
            aid = self._checked_call("register_authority", [f"lost{self.m._next_auth}", Tier.DEVICE, 50])
            self._checked_call("lease", [self._arg(data, "holder"), aid, data.draw(st.integers(1, 50))])
        self._checked_call("lose_device", [aid])
        self._checked_call("confirm_termination", [aid])

    @invariant()
    def harms(self) -> None:
        _harms(self.m, self.dropped)

    def teardown(self) -> None:
        if self.traced:
            r, lines = replayed(self.m, self.buf)
            assert r.ok, r.describe()
            COUNTS["trace events replayed"] += len(lines)


class _TracedFuzz(ManagerFuzz):
    traced = True


SETTINGS = settings(max_examples=300, stateful_step_count=50, report_multiple_bugs=False, deadline=None,
                    suppress_health_check=list(HealthCheck), derandomize=True, database=None)


def _per_op(part: str, capsys) -> None:
    with capsys.disabled():
        print(f"[fuzz {part}] accepted per operation: "
              + ", ".join(f"{n}={COUNTS[f'ok/{n}']}" for n, _ in OPS if n[0] != "~")
              + f"; callbacks delivered: {dict(CALLED)}")


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_fuzz_composed_manager(capsys, request, traced: bool) -> None:
    COUNTS.clear()
    seeded = request.config.getoption("--hypothesis-seed") is not None  # pytest --hypothesis-seed=N: that seed's run
    with contracts.contracts(True):
        run_state_machine_as_test(_TracedFuzz if traced else ManagerFuzz,
                                  settings=settings(SETTINGS, derandomize=not seeded))
    name = "ProcessMemoryManager composed parts" + " traced" * traced
    report(name, COUNTS, capsys)
    _per_op(name, capsys)
    # Not vacuous: every operation was accepted at least once, and callbacks were delivered (each one is
    # delivered by `test_each_fuzz_callback_delivered_leaves_the_manager_consistent`).
    verbs = [n for n, _ in OPS if n[0] != "~"] + ["execute_view", "unmap_allowance"]  # those two: in lives only
    never = [n for n in verbs if not COUNTS[f"ok/{n}"]]
    assert not never, f"never accepted: {never}"
    assert sum(CALLED.values()) > 50 and len(CALLED) >= 4, CALLED
    assert COUNTS["accepted"] > 1000 and COUNTS["rejected"] > 1500, COUNTS
    assert not traced or COUNTS["trace events replayed"] > 1500, COUNTS


def test_replay_accepts_the_refusal_of_needs_and_victims_it_cannot_carry() -> None:
    """Found by the traced fuzzer: a refusal by what is inside an opaque tuple failed replay as a refinement."""
    pmm, buf = traced()
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    pid = pmm.open_pressure(h, a, 1)
    for call, error in [(lambda: pmm.plan_tx(h, ((True, 1),)), "InvalidArgument"),  # ill-typed needs: refused as
                        (lambda: pmm.plan_tx(h, ((a, 1.5),)), "InvalidArgument"),  # such, as the spec does
                        (lambda: pmm.answer(h, pid, (10**30,)), "UnknownAllocation")]:
        try:
            call()
        except GovernorError as e:
            assert type(e).__name__ == error, e
        else:
            raise AssertionError(f"{error} expected")
    pmm.cancel_pressure(pid)
    lines = lines_of(buf)
    assert '"opaque"' in buf.getvalue()
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


@pytest.mark.parametrize("callback", CALLBACKS, ids=[f.__name__ for f in CALLBACKS])
def test_each_fuzz_callback_delivered_leaves_the_manager_consistent(callback) -> None:
    pmm = _Fuzzed()
    _world(pmm)
    h, a = 1, 1
    lease(pmm, h, a, 30)
    pmm.register_callback(h, callback)
    before = CALLED[callback.__name__]
    try:
        pmm.press(h, a, 10)
    except GovernorError as e:  # a raising callback: reported typed, its ticket cancelled
        assert type(e).__name__ == "HolderCallbackFailed" and str(e), e
    assert CALLED[callback.__name__] > before
    _harms(pmm)
    m = abstract_manager(pmm)
    # a callback that neither answers nor raises leaves its ticket open (legal: zero is an answer not yet given)
    assert not m.pressures or callback.__name__ in ("_noop", "_press_again", "_submit_more", "_lower_from_inside")


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
