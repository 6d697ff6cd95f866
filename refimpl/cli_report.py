"""Rendering of an `ortmem verify` report: JSON (machine-readable), Markdown (reviewers), the console table.

Rendering only: every figure comes from the `refimpl.verify.Report` value; nothing here judges.
"""

from __future__ import annotations

from typing import Any

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from invariants.explore import ExploreResult, render_counterexample
from invariants.itf import itf_trace
from invariants.liveness import lasso_itf, render_lasso
from invariants.liveness_props import LivenessResult
from refimpl.verify.verdict_rules import RULES, THRESHOLDS
from refimpl.verify import Report
from refimpl.verify.job import CHECKER_NAMES
from spec.guards import guard

__all__ = ["report_json", "report_markdown", "print_report", "explore_json", "explore_summary", "exploration_lines",
           "print_explorations", "liveness_json", "liveness_lines"]


def _events(c: Any) -> str:
    """What the campaign's accepted actions did, where a checker counts it (the ORT campaign's depth)."""
    if not c.events:
        return ""
    decodes = c.accepted_by_action.get("Decode")
    head = [f"{decodes} decodes"] if decodes is not None else []
    return "; " + ", ".join(head + [f"{v} {k}" for k, v in sorted(c.events.items()) if ":" not in k])


def report_json(r: Report) -> dict[str, Any]:
    """The machine-readable report (fields of the issue's schema, plus more)."""
    return {
        "ok": r.ok,
        "profile": r.profile,
        "checkers": list(r.checkers),
        "seconds": round(r.seconds, 3),
        "drift": list(r.drift),
        "drift_unchecked": list(r.drift_unchecked),
        "campaigns": {
            name: {"examples": c.examples, "steps": c.steps, "accepted": c.accepted, "rejected": c.rejected,
                   "accepted_by_action": dict(sorted(c.accepted_by_action.items())),
                   "events": dict(sorted(c.events.items())),
                   "seconds": round(c.seconds, 3)}
            for name, c in r.campaigns.items()},
        "campaign_errors": r.campaign_errors,
        "rules": [rule.format(threshold=THRESHOLDS[r.profile]) for rule in RULES],
        "all_verified": r.all_verified,
        "stale_mutants": list(r.stale_mutants),
        "explorer": {
            "runs": {name: explore_json(x) for name, x in r.explorations.items()},
            "negative_controls": {name: explore_json(x) for name, x in r.explorer_controls.items()},
        },
        "liveness": {pid: liveness_json(x) for pid, x in r.liveness.items()},
        "liveness_controls": {name: liveness_json(x) for name, x in r.liveness_controls.items()},
        "crosshair": None if r.crosshair is None else {
            "ok": r.crosshair.ok, "skipped": r.crosshair.skipped, "confirmed": r.crosshair.confirmed,
            "problems": list(r.crosshair.problems), "seconds": round(r.crosshair.seconds, 3)},
        "ids": [
            {
                "id": i.id, "title": i.title, "status": i.status, "predicates": list(i.predicates),
                "tests": list(i.tests), "examples": i.examples, "checks": i.checks, "evaluated": i.evaluated,
                "scope": i.scope, "planned": i.planned, "reasons": list(i.reasons),
                "coverage": [attrs.asdict(c) for c in i.coverage],
                "expected_negative_controls": i.expected_controls,
                "negative_controls": [_control_json(c) for c in i.negative_controls],
                "mutation_controls": [_control_json(c) for c in i.mutation_controls],
                "explorer_controls": [
                    {"name": name, "found": x.found, "steps": len(x.counterexample) if x.found else None,
                     "states": x.states, "seconds": round(x.seconds, 4), "violated": x.violated}
                    for name, x in r.explorer_controls.items() if i.id in guard(name).ids],
            }
            for i in r.ids
        ],
    }


