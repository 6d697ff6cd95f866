"""Each refusal of the composed view actions (`spec/manager_views.py`: C4, C6, I9) names what the caller got wrong.

The spec is the reference a foreign governor's refusals are read against (docs/conformance.md): a refusal
must say which id, which generation, which transaction, or the implementer cannot tell which rule fired.
Written from the mutation survivors that blanked or changed those messages.
"""

from __future__ import annotations

from typing import Any

import pytest

from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec.errors import DeviceLost, InvalidArgument, InvalidTransition, StaleGeneration, ViewInUse
from spec.types import Tier

DEV, HOST, H1, H2 = 1, 2, 1, 2
# View 1: committed, over lease 1 (H1's 3 B on DEV), bound by transaction 2's execution; view 2: transaction
# 2's provisional view; transaction 3 planned (holds nothing); transaction 4 holds its need and published view 3.
SETUP = (A.RegisterAuthority("dev", Tier.DEVICE, 8), A.RegisterAuthority("host", Tier.HOST, 8),
         A.RegisterHolder("h1"), A.RegisterHolder("h2"),
         M.PlanTx(H1, ((DEV, 3),)), M.ReserveTx(1), M.PublishView(1), M.ExecuteView(1, 1, 1), M.CommitTx(1),
         M.PlanTx(H2, ((HOST, 1),)), M.ReserveTx(2), M.PublishView(2), M.ExecuteView(2, 1, 1),
         M.PlanTx(H1, ((HOST, 1),)), M.PlanTx(H2, ((HOST, 1),)), M.ReserveTx(4), M.PublishView(4))


def _run(acts: tuple[Any, ...]) -> M.Manager:
    m = M.initial()
    for act in acts:
        m = MG.step(m, act)[0]
    return m


@pytest.fixture(scope="module")
def setup() -> M.Manager:
    m = _run(SETUP)
    assert set(m.views) == {1, 2, 3} and m.views[1].users == ((2, 1),) and set(m.txs) == {2, 3, 4}
    return m


@pytest.mark.parametrize("act, error, match", [
    (M.PublishView("x"), InvalidArgument, r"^tx must be an int id, got 'x'$"),
    (M.PublishView(3), InvalidTransition, r"^transaction 3 holds 0 of its 1 needs: no view before every need is held$"),
    (M.PublishView(2), InvalidTransition, r"^transaction 2 has already published its view$"),
    (M.ExecuteView("x", 1, 1), InvalidArgument, r"^tx must be an int id, got 'x'$"),
    (M.ExecuteView(2, "v", 1), InvalidArgument, r"^view must be an int id, got 'v'$"),
    (M.ExecuteView(2, 1, 0), InvalidArgument, r"^generation must be an int >= 1, got 0$"),
    (M.ExecuteView(3, 1, 1), InvalidTransition, r"^transaction 3 has published no view: it cannot execute$"),
    (M.ExecuteView(4, 2, 1), InvalidArgument, r"^view 2 is the provisional view of transaction 2$"),
    (M.ExecuteView(2, 1, 1), InvalidTransition, r"^transaction 2 already binds view 1$"),
    (M.ExecuteView(4, 1, 2), StaleGeneration, r"^view 1 is at generation 1, not 2$"),
    (M.RemapView("v"), InvalidArgument, r"^view must be an int id, got 'v'$"),
    (M.RemapView(1), ViewInUse, r"^view 1 is bound to execution\(s\) \[2\]$"),
], ids=["publish-tx-not-int", "publish-before-held", "publish-twice", "execute-tx-not-int", "execute-view-not-int",
        "execute-generation-0", "execute-without-own-view", "execute-anothers-provisional", "execute-twice",
        "execute-stale-generation", "remap-not-int", "remap-bound"])
def test_invalid_view_action_is_refused_naming_what_is_wrong(setup: M.Manager, act: Any, error: type,
                                                             match: str) -> None:
    with pytest.raises(error, match=match):
        MG.step(setup, act)


def test_a_dropped_view_and_a_lost_devices_view_are_refused_naming_the_view() -> None:
    idle = _run((*SETUP, M.CommitTx(2), M.DropView(1)))
    with pytest.raises(InvalidTransition, match=r"^view 1 is already dropped$"):
        MG.step(idle, M.RemapView(1))
    lost = _run((*SETUP, A.LoseDevice(DEV)))
    with pytest.raises(DeviceLost, match=r"^view 1 is invalid: its device context was lost$"):
        MG.step(lost, M.RemapView(1))


def _sites(m: M.Manager, act: Any) -> list[tuple[str, Any]]:
    return [(type(e).__name__, getattr(e, "site", None)) for e in MG.refusals(m, act)]


def test_every_refusal_of_a_view_action_at_its_own_site(setup: M.Manager) -> None:
    """`spec.manager.refusals` (issue #21, D11): each view check whose refusal a later one can follow is its own
    waivable site, so every refusal whose precondition holds is listed, once."""
    assert _sites(setup, M.ExecuteView(3, 2, 5)) == [("InvalidTransition", "published"),
                                                     ("InvalidArgument", "provisional"),
                                                     ("StaleGeneration", "generation")]
    assert _sites(setup, M.ExecuteView(2, 1, 2)) == [("InvalidTransition", "bound"), ("StaleGeneration", "generation")]
    assert _sites(setup, M.PublishView(3)) == [("InvalidTransition", "held")]
    assert _sites(setup, M.DropView(2)) == [("InvalidTransition", "provisional")]
    assert _sites(setup, M.DropView(1)) == [("ViewInUse", None)]
    lost = MG.step(setup, A.LoseDevice(DEV))[0]  # view 1 invalid; transaction 2 (bound to it) aborted
    assert _sites(lost, M.ExecuteView(4, 1, 2)) == [("DeviceLost", "mapped"), ("StaleGeneration", "generation")]
    assert _sites(lost, M.RemapView(1)) == [("DeviceLost", "mapped")]
