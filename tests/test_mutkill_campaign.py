"""invariants/campaign.py pinned (its mutation run, benchmarks/mutation.py): the campaign runners on a toy machine
whose governor goes wrong one way at a time. Counts are compared exactly with what the toy itself saw, a control's
whole result is pinned (a fake clock makes `seconds` exact), and the settings, seeds, database and progress ticks
each runner sets up are read back."""

from __future__ import annotations

import itertools
import zlib
from types import SimpleNamespace as NS
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.extra.redis import RedisExampleDatabase
from hypothesis.stateful import initialize, rule

from invariants import campaign, contracts
from invariants._violation import ErrorTypeDivergence, InvariantViolation
from invariants.campaign import (CampaignStats, ControlResult, Search, campaign_settings, configure, current_search,
                                 hunt, open_database, run_machine, searching)
from invariants.checked import CheckedMachine
from invariants.clauses import CLAUSES, Clause, conjunction
from invariants import manager_machine
from invariants.manager_ledger_machine import LedgerMachine
from invariants.manager_machine import ManagerSpecAdapter, find_counterexample
from invariants.mutation import Mutant
from invariants.progress import reporting
from spec.errors import InvalidArgument
from spec.guards import ALL_ON, Guard, GuardSet, Layer


@attrs.frozen
class S:
    n: int = 0


@attrs.frozen
class Add:
    pass


@attrs.frozen
class Bad:
    pass


def toy_step(s: S, a: Any) -> tuple[S, Any]:
    if isinstance(a, Bad):
        raise InvalidArgument("bad")
    return S(s.n + 1), s.n


def _key(id: str) -> str:
    return next(k for k, c in CLAUSES.items() if c.id == id)


C1, C2 = _key("C1"), _key("C2")  # real catalog clauses: a control credits a clause of its IDs
POS = Clause("T", "toy_state", "pos", "n is counted positive")


def _clause(key: str, id: str) -> Clause:
    pred, name = key.split(".", 1)
    return Clause(id, pred, name, "a toy's use of the key")


def state_fails(key: str, id: str, at: int = 2) -> Any:
    c = _clause(key, id)

    def pred(s: S) -> None:
        if s.n >= at:
            c.fail(f"n is {s.n}")
    return pred


def step_fails(key: str, id: str) -> Any:
    c = _clause(key, id)

    def pred(prev: S, a: Any, now: S) -> None:
        if prev.n >= 1 and isinstance(a, Add):
            c.fail(f"{prev.n} -> {now.n}")
    return pred


SEEN: list[tuple[Any, ...]] = []  # one row per example: what the configured class was
STEPS: list[str] = []  # one entry per rule run: "add" or "bad"
CONTRACTS: list[bool] = []  # contracts.enabled() at each predicate evaluation
POSITIVE: list[bool] = []  # each evaluation of POS: whether its case held
PER_EXAMPLE: list[int] = []  # the steps each example ran


def positive(s: S) -> None:
    POSITIVE.append(POS.case(s.n > 0))


class Gov:
    def __init__(self, state: tuple[Any, ...] = (), step: tuple[Any, ...] = (), fault: Any = None) -> None:
        self.state, self.state_preds, self.step_preds, self.fault = S(), state, step, fault

    def execute(self, a: Any) -> Any:
        if self.fault is not None:
            self.fault(self, a)
        self.state, result = toy_step(self.state, a)
        return result

    def abstract(self) -> S:
        return self.state


