"""invariants/manager_events.py pinned (its mutation run, benchmarks/mutation.py): each case of interest the composed
campaign counts (`situations`) is named exactly when it happens, on hand-made states around one step, and not on
its near misses (each condition of the case broken in turn). `situations` reads only the attributes built here."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest

from invariants.manager_events import SITUATIONS, situations
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.tickets import TicketState
from spec.types import AllocState, Role, Tier

P, G = TicketState.PENDING, TicketState.GRANTED


def auth(limit: int = 10, used: int = 0, alias_of: int | None = None) -> NS:
    return NS(limit=limit, used=used, alias_of=alias_of)


def mgr(tickets: tuple[tuple[int, int, TicketState], ...] = (), auths: dict[int, NS] | None = None,
        allocs: tuple[tuple[int, AllocState], ...] = (), txs: tuple[tuple[tuple[tuple[int, int], ...],
                                                                          tuple[int, ...]], ...] = (),
        pressures: dict[int, bool] | None = None, allowances: dict[Any, Any] | None = None) -> NS:
    """A manager state: tickets (id, authority, state), allocations (authority, state), transactions (needs, held),
    pressures id -> opened by a limit change."""
    return NS(tickets={i: NS(id=i, authority=a, state=s) for i, a, s in tickets},
              pressures={i: NS(change=c) for i, c in (pressures or {}).items()},
              txs={n: NS(needs=needs, held=held) for n, (needs, held) in enumerate(txs)},
              ledger=NS(authorities=auths if auths is not None else {1: auth(), 2: auth()},
                        allocations={n: NS(authority=a, state=s) for n, (a, s) in enumerate(allocs)},
                        allowances=allowances or {}))


def test_every_case_is_named_once() -> None:
    assert len(SITUATIONS) == len(set(SITUATIONS)) == 12


@pytest.mark.parametrize(("prev", "now", "out"), [
    (mgr(((1, 1, P),), {1: auth(4)}), mgr(((1, 1, P),), {1: auth(5)}), ("limit raised while tickets wait",)),
    (mgr(((1, 1, P),), {1: auth(4)}), mgr(((1, 1, P),), {1: auth(4)}), ()),  # not raised
    (mgr(((1, 1, P),), {1: auth(5)}), mgr(((1, 1, P),), {1: auth(4)}), ()),  # lowered
    (mgr(((1, 2, P),), {1: auth(4), 2: auth()}), mgr(((1, 2, P),), {1: auth(5), 2: auth()}), ()),  # elsewhere
    (mgr(((1, 1, G),), {1: auth(4)}), mgr(((1, 1, G),), {1: auth(5)}), ()),  # none waiting
])
def test_limit_raised_while_tickets_wait(prev: NS, now: NS, out: tuple[str, ...]) -> None:
    assert situations(prev, M.CommitLimit(1), now) == out


Q, L = AllocState.QUARANTINED, AllocState.LIVE
TWO = ((1, 8), (2, 8))


@pytest.mark.parametrize(("prev", "out"), [
    (mgr(allocs=((2, L), (1, Q))), ("device lost holding a quarantined lease",)),
    (mgr(allocs=((1, L), (2, Q))), ()),  # the quarantined lease is on another device
    (mgr(txs=((TWO, (7,)),)), ("loss unwinds a two-ledger transaction",)),
    (mgr(txs=((((1, 8),), (7,)),)), ()),  # one ledger
    (mgr(txs=((TWO, ()),)), ()),  # holds nothing yet
    (mgr(txs=((((2, 8), (3, 8)), (7,)),)), ()),  # not on the lost device
    (mgr(allocs=((1, Q),), txs=((((3, 8),), ()), (TWO, (7,)))),
     ("device lost holding a quarantined lease", "loss unwinds a two-ledger transaction")),
])
def test_device_lost(prev: NS, out: tuple[str, ...]) -> None:
    assert situations(prev, A.LoseDevice(1), prev) == out


BEFORE, GRANTED = mgr(((1, 1, P), (2, 1, G))), mgr(((1, 1, G), (2, 1, G), (3, 1, G)))
ROUNDS = [(A.Release(1, 5), "release followed by a granting round"),
          (M.ShrinkLease(1, 5, 4), "lease shrink followed by a granting round"),
          (M.CancelTicket(1, 2), "a cancel or timeout grants a waiter"),
          (M.TimeoutTicket(1, 2), "a cancel or timeout grants a waiter")]


@pytest.mark.parametrize(("action", "name"), ROUNDS)
def test_a_step_whose_round_grants_a_waiter(action: Any, name: str) -> None:
    assert situations(BEFORE, action, GRANTED) == (name,)
    # granted already, or new and granted at once, or still pending: no waiter was granted
    assert situations(mgr(((1, 1, G),)), action, mgr(((1, 1, G), (3, 1, G)))) == ()
    assert situations(BEFORE, action, mgr(((1, 1, P), (2, 1, G)))) == ()
    assert situations(mgr(((1, 1, P),)), action, mgr()) == ()


@pytest.mark.parametrize(("prev", "now", "out"), [
    (mgr(((1, 1, P),), pressures={4: False}), mgr(((1, 1, G),)), ("pressure answer grants a waiter",)),
    (mgr(((1, 1, P),), pressures={4: True}), mgr(((1, 1, P),)), ("limit-change pressure answered",)),
    (mgr(((1, 1, P),), pressures={4: True}), mgr(((1, 1, G),)),
     ("pressure answer grants a waiter", "limit-change pressure answered")),
    (mgr(pressures={4: False}), mgr(), ()),
    (mgr(pressures={3: True}), mgr(), ()),  # another pressure changes the limit
])
def test_pressure_answers(prev: NS, now: NS, out: tuple[str, ...]) -> None:
    assert situations(prev, M.Answer(1, 4, ()), now) == out


ALIASED = {1: auth(), 2: auth(alias_of=1)}
SUBMIT, TX, CLAIM = M.Submit(1, 1, 4), M.ReserveTx(1), M.Claim(1, 1)
RESERVE = A.Reserve(1, 1, Tier.DEVICE, 4, Role.STAGING)


@pytest.mark.parametrize(("action", "prev", "out"), [
    (RESERVE, mgr(auths=ALIASED), ("part reserves beside an alias",)),
    (TX, mgr(auths=ALIASED), ("part reserves beside an alias",)),
    (SUBMIT, mgr(auths=ALIASED), ("part reserves beside an alias",)),
    (CLAIM, mgr(auths=ALIASED), ()),
    (RESERVE, mgr(), ()),
    (SUBMIT, mgr(allowances={3: 0, 1: 6}), ("ticket or transaction beside an allowance",)),
    (TX, mgr(allowances={1: 6}), ("ticket or transaction beside an allowance",)),
    (RESERVE, mgr(allowances={1: 6}), ()),
    (SUBMIT, mgr(allowances={1: 0}), ()),  # an allowance of nothing
    (SUBMIT, mgr(auths={1: auth(4, 4), 2: auth(4, 5)}), ("part acts on an oversubscribed ledger",)),
    (TX, mgr(auths={1: auth(4, 5)}), ("part acts on an oversubscribed ledger",)),
    (CLAIM, mgr(auths={1: auth(4, 5)}), ("part acts on an oversubscribed ledger",)),
    (SUBMIT, mgr(auths={1: auth(4, 4)}), ()),  # full, not over
    (RESERVE, mgr(auths={1: auth(4, 5)}), ()),
    (SUBMIT, mgr(auths={1: auth(4, 5), 2: auth(alias_of=1)}, allowances={1: 6}),
     ("part reserves beside an alias", "ticket or transaction beside an allowance",
      "part acts on an oversubscribed ledger")),
])
def test_parts_beside_aliases_allowances_and_oversubscription(action: Any, prev: NS, out: tuple[str, ...]) -> None:
    assert situations(prev, action, prev) == out


def test_a_retry_takes_back_an_aborted_attempts_place() -> None:
    assert situations(mgr(), M.PlanTx(1, TWO, retry=3), mgr()) == ("a retry takes back an aborted attempt's place",)
    assert situations(mgr(), M.PlanTx(1, TWO, retry=0), mgr()) == ("a retry takes back an aborted attempt's place",)
    assert situations(mgr(), M.PlanTx(1, TWO), mgr()) == ()
