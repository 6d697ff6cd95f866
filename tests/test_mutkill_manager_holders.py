"""I4a's holder-lifetime clause (`invariants.manager_holders`) judged on steps broken by hand, one per kind of record.

A foreign governor's trace is read against this clause (docs/conformance.md): its message must say which holder
left, and which record of which kind still names it, or the implementer cannot tell what was stranded. Its case
is counted exactly when the registry lost a holder (verify's coverage rule R1). Written from the mutation
survivors that blanked the message, renamed a kind or miscounted the case.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from clause_harness import judged
from manager_harness import DEV, H1, H2, make_alloc, make_ticket, start

from invariants.manager_holders import step_I4a_holders
from spec import manager_actions as M
from spec.errors import HolderInUse
from spec.ledger_state import Allowance
from spec.tickets import TicketState

KEY = "step_I4a_holders.no_record_outlives_its_holder"
ACT = M.UnregisterHolder(H1)


def _ledger(m: M.Manager, **parts: Any) -> M.Manager:
    return evolve(m, ledger=evolve(m.ledger, **parts))


def _with(kind: str, holder: int) -> M.Manager:
    """`start()` plus one record of `kind` (id 7) naming `holder`."""
    m = start()
    if kind == "allocation":
        return _ledger(m, allocations=m.ledger.allocations.set(7, make_alloc(7, DEV, holder, 1)))
    if kind == "allowance":
        return _ledger(m, allowances=m.ledger.allowances.set(7, Allowance(7, DEV, holder, 2, 0, 0)))
    record = {"ticket": make_ticket(7, holder, DEV, 1, TicketState.PENDING, 0),
              "pressure": M.Pressure(7, holder, DEV, 1, False),
              "transaction": M.Tx(7, holder, ((DEV, 1),), ()),
              "intent": M.Intent(7, holder, 7, 0, 0)}[kind]
    field = {"ticket": "tickets", "pressure": "pressures", "transaction": "txs", "intent": "intents"}[kind]
    return evolve(m, **{field: getattr(m, field).set(7, record)})


def _without_h1(m: M.Manager) -> M.Manager:
    return _ledger(m, holders=m.ledger.holders.delete(H1))


def _judge(before: M.Manager, after: M.Manager) -> tuple[str | None, tuple[int, int]]:
    message, counts = judged(step_I4a_holders, before, ACT, after)
    return message, counts.get(KEY, (0, 0))


KINDS = ("allocation", "allowance", "ticket", "pressure", "transaction", "intent")


@pytest.mark.parametrize("kind", KINDS)
def test_a_holder_gone_while_a_record_names_it_is_named_with_the_record(kind: str) -> None:
    before = _with(kind, H1)
    message, counts = _judge(before, _without_h1(before))
    assert message is not None and message.endswith(f"{ACT!r}: holder {H1} left the registry while {kind} 7 names it")
    assert message.startswith("I4a"), message
    assert counts == (1, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_of_another_holder_is_no_harm(kind: str) -> None:
    before = _with(kind, H2)
    assert _judge(before, _without_h1(before)) == (None, (1, 1))


def test_the_case_is_counted_only_when_the_registry_lost_a_holder() -> None:
    m = start()
    assert _judge(m, m) == (None, (1, 0))  # the registry untouched
    grown = _ledger(m, holders=m.ledger.holders.set(3, m.ledger.holders[H1]))
    assert _judge(m, grown) == (None, (1, 0))  # a new holder: the registry changed, nobody left
    assert _judge(m, _without_h1(m)) == (None, (1, 1))  # a holder left, nothing named it


def test_the_spec_s_own_unregister_is_judged_clean() -> None:
    from spec import manager as MG
    m = start()
    after, _ = MG.step(m, ACT)
    assert H1 not in after.ledger.holders and _judge(m, after) == (None, (1, 1))
    with pytest.raises(HolderInUse, match="holder 1 is named by ticket 7"):  # the spec refuses what the clause judges
        MG.step(_with("ticket", H1), ACT)