class Toy(CheckedMachine):
    @initialize()
    def begin(self) -> None:
        cls = type(self)
        SEEN.append((cls.__name__, cls.check_refinement, cls.tolerate_error_type, self.stats is not None,
                     vars(cls).get("_hypothesis_internal_use_seed"), contracts.enabled()))
        PER_EXAMPLE.append(0)
        self.start(cls.adapter_factory(), S())

    @rule()
    def add(self) -> None:
        STEPS.append("add")
        PER_EXAMPLE[-1] += 1
        self.act(Add())

    @rule()
    def bad(self) -> None:
        STEPS.append("bad")
        PER_EXAMPLE[-1] += 1
        self.act(Bad())

    def spec_step(self, state: Any, action: Any) -> tuple[Any, Any]:
        return toy_step(state, action)

    def situations(self, prev: Any, action: Any, now: Any) -> tuple[str, ...]:
        return ("n: grew",)

    def check_state(self, state: Any) -> None:
        CONTRACTS.append(contracts.enabled())
        conjunction({"T": (positive, *self.gov.state_preds)}, state)

    def check_step(self, prev: Any, action: Any, now: Any) -> None:
        conjunction({"T": self.gov.step_preds}, prev, action, now)


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    SEEN.clear(), STEPS.clear(), CONTRACTS.clear(), POSITIVE.clear(), PER_EXAMPLE.clear()
    monkeypatch.setattr(campaign, "time", NS(perf_counter=itertools.count(10.0, 3.0).__next__))


CFG = campaign_settings(6, 5)
G = Guard("single_authority_per_pool", ("C1",), "a toy guard", "n reaches 2")  # a real name: GuardSet checks it


# --- stats, searches, settings ------------------------------------------------------------------------------


def test_total_adds_every_count() -> None:
    a = CampaignStats(1, 2, 3, {"X": 1}, 0.5, {"Add": 3}, {"k": [2, 1]}, {"e": 1})
    b = CampaignStats(10, 20, 30, {"X": 2, "Y": 1}, 1.5, {"Add": 1, "Sub": 2}, {"k": [1, 1], "j": [1, 0]},
                      {"e": 2, "f": 1})
    assert CampaignStats.total([a, b]) == CampaignStats(11, 22, 33, {"X": 3, "Y": 1}, 2.0, {"Add": 4, "Sub": 2},
                                                        {"k": [3, 2], "j": [1, 0]}, {"e": 3, "f": 1})
    assert a == CampaignStats(1, 2, 3, {"X": 1}, 0.5, {"Add": 3}, {"k": [2, 1]}, {"e": 1})  # inputs untouched
    assert CampaignStats.total([]) == CampaignStats(0, 0, 0, {}, 0, {}, {}, {})
    assert campaign._stats({}, 2.0) == CampaignStats(0, 0, 0, {}, 2.0, {}, {}, {})
    # a key's name is everything after its first colon
    assert campaign._stats({"rejected:a:b": 1, "accepted:c:d": 2, "event:e:f": 3, "steps": 4}, 1.0) == \
        CampaignStats(0, 4, 0, {"a:b": 1}, 1.0, {"c:d": 2}, {}, {"e:f": 3})


def test_searching_sets_the_search_for_its_block_only() -> None:
    assert current_search() == Search() == Search(None, None)
    with searching(Search(seed=3, database="d")):
        assert current_search() == Search(3, "d")
        with pytest.raises(KeyError), searching(Search(seed=4)):
            assert current_search() == Search(4)
            raise KeyError
        assert current_search() == Search(3, "d")
    assert current_search() == Search()


def test_open_database_reads_redis_urls_and_directories(tmp_path: Any) -> None:
    d = open_database(str(tmp_path))
    assert type(d) is DirectoryBasedExampleDatabase and d.path == tmp_path
    for url, kw in [("redis://h:1234/2", {"host": "h", "port": 1234, "db": 2}),
                    ("rediss://s:99", {"host": "s", "port": 99}), ("unix:///tmp/sock", {"path": "/tmp/sock"})]:
        r = open_database(url)
        assert type(r) is RedisExampleDatabase
        assert kw.items() <= r.redis.connection_pool.connection_kwargs.items(), url
    assert type(open_database(f"{tmp_path}/redis://x")) is DirectoryBasedExampleDatabase


