"""invariants/contracts.py pinned (its mutation run, benchmarks/mutation.py): the contract switch's start value and
start level under each environment, on/off/level and what each change tells the watchers, the context manager's
nesting and restoring, the bad level's whole message, and what a governor checks under each setting (nothing off,
the local contract at "local", the frozen-view contract at "full")."""

from __future__ import annotations

import gc

import pytest

from invariants import contracts
from invariants._violation import InvariantViolation
from refimpl.manager import ProcessMemoryManager
from refimpl.manager.views import Views
from spec.guards import GuardSet
from spec.types import Role, Tier


class Watcher:
    def __init__(self) -> None:
        self.forgot = 0

    def forget(self) -> None:
        self.forgot += 1


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("ORTMEM_CONTRACTS", raising=False)
    monkeypatch.delenv("ORTMEM_CONTRACTS_LEVEL", raising=False)
    return monkeypatch


@pytest.mark.parametrize("env, expected", [(None, __debug__), ("0", False), ("1", True), (" 0 ", False),
                                           (" 1\n", True), ("2", __debug__), ("", __debug__), ("10", __debug__)])
def test_default_reads_the_environment(clean_env, env, expected):
    if env is not None:
        clean_env.setenv("ORTMEM_CONTRACTS", env)
    assert contracts.default() is expected
    contracts.disable()
    contracts.reset()
    assert contracts.enabled() is expected


@pytest.mark.parametrize("env, expected", [(None, "local"), ("full", "full"), (" full ", "full"), ("local", "local"),
                                           ("FULL", "local"), ("", "local"), ("fu", "local")])
def test_default_level_reads_the_environment(clean_env, env, expected):
    if env is not None:
        clean_env.setenv("ORTMEM_CONTRACTS_LEVEL", env)
    assert contracts.default_level() == expected
    contracts.set_level("full" if expected == "local" else "local")
    contracts.reset()
    assert contracts.level() == expected


@pytest.mark.parametrize("on_env, level_env", [("0", "full"), ("1", "local"), ("1", "full"), ("0", None)])
def test_a_fresh_switch_starts_from_the_environment(clean_env, on_env, level_env):
    clean_env.setenv("ORTMEM_CONTRACTS", on_env)
    if level_env is not None:
        clean_env.setenv("ORTMEM_CONTRACTS_LEVEL", level_env)
    s = contracts._Switch()
    assert (s.on, s.full) == (on_env == "1", level_env == "full")
    assert type(s.on) is bool and type(s.full) is bool
    assert len(s.watchers) == 0
    w = Watcher()
    s.watch(w)
    assert list(s.watchers) == [w]
    del w  # held weakly
    gc.collect()
    assert len(s.watchers) == 0


def test_set_tells_every_watcher_once_per_change_and_never_without_one():
    s = contracts._Switch()
    s.set(False, False)
    a, b = Watcher(), Watcher()
    s.watch(a)
    s.watch(b)
    s.set(False, False)
    assert (a.forgot, b.forgot) == (0, 0)
    s.set(True, False)
    assert (s.on, s.full, a.forgot, b.forgot) == (True, False, 1, 1)
    s.set(True, True)
    assert (s.on, s.full, a.forgot, b.forgot) == (True, True, 2, 2)
    s.set(True, True)
    assert (a.forgot, b.forgot) == (2, 2)
    s.set(False, False)
    assert (s.on, s.full, a.forgot, b.forgot) == (False, False, 3, 3)


def test_enable_disable_keep_the_level_and_tell_the_watchers():
    w = Watcher()
    contracts.SWITCH.watch(w)
    contracts.disable()
    contracts.set_level("full")
    n = w.forgot
    contracts.enable()
    assert (contracts.enabled(), contracts.level(), w.forgot) == (True, "full", n + 1)
    contracts.disable()
    assert (contracts.enabled(), contracts.level(), w.forgot) == (False, "full", n + 2)
    contracts.set_level("local")
    assert (contracts.enabled(), contracts.level(), w.forgot) == (False, "local", n + 3)
    contracts.enable()
    contracts.set_level("full")
    assert (contracts.SWITCH.on, contracts.SWITCH.full, contracts.level()) == (True, True, "full")
    contracts.set_level("local")
    assert (contracts.SWITCH.on, contracts.SWITCH.full, contracts.level()) == (True, False, "local")


@pytest.mark.parametrize("bad", ["FULL", "", "none", None, ("local",)])
def test_a_bad_level_is_refused_whole_and_changes_nothing(bad):
    contracts.enable()
    contracts.set_level("full")
    with pytest.raises(ValueError) as e:
        contracts.set_level(bad)
    assert str(e.value) == f"contracts level must be one of ('local', 'full'), got {bad!r}"
    assert (contracts.enabled(), contracts.level()) == (True, "full")
    if bad is not None:  # the context's None means "leave the level"
        with pytest.raises(ValueError), contracts.contracts(False, level=bad):
            pass
    assert (contracts.enabled(), contracts.level()) == (True, "full")


def test_reset_restores_on_and_level(clean_env):
    clean_env.setenv("ORTMEM_CONTRACTS", "1")
    clean_env.setenv("ORTMEM_CONTRACTS_LEVEL", "full")
    contracts.disable()
    contracts.set_level("local")
    contracts.reset()
    assert (contracts.SWITCH.on, contracts.SWITCH.full) == (True, True)
    clean_env.setenv("ORTMEM_CONTRACTS", "0")
    clean_env.delenv("ORTMEM_CONTRACTS_LEVEL")
    contracts.reset()
    assert (contracts.SWITCH.on, contracts.SWITCH.full) == (False, False)


def test_the_context_sets_on_and_level_and_restores_both():
    assert contracts.LEVELS == ("local", "full")
    contracts.disable()
    contracts.set_level("local")
    with contracts.contracts():
        assert (contracts.enabled(), contracts.level()) == (True, "local")
        with contracts.contracts(False, level="full"):
            assert (contracts.enabled(), contracts.level()) == (False, "full")
            with contracts.contracts(True):
                assert (contracts.enabled(), contracts.level()) == (True, "full")
            assert (contracts.enabled(), contracts.level()) == (False, "full")
        assert (contracts.enabled(), contracts.level()) == (True, "local")
    assert (contracts.enabled(), contracts.level()) == (False, "local")
    with pytest.raises(KeyError), contracts.contracts(True, level="full"):
        raise KeyError
    assert (contracts.enabled(), contracts.level()) == (False, "local")


def _reserve_off_tier(monkeypatch) -> tuple[bool, int]:
    """A guard-off reserve (tier_match off): whether a violation was raised, and how often the frozen-view
    contract (`Views._checked`) ran."""
    calls = []
    real = Views._checked
    monkeypatch.setattr(Views, "_checked", lambda self, *args, **kw: calls.append(args[0]) or real(self, *args, **kw))
    p = ProcessMemoryManager(guards=GuardSet.without("tier_match"))
    with contracts.contracts(False):
        a, h = p.register_authority("gpu0", Tier.DEVICE, 100), p.register_holder("h")
    try:
        p.reserve(h, a, Tier.HOST, 10, Role.KV)
    except InvariantViolation:
        return True, len(calls)
    return False, len(calls)


@pytest.mark.parametrize("on, level, expected", [(False, "local", (False, 0)), (False, "full", (False, 0)),
                                                 (True, "local", (True, 0)), (True, "full", (True, 1))])
def test_what_a_governor_checks_under_each_setting(monkeypatch, on, level, expected):
    with contracts.contracts(on, level=level):
        assert _reserve_off_tier(monkeypatch) == expected
