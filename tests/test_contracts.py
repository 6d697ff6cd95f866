# The contract switch (attrs `_config` style) and the contract itself.
#
# Switch: on by default under __debug__, ORTMEM_CONTRACTS=0/1 overrides, off
# under `python -O`; enable/disable; nestable context manager that restores
# even when an exception escapes. InvariantViolation stays outside the
# GovernorError hierarchy, so `except GovernorError` cannot swallow it.
#
# Contract: negative controls (STYLE 8). For every registered guard a short
# hand-written scenario exploits the guard being off; with contracts on,
# refimpl must raise InvariantViolation naming one of the guard's catalog IDs
# at the offending operation. With every guard on, the same scenario must end
# in the typed GovernorError instead, and never in an InvariantViolation.

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from invariants.ledger import check_all
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger
from spec.errors import (
    AllowanceExceeded,
    CapacityDenied,
    ForeignHolder,
    GovernorError,
    IdentityMismatch,
    InvalidBytes,
    InvalidTransition,
    TierMismatch,
)
from spec.guards import ALL_ON, GUARDS as _ALL_GUARDS, GuardSet

GUARDS = [g for g in _ALL_GUARDS if g.model == "ledger"]  # other checkers test their own guards
from spec.types import Role, Tier
from refimpl_manager_harness import lease

ROOT = Path(__file__).resolve().parents[1]
DEV, HOST, KV = Tier.DEVICE, Tier.HOST, Role.KV

# --- the switch ------------------------------------------------------------------

# Prints "<switch on> <a guard-off violation was caught>": the second field shows
# the flag actually reaches the governor, not just the module attribute.
_PROBE = """
from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from spec.guards import GuardSet
from spec.types import Role, Tier
p = ProcessMemoryManager(guards=GuardSet.without("tier_match"))
a, h = p.register_authority("gpu0", Tier.DEVICE, 100), p.register_holder("h")
try:
    p.reserve(h, a, Tier.HOST, 10, Role.KV)
    caught = False
except InvariantViolation:
    caught = True
print(contracts.enabled(), caught)
"""


@pytest.mark.parametrize("flags, env, expected", [
    pytest.param([], None, True, id="debug-default-on"),
    pytest.param([], "0", False, id="debug-env0-off"),
    pytest.param([], "1", True, id="debug-env1-on"),
    pytest.param([], "yes", True, id="debug-env-junk-ignored"),
    pytest.param(["-O"], None, False, id="O-default-off"),
    pytest.param(["-O"], "1", True, id="O-env1-on"),
    pytest.param(["-O"], "0", False, id="O-env0-off"),
    pytest.param(["-O"], "yes", False, id="O-env-junk-ignored"),
])
def test_switch_start_value_in_fresh_interpreter(flags, env, expected):
    environ = {k: v for k, v in os.environ.items() if k not in ("ORTMEM_CONTRACTS", "PYTHONOPTIMIZE")}
    if env is not None:
        environ["ORTMEM_CONTRACTS"] = env
    out = subprocess.run([sys.executable, *flags, "-c", _PROBE], cwd=ROOT, env=environ,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(expected), str(expected)]


def test_switch_default_follows_debug(monkeypatch):
    monkeypatch.delenv("ORTMEM_CONTRACTS", raising=False)
    assert contracts.default() is __debug__
    contracts.disable()
    contracts.reset()
    assert contracts.enabled() is __debug__


@pytest.mark.parametrize("env, expected", [("0", False), ("1", True), (" 0 ", False)])
def test_switch_env_override(monkeypatch, env, expected):
    monkeypatch.setenv("ORTMEM_CONTRACTS", env)
    assert contracts.default() is expected
    contracts.reset()
    assert contracts.enabled() is expected


def test_enable_disable():
    contracts.disable()
    assert contracts.enabled() is False
    contracts.enable()
    assert contracts.enabled() is True
    contracts.disable()
    assert contracts.enabled() is False


@pytest.mark.parametrize("start", [True, False])
def test_nested_contexts_restore(start):
    contracts.enable() if start else contracts.disable()
    with contracts.contracts(not start):
        assert contracts.enabled() is (not start)
        with contracts.contracts(start):
            assert contracts.enabled() is start
            with contracts.contracts(start):
                assert contracts.enabled() is start
            assert contracts.enabled() is start
        assert contracts.enabled() is (not start)
    assert contracts.enabled() is start


