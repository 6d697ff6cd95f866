"""Issue #14: the GovernedRuntime fuzzer (real ORT sessions; I3, I8, I8b, I8c, C7, C8, C9).

Every session action, hostile field values interleaved with valid ones: a
typed error with a message and both the session abstraction and the
ledger's unchanged on each rejection; the session predicates after each
accepted action; `close()` always settles the ledger to zero.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fuzz_harness import FUZZ_SETTINGS, report, run_fuzz  # noqa: E402

from invariants.sessions import check_state  # noqa: E402
from refimpl.verify.sessions_checker import BUCKET, MAX_CONTEXT  # noqa: E402
from refimpl.ort.governed import GovernedRuntime  # noqa: E402
from refimpl.verify.manager_hooks import abstract_ledger  # noqa: E402
from spec import sessions as S  # noqa: E402
from spec.types import Role  # noqa: E402


#: The session actions by the harness's op names (`load` draws its facts from the world, below).
ACTIONS = {"open": S.Open, "decode": S.Decode, "close_request": S.Close, "prefetch": S.Prefetch,
           "pressure": S.Pressure, "decline": S.Decline, "lower_limit": S.LowerLimit, "observe": S.ObserveResidency}


class _Runtime:
    """One method per session action, so the harness can hand each field a hostile value."""

    def __init__(self, world) -> None:
        self.world = world
        self.rt = GovernedRuntime(world.topology(64 * 1024), 256 * 1024, world.sources, MAX_CONTEXT, BUCKET)

    def load(self, name, source, declared, host_mapped):
        facts = self.world.facts.get(source) if type(source) is str else None
        decl = (facts.loop_carried if facts else frozenset()) if declared == "full" else declared
        return self.rt.execute(S.LoadModel(name, source, facts if facts else S.ModelFacts(1, 1, 0, frozenset(), 0, 0, 0),
                                           decl, host_mapped))

    def __getattr__(self, name):
        if name not in ACTIONS:
            raise AttributeError(name)
        return lambda *args: self.rt.execute(ACTIONS[name](*args))


OPS = [("load", ("name", "source", "declared", "bool")), ("open", ("model",)), ("decode", ("rid",)),
       ("decode", ("rid",)), ("close_request", ("rid",)), ("prefetch", ()), ("pressure", ("bytes",)),
       ("decline", ("role",)), ("lower_limit", ("limit",)), ("observe", ("model", "bytes", "name"))]


def test_fuzz_governed_runtime(world, capsys) -> None:
    counts: Counter = Counter()

    @settings(FUZZ_SETTINGS, max_examples=12)
    @given(st.data())
    def run(data) -> None:
        r = _Runtime(world)
        rids: list[int] = []

        def valid(kind, data):
            return {
                "name": lambda: data.draw(st.sampled_from(["a", "b"])),
                "source": lambda: data.draw(st.sampled_from(sorted(world.sources))),
                "declared": lambda: data.draw(st.sampled_from(["full", None])),
                "bool": lambda: data.draw(st.booleans()),
                "model": lambda: data.draw(st.sampled_from(["a", "b", "zz"])),
                "rid": lambda: data.draw(st.sampled_from(rids or [1])),
                "bytes": lambda: data.draw(st.integers(1, 40_000)),
                "role": lambda: data.draw(st.sampled_from(list(Role))),
                "limit": lambda: data.draw(st.integers(100_000, 256 * 1024)),
            }[kind]()

        def noted(name, args, result):
            if name == "open":
                rids.append(result)

        run_fuzz(data, r, OPS, valid, lambda x: (x.rt.abstract(), abstract_ledger(x.rt.pmm)), counts, steps=12,
                 noted=noted, check=lambda x: check_state(x.rt.abstract()))
        r.rt.close()
        assert r.rt.used() == r.rt.env_arena.grant and r.rt.env_arena.lent == 0  # the arena's lease alone

    run()
    report("GovernedRuntime (ORT)", counts, capsys)
    assert counts["accepted"] > 20 and counts["rejected"] > 20, counts
