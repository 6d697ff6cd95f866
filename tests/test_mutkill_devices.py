"""`remove_authority` / `unregister_holder` (C3, I4a): whole refusal messages, the records each lists, the retry
places of other holders kept, and the ledgers each traces (its scope). Written from the mutation survivors in
refimpl/manager/devices.py (`_pins`, `_holder_refs`, `_ms_remove`, `_ms_holder`, `_unregister_holder`)."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import GovernorError, HolderInUse
from spec.types import Tier
from trace_harness import traced
from refimpl_manager_harness import lease


def _used(buf: io.StringIO) -> dict[str, Any]:
    """The `used` figure of the last traced event: the ledgers of the action's scope."""
    return json.loads(buf.getvalue().splitlines()[-1])["payload"]["used"]


def _holder_world(pmm: ProcessMemoryManager) -> tuple[int, int, list[int]]:
    """Holder `h` named by one record of each kind, each on a ledger of its own; `other` leases on a sixth."""
    auths = [pmm.register_authority(f"gpu{i}", Tier.DEVICE, 4) for i in range(6)]
    a, b, c, d, e, f = auths
    h, other = pmm.register_holder("kv"), pmm.register_holder("weights")
    lease(pmm, h, a, 1)
    lease(pmm, other, b, 4)
    pmm.open_allowance(h, b, 2)
    lease(pmm, other, c, 1)
    pmm.submit(h, c, 4)  # 3 B free: pending
    pmm.open_pressure(h, d, 1)
    pmm.plan_tx(h, ((e, 1),))
    lease(pmm, other, f, 1)
    return h, other, auths


def test_holder_in_use_names_its_first_four_records_in_kind_order_and_changes_nothing() -> None:
    pmm, buf = traced()
    h, _, auths = _holder_world(pmm)
    before = abstract_manager(pmm)
    msg = f"holder {h} is named by allocation 1, allowance 1, ticket 1, pressure 1"
    with pytest.raises(HolderInUse, match=f"^{re.escape(msg)}$"):
        pmm.unregister_holder(h)
    assert abstract_manager(pmm) == before
    # its scope: every ledger it has a record on (the allocation's, allowance's, ticket's, pressure's and
    # transaction's), and not the other holder's own ledger
    assert sorted(map(int, _used(buf))) == auths[:5]


def test_a_refused_holder_of_the_wrong_type_has_no_scope() -> None:
    pmm, buf = traced()
    _holder_world(pmm)
    with pytest.raises(GovernorError):
        pmm.unregister_holder(True)  # == holder 1, registered and named by records: still not an int
    assert _used(buf) == {}


def test_unregistering_one_holder_keeps_the_records_and_retry_places_of_the_others() -> None:
    pmm = ProcessMemoryManager()
    a, b = pmm.register_authority("gpu0", Tier.DEVICE, 8), pmm.register_authority("gpu1", Tier.DEVICE, 8)
    pmm.register_holder("spare")
    h, other = pmm.register_holder("kv"), pmm.register_holder("weights")
    mine, theirs = pmm.plan_tx(h, ((b, 1),)), pmm.plan_tx(other, ((b, 1),))
    pmm.abort_tx(mine)  # each leaves its retry intent
    pmm.abort_tx(theirs)
    assert set(abstract_manager(pmm).intents) == {mine, theirs}
    lease(pmm, other, a, 4)
    pmm.open_allowance(other, a, 2)
    pmm.open_pressure(other, a, 1)
    pmm.plan_tx(other, ((a, 1),))
    pmm.unregister_holder(h)  # the other holder's allowance, pressure and transaction do not name it
    after = abstract_manager(pmm)
    assert set(after.intents) == {theirs}
    assert h not in after.ledger.holders and other in after.ledger.holders
    assert h not in pmm._holder_recs  # its frozen record goes with it


def test_a_holder_that_never_acted_is_unregistered() -> None:
    pmm = ProcessMemoryManager()
    h = pmm.register_holder("kv")
    with contracts.contracts(False):  # no view built: the holder never got a frozen record
        pmm.unregister_holder(h)
    assert h not in abstract_manager(pmm).ledger.holders


def test_removing_an_alias_traces_its_canonical_ledger() -> None:
    pmm, buf = traced()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 8)
    lease(pmm, pmm.register_holder("kv"), a, 3)
    alias = pmm.register_alias(a, "uvm")
    pmm.remove_authority(alias)
    assert _used(buf) == {str(a): 3}


def test_a_refused_removal_traces_its_ledger_and_one_of_the_wrong_type_none() -> None:
    pmm, buf = traced()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 8)
    lease(pmm, pmm.register_holder("kv"), a, 3)
    with pytest.raises(GovernorError, match=f"^authority {a} is pinned by allocation 1$"):
        pmm.remove_authority(a)
    assert _used(buf) == {str(a): 3}
    with pytest.raises(GovernorError):
        pmm.remove_authority(True)  # == authority 1: still not an int
    assert _used(buf) == {}