def test_campaign_settings_override_the_loaded_profile() -> None:
    old = settings._current_profile
    settings.register_profile("mutkill_campaign", print_blob=True, report_multiple_bugs=True, deadline=1000,
                              database=DirectoryBasedExampleDatabase(".hypothesis-unused"), derandomize=False,
                              suppress_health_check=[])
    settings.load_profile("mutkill_campaign")
    try:
        s = campaign_settings(7, 9)
        t = campaign_settings(7, 9, shrink=False)
        with searching(Search(seed=0)):
            u = campaign_settings(1, 1)
    finally:
        settings.load_profile(old)
    assert (s.max_examples, s.stateful_step_count, s.deadline, s.database, s.derandomize, s.phases,
            tuple(s.suppress_health_check), s.report_multiple_bugs, s.print_blob) == \
        (7, 9, None, None, True, (Phase.reuse, Phase.generate, Phase.shrink), tuple(HealthCheck), False, False)
    assert t.phases == (Phase.reuse, Phase.generate) and t.max_examples == 7 and t.stateful_step_count == 9
    assert (u.derandomize, u.database) == (False, None)  # seeded: the profile's database is not used either


def test_seeded_sets_a_seed_from_the_search_and_the_name() -> None:
    m = type("M", (Toy,), {})
    assert campaign._seeded(m, "n") is m and "_hypothesis_internal_use_seed" not in vars(m)
    with searching(Search(seed=0)):
        assert campaign._seeded(m, "n") is m and m._hypothesis_internal_use_seed == zlib.crc32(b"0:n")


def test_live_stats_tick_examples_and_steps_only() -> None:
    ticks: list[tuple[str, int]] = []
    with reporting(lambda c, n: ticks.append((c, n))):
        d = campaign._LiveStats()
        d["examples"], d["steps"], d["accepted"], d["steps"] = 1, 2, 3, 4
    assert ticks == [("examples", 1), ("steps", 1), ("steps", 1)] and d == {"examples": 1, "steps": 4, "accepted": 3}


def test_configure_binds_factory_refinement_stats_and_tolerance() -> None:
    def f() -> None:
        pass
    c = configure(Toy, f)
    assert (c.__name__, c.__bases__, c.adapter_factory, c.check_refinement, c.stats, c.tolerate_error_type) == \
        ("Toy", (Toy,), f, True, None, False)
    d: dict[str, Any] = {}
    c = configure(Toy, f, refine=False, stats=d, tolerate_error_type=True)
    assert (c.adapter_factory, c.check_refinement, c.stats, c.tolerate_error_type) == (f, False, d, True)


# --- run_machine ---------------------------------------------------------------------------------------------


def test_run_machine_counts_exactly_what_the_machine_ran() -> None:
    ticks: list[str] = []
    with reporting(lambda c, n: ticks.append(c)):
        st = run_machine(Toy, Gov, CFG)
    adds, bads = STEPS.count("add"), STEPS.count("bad")
    assert adds and bads and len(SEEN) >= 6 and len(POSITIVE) == len(SEEN) + adds + bads and 0 < sum(POSITIVE) < len(POSITIVE)
    assert st == CampaignStats(len(SEEN), adds + bads, adds, {"InvalidArgument": bads}, 3.0, {"Add": adds},
                               {"toy_state.pos": [len(SEEN) + adds + bads, sum(POSITIVE)]}, {"n: grew": adds})
    assert ticks.count("examples") == len(SEEN) and ticks.count("steps") == adds + bads
    assert set(SEEN) == {("Toy", True, False, True, None, contracts.enabled())}
    SEEN.clear()
    run_machine(Toy, Gov, CFG, refine=False)
    assert {s[1] for s in SEEN} == {False}


def test_run_machine_seeds_and_keeps_a_failure_in_the_database(tmp_path: Any) -> None:
    with searching(Search(seed=5, database=str(tmp_path))), pytest.raises(InvariantViolation) as e:
        run_machine(Toy, lambda: Gov((state_fails(C1, "C1"),)), CFG)
    assert e.value.args == ("C1: n is 2",)
    assert {s[4] for s in SEEN} == {zlib.crc32(b"5:Toy")}
    assert list(tmp_path.iterdir())  # the failure was saved
    SEEN.clear(), PER_EXAMPLE.clear()
    with searching(Search(database=str(tmp_path / "b"))):
        run_machine(Toy, Gov, campaign_settings(6, 2))
    assert 0 < len(SEEN) <= 6 and max(PER_EXAMPLE) <= 2  # the database is added to the campaign's own settings


# --- hunt ---------------------------------------------------------------------------------------------------


def spec_of(gov: Any, offs: list[Any], name: str) -> Any:
    def spec(off: GuardSet) -> Any:
        offs.append((name, off))
        return lambda: gov()
    return spec


