"""Counterexamples with states: the ITF encoding (`invariants.itf`), the explorer's trace, the golden ITF files.

`tests/golden/itf/<guard>.json` holds each ledger guard's shortest counterexample as an ITF trace (the
format Apalache and Quint read): the state after every step. Regenerate with
`python -m refimpl.cli explore --write-golden` after reviewing the change.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import attrs
import immutables
import pytest

from invariants._violation import InvariantViolation
from invariants.explore import Model, explore, render_counterexample
from invariants.itf import MAX_SAFE_INT, itf_trace, to_itf
from invariants.ledger_scope import golden_itf
from spec.guards import GUARDS

GOLDEN = Path(__file__).parent / "golden" / "itf"
LEDGER_GUARDS = [g for g in GUARDS if g.model == "ledger"]


class _Colour(enum.Enum):
    RED = "red"


@attrs.frozen
class _Rec:
    n: int
    tags: frozenset
    pair: tuple
    table: immutables.Map
    colour: _Colour
    missing: None = None


def test_to_itf_encodes_every_value_kind() -> None:
    r = _Rec(2**60, frozenset({3, 1}), (1, "a"), immutables.Map({2: True, 1: False}), _Colour.RED)
    assert to_itf(r) == {"n": {"#bigint": str(2**60)}, "tags": {"#set": [1, 3]}, "pair": {"#tup": [1, "a"]},
                         "table": {"#map": [[1, False], [2, True]]}, "colour": "RED",
                         "missing": {"tag": "None", "value": {"#tup": []}}}
    assert to_itf(MAX_SAFE_INT) == MAX_SAFE_INT and to_itf(-MAX_SAFE_INT - 1) == {"#bigint": str(-MAX_SAFE_INT - 1)}


def test_to_itf_rejects_a_value_it_has_no_form_for() -> None:
    with pytest.raises(TypeError, match="no ITF form for a float"):
        to_itf(1.5)


def test_itf_trace_rejects_actions_that_do_not_match_the_states() -> None:
    with pytest.raises(ValueError, match="3 states need 2 actions, got 1"):
        itf_trace((0, 1, 2), ("a",), {})


def _counter(limit: int) -> Model:
    def check(s: int) -> None:
        if s > limit:
            raise InvariantViolation("TOY", f"counter {s} > {limit}")
    return Model("toy", 0, lambda s, a: s + a, lambda s: (1, 2), check, lambda p, a, n: None)


def test_counterexample_carries_and_prints_the_state_after_each_step() -> None:
    r = explore(_counter(2), max_depth=5)
    assert r.counterexample == (1, 2) and r.trace == (0, 1, 3)
    assert render_counterexample(r) == (" 0. (initial)\n     0\n 1. 1\n     -> 1\n 2. 2\n     -> 3\n"
                                        "=> TOY: counter 3 > 2\n")
    t = itf_trace(r.trace, r.counterexample, {"violated": r.violated})
    assert t["vars"] == ["action", "state"] and [s["state"] for s in t["states"]] == [0, 1, 3]
    assert [s["action"] for s in t["states"]] == ["init", "1", "2"] and t["#meta"]["violated"] == "TOY"


def test_parallel_explorer_counterexample_carries_the_same_states() -> None:
    from invariants.explore_parallel import explore_parallel
    r = explore_parallel(_counter(2), max_depth=5, workers=2)
    assert r.counterexample == (1, 2) and r.trace == (0, 1, 3)


@pytest.mark.parametrize("g", LEDGER_GUARDS, ids=lambda g: g.name)
def test_golden_itf_counterexample_unchanged(g) -> None:
    path = GOLDEN / f"{g.name}.json"
    assert path.is_file(), "run `python -m refimpl.cli explore --write-golden`"
    text = golden_itf(g)
    assert text == path.read_text(), (
        "the counterexample changed: review, then `python -m refimpl.cli explore --write-golden`")
    t = json.loads(text)
    # One state per step plus the initial one, each indexed and holding every variable; it ends where it breaks.
    assert [s["#meta"]["index"] for s in t["states"]] == list(range(len(t["states"])))
    assert all(set(t["vars"]) <= set(s) for s in t["states"]) and len(t["states"]) >= 2
    assert t["#meta"]["violated"] in g.ids


def test_every_ledger_guard_has_a_golden_itf_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(g.name for g in LEDGER_GUARDS)


def test_report_lists_each_scope_complete_or_to_depth_with_its_figures() -> None:
    from invariants.model_scopes import explore_scopes
    from refimpl.cli_report import exploration_lines, explore_json
    from spec.guards import ALL_ON

    x = explore_scopes(("elastic", "kv_batch"), ALL_ON, max_depth={"elastic": 10**6, "kv_batch": 3},
                       max_states=100_000)
    lines = exploration_lines("admission", x)
    assert len(lines) == 2 and lines[0].startswith("admission (elastic) explorer: 44 distinct states, 204 transitions, "
                                                   "complete, diameter 12")
    assert "to depth 3" in lines[1] and "complete" not in lines[1]
    j = explore_json(x)
    assert [(s["model"], s["complete"], s["coverage"]) for s in j["scopes"]] == [
        ("elastic", True, "complete, diameter 12"), ("kv_batch", False, "to depth 3")]
    assert not j["complete"] and j["trace"] is None


def _scope_models() -> dict[str, Model]:
    from invariants.hierarchy_scope import arbitration_model, hierarchy_model
    from invariants.ledger_scope import ledger_model
    from invariants.model_scopes import SCOPES
    from spec.guards import ALL_ON
    return {**{n: f(ALL_ON) for n, f in SCOPES.items()}, "ledger": ledger_model(),
            "hierarchy": hierarchy_model(ALL_ON), "arbitration": arbitration_model(ALL_ON)}


@pytest.mark.parametrize("name", sorted(_scope_models()))
def test_every_scopes_states_have_an_itf_form(name: str) -> None:
    # `explore --json` and the verify report encode any scope's counterexample: no state may hold a value
    # ITF has no form for (to_itf raises TypeError naming it).
    from invariants.liveness import build_graph
    g = build_graph(_scope_models()[name], max_states=300)
    t = itf_trace(g.states, [a for _, a in (p for p in g.parent[1:])], {})
    assert len(t["states"]) == len(g.states) and all(set(t["vars"]) <= set(s) for s in t["states"])


def test_report_markdown_shows_each_explorer_control_with_its_states() -> None:
    from invariants.ledger_scope import CONTROL_SCOPE, ledger_model
    from refimpl.cli_report import report_markdown
    from refimpl.verify import Report
    from spec.guards import GuardSet

    x = explore(ledger_model(CONTROL_SCOPE, GuardSet.without("owner_only")), max_depth=6)
    md = report_markdown(Report(True, "quick", (), {}, {}, (), 0.0, explorer_controls={"owner_only": x}))
    section = md.split("### `owner_only` off: violates I6", 1)[1]
    assert section.count("     -> State(") == len(x.counterexample) and " 0. (initial)" in section