def _control_json(c: Any) -> dict[str, Any]:
    return {"name": c.guard, "layer": c.layer.value, "found": c.found, "steps": c.steps,
            "seconds": round(c.seconds, 3), "violated": c.violated, "clause": c.clause, "clauses": list(c.clauses),
            "counterexample": list(c.counterexample), "message": c.message}


def liveness_json(x: LivenessResult) -> dict[str, Any]:
    """A liveness verdict with its figures; a violation's lasso as an ITF trace with `loop`."""
    return {"id": x.id, "scope": x.scope, "fairness": x.fairness, "status": x.status, "states": x.states,
            "transitions": x.transitions, "complete": x.complete, "diameter": x.diameter,
            "seconds": round(x.seconds, 3), "reason": x.reason,
            "lasso": None if x.lasso is None else {
                "prefix_steps": len(x.lasso.prefix), "cycle_steps": len(x.lasso.cycle),
                "trace": lasso_itf(x.lasso, {"property": x.id, "scope": x.scope})}}


def liveness_lines(r: Report) -> list[str]:
    """One line per property (status, scope figures or the reason) and per control (its lasso's size)."""
    out = []
    for pid, x in r.liveness.items():
        figures = (f" on {x.states} states, {x.transitions} transitions, "
                   f"{'complete' if x.complete else 'not whole'}, diameter {x.diameter}" if x.states else "")
        out.append(f"liveness {pid} ({x.scope}): {x.status}{figures}{': ' + x.reason if x.reason else ''}")
    for name, x in r.liveness_controls.items():
        got = (f"a lasso of {len(x.lasso.prefix)} + {len(x.lasso.cycle)} steps (prefix + cycle)"
               if x.lasso is not None else "NO LASSO")
        out.append(f"liveness control {name} off ({x.id}): {x.status}, {got}")
    return out


def explore_summary(x: ExploreResult) -> dict[str, Any]:
    """A run's figures: "complete" only for a fixpoint (`coverage` says "to depth d" otherwise)."""
    return {"model": x.model, "states": x.states, "transitions": x.transitions, "rejected": x.rejected,
            "depth": x.depth, "diameter": x.diameter, "complete": x.complete, "bound_hit": x.bound_hit,
            "coverage": x.coverage, "seconds": round(x.seconds, 3), "cpu_seconds": round(x.cpu_seconds, 3),
            "states_per_second": round(x.states_per_second),
            "found": x.found, "violated": x.violated, "clause": x.clause, "clauses": list(x.clauses),
            "steps": len(x.counterexample) if x.found else None, "message": x.message}


def explore_json(x: ExploreResult) -> dict[str, Any]:
    """The figures, each scope's own (a combined run), and the counterexample with its states (ITF)."""
    return {**explore_summary(x), "scopes": [explore_summary(p) for p in x.parts or (x,)],
            "counterexample": [repr(a) for a in x.counterexample],
            "trace": itf_trace(x.trace, x.counterexample, {"violated": x.violated, "message": x.message})
            if x.trace else None}


