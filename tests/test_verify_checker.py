"""`ortmem verify --checker NAME`: only the named checkers' phases run, and only the IDs they check are judged.

Cheap and deterministic: the jobs, the drift check and the explorer are replaced by recorders, so
what is pinned is the selection (which campaigns, controls, mutants and explorer scopes would run,
which IDs are reported), not a campaign's outcome; the real restricted run is
`ortmem verify --quick --checker transactions` (README).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import refimpl.cli as cli
from refimpl.cli import EXIT_USAGE, main
from refimpl.cli_report import scope_text
from refimpl.verify import CHECKER_NAMES, Report, verify
from refimpl.verify.mutants import MUTANTS
from spec.guards import GUARDS, Layer

# The module that defines the job (refimpl.verify.job): monkeypatching its globals reaches the code under test.
V = sys.modules[verify.__module__]


def test_checker_flag_reaches_verify_repeatable(monkeypatch) -> None:
    seen: dict[str, Any] = {}

    def fake(profile, progress, jobs=None, checkers=None, **search_and_live):
        seen.update(profile=profile, checkers=checkers)
        return V.Report(True, profile, (), {}, {}, (), 0.0, checkers=checkers or ())
    monkeypatch.setattr(cli, "verify", fake)
    assert main(["verify", "--quick", "--checker", "ort", "--checker", "hierarchy"]) == 0
    assert seen == {"profile": "quick", "checkers": ("ort", "hierarchy")}
    assert main(["verify", "--quick"]) == 0
    assert seen["checkers"] is None


def test_invalid_checker_name_is_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "verify", lambda *a, **k: pytest.fail("verify ran with an unknown checker"))
    with pytest.raises(SystemExit) as e:
        main(["verify", "--quick", "--checker", "nope"])
    assert e.value.code == EXIT_USAGE
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_verify_rejects_unknown_checker_names() -> None:
    with pytest.raises(ValueError, match="unknown checkers \\['nope'\\]"):
        V.verify("quick", checkers=("nope",))
    with pytest.raises(ValueError, match="unknown checkers"):
        V.verify("quick", checkers=())


@pytest.mark.parametrize("names", [("transactions",), ("ort", "hierarchy"), V.CHECKER_NAMES], ids="+".join)
def test_only_the_named_checkers_jobs_run(monkeypatch, names) -> None:
    jobs: list[tuple[str, str, str | None]] = []

    def record(kind, name, layer, profile):
        jobs.append((kind, name, layer))
        return "recorded"  # a str: counted as a campaign error / stale mutant, never as a result
    monkeypatch.setattr(V, "_job", record)
    out = V._campaigns_and_controls("quick", V._noop, 1, names)
    explorers = [n for n in V.CHECKER_NAMES if n in names and hasattr(V.CHECKERS[n], "explore")]
    want = [("campaign", n, None) for n in V.CHECKER_NAMES if n in names]
    want += [("scope", n, None) for n in explorers]
    want += [("control", g.name, layer.value) for g in GUARDS if g.model in names for layer in Layer]
    want += [("mutant", m.name, m.layer.value) for m in MUTANTS.values() if m.model in names]
    want += [("scope-control", g.name, None) for g in GUARDS if g.model in explorers]
    assert jobs == want
    assert any(k == "control" for k, _, _ in jobs) and any(k == "scope" for k, _, _ in jobs)  # not vacuous
    # Each explorer job's result comes back under its scope or guard, in job order.
    explorations, explorer_controls = out[5], out[6]
    assert list(explorations) == explorers and set(explorations.values()) == {"recorded"}
    assert list(explorer_controls) == [g.name for g in GUARDS if g.model in explorers]


def test_restricted_run_reports_its_ids_and_skips_crosshair(monkeypatch) -> None:
    explored: list[str] = []

    def fake_jobs(profile, progress, jobs, names, **kw):
        explored.extend(names)
        return {}, {}, [], [], (), {}, {}
    monkeypatch.setattr(V, "drift_problems", lambda: [])
    monkeypatch.setattr(V, "_campaigns_and_controls", fake_jobs)
    monkeypatch.setattr(V, "run_crosshair", lambda: pytest.fail("CrossHair ran in a restricted run"))
    r = V.verify("quick", checkers=("transactions",))
    assert explored == ["transactions"]
    assert r.checkers == ("transactions",)
    # The transactions checker's IDs, and I1 of its mutant reserve_charges_first_need (a reservation of the wrong size).
    assert {i.id for i in r.ids} == {"C3", "C4", "C6", "I5", "I9", "I10", "I1"}
    assert r.crosshair is not None and r.crosshair.skipped and "transactions" in r.crosshair.skipped
    assert all(i.status == "partial" for i in r.ids)  # no campaign ran here: nothing may read "verified"
    assert cli.report_json(r)["checkers"] == ["transactions"]


def test_explorer_runs_only_the_named_checkers_scopes(monkeypatch) -> None:
    calls: list[tuple[str, str | None]] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def explore(self, guard, budget):
            calls.append((self.name, None if guard is None else guard.name))
            return "explored"
    monkeypatch.setattr(V, "CHECKERS", {n: Fake(n) for n in V.CHECKER_NAMES})
    explorer_jobs = [w for w in V._work(("pressure",)) if w[0] in ("scope", "scope-control")]
    results = [V._run_job(kind, name, layer, "quick") for kind, name, layer in explorer_jobs]
    assert results == ["explored"] * len(explorer_jobs)
    assert calls[0] == ("pressure", None)
    assert {n for n, _ in calls} == {"pressure"}
    assert {g for _, g in calls[1:]} == {g.name for g in GUARDS if g.model == "pressure"} and calls[1:]



@pytest.mark.parametrize("checkers, text", [
    (("transactions",), "3 IDs checked by this checker (transactions)"),
    (("ledger", "pressure"), "3 IDs checked by these checkers (ledger, pressure)"),
    (CHECKER_NAMES, "all 3 IDs"),
])
def test_the_verdict_line_names_its_scope(checkers: tuple[str, ...], text: str) -> None:
    """Issue #22: a one-checker run says which IDs its verdict covers, not "0 of 2 IDs verified"."""
    r = Report(True, "quick", (), {}, {}, (None, None, None), 0.0, checkers=checkers)  # type: ignore[arg-type]
    assert scope_text(r) == text