@pytest.mark.parametrize("start", [True, False])
def test_nested_contexts_restore_when_exception_escapes(start):
    contracts.enable() if start else contracts.disable()
    with pytest.raises(KeyError, match="escaped"):
        with contracts.contracts(not start):
            with contracts.contracts(start):
                with contracts.contracts(not start):
                    raise KeyError("escaped")
    assert contracts.enabled() is start
    with contracts.contracts(not start):
        with pytest.raises(KeyError, match="inner"):
            with contracts.contracts(start):
                raise KeyError("inner")
        assert contracts.enabled() is (not start)  # the inner exit restored the outer value
    assert contracts.enabled() is start


def test_context_default_argument_turns_on():
    contracts.disable()
    with contracts.contracts():
        assert contracts.enabled() is True
    assert contracts.enabled() is False


def test_invariant_violation_is_not_a_governor_error():
    assert not issubclass(InvariantViolation, GovernorError)
    assert issubclass(InvariantViolation, AssertionError)
    err = InvariantViolation("I2", "granted past the limit")
    assert (err.id, str(err)) == ("I2", "I2: granted past the limit")


def test_except_governor_error_cannot_swallow_invariant_violation():
    p = ProcessMemoryManager(guards=GuardSet.without("limit_check"))
    a, h = p.register_authority("gpu0", DEV, 100), p.register_holder("alice")
    with contracts.contracts(True), pytest.raises(InvariantViolation, match=r"\bI2\b"):
        try:
            p.reserve(h, a, DEV, 101, KV)
        except GovernorError:  # a caller's broad handler must not hide a governor bug
            pass


# --- negative controls: one scenario per guard --------------------------------------
# A scenario is a generator over a fresh ProcessMemoryManager; it yields a label
# right before each operation the test pins down, so the test knows which
# operation raised.


def _world(p: ProcessMemoryManager) -> tuple[int, int, int]:
    return p.register_authority("gpu0", DEV, 100), p.register_holder("alice"), p.register_holder("bob")


def single_authority_per_pool(p):  # C1: a second grantable ledger over gpu0
    _world(p)
    yield "register gpu0 again with another identity"
    p.register_authority("gpu0", HOST, 100)


def identity_check(p):  # C1: a mismatched identity bound to gpu0
    _world(p)
    yield "register gpu0 again with another identity"
    p.register_authority("gpu0", DEV, 50)


def alias_resolution(p):  # I1: the alias keeps its own ledger
    a, h, _ = _world(p)
    uva = p.register_alias(a, "uva")
    p.reserve(h, a, DEV, 60, KV)
    yield "reserve 60 B more through the alias"
    p.reserve(h, uva, DEV, 60, KV)


def tier_match(p):  # C2
    a, h, _ = _world(p)
    yield "reserve a host lease on a device pool"
    p.reserve(h, a, HOST, 10, KV)


def commit_within_reservation(p):  # C2
    a, h, _ = _world(p)
    x = p.reserve(h, a, DEV, 10, KV)
    yield "commit 20 B of a 10 B reservation"
    p.commit(h, x, 20)


def limit_check(p):  # I2
    a, h, _ = _world(p)
    p.reserve(h, a, DEV, 60, KV)
    yield "reserve past the limit"
    p.reserve(h, a, DEV, 60, KV)


def fresh_ids(p):  # I4a
    a, h, g = _world(p)
    x = p.reserve(h, a, DEV, 10, KV)
    p.cancel(h, x)
    yield "bob reserves (takes alice's retired id when the guard is off)"
    p.reserve(g, a, DEV, 10, KV)
    yield "alice cancels her retired id again"
    p.cancel(h, x)


def lifecycle_table(p):  # I4a
    a, h, _ = _world(p)
    x = p.reserve(h, a, DEV, 10, KV)
    yield "quarantine a provisional reservation"
    p.quarantine(h, x, 0)


def allowance_bounds(p):  # I4b
    a, h, _ = _world(p)
    w = p.open_allowance(h, a, 10)
    yield "grow an allowance past its limit"
    p.reserve_growth(h, w, 20)


def allowance_capacity(p):  # I4b
    a, h, _ = _world(p)
    p.open_allowance(h, a, 60)
    yield "promise more than the pool holds"
    p.open_allowance(h, a, 60)


