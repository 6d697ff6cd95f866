"""Derandomized campaigns search the same in every process, whatever it imported before (`import_every_module`).

Hypothesis now and then draws a constant it found in the source of the local modules a process has imported, so
without the import a campaign's search depended on history: CI's composed campaign met no ConfirmTermination in
240 examples after tests/test_cli.py had run in its pytest worker, and met it when run alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_RUN = """
import hashlib, sys
if sys.argv[1] == "history":  # what an earlier test may have imported: a module refimpl.verify.job does not import
    import refimpl.simulate
if sys.argv[2] == "preload":
    from refimpl.verify.job import import_every_module
    import_every_module()
from invariants import checked
from invariants.campaign import campaign_settings, run_machine
from invariants.manager_machine import ManagerMachine, ManagerSpecAdapter
steps = []
step = checked.CheckedMachine._step
checked.CheckedMachine._step = lambda self, action: (steps.append(repr(action)), step(self, action))[1]
run_machine(ManagerMachine, ManagerSpecAdapter, campaign_settings(60, 30), refine=False)
print(hashlib.sha256("\\n".join(steps).encode()).hexdigest())
"""


def _search(history: str, preload: str) -> str:
    """The digest of every action a 60-example composed campaign on the spec took, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _RUN, history, preload], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_the_search_is_the_same_whatever_the_process_imported_before() -> None:
    assert _search("fresh", "preload") == _search("history", "preload")


def test_without_the_import_the_search_depends_on_history() -> None:
    """The negative control: what `import_every_module` guards against happens without it."""
    if _search("fresh", "none") == _search("history", "none"):
        pytest.skip("this Hypothesis draws no constants from the imported modules' source: nothing to guard")


def test_a_module_that_cannot_be_imported_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module left from an older build or install (one that imports a name since deleted) is named, with what
    to do, where `ortmem verify` imports every module first (the parent does, before any worker starts)."""
    import pkgutil

    from refimpl.verify import job

    real = pkgutil.walk_packages

    def walk(path: list[str], prefix: str = "") -> object:
        yield from real(path, prefix)
        yield pkgutil.ModuleInfo(None, prefix + "left_from_an_old_build", False)  # type: ignore[arg-type]

    monkeypatch.setattr(job.pkgutil, "walk_packages", walk)
    with pytest.raises(ImportError, match=r"cannot import spec\.left_from_an_old_build from .*: No module named "
                                          r".*older build or install\? rebuild or reinstall ortmem"):
        job.import_every_module.__wrapped__()  # past the once-a-process cache