#: checker -> its machine, and per profile (campaign examples, steps), (control examples, steps): verify's sizes.
RESTRICTIONS = {
    "ledger": ("LedgerMachine", {"quick": ((600, 40), (400, 30)), "thorough": ((4000, 60), (1500, 40))}),
    "pressure": ("PressureMachine", {"quick": ((200, 40), (400, 40)), "thorough": ((1333, 60), (1500, 40))}),
    "transactions": ("TxMachine", {"quick": ((200, 40), (200, 30)), "thorough": ((1333, 60), (200, 30))}),
    "manager": ("ManagerMachine", {"quick": ((300, 40), (400, 40)), "thorough": ((1000, 60), (1500, 40))}),
}


def test_the_composed_machines_checkers_run_their_own_restriction_at_their_sizes(monkeypatch) -> None:
    """One class told apart by data: each drives the composed adapter on its own machine, the campaign with
    contracts on, at its own search sizes."""
    from invariants import contracts
    from refimpl.verify import manager_checker as MC
    from refimpl.verify.manager_adapter import ManagerAdapter
    seen: list[Any] = []
    monkeypatch.setattr(MC, "run_machine", lambda m, f, cfg: seen.append(
        (m.__name__, f, cfg.max_examples, cfg.stateful_step_count, contracts.enabled())))
    monkeypatch.setattr(MC, "find_counterexample", lambda m, g, layer, cfg, f: seen.append(
        (m.__name__, f, cfg.max_examples, cfg.stateful_step_count, len(cfg.phases))))  # 2 phases: no shrink
    g = next(g for g in GUARDS if g.model == "ledger")
    for name, (m, sizes) in RESTRICTIONS.items():
        for profile, ((ce, cs), (ke, ks)) in sizes.items():
            seen.clear()
            with contracts.contracts(False):
                V.CHECKERS[name].campaign(V.PROFILES[profile])
                V.CHECKERS[name].control(g, Layer.REFIMPL, V.PROFILES[profile])
            assert seen == [(m, ManagerAdapter, ce, cs, True), (m, ManagerAdapter, ke, ks, 2)], (name, profile)
