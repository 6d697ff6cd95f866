"""`ProcessMemoryManager`'s public surface is its verbs, documented in one place (issue #21 item 2).

docs/guide.md, "The public verbs", lists every public name of the manager with the part (module) that
defines it. A public name the table does not list (a checker's or the recorder's hook coming back as a
method, a property, or any attribute), a listed verb the manager lacks, and a verb defined in another part
than its row says all fail here. The hooks live in `refimpl/verify/manager_hooks.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from refimpl.manager import ProcessMemoryManager
from spec.types import Role, Tier

ROOT = Path(__file__).resolve().parent.parent
HEADING = "### The public verbs"


def documented_verbs(text: str) -> dict[str, str]:
    """Verb -> module (`refimpl.manager.x`) from the table under HEADING (a name listed twice fails)."""
    section = text.split(HEADING + "\n", 1)[1].split("\n#", 1)[0]
    verbs: dict[str, str] = {}
    for row in re.findall(r"^\| `(refimpl/manager/\w+\.py)` \| (.+) \|$", section, re.M):
        module = row[0].removesuffix(".py").replace("/", ".")
        for name in re.findall(r"`(\w+)`", row[1]):
            assert name not in verbs, f"{name} is listed twice"
            verbs[name] = module
    return verbs


def surface_drift(cls: type, documented: dict[str, str]) -> dict[str, list[str]]:
    """What differs between `cls`'s public names and the table: undocumented, missing, in another part."""
    public = {n for n in dir(cls) if not n.startswith("_")}
    home = {n: next(c.__module__ for c in cls.__mro__ if n in vars(c)) for n in public}
    return {"undocumented": sorted(public - set(documented)),
            "missing": sorted(set(documented) - public),
            "elsewhere": sorted(n for n in public & set(documented) if home[n] != documented[n])}


def _table() -> dict[str, str]:
    return documented_verbs((ROOT / "docs" / "guide.md").read_text(encoding="utf-8"))


def test_the_public_names_are_the_documented_verbs() -> None:
    drift = surface_drift(ProcessMemoryManager, _table())
    assert drift == {"undocumented": [], "missing": [], "elsewhere": []}, drift


def test_the_surface_check_sees_a_hook_come_back_a_verb_go_and_a_verb_move() -> None:
    # Negative controls for the check above, on a manager changed in each way the check must see.
    table = _table()

    class Hooked(ProcessMemoryManager):
        __slots__ = ()

        def abstract(self) -> Any:  # a checker's hook as a method again
            return None

        @property
        def ledger_lock(self) -> Any:  # and as a property
            return self._lock

    Hooked.__module__ = "refimpl.manager.views"
    assert surface_drift(Hooked, table)["undocumented"] == ["abstract", "ledger_lock"]
    assert surface_drift(ProcessMemoryManager, {**table, "grow": "refimpl.manager.pressure"})["missing"] == ["grow"]
    assert surface_drift(ProcessMemoryManager, {**table, "submit": "refimpl.manager.ledger"})["elsewhere"] == ["submit"]
    twice = "### The public verbs\n\n| `refimpl/manager/ledger.py` | `reserve`, `reserve` |\n"
    with pytest.raises(AssertionError, match="reserve is listed twice"):
        documented_verbs(twice)


def test_a_holder_reads_exactly_what_it_holds() -> None:
    """`leases` and `allowances` are a holder's own records, equal to the refinement mapping's (I6: its own);
    an unknown holder is refused and nothing changes."""
    from refimpl.verify.manager_hooks import abstract_ledger
    from spec.errors import UnknownHolder
    from spec.types import AllocState

    pmm = ProcessMemoryManager()
    a, gpu = pmm.register_authority("spare", Tier.HOST, 64), pmm.register_authority("gpu", Tier.DEVICE, 64)
    h, other = pmm.register_holder("reader"), pmm.register_holder("other")
    lease = pmm.try_reserve(h, a, 8)
    pmm.reserve(other, a, Tier.HOST, 4, Role.KV)
    pmm.quarantine(other, pmm.try_reserve(other, a, 6), 2)
    pmm.try_reserve(other, gpu, 5)
    pmm.release(other, pmm.try_reserve(other, a, 1))
    pmm.lose_device(gpu)
    pmm.open_allowance(h, a, 16)
    pmm.open_allowance(other, a, 8)
    st = abstract_ledger(pmm)
    assert {r.state for r in st.allocations.values()} == {AllocState.PROVISIONAL, AllocState.LIVE,
                                                          AllocState.QUARANTINED, AllocState.DEVICE_LOST}
    seen = 0
    for holder in st.holders:
        leases = pmm.leases(holder)
        assert leases == tuple(r for _, r in sorted(st.allocations.items()) if r.holder == holder)
        assert pmm.allowances(holder) == tuple(w for _, w in sorted(st.allowances.items()) if w.holder == holder)
        seen += len(leases)
    assert seen == len(st.allocations) == 4
    assert [r.id for r in pmm.leases(h)] == [lease] and pmm.leases(h)[0].charge == 8
    assert [w.limit for w in pmm.allowances(h)] == [16]
    assert (pmm.snapshot(a).tier, pmm.snapshot(gpu).tier) == (Tier.HOST, Tier.DEVICE)
    for bad in (999, "1", None):
        for read in (pmm.leases, pmm.allowances):
            with pytest.raises(UnknownHolder):
                read(bad)
    assert abstract_ledger(pmm) == st
