"""What a checker loses when the refinement mappings of `refimpl/manager/views.py` go wrong.

`abstract()` and `abstract_manager()` reuse each concrete record's last frozen record while the fields code can
change are unchanged (`_auth_rec`, `_alloc_rec`, `_allow_rec`, `_ticket_rec`). A stale record hides the
governor's real state from every check that reads the mapping: after each step of a script that changes every
such field, the mapping equals the one built with every cached record thrown away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from invariants.contracts import contracts
from refimpl.manager import ProcessMemoryManager
from spec.types import Role, Tier


def _uncached(pmm: ProcessMemoryManager) -> tuple[Any, Any]:
    """Both mappings built afresh: every record's cached frozen record dropped first."""
    with pmm.ledger_lock:
        for table in (pmm._auths, pmm._allocs, pmm._allows, pmm._tickets):
            for r in table.values():
                r.rec = None
        pmm._holder_recs.clear()
    return pmm.abstract(), pmm.abstract_manager()


def _script(pmm: ProcessMemoryManager, ids: dict[str, int]) -> list[tuple[str, Callable[[], Any]]]:
    h, g, a, b = ids["h"], ids["g"], ids["a"], ids["b"]

    def keep(name: str, f: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            ids[name] = f()
            return ids[name]
        return run

    return [
        ("reserve", keep("r", lambda: pmm.reserve(h, a, Tier.DEVICE, 60, Role.KV))),  # used, a new row
        ("commit less", lambda: pmm.commit(h, ids["r"], 50)),  # charge, nbytes, state; used refunded
        ("submit pending", keep("t", lambda: pmm.submit(g, a, 80))),  # a pending ticket
        ("submit again", lambda: pmm.submit(g, a, 90)),  # a round: the first ticket ages
        ("release", lambda: pmm.release(h, ids["r"])),  # the first ticket granted: state, allocation
        ("open allowance", keep("w", lambda: pmm.open_allowance(h, b, 40))),
        ("reserve growth", lambda: pmm.reserve_growth(h, ids["w"], 35)),  # the allowance's reserved bytes
        ("map", lambda: pmm.map_allowance(h, ids["w"], 30)),  # its mapped bytes
        ("unmap", lambda: pmm.unmap_allowance(h, ids["w"], 10)),
        ("lower limit", lambda: pmm.lower_limit(b, 90)),  # the authority's limit
        ("lose device", lambda: pmm.lose_device(a)),  # context; tickets and rows on it
    ]


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_the_mappings_never_show_a_stale_record(on: bool) -> None:
    with contracts(on=on):
        pmm = ProcessMemoryManager()
        ids = {"h": pmm.register_holder("kv"), "g": pmm.register_holder("weights"),
               "a": pmm.register_authority("gpu0", Tier.DEVICE, 100),
               "b": pmm.register_authority("host", Tier.HOST, 100)}
        for name, step in _script(pmm, ids):
            step()
            cached = (pmm.abstract(), pmm.abstract_manager())
            assert cached == _uncached(pmm), f"after {name}: the mapping shows a record as it was"