def report_markdown(r: Report) -> str:
    """A reviewer's summary: verdict, campaigns, the per-ID table, every counterexample found."""
    lines = [f"# ortmem verify: {'OK' if r.ok else 'FAILED'} ({r.profile} profile, {r.seconds:.0f} s)", ""]
    lines += [f"- drift: {p}" for p in r.drift] or ["- drift: none (catalog, predicates, tests and docs in step)"]
    lines += [f"- drift not checked: {p}" for p in r.drift_unchecked]
    lines += [f"- {name} campaign violation: {err}" for name, err in r.campaign_errors.items()]
    lines += [f"- {name} campaign: {c.examples} examples, {c.steps} steps ({c.accepted} accepted, "
              f"{sum(c.rejected.values())} rejected with typed errors){_events(c)}" for name, c in r.campaigns.items()]
    lines += [f"- stale mutant: {m}" for m in r.stale_mutants]
    lines += [f"- {line}" for name, x in r.explorations.items() for line in exploration_lines(name, x)]
    lines += [f"- {line}" for line in liveness_lines(r)]
    lines += ["", "## What \"verified\" means", "", *[f"- {rule.format(threshold=THRESHOLDS[r.profile])}"
                                                      for rule in RULES]]
    lines += ["", "| ID | title | clauses | weakest clause (case met) | negative controls | mutation controls "
              "| status |", "|---|---|---|---|---|---|---|"]
    for i in r.ids:
        lines.append(f"| {i.id} | {i.title} | {len(i.coverage) or '-'} | {_weakest(i)} | {_found(i.negative_controls, i.expected_controls)} "
                     f"| {_found(i.mutation_controls)} | {i.status} |")
    lines += ["", "## Why partial", ""]
    for i in r.ids:
        lines += [f"- **{i.id}**: {why}" for why in i.reasons]
    lines += ["", "## Clause coverage", "", "| ID | clause | evaluated | case met | made to fail by |",
              "|---|---|---|---|---|"]
    for i in r.ids:
        lines += [f"| {i.id} | `{c.predicate}.{c.clause}` | {c.evaluated} | {c.antecedent_held} | "
                  f"{', '.join(c.failed_by) or '**none**'} |" for c in i.coverage]
    if r.explorer_controls:
        lines += ["", "## Explorer controls", "", "Each spec-layer guard switched off: the explorer's shortest "
                  "counterexample, with the state after each step (the JSON report holds it as an ITF trace).", ""]
        for name, x in r.explorer_controls.items():
            lines += [f"### `{name}` off: {'violates ' + str(x.violated) if x.found else 'NOT FOUND'}", "",
                      "```", render_counterexample(x).rstrip("\n"), "```", ""]
    if r.liveness_controls:
        lines += ["", "## Liveness controls", "", "Each liveness property's guard switched off: the lasso (a prefix, "
                  "then a cycle repeated forever) with the state after each step.", ""]
        for name, x in r.liveness_controls.items():
            lines += [f"### `{name}` off ({x.id}): {x.status}", "", f"Fairness: {x.fairness}", ""]
            if x.lasso is not None:
                lines += ["```", render_lasso(x.lasso).rstrip("\n"), "```", ""]
    lines += ["", "## Negative controls", "",
              "Each guard switched off, in the spec (an invariant must fail) and in refimpl (refinement must "
              "fail); the counterexample is the action script Hypothesis found.", ""]
    seen = set()
    for i in r.ids:
        for c in i.negative_controls:
            if (c.guard, c.layer) in seen:
                continue
            seen.add((c.guard, c.layer))
            verdict = f"found, violates {c.violated}, {c.steps} steps" if c.found else "NOT FOUND"
            lines += [f"### `{c.guard}` ({c.layer.value}): {verdict}", "", f"{c.message}", ""]
            if c.counterexample:
                lines += ["```", *c.counterexample, "```", ""]
    return "\n".join(lines) + "\n"


def _weakest(i: Any) -> str:
    if not i.coverage:
        return "-"
    c = min(i.coverage, key=lambda c: c.antecedent_held)
    return f"{c.clause}: {c.antecedent_held}"


def _found(controls: Any, expected: int | None = None) -> str:
    n = len(controls) if expected is None else expected
    return f"{sum(c.found for c in controls)}/{n}" if n else "-"


def _labelled(label: str, style: str, text: str) -> Text:
    """A styled label and plain text: the text is never parsed as markup (it may hold brackets)."""
    return Text.assemble((label, style), " ", text)


def exploration_lines(name: str, x: ExploreResult) -> list[str]:
    """One line per scope of a checker's run: states, transitions, "complete, diameter D" or "to depth d"."""
    out = []
    for p in x.parts or (x,):
        scope = name if p.model == name else f"{name} ({p.model})"
        verdict = f"violation {p.violated}" if p.found else "no violation"
        out.append(f"{scope} explorer: {p.states} distinct states, {p.transitions} transitions, {p.coverage}, "
                   f"{p.states_per_second:,.0f} states/s: {verdict}")
    return out


