"""Issue #14: the composed `ProcessMemoryManager` fuzzer, its new parts, plain and traced (C3, C4, C5, C8, I1, I2, I6, I7, I13).

Every public operation of arbitration (`submit`, `claim`, `cancel_ticket`,
`timeout_ticket`, `acquire`), pressure (`press`, `open_pressure`, `answer`,
`cancel_pressure`, `register_callback`), transactions (`plan_tx`,
`reserve_all`, `commit_tx`, `abort_tx`), limits (`lower_limit`), the
checkers' single steps of both (`reserve_tx`, `prepare_limit`,
`commit_limit`, `refimpl.verify.manager_adapter`) and devices (`lose_device`,
`confirm_termination`), with the ledger operations that build the leases
they work on, hostile values (`fuzz_harness.HOSTILE`, plus hostile victims
and needs: lists, duplicates, bools, nested junk) interleaved with valid
ones drawn from live, retired, foreign and never-issued ids. Holder
callbacks answer, re-enter the manager (answer, submit, press, lower_limit)
or raise. After each call: success, a `CalloutFailed` (the call completed),
or a typed `GovernorError` with a message and the WHOLE `abstract_manager()`
unchanged; after each accepted call the composed predicates
(`invariants.manager.check_all`) and conservation (`used` is the sum of the
charges). The traced run replays its own trace clean against `spec.manager`.

`reserve_all` is the one operation whose refusal is documented to change
state (a `CapacityDenied` aborts the transaction): the fuzzer checks that
documented outcome instead of an unchanged snapshot.
"""

from __future__ import annotations

import io
import threading
from collections import Counter
from typing import Any

from fuzz_harness import FUZZ_SETTINGS, IntSub, pick, replayed, report, run_fuzz
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from refimpl_manager_harness import conserved, idle

from invariants import manager as IM
from invariants.manager_replay import replay_manager_lines
from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink
from refimpl.verify.manager_adapter import commit_limit, prepare_limit, reserve_tx
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import CapacityDenied, GovernorError
from spec.tickets import TicketState
from spec.types import Role, Tier

OPS = [
    # arbitration
    ("submit", ("holder", "authority", "bytes", "prio", "role")), ("claim", ("tholder", "ticket")),
    ("cancel_ticket", ("tholder", "ticket")), ("timeout_ticket", ("tholder", "ticket")),
    ("acquire", ("holder", "authority", "bytes", "prio", "role", "timeout")),
    # pressure
    ("press", ("holder", "authority", "bytes")), ("open_pressure", ("holder", "authority", "bytes")),
    ("answer", ("pholder", "pressure", "victims")), ("cancel_pressure", ("pressure",)),
    ("register_callback", ("holder", "callback")),
    # transactions
    ("plan_tx", ("holder", "needs")), ("reserve_tx", ("tx",)), ("commit_tx", ("ready",)), ("abort_tx", ("tx",)),
    ("reserve_all_checked", ("tx",)),
    # limits
    ("prepare_limit", ("authority", "limit")), ("commit_limit", ("changed",)), ("lower_limit", ("authority", "limit")),
    # devices
    ("lose_device", ("authority",)), ("confirm_termination", ("lost",)),
    # the ledger traffic the parts work on
    ("lease", ("holder", "authority", "bytes")), ("release", ("aholder", "allocation")),
    ("register_authority", ("pool", "tier", "capacity")),
]
_BY = {name: kinds for name, kinds in OPS}
# Valid traffic dominates so that leases, tickets, pressures and transactions build up between hostile calls.
WEIGHTED = OPS + [(n, _BY[n]) for n in ["lease"] * 4 + ["submit"] * 2 + ["claim"] * 2 + ["press", "answer", "answer",
                                          "plan_tx", "plan_tx", "reserve_tx", "reserve_tx", "commit_tx", "prepare_limit",
                                          "commit_limit", "lower_limit", "register_callback", "open_pressure", "open_pressure", "answer", "answer",
                                          "reserve_all_checked", "reserve_all_checked", "confirm_termination",
                                          "commit_tx", "abort_tx", "timeout_ticket", "cancel_ticket", "release"]]
_RARE = {"lose_device", "register_authority"}  # kept rare: a lost device refuses everything
WEIGHTED = [op for op in WEIGHTED if op[0] not in _RARE] * 2 + [op for op in OPS if op[0] in _RARE] * 2


