"""The hierarchy campaign's figures: real processes against the spec, with per-action and per-clause counts.

    python benchmarks/hierarchy_campaign.py [examples] [steps] [--sim]

Prints examples, steps, accepted steps by action type, refusals by error type,
the environment's cases reached (`refimpl.verify.hierarchy_checker.cases`), and
for every harm clause of `invariants.hierarchy` how often it was evaluated and
how often its antecedent held (the case it is about occurred). `--sim`: the
same code in one process, its network simulated (`refimpl.verify.hierarchy_sim`).
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

import attrs

from invariants import contracts
from invariants.campaign import campaign_settings
from invariants.hierarchy import CLAUSES, evaluate
from invariants.hierarchy_machine import model
from invariants.model_machine import run_model_campaign
from invariants.hierarchy_machine import campaign_step
from refimpl.verify.hierarchy_adapter import HierarchyAdapter
from refimpl.verify.hierarchy_checker import cases
from refimpl.verify.hierarchy_sim import SimAdapter
from spec.errors import GovernorError

accepted: collections.Counter[str] = collections.Counter()
reached: collections.Counter[str] = collections.Counter()
refused: collections.Counter[str] = collections.Counter()
held: collections.Counter[str] = collections.Counter()
evaluated: collections.Counter[str] = collections.Counter()


def counting(base: type) -> type:
    class Counting(base):  # type: ignore[misc, valid-type]
        def execute(self, act: Any) -> Any:
            try:
                out = super().execute(act)
            except GovernorError as e:
                refused[f"{type(act).__name__}:{type(e).__name__}"] += 1
                raise
            accepted[type(act).__name__] += 1
            return out
    return Counting


def _count(pred: str, *args: Any) -> None:
    for name, h, _ in evaluate(pred, *args):
        evaluated[name] += 1
        held[name] += h


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--sim"]
    examples = int(args[0]) if args else 15
    steps = int(args[1]) if len(args) > 1 else 25
    impl = counting(SimAdapter if "--sim" in sys.argv else HierarchyAdapter)
    base = model(lambda c, g: impl(c, g))

    def step(s: Any, a: Any, guards: Any = None) -> Any:
        reached.update(cases(s, a))
        return campaign_step(s, a) if guards is None else campaign_step(s, a, guards)

    def check_state(s: Any) -> None:
        base.check_state(s)
        _count("state_C10_hierarchy", s)
        _count("state_I11_hierarchy", s)

    def check_step(p: Any, a: Any, n: Any) -> None:
        base.check_step(p, a, n)
        _count("step_C10_hierarchy", p, a, n)
        _count("step_I11_hierarchy", p, a, n)

    m = attrs.evolve(base, check_state=check_state, check_step=check_step, step=step)
    t0 = time.perf_counter()
    with contracts.contracts(True):
        stats = run_model_campaign(m, campaign_settings(examples, steps))
    print(f"examples {stats.examples}, steps {stats.steps}, accepted {stats.accepted}, "
          f"{time.perf_counter() - t0:.1f} s")
    print("accepted by action:", dict(sorted(accepted.items())))
    print("refused by action:error:", dict(sorted(refused.items())))
    print("environment cases reached:", dict(sorted(reached.items())))
    print("clause: evaluated / antecedent held")
    for pred, clauses in CLAUSES.items():
        for name, _ in clauses:
            print(f"  {pred}.{name}: {evaluated[name]} / {held[name]}")


if __name__ == "__main__":
    main()
