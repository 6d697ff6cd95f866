"""Issue #14: the fuzzers of the manager's pool protocol and of its focused transaction operations (C3-C6, I5-I7, I9, I10, I13).

Every public operation, hostile values interleaved with valid ones, holder
callbacks that answer, re-enter the governor or raise; a typed error with a
message and the whole `abstract()` unchanged on each rejection, the part's
invariants after each accepted call. Drops are drained at once (a drop's
effect lands at the next operation's drain, so a rejection is compared
against a drained pool); `test_a_rejected_call_does_not_drain_the_mailbox`
covers a refused call with posts waiting.
"""

from __future__ import annotations

import threading
from collections import Counter

from fuzz_harness import FUZZ_SETTINGS, pick, report, run_fuzz
from hypothesis import given
from hypothesis import strategies as st

from invariants import pressure as IP
from invariants import transactions as IT
from pool_harness import Pool, pool as make_pool
from spec.transactions_lifecycle import ViewKind
from tx_harness import TxManager

# --- the manager's pool protocol (tests/pool_harness.py) ---------------------

P_OPS = [
    ("submit", ("holder", "bytes", "prio")), ("pool_try_reserve", ("holder", "bytes", "prio")),
    ("claim", ("holder", "ticket")), ("release", ("holder", "ticket")), ("cancel", ("holder", "ticket")),
    ("timeout", ("holder", "ticket")), ("reconfigure", ()), ("pool_set_use", ("holder", "ticket", "bool", "bool")),
    ("wait", ("ticket", "timeout")), ("acquire", ("holder", "bytes", "prio", "timeout")),
    ("drop_then_drain", ("holder", "ticket")), ("drain", ()), ("register_callback", ("holder", "callback")),
    ("press", ("holder", "bytes", "prio", "now")), ("answer", ("holder", "pressure", "victims", "now")),
    ("cancel_pressure", ("pressure",)), ("expire_pressure", ("pressure", "now")), ("free", ()),
]
P_WEIGHTED = P_OPS + [P_OPS[0], P_OPS[2], P_OPS[2], P_OPS[3], P_OPS[13]]


def _noop(g, pid, target, deadline):
    return None


def _answer_nothing(g, pid, target, deadline):  # re-enters the governor from the callback
    g.answer(g.abstract().pressures[pid].holder, pid, (), 0)


def _answer_own_idle(g, pid, target, deadline):  # gives back its own unpinned idle leases
    pool = g.abstract()
    h = pool.pressures[pid].holder
    mine = tuple(t.id for t in pool.tickets.values() if t.holder == h and t.state.value == "claimed"
                 and not t.pinned and not t.in_flight)[:2]
    g.answer(h, pid, mine, 0)


def _submit_more(g, pid, target, deadline):  # re-entrant request from inside the callback
    g.submit(g.abstract().pressures[pid].holder, 1)


def _raises(g, pid, target, deadline):
    raise ValueError("holder exploded")


CALLBACKS = [_noop, _answer_nothing, _answer_own_idle, _submit_more, _raises]


def _short(timeout):
    """A legal but long timeout (None, 10**9 s) would park the fuzzer: keep its type, shorten its length."""
    if type(timeout) in (int, float) and timeout == timeout and 0.01 < timeout <= threading.TIMEOUT_MAX:
        return type(timeout)(0.01) if type(timeout) is float else 0
    return timeout


class _Fuzzed(Pool):
    def drop_then_drain(self, holder, ticket):
        self.drop(holder, ticket)
        self.drain()

    def wait(self, ticket, timeout):
        return super().wait(ticket, 0.01 if timeout is None else _short(timeout))

    def acquire(self, holder, nbytes, priority=0, timeout=None):
        return super().acquire(holder, nbytes, priority, 0.01 if timeout is None else _short(timeout))


class _PWorld:
    def __init__(self) -> None:
        self.tickets: list[int] = []
        self.pressures: list[int] = []

    def valid(self, kind: str, data) -> object:
        return {
            "holder": lambda: data.draw(st.sampled_from([1, 2, 3])), "bytes": lambda: data.draw(st.integers(1, 60)),
            "prio": lambda: data.draw(st.integers(0, 3)), "ticket": lambda: pick(data, self.tickets),
            "pressure": lambda: pick(data, self.pressures), "bool": lambda: data.draw(st.booleans()),
            "timeout": lambda: data.draw(st.sampled_from([0, 0.0, 0.001])), "now": lambda: data.draw(st.integers(0, 20)),
            "victims": lambda: tuple(sorted(set(data.draw(st.lists(st.sampled_from(self.tickets or [1]), max_size=2))))),
            "callback": lambda: data.draw(st.sampled_from(CALLBACKS)),
        }[kind]()

    def noted(self, name: str, args, result) -> None:
        if name in ("submit", "pool_try_reserve") or (name == "acquire" and result is not None):
            self.tickets.append(result)
        elif name == "press":
            self.pressures.append(result)


