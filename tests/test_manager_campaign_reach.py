"""Issue #21: the composed campaign issues every action kind of `spec.manager` and reaches every cross-part
situation it counts (`invariants.manager_events.SITUATIONS`), on the spec and on refimpl with contracts on."""

from __future__ import annotations

import typing

import pytest

from invariants import contracts
from invariants.campaign import campaign_settings, run_machine
from invariants.manager_events import SITUATIONS
from invariants.manager_machine import ManagerMachine, ManagerSpecAdapter
from spec import manager as MG

KINDS = sorted(c.__name__ for c in MG.ACTIONS)


def _refimpl() -> typing.Any:
    from refimpl.verify.manager_adapter import ManagerAdapter
    return ManagerAdapter()


@pytest.mark.parametrize("layer", ["spec", "refimpl"])
def test_the_composed_campaign_reaches_every_action_kind_and_situation(layer: str) -> None:
    assert len(KINDS) == 48  # 17 ledger actions, 29 of the parts, the grant and the corrupt ledger (I5)
    with contracts.contracts(True):
        stats = run_machine(ManagerMachine, ManagerSpecAdapter if layer == "spec" else _refimpl,
                            campaign_settings(240, 50), refine=layer == "refimpl")
    missing = [k for k in KINDS if not stats.accepted_by_action.get(k)]
    assert not missing, f"never accepted: {missing}; {stats.accepted_by_action}"
    unmet = [s for s in SITUATIONS if not stats.events.get(s)]
    assert not unmet, f"never reached: {unmet}; {stats.events}"


def _skip(self: typing.Any, pid: int) -> None:
    """A delivery that never calls the holder: nobody learns of the pressure (C5)."""


def _under_lock(self: typing.Any, pid: int) -> None:
    """The callback called with the ledger lock held (I7)."""
    with self._lock:
        r = self._pressures[pid]
        self._callbacks[r.holder](self, pid, r.target)


def _wrong_target(self: typing.Any, pid: int) -> None:
    r = self._pressures[pid]
    self._callbacks[r.holder](self, pid, r.target + 1)


@pytest.mark.parametrize(("bug", "harm"), [(_skip, "C5: Press"), (_under_lock, "I7: holder .* ledger lock"),
                                           (_wrong_target, "C5: Press")], ids=["skip", "under_lock", "wrong_target"])
def test_the_composed_campaign_catches_a_broken_pressure_delivery(bug: typing.Any, harm: str,
                                                                  monkeypatch: typing.Any) -> None:
    from invariants._violation import InvariantViolation
    from refimpl.manager import ProcessMemoryManager

    monkeypatch.setattr(ProcessMemoryManager, "_deliver", bug)
    with contracts.contracts(False), pytest.raises(InvariantViolation, match=harm):
        run_machine(ManagerMachine, _refimpl, campaign_settings(50, 30, shrink=False))