def _short(timeout: Any) -> Any:
    """A legal but long timeout (None, 10**9 s) would park the fuzzer: keep its type, shorten its length."""
    if timeout is None:
        return 0.001
    if type(timeout) in (int, float) and timeout == timeout and 0.001 < timeout <= threading.TIMEOUT_MAX:
        return type(timeout)(0.001) if type(timeout) is float else 0
    return timeout


class _Fuzzed(ProcessMemoryManager):
    """The manager with the fuzzer's two conveniences; every other operation is the manager's own."""

    def acquire(self, holder, authority, nbytes, priority=0, role=Role.STAGING, timeout=None):
        return super().acquire(holder, authority, nbytes, priority, role, _short(timeout))

    def lease(self, holder, authority, nbytes):
        a = abstract_manager(self).ledger.authorities.get(authority) if type(authority) is int else None
        i = self.reserve(holder, authority, a.tier if a is not None else Tier.DEVICE, nbytes, Role.KV)
        self.commit(holder, i, nbytes)
        return i

    # The spec's single steps: no public verbs, the checkers' (`refimpl.verify.manager_adapter`).
    def reserve_tx(self, tx):
        return reserve_tx(self, tx)

    def prepare_limit(self, authority, limit):
        return prepare_limit(self, authority, limit)

    def commit_limit(self, authority):
        return commit_limit(self, authority)

    def reserve_all_checked(self, tx):
        """`reserve_all`; its documented CapacityDenied outcome (the transaction aborted, each hold credited) checked."""
        before = abstract_manager(self)
        try:
            return self.reserve_all(tx)
        except CapacityDenied as e:
            after = abstract_manager(self)
            assert str(e) and tx in before.txs and tx not in after.txs, (tx, e)
            held = before.txs[tx].held
            assert not set(held) & set(after.ledger.allocations), "an aborted transaction kept a reservation"
            for aid, a in after.ledger.authorities.items():
                credit = sum(before.ledger.allocations[i].charge for i in held
                             if before.ledger.allocations[i].authority == aid)
                assert a.used == before.ledger.authorities[aid].used - credit, (aid, credit)
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


def _per_op(part: str, counts: Counter, capsys) -> None:
    with capsys.disabled():
        print(f"[fuzz {part}] accepted per operation: "
              + ", ".join(f"{n}={counts[f'ok/{n}']}" for n, _ in OPS) + f"; callbacks delivered: {dict(CALLED)}")


def _covered(counts: Counter) -> None:
    """Not vacuous: every operation was accepted at least once, and callbacks were delivered (each one is
    delivered by `test_each_fuzz_callback_delivered_leaves_the_manager_consistent`)."""
    never = [name for name, _ in OPS if not counts[f"ok/{name}"]]
    assert not never, f"never accepted: {never}"
    assert sum(CALLED.values()) > 50 and len(CALLED) >= 4, CALLED


# --- the world: ids issued, live and retired ------------------------------------------------------------------

