"""Harm clause of holder lifetime (I4a): a holder leaves the registry only when nothing names it.

I4a: every allocation is provisional, committed to exactly one holder, or
released. A holder unregistered while an allocation, allowance, ticket,
pressure, transaction or retry intent still names it leaves bytes (or a
claim on them) committed to nobody: no registered holder may release them,
answer for them or retry for them. The clause reads the registry and the
records only, never the guard that prevents it (`spec.manager_parts`
`holder_in_use`). It walks the records only on a step in which the registry
lost a holder, so replay pays nothing on every other event.
Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from typing import Any

from invariants.clauses import clause
from spec import manager_actions as M

__all__ = ["step_I4a_holders"]

_I4A_NAMED = clause("I4a", "step_I4a_holders", "no_record_outlives_its_holder",
                    "no holder leaves the registry while an allocation, allowance, ticket, pressure, transaction "
                    "or retry intent names it: those bytes (or a place to claim them) would belong to nobody")


def step_I4a_holders(before: M.Manager, act: Any, after: M.Manager, result: Any = None) -> None:
    if after.ledger.holders is before.ledger.holders:
        _I4A_NAMED.case(False)
        return
    gone = {h for h in before.ledger.holders.keys() if h not in after.ledger.holders}
    _I4A_NAMED.case(bool(gone))
    if not gone:
        return
    led = after.ledger
    for kind, records in (("allocation", led.allocations), ("allowance", led.allowances), ("ticket", after.tickets),
                          ("pressure", after.pressures), ("transaction", after.txs), ("intent", after.intents)):
        for r in records.values():
            if r.holder in gone:
                _I4A_NAMED.fail(f"{act!r}: holder {r.holder} left the registry while {kind} {r.id} names it")
