"""The reservation order holds by construction in the composed begin/reserve path (C4; issue #21).

The harm the order prevents: a circle of holds, transactions each holding a
reservation that the next one needs and cannot get (it does not fit the
headroom). Were reservations to wait, that circle is a deadlock; try-only,
it is a livelock (each misses, aborts and retries in the same order).
`PlanTx` stores the needs in ascending authority id and `ReserveTx` takes
only the next of them, so a transaction holds a prefix of its sorted needs
and every edge of a circle would go to a strictly higher authority: none can
close. Checked over every state of a small scope of the spec (explored
exhaustively) and of random sequences on the governor, with C4's harm clause
(`invariants.manager_tx.circle_of_holds`); the controls plant the declared
order instead (spec and governor) and reach a circle.
(The focused verbs `tx_reservation_order` / `tx_reserve_all` are gone: the
composed path has one order and no verb to choose another.)
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pytest

from invariants import contracts
from invariants.manager_tx import circle_of_holds
from invariants.mutation import Mutant, applied
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import reserve_tx
from refimpl.verify.manager_hooks import abstract_manager
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import GovernorError
from spec.guards import Layer
from spec.types import Tier

DEV, HOST, H1, H2 = 1, 2, 1, 2
ORDERS = (((DEV, 2), (HOST, 2)), ((HOST, 2), (DEV, 2)))  # the same needs, declared in both orders

SPEC_DECLARED_ORDER = Mutant(
    "declared_order", ("C4",), "manager", Layer.SPEC, "spec.manager_tx",
    "    order = tuple(sorted(needs)) if guards.on(\"ordered_reservation\") else needs\n",
    "    order = needs\n",
    "the spec keeps a transaction's needs in declared order: two transactions take two authorities oppositely")
REFIMPL_DECLARED_ORDER = Mutant(
    "declared_order", ("C4",), "manager", Layer.REFIMPL, "refimpl.manager.transactions",
    "        self.needs = tuple(sorted(decl))", "        self.needs = tuple(decl)",
    "the governor takes a transaction's needs in declared order")


def _start() -> M.Manager:
    m = M.initial()
    for act in (A.RegisterAuthority("dev", Tier.DEVICE, 3), A.RegisterAuthority("host", Tier.HOST, 3),
                A.RegisterHolder("h1"), A.RegisterHolder("h2")):
        m = MG.step(m, act)[0]
    for h, needs in ((H1, ORDERS[0]), (H2, ORDERS[1])):
        m = MG.step(m, M.PlanTx(h, needs))[0]
    return m


def _explore() -> tuple[int, list[Any] | None]:
    """Every state reachable from two transactions over two 3 B authorities (each needs 2 B of both), by their
    reserves, aborts, commits and re-plans in either order: (states seen, the first path to a circle)."""
    first = _start()
    seen, frontier = {first: []}, [first]
    while frontier:
        nxt = []
        for m in frontier:
            acts: list[Any] = [M.PlanTx(h, o) for h in (H1, H2) for o in ORDERS] if len(m.txs) < 2 else []
            acts += [k(x) for x in m.txs for k in (M.ReserveTx, M.AbortTx, M.CommitTx)]
            for act in acts:
                try:
                    after = MG.step(m, act)[0]
                except GovernorError:
                    continue
                if after.next_tx > 6 or after in seen:
                    continue
                seen[after] = seen[m] + [act]
                if circle_of_holds(after):
                    return len(seen), seen[after]
                nxt.append(after)
        frontier = nxt
    return len(seen), None


def test_no_circle_of_holds_in_any_reachable_state_of_the_spec() -> None:
    states, circle = _explore()
    assert circle is None, circle
    assert states > 200  # the scope is not trivial: reserves, misses, aborts and re-plans all happen


def test_control_declared_order_in_the_spec_reaches_a_circle() -> None:
    with applied(SPEC_DECLARED_ORDER):
        _, circle = _explore()
    assert circle == [M.ReserveTx(1), M.ReserveTx(2)], circle  # each took one authority the other needs next


def _governor_run(seed: int) -> list[int]:
    """Random plans (both declared orders), reserves and aborts on the governor; the first circle it shows."""
    rnd = random.Random(seed)
    pmm = ProcessMemoryManager()
    pmm.register_authority("dev", Tier.DEVICE, 3)
    pmm.register_authority("host", Tier.HOST, 3)
    holders = [pmm.register_holder("h1"), pmm.register_holder("h2")]
    for _ in range(60):
        live = sorted(abstract_manager(pmm).txs)
        try:
            if len(live) < 2 and rnd.random() < 0.5:
                pmm.plan_tx(rnd.choice(holders), rnd.choice(ORDERS))
            elif live:
                rnd.choice((partial(reserve_tx, pmm),) * 2 + (pmm.abort_tx, pmm.commit_tx))(rnd.choice(live))
        except GovernorError:
            pass
        circle = circle_of_holds(abstract_manager(pmm))
        if circle:
            return circle
    return []


@pytest.mark.parametrize("seed", range(20))
def test_no_circle_of_holds_on_the_governor(seed: int) -> None:
    assert _governor_run(seed) == []


def test_control_declared_order_in_the_governor_reaches_a_circle() -> None:
    # Contracts off: the governor's own C4 contract (the same clause, `invariants.manager_tx.state_C4_holds`)
    # would stop the run at the circle before this check reads it.
    with applied(REFIMPL_DECLARED_ORDER), contracts.contracts(False):
        found = [c for seed in range(20) if (c := _governor_run(seed))]
    assert found and all(len(c) == 2 for c in found), found
