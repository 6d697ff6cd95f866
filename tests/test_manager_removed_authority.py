"""Every manager verb that names an authority, called on one that was removed (C3): a typed error, no crash.

`remove_authority` retires an id for good (it is never reused); the spec refuses any later action naming it with
InvalidTransition ("authority N was removed", `spec.ledger._authority`). The reference implementation must refuse
the same way, whatever the verb (the requester, allocator, pressure, transaction, limit, device and allowance
verbs, and the reads), with contracts on and off, and leave the WHOLE `abstract_manager()` unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import make

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import commit_limit, prepare_limit
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import GovernorError, InvalidTransition
from spec.types import Role, Tier


@pytest.fixture
def world() -> tuple[ProcessMemoryManager, Any]:
    pmm, w = make()
    w.gone = pmm.register_authority("gpu1", Tier.DEVICE, 100)
    w.gone_alias = pmm.register_alias(w.a, "uvm")
    pmm.remove_authority(w.gone_alias)  # an alias with nothing of its own may go first
    pmm.remove_authority(w.gone)
    return pmm, w


_R = Role.KV
#: verb -> a call of it naming the removed authority `g` (every other argument valid)
VERBS: dict[str, Callable[[ProcessMemoryManager, Any, int], Any]] = {
    "register_alias": lambda p, w, g: p.register_alias(g, "uvm2"),
    "reserve": lambda p, w, g: p.reserve(w.h1, g, Tier.DEVICE, 1, _R),
    "record_committed": lambda p, w, g: p.record_committed(w.h1, g, Tier.DEVICE, 1, _R),
    "open_allowance": lambda p, w, g: p.open_allowance(w.h1, g, 1),
    "submit": lambda p, w, g: p.submit(w.h1, g, 1),
    "try_reserve": lambda p, w, g: p.try_reserve(w.h1, g, 1),
    "acquire": lambda p, w, g: p.acquire(w.h1, g, 1),
    "reconfigure": lambda p, w, g: p.reconfigure(g),
    "press": lambda p, w, g: p.press(w.h1, g, 1),
    "open_pressure": lambda p, w, g: p.open_pressure(w.h1, g, 1),
    "plan_tx": lambda p, w, g: p.plan_tx(w.h1, ((g, 1),)),
    "plan_tx_beside_a_live_one": lambda p, w, g: p.plan_tx(w.h1, ((w.a, 1), (g, 1))),
    "prepare_limit": lambda p, w, g: prepare_limit(p, g, 1),  # the checkers' steps (no public verbs)
    "commit_limit": lambda p, w, g: commit_limit(p, g),
    "lower_limit": lambda p, w, g: p.lower_limit(g, 1),
    "lose_device": lambda p, w, g: p.lose_device(g),
    "confirm_termination": lambda p, w, g: p.confirm_termination(g),
    "remove_authority": lambda p, w, g: p.remove_authority(g),
    "snapshot": lambda p, w, g: p.snapshot(g),
}


@pytest.mark.parametrize("on", [False, True], ids=["contracts_off", "contracts_on"])
@pytest.mark.parametrize("which", ["canonical", "alias"])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verb_on_a_removed_authority_is_refused_unchanged(world: Any, verb: str, which: str, on: bool) -> None:
    pmm, w = world
    gone = w.gone if which == "canonical" else w.gone_alias
    before = abstract_manager(pmm)
    with contracts.contracts(on), pytest.raises(GovernorError, match=rf"^authority {gone} was removed") as exc:
        VERBS[verb](pmm, w, gone)  # a KeyError or AttributeError (a crash) fails here too: not a GovernorError
    assert type(exc.value) is InvalidTransition  # the spec's refusal of a removed id (caller misuse)
    assert abstract_manager(pmm) == before


def test_a_removed_id_is_never_reused_and_the_rest_still_works(world: Any) -> None:
    # Near miss: the other authorities keep working beside the removed ones, and the pool may be registered again
    # under a new id (`spec.manager_actions` RemoveAuthority).
    pmm, w = world
    again = pmm.register_authority("gpu1", Tier.DEVICE, 100)
    assert again not in (w.a, w.b, w.gone, w.gone_alias)
    assert pmm.try_reserve(w.h1, again, 1) > 0 and pmm.snapshot(again).used == 1
    assert pmm.submit(w.h1, w.a, 1) > 0
