"""Issue #14: the fuzzer of the manager's focused transaction operations (C3-C6, I5, I9, I10; the pool protocol's
fuzzer went with that front end, issue #21: the composed verbs are fuzzed by tests/test_fuzz_manager.py).

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

from invariants import transactions as IT
from spec.transactions_lifecycle import ViewKind
from tx_harness import TxManager

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