def test_fuzz_pressure_governor(capsys) -> None:
    counts: Counter = Counter()

    @FUZZ_SETTINGS
    @given(st.data())
    def run(data) -> None:
        gov = _Fuzzed(make_pool(120, fixed=10, holders=3, aging_bound=3, mailbox=8).adapter)
        w = _PWorld()
        run_fuzz(data, gov, P_WEIGHTED, w.valid, lambda g: g.abstract(), counts, steps=40, noted=w.noted,
                 check=lambda g: IP.check_all(g.abstract()))
        pool = gov.abstract()  # the pool always settles: nothing is stuck behind a fault
        for t in pool.tickets.values():
            (gov.release if t.state.value == "claimed" else gov.cancel)(t.holder, t.id)
        assert gov.free() == 110 and not gov.abstract().tickets

    run()
    report("Pool", counts, capsys)
    assert counts["accepted"] > 250 and counts["rejected"] > 400, counts


# --- ProcessMemoryManager's focused transactions --------------------------------------------

T_OPS = [
    ("add_authority", ("name", "bytes")), ("open_bundle", ()),
    ("report_mismatch", ("bundle",)), ("plan", ("needs", "prio", "kind", "bundle?", "intent?")),
    ("reserve", ("tx", "authority")), ("reserve_all", ("tx",)),
    ("publish", ("tx",)), ("execute", ("tx", "view", "generation")), ("commit", ("tx",)), ("abort", ("tx",)),
    ("release", ("tx",)), ("remap", ("view",)), ("lose_device", ("authority",)),
    ("confirm_termination", ("authority",)), ("abstract", ()),
]
T_WEIGHTED = T_OPS + [T_OPS[3], T_OPS[3], T_OPS[5], T_OPS[5], T_OPS[6], T_OPS[7], T_OPS[8]]


class _TWorld:
    def __init__(self, tc: TxManager) -> None:
        self.auths = [tc.add_authority(n, 100) for n in ("device", "host", "staging")]
        self.txs: list[int] = []
        self.views: list[int] = []
        self.bundles: list[int] = []
        self.intents: list[int] = []

    def valid(self, kind: str, data) -> object:
        def needs():
            chosen = data.draw(st.lists(st.sampled_from(self.auths), min_size=1, max_size=2, unique=True))
            return tuple((a, data.draw(st.integers(1, 60))) for a in chosen)

        def maybe(ids):
            return None if data.draw(st.booleans()) else pick(data, ids)

        return {
            "name": lambda: data.draw(st.sampled_from(["device", "host", "staging", "gpu1"])),
            "bytes": lambda: data.draw(st.integers(1, 150)), "authority": lambda: pick(data, self.auths),
            "bundle": lambda: pick(data, self.bundles), "bundle?": lambda: maybe(self.bundles),
            "intent?": lambda: maybe(self.intents), "needs": needs, "prio": lambda: data.draw(st.integers(0, 3)),
            "kind": lambda: data.draw(st.sampled_from(list(ViewKind))), "tx": lambda: pick(data, self.txs),
            "view": lambda: pick(data, self.views), "generation": lambda: data.draw(st.integers(0, 2)),
        }[kind]()

    def noted(self, name: str, args, result) -> None:
        lists = {"add_authority": self.auths, "open_bundle": self.bundles, "plan": self.txs, "publish": self.views,
                 "remap": None, "abort": self.intents}
        target = lists.get(name)
        if target is not None and type(result) is int and result not in target:
            target.append(result)
        if name in ("reserve", "reserve_all") and type(result) is int:
            self.intents.append(result)  # aborted on the way: this is its retry intent


def test_fuzz_transaction_coordinator(capsys) -> None:
    counts: Counter = Counter()

    @FUZZ_SETTINGS
    @given(st.data())
    def run(data) -> None:
        tc = TxManager()
        w = _TWorld(tc)
        run_fuzz(data, tc, T_WEIGHTED, w.valid, lambda c: c.abstract(), counts, steps=40, noted=w.noted,
                 check=lambda c: IT.check_all(c.abstract()))

    run()
    report("ProcessMemoryManager transactions", counts, capsys)
    assert counts["accepted"] > 250 and counts["rejected"] > 400, counts
