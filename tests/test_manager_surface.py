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
