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
from refimpl.verify.verdict_rules import RULES, THRESHOLDS
from refimpl.verify import Report
from refimpl.verify.job import CHECKER_NAMES
from spec.guards import guard

__all__ = ["report_json", "report_markdown", "print_report", "explore_json"]


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


def explore_json(x: ExploreResult) -> dict[str, Any]:
    return {"states": x.states, "transitions": x.transitions, "rejected": x.rejected, "depth": x.depth,
            "complete": x.complete, "seconds": round(x.seconds, 3), "cpu_seconds": round(x.cpu_seconds, 3),
            "states_per_second": round(x.states_per_second),
            "found": x.found, "violated": x.violated, "clause": x.clause,
            "steps": len(x.counterexample) if x.found else None,
            "counterexample": [repr(a) for a in x.counterexample], "message": x.message}


def report_markdown(r: Report) -> str:
    """A reviewer's summary: verdict, campaigns, the per-ID table, every counterexample found."""
    lines = [f"# ortmem verify: {'OK' if r.ok else 'FAILED'} ({r.profile} profile, {r.seconds:.0f} s)", ""]
    lines += [f"- drift: {p}" for p in r.drift] or ["- drift: none (catalog, predicates, tests and docs in step)"]
    lines += [f"- drift not checked: {p}" for p in r.drift_unchecked]
    lines += [f"- {name} campaign violation: {err}" for name, err in r.campaign_errors.items()]
    lines += [f"- {name} campaign: {c.examples} examples, {c.steps} steps ({c.accepted} accepted, "
              f"{sum(c.rejected.values())} rejected with typed errors){_events(c)}" for name, c in r.campaigns.items()]
    lines += [f"- stale mutant: {m}" for m in r.stale_mutants]
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
    for name, x in r.explorations.items():
        verdict = f"[red]violation {x.violated}[/]" if x.found else "no violation"
        console.print(f"{name} explorer: {x.states} distinct states, depth {x.depth}"
                      f"{' (complete)' if x.complete else '' if x.found else ' (state bound hit)'}, "
                      f"{x.transitions} transitions, "
                      f"{x.states_per_second:,.0f} states/s: {verdict}")
        if x.found:
            console.print(render_counterexample(x), markup=False)
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