def owner_only(p):  # I6
    a, h, g = _world(p)
    x = lease(p, h, a, 10)
    yield "bob releases alice's lease"
    p.release(g, x)


@attrs.frozen
class Control:
    scenario: Callable[[ProcessMemoryManager], Iterator[str]]
    on_error: type[GovernorError]
    on_match: str
    on_at: int = 0  # index of the label at which the all-guards-on run must refuse
    off_at: int = 0  # index of the label at which the guard-off run must violate


CONTROLS: dict[str, Control] = {
    "single_authority_per_pool": Control(single_authority_per_pool, IdentityMismatch, "gpu0"),
    "identity_check": Control(identity_check, IdentityMismatch, "gpu0"),
    "alias_resolution": Control(alias_resolution, CapacityDenied, "available"),
    "tier_match": Control(tier_match, TierMismatch, r"\bhost\b"),
    "commit_within_reservation": Control(commit_within_reservation, InvalidBytes, "reserved"),
    "limit_check": Control(limit_check, CapacityDenied, "available"),
    "fresh_ids": Control(fresh_ids, InvalidTransition, "already released", on_at=1),
    "lifecycle_table": Control(lifecycle_table, InvalidTransition, "quarantine"),
    "allowance_bounds": Control(allowance_bounds, AllowanceExceeded, "free"),
    "allowance_capacity": Control(allowance_capacity, AllowanceExceeded, "promised"),
    "owner_only": Control(owner_only, ForeignHolder, r"holder \d+, not \d+"),
}


#: The ProcessMemoryManager's guards; other checkers' guards have their own contract tests.
LEDGER_GUARDS = [g for g in GUARDS if g.model == "ledger"]


def test_every_guard_has_a_negative_control():
    assert set(CONTROLS) == {g.name for g in LEDGER_GUARDS}


@pytest.mark.parametrize("guard", LEDGER_GUARDS, ids=lambda g: g.name)
def test_invalid_guard_off_raises_invariant_violation(guard):
    control = CONTROLS[guard.name]
    pmm = ProcessMemoryManager(guards=GuardSet.without(guard.name))
    progress: list[str] = []
    with contracts.contracts(True):
        with pytest.raises(InvariantViolation, match="|".join(rf"^{i}:" for i in guard.ids)) as exc:
            for label in control.scenario(pmm):
                progress.append(label)
    assert exc.value.id in guard.ids
    assert len(progress) == control.off_at + 1, f"violation raised after {progress!r}"


@pytest.mark.parametrize("guard", LEDGER_GUARDS, ids=lambda g: g.name)
def test_guard_on_refuses_with_typed_error(guard):
    control = CONTROLS[guard.name]
    pmm = ProcessMemoryManager(guards=ALL_ON)
    progress: list[str] = []
    with contracts.contracts(True):
        before = None
        with pytest.raises(control.on_error, match=control.on_match) as exc:
            for label in control.scenario(pmm):
                progress.append(label)
                before = abstract_ledger(pmm)
    assert type(exc.value) is control.on_error
    assert len(progress) == control.on_at + 1, f"refused after {progress!r}"
    assert abstract_ledger(pmm) == before  # the refusal changed nothing
    check_all(abstract_ledger(pmm))


def test_invalid_guard_off_with_contracts_off_goes_unnoticed_until_checked():
    """The switch gates the contract: off, the bad step is accepted; the full check still sees it."""
    pmm = ProcessMemoryManager(guards=GuardSet.without("tier_match"))
    with contracts.contracts(False):
        labels = list(tier_match(pmm))
    assert labels == ["reserve a host lease on a device pool"]
    with pytest.raises(InvariantViolation, match=r"^C2:"):
        check_all(abstract_ledger(pmm))


def test_invalid_duplicate_pool_same_identity_caught_by_contract():
    pmm = ProcessMemoryManager(guards=GuardSet.without("single_authority_per_pool"))
    pmm.register_authority("gpu0", DEV, 100)
    with contracts.contracts(True), pytest.raises(InvariantViolation, match=r"^C1:"):
        pmm.register_authority("gpu0", DEV, 100)


def test_duplicate_pool_same_identity_is_a_c1_violation():
    """The state the test above catches incrementally is a real C1 violation (the full check finds it)."""
    pmm = ProcessMemoryManager(guards=GuardSet.without("single_authority_per_pool"))
    with contracts.contracts(False):
        first, second = pmm.register_authority("gpu0", DEV, 100), pmm.register_authority("gpu0", DEV, 100)
    assert first != second
    with pytest.raises(InvariantViolation, match=r"^C1:"):
        check_all(abstract_ledger(pmm))


