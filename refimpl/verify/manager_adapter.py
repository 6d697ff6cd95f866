"""Adapter from the composed actions (`spec.ledger_actions`, `spec.manager_actions`) to `ProcessMemoryManager` calls.

Method names are the actions' names in snake case and keywords the actions'
field names, so the mapping is mechanical and cannot hide logic.

The pressure callback's path (issue #21): every holder the campaign registers
gets a callback that only records what it was handed, so each accepted
`Press` goes through refimpl's delivery. The adapter checks the harms C5 and I7
name: the new pressure ticket reached its own holder, once, with its target
(C5), while the caller held no ledger lock (I7,
`invariants.manager.observed_I7_manager`). The callback answers nothing, so
the spec's state is unchanged by it (refinement still compares every step).

Checker-only steps (issue #21 item 2): a spec action a campaign interleaves
one at a time but no user of the governor should take alone is no public
verb of `ProcessMemoryManager`; it is reached here, through the manager's
own runner, so it is checked and traced exactly as the public verb that is
made of it. `operation(pmm, name)` is the one way every harness turns an
action's name into a call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, partial
from typing import Any

import attrs

from invariants._violation import InvariantViolation
from invariants.manager import observed_I7_manager
from refimpl.verify.manager_hooks import abstract_manager, corrupt_ledger, ledger_lock
from refimpl.manager import ProcessMemoryManager
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.guards import ALL_ON, GuardSet
from spec.manager_actions import Manager

__all__ = ["ManagerAdapter", "STEPS", "commit_limit", "execute", "method_name", "operation", "prepare_limit",
           "reserve_tx"]


def method_name(action: Any) -> str:
    """`ReserveGrowth` -> `reserve_growth`."""
    return _snake(type(action).__name__)


@cache
def _snake(name: str) -> str:  # once per action class: every checked step asks
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def reserve_tx(pmm: ProcessMemoryManager, tx: int) -> int:
    """The `ReserveTx` step alone: the next need, granted now or CapacityDenied now, the transaction left open.

    Users call `reserve_all`, which takes these steps and aborts on a refusal (holding part of the needs while
    waiting for the rest is the circle C4 rules out)."""
    return pmm._run(M.ReserveTx, pmm._ms_tx, pmm._reserve, tx)


def prepare_limit(pmm: ProcessMemoryManager, authority: int, limit: int) -> tuple[int, ...]:
    """The `PrepareLimit` step alone: a pending limit change and its pressure tickets, delivered to nobody.

    Users call `lower_limit`, which prepares, delivers and commits (C8)."""
    return pmm._run(M.PrepareLimit, pmm._ms_auth0, pmm._prepare, authority, limit)


def commit_limit(pmm: ProcessMemoryManager, authority: int) -> M.LimitOutcome:
    """The `CommitLimit` step alone: the pending change's tickets retired; the new limit if `used` fits."""
    return pmm._commit_step(authority)


#: Checker-only steps by action name (`method_name`): spec actions that are no public verb of the manager.
STEPS: dict[str, Callable[..., Any]] = {"reserve_tx": reserve_tx, "prepare_limit": prepare_limit,
                                        "commit_limit": commit_limit}


def operation(pmm: ProcessMemoryManager, name: str) -> Callable[..., Any]:
    """The call for the action named `name` (snake case): a checker-only step bound to `pmm`, else its verb."""
    step = STEPS.get(name)
    return partial(step, pmm) if step is not None else getattr(pmm, name)


def execute(pmm: ProcessMemoryManager, action: Any) -> Any:
    """Run a spec action (`spec.ledger_actions`, `spec.manager_actions`) on `pmm`, keywords its fields."""
    return operation(pmm, method_name(action))(**attrs.asdict(action, recurse=False))


class ManagerAdapter:
    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.pmm = ProcessMemoryManager(guards=guards)
        self.delivered: list[tuple[int, int, int, bool]] = []  # (holder, pressure, target, lock held)

    def execute(self, action: Any) -> Any:
        self.delivered.clear()
        if isinstance(action, M.CorruptLedger):
            return corrupt_ledger(self.pmm)  # the environment's event: a test hook, no governor verb (I5)
        result = execute(self.pmm, action)
        if isinstance(action, A.RegisterHolder):
            self.pmm.register_callback(result, lambda pmm, pid, target, h=result: self.delivered.append(
                (h, pid, target, ledger_lock(pmm).held_by_me())))
        elif isinstance(action, M.Press):
            observed_I7_manager(self.delivered)  # I7: the callback ran with the ledger lock released
            if [d[:3] for d in self.delivered] != [(action.holder, result, action.target)]:
                raise InvariantViolation("C5", f"{action!r} opened pressure {result}; its holder's callback was "
                                               f"handed {self.delivered} (holder, pressure, target, lock held), not "
                                               f"exactly [({action.holder}, {result}, {action.target}, _)]",
                                         clause="delivery.to_its_holder_once")
        return result

    def abstract(self) -> Manager:
        return abstract_manager(self.pmm)

    def snapshot(self, authority: int) -> Any:
        return self.pmm.snapshot(authority)
