"""Fixed refimpl scripts: the deterministic control of a pressure guard the spec cannot express (rule R4).

The explorer is the deterministic control of every guard the spec has; a
guard that lives only in refimpl (`SPEC_CANNOT_EXPRESS`: the spec has no
lock) has no spec state to exhaust. Its deterministic control is a fixed
script, the same on every run and free of Hypothesis: the script is run on
the real `ProcessMemoryManager` through the composed `ManagerAdapter`, whose
callbacks record whether their caller held the ledger lock and judge it
(`invariants.manager.observed_I7_manager`), once with every guard on, where
no clause may fail, and once with the guard off, where one of the guard's
IDs' clauses must. The outcome is an `ExploreResult` whose model ends in
`SCRIPT_SUFFIX`, so the verdict names it a script, never the explorer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.explore import ExploreResult
from invariants.manager import observed_I7_manager
from refimpl.verify.manager_adapter import ManagerAdapter
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import ALL_ON, Guard, GuardSet
from spec.types import Tier

__all__ = ["SCRIPT_SUFFIX", "SCRIPTS", "SPEC_CANNOT_EXPRESS", "run_script"]

SCRIPT_SUFFIX = "-script"

#: Guards whose harm the spec model cannot state, and why (their spec-layer control is an honest "not found").
SPEC_CANNOT_EXPRESS = {
    "unlock_before_callback": "a spec step is atomic, has no lock and calls no one, so 'a holder callback ran "
                              "under the ledger lock' is not a state or step of the model; the refimpl control "
                              "observes it from another thread (observed_I7_callbacks)",
}

#: guard -> (actions, what is observed after each step). One press: the governor calls holder 1's pressure
#: callback, which records whether the thread calling it held the ledger lock.
SCRIPTS: dict[str, tuple[tuple[Any, ...], Callable[[ManagerAdapter], None]]] = {
    "unlock_before_callback": ((A.RegisterHolder("h1"), A.RegisterAuthority("pool", Tier.DEVICE, 16),
                                M.Press(1, 1, 4, 0, 5)),
                               lambda ad: observed_I7_manager(ad.delivered)),
}


def _run(guard: Guard, guards: GuardSet) -> tuple[int, int, InvariantViolation | None, int]:
    """(accepted, rejected, the first violation or None, steps run)."""
    actions, observe = SCRIPTS[guard.name]
    ad = ManagerAdapter(guards)
    accepted = rejected = 0
    with contracts.contracts(False):  # only the script's own observation judges
        for i, a in enumerate(actions, 1):
            try:
                ad.execute(a)
                accepted += 1
                observe(ad)
            except GovernorError:
                rejected += 1
            except InvariantViolation as e:
                return accepted, rejected, e, i
    return accepted, rejected, None, len(actions)


def run_script(guard: Guard) -> ExploreResult:
    """The guard's fixed script: clean with every guard on, a violation of the guard's IDs with it off."""
    t0 = time.perf_counter()
    actions = SCRIPTS[guard.name][0]
    _, _, clean, _ = _run(guard, ALL_ON)
    model = f"pressure{SCRIPT_SUFFIX}"
    if clean is not None:  # the script itself is wrong: it is not evidence about the guard
        return ExploreResult(model, 0, 0, 0, 0, False, time.perf_counter() - t0, None,
                             f"the fixed script fails with every guard on ({clean}): not a control", ())
    acc, rej, e, n = _run(guard, GuardSet.without(guard.name))
    seconds = time.perf_counter() - t0
    trace = tuple(repr(a) for a in actions[:n])
    if e is None or e.id not in guard.ids:
        why = "no counterexample found" if e is None else f"another ID's harm ({e}), not the guard's"
        return ExploreResult(model, n + 1, acc, rej, n, False, seconds, None, f"fixed script, guard off: {why}", ())
    return ExploreResult(model, n + 1, acc, rej, n, False, seconds, e.id, f"fixed script, guard off: {e}", trace,
                         e.clause, (e.clause,) if e.clause else ())