# --- refusals change nothing (lease rule G4) --------------------------------------


@pytest.mark.parametrize("on", [True, False], ids=["contracts-on", "contracts-off"])
def test_refused_operation_leaves_state_unchanged(on):
    pmm = ProcessMemoryManager()
    with contracts.contracts(on):
        a, h, g = _world(pmm)
        x = pmm.reserve(h, a, DEV, 60, KV)
        pmm.commit(h, x, 50)
        before = abstract_ledger(pmm)
        with pytest.raises(CapacityDenied, match="available"):
            pmm.reserve(h, a, DEV, 51, KV)
        assert abstract_ledger(pmm) == before
        with pytest.raises(ForeignHolder, match=r"holder \d+, not \d+"):
            pmm.release(g, x)
        assert abstract_ledger(pmm) == before


class _LeakyGovernor(ProcessMemoryManager):
    """Deliberately broken: a refused commit still moves the ledger by one byte."""

    def _commit(self, holder: int, allocation: int, nbytes: int) -> None:
        self._allocs[allocation].auth.used += 1
        raise CapacityDenied("leaky commit refused")


def test_invalid_refusal_that_changes_state_violates_g4():
    pmm = _LeakyGovernor()
    a, h, _ = _world(pmm)
    x = pmm.reserve(h, a, DEV, 10, KV)
    with contracts.contracts(True), pytest.raises(InvariantViolation, match=r"^G4:.*refused"):
        pmm.commit(h, x, 10)


def test_leaky_refusal_unnoticed_with_contracts_off():
    """Negative control for the G4 test above: the leak is real, only the contract catches it."""
    pmm = _LeakyGovernor()
    a, h, _ = _world(pmm)
    x = pmm.reserve(h, a, DEV, 10, KV)
    with contracts.contracts(False), pytest.raises(CapacityDenied, match="leaky"):
        pmm.commit(h, x, 10)
    assert pmm.snapshot(a).used == 11


# --- the checked path names what it checks (pinned by the mutation run of refimpl/manager/ledger.py) ----------


def test_owner_only_off_quarantine_is_caught_naming_the_action() -> None:
    # The contract sees the touched lease (scope key) and reports the action as called (its repr, whole).
    from spec import ledger_actions as A

    pmm = ProcessMemoryManager(guards=GuardSet.without("owner_only"))
    a, h, g = _world(pmm)
    x = lease(pmm, h, a, 10)
    with contracts.contracts(True), pytest.raises(InvariantViolation) as exc:
        pmm.quarantine(g, x, 4)  # bob gives back 4 B of alice's lease
    assert str(exc.value) == f"I6: {A.Quarantine(g, x, 4)!r} reduced holder {h}'s allocation {x} by 4 B"


def test_fresh_ids_off_refines_the_spec_step_by_step() -> None:
    # The negative-control path (ids reused lowest-first; the contracts would stop it, so they are off) is
    # still a refinement of the spec under the same guard set: results and the whole abstract state,
    # counters included, after every step.
    import attrs

    from refimpl.verify.manager_adapter import method_name
    from spec import ledger_actions as A
    from spec.ledger import step as spec_step
    from spec.ledger_state import EMPTY

    guards = GuardSet.without("fresh_ids")
    pmm, state = ProcessMemoryManager(guards=guards), EMPTY
    actions = [A.RegisterAuthority("gpu0", DEV, 100), A.RegisterHolder("alice"),
               A.Reserve(1, 1, DEV, 10, KV), A.Reserve(1, 1, DEV, 10, KV), A.Cancel(1, 1),
               A.Reserve(1, 1, DEV, 10, KV), A.Reserve(1, 1, DEV, 10, KV), A.Reserve(1, 1, DEV, 10, KV)]
    results = []
    with contracts.contracts(False):
        for act in actions:
            state, expected = spec_step(state, act, guards)
            got = getattr(pmm, method_name(act))(**attrs.asdict(act, recurse=False))
            assert got == expected, act
            assert abstract_ledger(pmm) == state, act
            results.append(got)
    assert results[2:] == [1, 2, None, 1, 3, 4]  # id 1 reused, then the counter moves on by one