class _World:
    def __init__(self, pmm: ProcessMemoryManager) -> None:
        self.pmm = pmm
        self.holders = [pmm.register_holder("kv"), pmm.register_holder("weights"), pmm.register_holder("arena")]
        self.auths = [pmm.register_authority("gpu0", Tier.DEVICE, 200), pmm.register_authority("host", Tier.HOST, 300)]
        self.auths.append(pmm.register_alias(self.auths[0], "uvm"))  # a view: refused where a ledger is named
        self.tickets: list[int] = []
        self.pressures: list[int] = []
        self.txs: list[int] = []
        self.allocs: list[int] = []
        self.chosen: dict[str, int] = {}  # the record an owner argument was drawn for, named by the next argument
        self.answered: int | None = None  # the pressure an answer names: its victims are drawn from its holder

    def start(self, data) -> None:
        """A callback on every holder from the start; `register_callback` swaps them."""
        order = data.draw(st.permutations(range(len(CALLBACKS))), label="callbacks")
        for h, i in zip(self.holders, order):
            self.pmm.register_callback(h, CALLBACKS[i])

    def valid(self, kind: str, data) -> Any:
        m = abstract_manager(self.pmm)

        def victims():
            p = m.pressures.get(self.answered) if self.answered is not None else None
            own = list(idle(self.pmm, p.holder, p.authority)) if p is not None else []
            shape = data.draw(st.sampled_from(["own", "own", "own", "list", "duplicate", "foreign", "bool", "junk"]))
            vs = tuple(own[:data.draw(st.integers(0, 2))])
            return {"own": vs, "list": list(vs), "duplicate": vs + vs[:1] if vs else (1, 1),
                    "foreign": vs + (pick(data, self.allocs),), "bool": (True,), "junk": (IntSub(1), 2.0, None)}[shape]

        def needs():
            ledgers = [i for i, a in m.ledger.authorities.items() if a.alias_of is None and a.context.value == "active"]
            chosen = data.draw(st.lists(st.sampled_from(ledgers if ledgers and data.draw(st.integers(0, 3))
                                                        else self.auths), min_size=1, max_size=3, unique=True))
            ns = tuple((a, data.draw(st.integers(1, 40))) for a in chosen)
            shape = data.draw(st.sampled_from(["ok"] * 10 + ["list", "triple", "empty", "nested", "bool-id"]))
            return {"ok": ns, "list": list(ns), "triple": tuple(n + (1,) for n in ns), "empty": (),
                    "nested": (ns,), "bool-id": ((True, 1),)}[shape]

        def live_first(kind: str, live: dict, ids: list[int]) -> int:
            """A live record's id three times in four (else any id ever issued, or one never issued)."""
            if live and data.draw(st.integers(0, 3)):
                self.chosen[kind] = data.draw(st.sampled_from(sorted(live)))
            else:
                self.chosen[kind] = pick(data, ids)
            return self.chosen[kind]

        def owner(kind: str, live: dict, ids: list[int], holder_of) -> int:
            """The owner of the record the next argument names (drawn now), one time in six another holder."""
            rid = live_first(kind, live, ids)
            rec = live.get(rid)
            if rec is None or not data.draw(st.integers(0, 5)):
                return pick(data, self.holders)
            return holder_of(rec)

        return {
            "holder": lambda: data.draw(st.sampled_from(self.holders[:1] * 3 + self.holders)) if data.draw(
                st.integers(0, 7)) else pick(data, self.holders),
            "authority": lambda: data.draw(st.sampled_from(self.auths[:2] * 3 + self.auths)) if data.draw(
                st.integers(0, 7)) else pick(data, self.auths),
            "lost": lambda: data.draw(st.sampled_from(sorted(lost))) if (lost := [
                i for i, a in m.ledger.authorities.items() if a.context.value != "active"]) and data.draw(
                st.booleans()) else pick(data, self.auths),
            "changed": lambda: data.draw(st.sampled_from(sorted(m.changes))) if m.changes and data.draw(
                st.integers(0, 3)) else pick(data, self.auths),
            "tholder": lambda: owner("ticket", m.tickets, self.tickets, lambda t: t.holder),
            "pholder": lambda: owner("pressure", m.pressures, self.pressures, lambda p: p.holder),
            "aholder": lambda: owner("allocation", m.ledger.allocations, self.allocs, lambda r: r.holder),
            "bytes": lambda: data.draw(st.integers(1, 90)), "prio": lambda: data.draw(st.integers(0, 3)),
            "role": lambda: data.draw(st.sampled_from(list(Role))),
            "timeout": lambda: data.draw(st.sampled_from([0, 0.0, 0.001, None])),
            "ticket": lambda: self.chosen.pop("ticket", None) or pick(data, self.tickets),
            "pressure": lambda: self._pressure(data),
            "allocation": lambda: self.chosen.pop("allocation", None) or pick(data, self.allocs),
            "tx": lambda: live_first("tx", m.txs, self.txs),
            "ready": lambda: live_first("tx", {i: t for i, t in m.txs.items() if len(t.held) == len(t.needs)}
                                        or m.txs, self.txs),  # a transaction holding every need, if any
            "victims": victims, "needs": needs, "callback": lambda: data.draw(st.sampled_from(CALLBACKS)),
            "limit": lambda: data.draw(st.integers(0, 300)), "capacity": lambda: data.draw(st.integers(1, 300)),
            "pool": lambda: data.draw(st.sampled_from(["gpu1", "gpu2", "pinned"])),
            "tier": lambda: data.draw(st.sampled_from(list(Tier))),
        }[kind]()

    def _pressure(self, data) -> Any:
        self.answered = self.chosen.pop("pressure", None) or pick(data, self.pressures)
        return self.answered

    def noted(self, name: str, args, result) -> None:
        if name in ("submit",) or (name == "acquire" and type(result) is int):
            (self.tickets if name == "submit" else self.allocs).append(result)
        elif name in ("press", "open_pressure"):
            self.pressures.append(result)
        elif name == "prepare_limit":
            self.pressures.extend(result)
        elif name == "plan_tx":
            self.txs.append(result)
        elif name in ("claim", "lease"):
            self.allocs.append(result)
        elif name == "commit_tx":
            self.allocs.extend(result)
        elif name == "register_authority" and result not in self.auths:
            self.auths.append(result)
        # retired ids stay in the lists: a claimed ticket, an answered pressure, a committed transaction and a
        # released lease are drawn again, as the retired ids a caller may still hold
        m = abstract_manager(self.pmm)
        self.tickets.extend(t for t in m.tickets if t not in self.tickets)  # issued by callbacks' re-entry
        self.pressures.extend(p for p in m.pressures if p not in self.pressures)


