"""Harm clause of the composed manager's state bundles (I10): a bundle moves with the bytes of its step.

What the engine sees (the parts' versions) against what the ledger holds (the leases of the step), read from the
allocation records: not the handler's `+1` on the transaction it deleted. Reads spec values only; never imports
refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.changed import changed
from invariants.clauses import clause
from spec import manager_actions as M
from spec.types import AllocState

__all__ = ["step_I10_manager"]

_I10_WITH_LEASES = clause("I10", "step_I10_manager", "bundle_moves_with_its_leases",
                          "no part of a state bundle claims a step whose bytes are not leased, nor lags bytes that "
                          "are: every part moves by one exactly in the step in which a transaction of the bundle "
                          "turns all its reservations into leases, by none otherwise, and a poisoned bundle's "
                          "transaction never turns them")


def _leased_steps(before: M.Manager, after: M.Manager) -> dict[int, int]:
    """Per bundle, the transactions of it whose reservations all became leases in this step (ledger records)."""
    out: dict[int, int] = {}
    was, now = before.ledger.allocations, after.ledger.allocations
    for x in before.txs.values():
        if x.bundle is not None and x.held and all(
                was[a].state is AllocState.PROVISIONAL and a in now and now[a].state is AllocState.LIVE
                for a in x.held):
            out[x.bundle] = out.get(x.bundle, 0) + 1
    return out


def step_I10_manager(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    leased = _leased_steps(before, after)
    _I10_WITH_LEASES.case(bool(after.bundles))  # every step constrains every bundle: none moves but with its leases
    # A bundle whose record did not change and none of whose transactions leased passes: only the rest are read.
    for bid in sorted(moved | leased.keys()) if (moved := changed(before.bundles, after.bundles)) or leased else ():
        b, p = after.bundles.get(bid), before.bundles.get(bid)
        if b is None:
            continue
        old, steps = (p.versions if p is not None else (0,) * len(b.versions)), leased.get(b.id, 0)
        if steps and p is not None and p.poisoned:
            _I10_WITH_LEASES.fail(f"{act!r}: poisoned bundle {b.id}'s transaction turned its reservations into leases")
        if b.versions != tuple(v + steps for v in old):
            _I10_WITH_LEASES.fail(f"{act!r}: bundle {b.id} moved {old} -> {b.versions} with {steps} step(s) of "
                                  f"its bytes leased")