def control(g: Any, layer: Layer, gov: Any) -> tuple[ControlResult, list[Any]]:
    offs: list[Any] = []
    with contracts.contracts(True):
        r = hunt(Toy, g, layer, CFG, spec=spec_of(gov, offs, "spec"), impl=spec_of(gov, offs, "impl"))
    assert set(CONTRACTS) == {False} and {s[2] for s in SEEN} == {True} and {s[5] for s in SEEN} == {False}
    return r, offs


def test_a_spec_control_finds_its_ids_harm() -> None:
    r, offs = control(G, Layer.SPEC, lambda: Gov((state_fails(C1, "C1"),)))
    assert r == ControlResult("single_authority_per_pool", Layer.SPEC, ("C1",), True, "C1", 2, 3.0, ("Add()", "Add()"), "C1: n is 2",
                              C1, (C1,))
    assert offs == [("spec", GuardSet.without("single_authority_per_pool"))] and {s[1] for s in SEEN} == {False}


def test_a_control_credits_every_clause_the_step_breaks() -> None:
    r, _ = control(G, Layer.SPEC, lambda: Gov((state_fails(C1, "C1"),), (step_fails("toy_step.a", "X"),)))
    assert (r.found, r.violated, r.clause, r.clauses, r.message) == \
        (True, "X", "toy_step.a", ("toy_step.a", C1), "X: 1 -> 2")
    r, _ = control(G, Layer.SPEC, lambda: Gov((state_fails("toy_state.b", "C1"),), (step_fails("toy_step.a", "X"),)))
    assert (r.found, r.clauses) == (False, ("toy_step.a", "toy_state.b"))  # not a catalog clause
    # a second step clause of the same step, seen only when the step is judged again as accepted
    r, _ = control(G, Layer.SPEC, lambda: Gov((), (step_fails("toy_step.a", "X"), step_fails(C1, "C1"))))
    assert (r.found, r.violated, r.clauses) == (True, "X", ("toy_step.a", C1))
    r, _ = control(G, Layer.SPEC, lambda: Gov((state_fails(C2, "C2"),)))
    assert (r.found, r.violated, r.clauses) == (False, "C2", (C2,))  # another ID's clause


def test_a_refimpl_control_counts_refinement_and_g4() -> None:
    def twice(gov: Gov, a: Any) -> None:
        if gov.state.n == 1:
            gov.state = S(2)
    r, offs = control(G, Layer.REFIMPL, lambda: Gov(fault=twice))
    assert r == ControlResult("single_authority_per_pool", Layer.REFIMPL, ("C1",), True, "refinement", 2, 3.0, ("Add()", "Add()"),
                              "refinement: Add(): result 2 vs spec 1; n: 3 != 2", "refinement", ("refinement",))
    assert offs == [("impl", GuardSet.without("single_authority_per_pool"))] and {s[1] for s in SEEN} == {True}

    def refuse_changed(gov: Gov, a: Any) -> None:
        if isinstance(a, Bad):
            gov.state = S(gov.state.n + 1)
            raise InvalidArgument("bad")
    g4 = Guard("tier_match", ("C2",), "d", "h")
    r, _ = control(g4, Layer.REFIMPL, lambda: Gov(fault=refuse_changed))
    assert (r.found, r.violated, r.clause, r.clauses, r.counterexample) == (
        True, "G4", "G4.rejection_changes_nothing", ("G4.rejection_changes_nothing",), ("Bad()",))
    r, _ = control(g4, Layer.SPEC, lambda: Gov(fault=refuse_changed))
    assert (r.found, r.violated) == (False, "G4")  # the spec layer credits only the guard's IDs