def _check(pmm: ProcessMemoryManager) -> None:
    m = abstract_manager(pmm)
    IM.check_all(m)
    conserved(m)
    assert not any(t.state is TicketState.GRANTED and t.allocation is None for t in m.tickets.values())


def _fuzz(data, counts: Counter, traced: bool) -> None:
    buf = io.StringIO()
    pmm = _Fuzzed(trace=JsonlSink(buf) if traced else None)
    world = _World(pmm)
    world.start(data)
    def noted(name, args, result):
        counts[f"ok/{name}"] += 1  # per operation, so a part never accepted shows (no ": " in the key)
        world.noted(name, args, result)

    run_fuzz(data, pmm, WEIGHTED, world.valid, lambda p: abstract_manager(p), counts, steps=40,
             noted=noted, check=_check)
    if traced:
        r, lines = replayed(pmm, buf)
        assert r.ok, r.describe()
        counts["trace events replayed"] += len(lines)


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_fuzz_composed_manager(capsys, traced: bool) -> None:
    counts: Counter = Counter()

    @settings(FUZZ_SETTINGS, phases=[Phase.explicit, Phase.generate], max_examples=100)  # no shrinking: a failure prints its script
    @given(st.data())
    def run(data) -> None:
        _fuzz(data, counts, traced=traced)

    run()
    name = "ProcessMemoryManager composed parts" + " traced" * traced
    report(name, counts, capsys)
    _per_op(name, counts, capsys)
    _covered(counts)
    assert counts["accepted"] > 1000 and counts["rejected"] > 1500, counts
    assert not traced or counts["trace events replayed"] > 1500, counts


def test_replay_accepts_the_refusal_of_needs_and_victims_it_cannot_carry() -> None:
    """Found by the traced fuzzer: a refusal by what is inside an opaque tuple failed replay as a refinement."""
    buf = io.StringIO()
    pmm = ProcessMemoryManager(trace=JsonlSink(buf))
    h = pmm.register_holder("kv")
    a = pmm.register_authority("gpu0", Tier.DEVICE, 100)
    pid = pmm.open_pressure(h, a, 1)
    for call, error in [(lambda: pmm.plan_tx(h, ((True, 1),)), "UnknownAuthority"),
                        (lambda: pmm.plan_tx(h, ((a, 1.5),)), "InvalidBytes"),
                        (lambda: pmm.answer(h, pid, (10**30,)), "UnknownAllocation")]:
        try:
            call()
        except GovernorError as e:
            assert type(e).__name__ == error, e
        else:
            raise AssertionError(f"{error} expected")
    pmm.cancel_pressure(pid)
    lines = [line.encode() + b"\n" for line in buf.getvalue().splitlines()]
    assert '"opaque"' in buf.getvalue()
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


@pytest.mark.parametrize("callback", CALLBACKS, ids=[f.__name__ for f in CALLBACKS])
def test_each_fuzz_callback_delivered_leaves_the_manager_consistent(callback) -> None:
    pmm = _Fuzzed()
    w = _World(pmm)
    h, a = w.holders[0], w.auths[0]
    pmm.lease(h, a, 30)
    pmm.register_callback(h, callback)
    before = CALLED[callback.__name__]
    try:
        pmm.press(h, a, 10)
    except GovernorError as e:  # a raising callback: reported typed, its ticket cancelled
        assert type(e).__name__ == "HolderCallbackFailed" and str(e), e
    assert CALLED[callback.__name__] > before
    _check(pmm)
    m = abstract_manager(pmm)
    # a callback that neither answers nor raises leaves its ticket open (legal: zero is an answer not yet given)
    assert not m.pressures or callback.__name__ in ("_noop", "_press_again", "_submit_more", "_lower_from_inside")