def print_explorations(runs: dict[str, ExploreResult], console: Console) -> None:
    """Each explorer scope's figures; a counterexample with the state after each step."""
    for name, x in runs.items():
        for line in exploration_lines(name, x):
            console.print(line, markup=False, soft_wrap=True)
        if x.found:
            console.print(render_counterexample(x), markup=False)


def print_report(r: Report, console: Console) -> None:
    for p in r.drift:
        console.print(_labelled("drift:", "red", p))
    for p in r.drift_unchecked:
        console.print(_labelled("drift not checked:", "yellow", p))
    for name, err in r.campaign_errors.items():
        console.print(_labelled(f"{name} campaign violation:", "red", err))
    for name, c in r.campaigns.items():
        console.print(f"{name} campaign: {c.examples} examples, {c.steps} steps ({c.accepted} accepted, "
                      f"{sum(c.rejected.values())} rejected with typed errors) in {c.seconds:.1f} s{_events(c)}")
    print_explorations(r.explorations, console)
    for line in liveness_lines(r):
        console.print(line, markup=False, soft_wrap=True)
    if r.explorer_controls:
        found = sum(x.found for x in r.explorer_controls.values())
        console.print(f"explorer negative controls: {found}/{len(r.explorer_controls)} guards yield a shortest "
                      f"counterexample (max {max(len(x.counterexample) for x in r.explorer_controls.values())} steps)")
        for name, x in r.explorer_controls.items():
            if not x.found:
                console.print(f"[red]explorer found nothing with {name} off[/]")
    if r.crosshair is not None:
        c = r.crosshair
        if c.skipped:
            console.print(_labelled("crosshair skipped:", "yellow", c.skipped))
        else:
            console.print(f"crosshair: {c.confirmed} conditions confirmed over all paths in {c.seconds:.1f} s"
                          + ("" if c.ok else " [red]FAILED[/]"))
            for p in c.problems:
                console.print(_labelled("crosshair:", "red", p))
    for m in r.stale_mutants:
        console.print(_labelled("stale mutant:", "red", m))
    table = Table(title="ortmem verify: per-ID results")
    for col in ("ID", "title", "checks", "weakest clause", "neg. controls", "mutants", "status"):
        table.add_column(col)
    style = {"verified": "green", "partial": "yellow", "not yet implemented": "dim"}
    for i in r.ids:
        table.add_row(i.id, i.title, str(i.checks) if i.checks else "-", _weakest(i),
                      _found(i.negative_controls, i.expected_controls), _found(i.mutation_controls),
                      f"[{style[i.status]}]{i.status}[/]")
    console.print(table)
    console.print("What \"verified\" means:")
    for rule in RULES:
        console.print(f"  {rule.format(threshold=THRESHOLDS[r.profile])}", markup=False)
    for i in r.ids:
        if i.reasons:
            console.print(_labelled(f"{i.id} partial:", "yellow", f"{len(i.reasons)} reason(s); first: {i.reasons[0]}"))
    verified = sum(i.status == "verified" for i in r.ids)
    verdict = "[green]OK[/] (no violation)" if r.ok else "[red]FAILED[/] (a violation)"
    console.print(f"{verdict}: {scope_text(r)}: {verified} verified, "
                  f"{sum(i.status == 'partial' for i in r.ids)} partial, in {r.seconds:.1f} s")


def scope_text(r: Report) -> str:
    """What the verdict covers: every ID, or only those the selected checkers check (`--checker`)."""
    if set(r.checkers) >= set(CHECKER_NAMES):
        return f"all {len(r.ids)} IDs"
    which = "this checker" if len(r.checkers) == 1 else "these checkers"
    return f"{len(r.ids)} IDs checked by {which} ({', '.join(r.checkers)})"
