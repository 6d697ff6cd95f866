"""The hierarchy campaign's figures: real processes against the spec, with per-action and per-clause counts.

    python benchmarks/hierarchy_campaign.py [examples] [steps]

Prints examples, steps, accepted steps by action type, refusals by error type,
and for every harm clause of `invariants.hierarchy` how often it was evaluated
and how often its antecedent held (the case it is about occurred).
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
from refimpl.verify.hierarchy_adapter import HierarchyAdapter
from spec.errors import GovernorError

accepted: collections.Counter[str] = collections.Counter()
refused: collections.Counter[str] = collections.Counter()
held: collections.Counter[str] = collections.Counter()
evaluated: collections.Counter[str] = collections.Counter()


class Counting(HierarchyAdapter):
    def execute(self, act: Any) -> Any:
        try:
            out = super().execute(act)
        except GovernorError as e:
            refused[f"{type(act).__name__}:{type(e).__name__}"] += 1
            raise
        accepted[type(act).__name__] += 1
        return out


def _count(pred: str, *args: Any) -> None:
    for name, h, _ in evaluate(pred, *args):
        evaluated[name] += 1
        held[name] += h


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    base = model(lambda c, g: Counting(c, g))

    def check_state(s: Any) -> None:
        base.check_state(s)
        _count("state_C10_hierarchy", s)
        _count("state_I11_hierarchy", s)

    def check_step(p: Any, a: Any, n: Any) -> None:
        base.check_step(p, a, n)
        _count("step_C10_hierarchy", p, a, n)
        _count("step_I11_hierarchy", p, a, n)

    m = attrs.evolve(base, check_state=check_state, check_step=check_step)
    t0 = time.perf_counter()
    with contracts.contracts(True):
        stats = run_model_campaign(m, campaign_settings(examples, steps))
    print(f"examples {stats.examples}, steps {stats.steps}, accepted {stats.accepted}, "
          f"{time.perf_counter() - t0:.1f} s")
    print("accepted by action:", dict(sorted(accepted.items())))
    print("refused by action:error:", dict(sorted(refused.items())))
    print("clause: evaluated / antecedent held")
    for pred, clauses in CLAUSES.items():
        for name, _ in clauses:
            print(f"  {pred}.{name}: {evaluated[name]} / {held[name]}")


if __name__ == "__main__":
    main()