def test_an_error_type_divergence_and_a_crash_are_not_harms() -> None:
    def diverge(s: S) -> None:
        if s.n >= 2:
            raise ErrorTypeDivergence("x")
    r, _ = control(G, Layer.REFIMPL, lambda: Gov((diverge, state_fails(C1, "C1"))))
    assert r == ControlResult("single_authority_per_pool", Layer.REFIMPL, ("C1",), False, "refinement:error-type", 2, 3.0,
                              ("Add()", "Add()"), "not a harm (error type only): refinement: x",
                              "refinement.error_type", ("refinement.error_type",))

    def crash(gov: Gov, a: Any) -> None:
        if gov.state.n == 1:
            raise RuntimeError("y" * 300)
    r, _ = control(G, Layer.SPEC, lambda: Gov((state_fails(C1, "C1"),), fault=crash))
    assert r == ControlResult("single_authority_per_pool", Layer.SPEC, ("C1",), False, "crash", 2, 3.0, ("Add()", "Add()"),
                              "the implementation crashed: RuntimeError: " + "y" * 200, None, ())

    def boom(s: S) -> None:  # a check that crashes (not a clause failing): no clause of the step is credited
        if s.n >= 2:
            raise RuntimeError("boom")
    r, _ = control(G, Layer.SPEC, lambda: Gov((boom, state_fails(C1, "C1"))))
    assert (r.found, r.violated, r.clause, r.clauses, r.message) == \
        (False, "crash", None, (), "the implementation crashed: RuntimeError: boom")


def test_a_control_that_finds_nothing_says_so() -> None:
    r, _ = control(G, Layer.SPEC, Gov)
    assert r == ControlResult("single_authority_per_pool", Layer.SPEC, ("C1",), False, None, None, 3.0, (), "no counterexample found")
    SEEN.clear()
    with searching(Search(seed=5)):
        control(G, Layer.REFIMPL, Gov)
    assert {s[4] for s in SEEN} == {zlib.crc32(b"5:Toy:single_authority_per_pool:refimpl")}


def test_a_mutant_runs_with_every_guard_on_and_refinement_off() -> None:
    mut = Mutant("toy_mutant", ("C1",), "ledger", Layer.SPEC, "spec.ledger", "a", "b", "d")
    for layer in Layer:
        SEEN.clear()
        r, offs = control(mut, layer, lambda: Gov((state_fails(C1, "C1"),)))
        assert (r.guard, r.layer, r.ids, r.found, r.violated) == ("toy_mutant", layer, ("C1",), True, "C1")
        assert offs == [("spec" if layer is Layer.SPEC else "impl", ALL_ON)] and {s[1] for s in SEEN} == {False}
    with pytest.raises(ValueError, match="^toy_mutant: a refimpl-layer control needs an implementation factory$"):
        hunt(Toy, mut, Layer.REFIMPL, CFG, spec=spec_of(Gov, [], "spec"), impl=None)
    with pytest.raises(ValueError, match="^single_authority_per_pool: a refimpl-layer control needs an implementation factory$"):
        hunt(Toy, G, Layer.REFIMPL, CFG, spec=spec_of(Gov, [], "spec"), impl=None)


# --- the composed machine's instance --------------------------------------------------------------------------


def test_the_composed_control_hunts_on_the_machine_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(manager_machine, "hunt", lambda *a, **k: calls.append((a, k)) or "hunted")
    off = GuardSet.without("tier_match")
    assert find_counterexample(LedgerMachine, G, Layer.SPEC, CFG) == "hunted"
    assert find_counterexample(LedgerMachine, G, Layer.REFIMPL, CFG, lambda o: ("impl", o)) == "hunted"
    (a1, k1), (a2, k2) = calls
    assert (a1, a2) == ((LedgerMachine, G, Layer.SPEC, CFG), (LedgerMachine, G, Layer.REFIMPL, CFG))
    assert k1["impl"] is None
    adapter = k1["spec"](off)()
    assert type(adapter) is ManagerSpecAdapter and adapter.guards == off
    assert k2["impl"](off)() == ("impl", off)


class Unbuilt(Toy):
    def __init__(self) -> None:
        raise RuntimeError("cannot build")


def test_a_machine_that_cannot_be_built_is_a_crash_with_no_trace() -> None:
    r = hunt(Unbuilt, G, Layer.SPEC, CFG, spec=spec_of(Gov, [], "spec"), impl=None)
    assert r == ControlResult("single_authority_per_pool", Layer.SPEC, ("C1",), False, "crash", 0, 3.0, (),
                              "the implementation crashed: RuntimeError: cannot build")
