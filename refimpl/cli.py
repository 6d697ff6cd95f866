"""The `ortmem` command: verify, spec, explore, trace, replay, demo, simulate, view, serve.

Rendering only: the work is in `refimpl.verify` and `spec.catalog`. It fails
fast: arguments are bounded by argparse and every output path is probed
before any work starts (issue #14, finding 6); a failure to write is one
line on stderr, never a traceback. Exit codes (`EXIT_*`, also in `--help`):
0 success, 1 a check failed, 2 usage error or unusable input / output path,
130 interrupted (Ctrl-C stops `verify` and its worker processes at once).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from invariants.drift import ROOT
from invariants.explore import ExploreResult, render_counterexample
from refimpl.verdict import RULES, THRESHOLDS
from refimpl.verify import Report, verify
from spec.catalog import CATALOG, Status, entry, render_markdown
from spec.guards import guard

__all__ = ["main", "report_json", "report_markdown", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES = (f"exit codes: {EXIT_OK} success; {EXIT_FAILED} a check failed (violation, rejected trace, missed "
              f"negative control, drift); {EXIT_USAGE} usage error or an unusable input/output path; "
              f"{EXIT_INTERRUPTED} interrupted (Ctrl-C)")


class _Unusable(Exception):
    """An input or output path that cannot be used: reported in one line, exit 2."""


def _bounded(low: int, high: int | None = None) -> Any:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if n < low or (high is not None and n > high):
            raise argparse.ArgumentTypeError(f"{n} is outside {low}..{high if high is not None else ''}")
        return n
    return parse


def _probe_file(path: str) -> None:
    """Fail now, before any work, if `path` cannot be written (without truncating an existing file)."""
    if os.path.isdir(path):
        raise _Unusable(f"{path} is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise _Unusable(f"cannot write {path}: directory {parent} does not exist")
    try:
        if os.path.exists(path):
            with open(path, "a"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".ortmem-probe-"):
                pass
    except OSError as e:
        raise _Unusable(f"cannot write {path}: {e.strerror or e}") from None


def _probe_dir(path: str) -> None:
    """Fail now if the report folder cannot be created or written."""
    p = os.path.abspath(path)
    if os.path.exists(p) and not os.path.isdir(p):
        raise _Unusable(f"{path} exists and is not a directory")
    existing = p
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise _Unusable(f"cannot create {path}: {existing} is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".ortmem-probe-"):
            pass
    except OSError as e:
        raise _Unusable(f"cannot write into {existing}: {e.strerror or e}") from None


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise _Unusable(f"cannot write {path}: {e.strerror or e}") from None


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
        "seconds": round(r.seconds, 3),
        "drift": list(r.drift),
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
            "runs": {name: _explore_json(x) for name, x in r.explorations.items()},
            "negative_controls": {name: _explore_json(x) for name, x in r.explorer_controls.items()},
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


def _explore_json(x: ExploreResult) -> dict[str, Any]:
    return {"states": x.states, "transitions": x.transitions, "rejected": x.rejected, "depth": x.depth,
            "complete": x.complete, "seconds": round(x.seconds, 3), "states_per_second": round(x.states_per_second),
            "found": x.found, "violated": x.violated, "clause": x.clause,
            "steps": len(x.counterexample) if x.found else None,
            "counterexample": [repr(a) for a in x.counterexample], "message": x.message}


def _verify(args: argparse.Namespace, console: Console) -> int:
    profile = "quick" if args.quick else "thorough"
    if args.json:
        _probe_file(args.json)
    if args.report:
        _probe_dir(args.report)
    console.print(f"ortmem verify: profile [bold]{profile}[/]")
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        report = verify(profile, progress, jobs=args.jobs)
    _print_report(report, console)
    if args.json:
        _write(Path(args.json), json.dumps(report_json(report), indent=2) + "\n")
        console.print(f"report written to {args.json}")
    if args.report:
        folder = Path(args.report)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _Unusable(f"cannot create {folder}: {e.strerror or e}") from None
        _write(folder / "report.json", json.dumps(report_json(report), indent=2) + "\n")
        _write(folder / "report.md", report_markdown(report))
        from refimpl.simulate_plots import write_plots

        plots = write_plots(folder)  # the simulate scenarios' plots, one PNG per scenario
        console.print(f"report folder written to {folder} (report.md, report.json, {len(plots)} scenario plots)")
    if args.strict and not report.all_verified:
        console.print("--strict: not every ID is verified")
        return EXIT_FAILED
    return EXIT_OK if report.ok else EXIT_FAILED


def report_markdown(r: Report) -> str:
    """A reviewer's summary: verdict, campaigns, the per-ID table, every counterexample found."""
    lines = [f"# ortmem verify: {'OK' if r.ok else 'FAILED'} ({r.profile} profile, {r.seconds:.0f} s)", ""]
    lines += [f"- drift: {p}" for p in r.drift] or ["- drift: none (catalog, predicates, tests and docs in step)"]
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


def _print_report(r: Report, console: Console) -> None:
    for p in r.drift:
        console.print(f"[red]drift:[/] {p}")
    for name, err in r.campaign_errors.items():
        console.print(f"[red]{name} campaign violation:[/] {err}")
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
            console.print(f"[yellow]crosshair skipped:[/] {c.skipped}")
        else:
            console.print(f"crosshair: {c.confirmed} conditions confirmed over all paths in {c.seconds:.1f} s"
                          + ("" if c.ok else " [red]FAILED[/]"))
            for p in c.problems:
                console.print(f"[red]crosshair:[/] {p}", markup=False)
    for m in r.stale_mutants:
        console.print(f"[red]stale mutant:[/] {m}", markup=False)
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
            console.print(f"[yellow]{i.id} partial:[/] {len(i.reasons)} reason(s); first: {i.reasons[0]}",
                          markup=False)
    verified = sum(i.status == "verified" for i in r.ids)
    verdict = "[green]OK[/] (no violation)" if r.ok else "[red]FAILED[/] (a violation)"
    console.print(f"{verdict}: {verified} of {len(r.ids)} IDs verified, "
                  f"{sum(i.status == 'partial' for i in r.ids)} partial, in {r.seconds:.1f} s")


def _spec(args: argparse.Namespace, console: Console) -> int:
    if args.write_docs:
        path = ROOT / "docs" / "spec.md"
        path.write_text(render_markdown())
        console.print(f"wrote {path}")
        return 0
    if args.id:
        try:
            e = entry(args.id)
        except KeyError as err:
            console.print(f"[red]{err.args[0]}[/]")
            return 2
        console.print(f"[bold]{e.id}[/] {e.title} ({e.kind}; {e.status.value})\n")
        console.print(e.statement + "\n")
        console.print(f"[bold]Rationale.[/] {e.rationale}\n")
        console.print("[bold]Evidence.[/]")
        for x in e.evidence:
            console.print(f"  - {x}")
        if e.status is Status.NOT_YET_IMPLEMENTED:
            console.print(f"\n[yellow]Not yet implemented[/]: planned in {e.planned}.")
            return 0
        if e.scope:
            console.print(f"\n[bold]Scope.[/] {e.scope}")
        console.print("\n[bold]Predicates.[/]")
        for p in e.predicates:
            console.print(f"  - {p}")
        console.print("[bold]Guards.[/]")
        for g in e.guards:
            console.print(f"  - {g.name}: {g.description} (switched off: {g.harm})")
        console.print("[bold]Tests.[/]")
        for t in e.tests:
            console.print(f"  - {t}")
        return 0
    table = Table(title="ortmem catalog")
    for col in ("ID", "kind", "title", "status"):
        table.add_column(col)
    for e in CATALOG:
        table.add_row(e.id, e.kind, e.title, e.status.value)
    console.print(table)
    return 0


def _explore(args: argparse.Namespace, console: Console) -> int:
    from invariants.explore import explore
    from invariants.ledger_scope import QUICK_SCOPE, golden_counterexample, ledger_model
    from spec.guards import GUARDS, GuardSet

    if args.write_golden:
        out = ROOT / "tests" / "golden"
        out.mkdir(parents=True, exist_ok=True)
        for g in GUARDS:
            if g.model == "ledger":
                (out / f"{g.name}.txt").write_text(golden_counterexample(g))
                console.print(f"wrote {out / (g.name + '.txt')}")
        return 0
    for name in args.guard or ():
        try:
            guard(name)
        except KeyError:
            console.print(f"[red]no guard {name!r}; known: {', '.join(g.name for g in GUARDS)}[/]")
            return 2
    guards = GuardSet.without(*args.guard) if args.guard else GuardSet()
    r = explore(ledger_model(QUICK_SCOPE, guards), max_depth=args.depth, max_states=args.max_states)
    console.print(f"{r.states} distinct states, depth {r.depth}, {r.transitions} transitions, "
                  f"{r.rejected} refused, {r.seconds:.2f} s, {r.states_per_second:,.0f} states/s, "
                  f"{'complete' if r.complete else 'stopped at the first violation' if r.found else 'state bound hit'}",
                  soft_wrap=True)
    console.print(render_counterexample(r), markup=False, soft_wrap=True)
    return 1 if r.found else 0


def _trace(args: argparse.Namespace, console: Console) -> int:
    from refimpl.governor import ProcessMemoryManager
    from refimpl.tracing import JsonlSink
    from refimpl.workload import run_workload

    if args.write_schema:
        from invariants.trace_format import json_schema

        from invariants.hierarchy_trace import json_schema as hierarchy_schema

        path = ROOT / "docs" / "trace-schema.json"
        path.write_text(json.dumps(json_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")
        path = ROOT / "docs" / "trace-schema-hierarchy.json"
        path.write_text(json.dumps(hierarchy_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")
        return 0
    if not args.out:
        console.print("[red]name the output file[/]")
        return 2
    _probe_file(args.out)
    try:
        with open(args.out, "w") as f:
            if args.ledger:
                run_workload(ProcessMemoryManager(trace=JsonlSink(f)), seed=args.seed, operations=args.operations)
            else:  # every part of the one manager: tickets, pressure, transactions, limits, device loss
                from refimpl.manager import ProcessMemoryManager as Composed
                from refimpl.manager_workload import run_manager_workload
                run_manager_workload(Composed(trace=JsonlSink(f)), seed=args.seed, operations=args.operations)
    except OSError as e:
        raise _Unusable(f"cannot write {args.out}: {e.strerror or e}") from None
    console.print(f"wrote {args.out}")
    return 0


def _replay(args: argparse.Namespace, console: Console) -> int:
    from invariants.replay import replay

    from invariants.hierarchy_trace import REVISION, replay_hierarchy
    from invariants.manager_replay import replay_manager_lines
    from invariants.manager_trace import MANAGER_REVISION
    from invariants.replay import bounded_lines

    try:
        with open(args.trace, "rb") as f:
            first = f.readline(4096)
            f.seek(0)
            # A composed trace (tickets, pressure, transactions, limits beside the ledger) has at least one
            # composed event anywhere; one bounded pass finds out.
            composed = REVISION.encode() not in first and any(MANAGER_REVISION.encode() in raw
                                                                for raw in bounded_lines(f))
            f.seek(0)
            if REVISION.encode() in first:  # a hierarchy trace (C10, I11)
                r = replay_hierarchy(iter(lambda: f.readline(1 << 17), b""))
            elif composed:
                r = replay_manager_lines(bounded_lines(f))
            else:
                r = replay(f)
    except OSError as e:
        console.print(f"[red]cannot read {args.trace}: {e.strerror}[/]")
        return 2
    console.print(r.describe(), markup=False, style="green" if r.ok else "red", soft_wrap=True)
    return 0 if r.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ortmem", description="Memory governance for ONNX Runtime: "
                                     "executable specification and reference implementation.", epilog=EXIT_CODES)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the catalog, the stateful campaign and every negative control",
                       epilog=EXIT_CODES)
    v.add_argument("--quick", action="store_true", help="the quick profile (about a minute on 2 cores)")
    v.add_argument("--json", metavar="PATH", help="write the per-ID report as JSON")
    v.add_argument("--report", metavar="DIR", help="write a report folder: report.md (for reviewers) and report.json")
    v.add_argument("--strict", action="store_true",
                   help="also exit 1 unless every implemented ID is verified (default: only on a violation)")
    v.add_argument("--jobs", type=_bounded(1, 64), metavar="N",
                   help="worker processes for campaigns and controls, 1..64 (default: one per core)")
    s = sub.add_parser("spec", help="list the catalog, or show one entry")
    s.add_argument("id", nargs="?", help="a catalog ID such as C1 or I8c")
    s.add_argument("--write-docs", action="store_true", help="regenerate docs/spec.md")
    x = sub.add_parser("explore", help="bounded-exhaustive exploration of the ledger spec")
    x.add_argument("--depth", type=_bounded(1), default=7, help="maximum number of actions, >= 1 (default 7)")
    x.add_argument("--max-states", type=_bounded(1), default=1_000_000, help="state bound, >= 1")
    x.add_argument("--guard", action="append", help="switch this guard off (repeatable)")
    x.add_argument("--write-golden", action="store_true", help="regenerate tests/golden/<guard>.txt")
    t = sub.add_parser("trace", help="write a JSONL trace of a seeded synthetic workload of the whole manager")
    t.add_argument("out", nargs="?", help="output file (JSONL)")
    t.add_argument("--write-schema", action="store_true", help="regenerate docs/trace-schema.json")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--operations", type=_bounded(1), default=300, help="workload operations, >= 1")
    t.add_argument("--ledger", action="store_true",
                   help="the ledger-only workload (revision ortmem-ledger/1) instead of the composed manager's")
    r = sub.add_parser("replay", help="check a JSONL trace against the spec (independent of refimpl)")
    r.add_argument("trace", help="the JSONL trace file")
    d = sub.add_parser("demo", help="one governed generation: charge per holder per step, static split vs elastic")
    d.add_argument("--steps", type=_bounded(1, 64), default=48, help="decode steps, 1..64 (max context 64)")
    d.add_argument("--plot", metavar="PATH", help="also write a PNG of both arms")
    m = sub.add_parser("simulate", help="the design's measured harms at the reference geometry, beside upstream")
    m.add_argument("--scenario", action="append", choices=sorted(_scenarios()), help="only this one (repeatable)")
    m.add_argument("--plots", metavar="DIR", help="also write one PNG per scenario into DIR")
    m.add_argument("--write-docs", action="store_true", help="regenerate docs/harms.md and docs/figures/")
    w = sub.add_parser("view", help="a self-contained HTML memory timeline of a JSONL trace")
    w.add_argument("trace", help="the JSONL trace file")
    w.add_argument("-o", "--out", default="timeline.html", help="output HTML file (default timeline.html)")
    sv = sub.add_parser("serve", help="a serving coordinator and N worker processes (C10); Ctrl-C to stop")
    sv.add_argument("--workers", type=_bounded(1, 8), default=2, help="worker processes (1..8)")
    sv.add_argument("--quota", type=int, default=64, metavar="MIB", help="serving quota in MiB (default 64)")
    sv.add_argument("--seconds", type=float, help="stop after this long (default: run until Ctrl-C)")
    sv.add_argument("--interval", type=float, default=0.5, help="seconds between rounds (default 0.5)")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # logs and CI: wide enough for the per-ID table
    commands = {"verify": _verify, "spec": _spec, "explore": _explore, "trace": _trace, "replay": _replay,
                "demo": _demo, "simulate": _simulate, "view": _view, "serve": _serve}
    try:
        code = commands[args.command](args, console)
        sys.stdout.flush()  # `ortmem spec > /dev/full`: the write error surfaces here, not at exit
    except _Unusable as e:
        print(f"ortmem {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"ortmem {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # stdout itself is unwritable (a full disk, a closed pipe)
        _quiet_stdout()
        print(f"ortmem {args.command}: cannot write output: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _serve(args: argparse.Namespace, console: Console) -> int:
    from refimpl.hierarchy.serve import run_serve

    if not 1 <= args.workers <= 8 or args.quota < 1:
        console.print("[red]--workers must be in 1..8 and --quota positive[/]")
        return 2
    return run_serve(args.workers, args.quota, args.seconds, args.interval,
                     lambda line: console.print(line, markup=False, soft_wrap=True))


def _demo(args: argparse.Namespace, console: Console) -> int:
    from refimpl.demo import plot, run_demo

    if args.plot:
        _probe_file(args.plot)
    static, elastic, identical = run_demo(steps=args.steps)
    table = Table(title="ortmem demo: charge per holder per step (bytes)")
    for col in ("step", "static weights", "static cache", "static KV", "static stranded",
                "elastic cache", "elastic KV", "elastic stranded", "reclaimed"):
        table.add_column(col, justify="right")
    for i, (a, b) in enumerate(zip(static.steps, elastic.steps), 1):
        table.add_row(str(i), f"{a['weights']:,}", f"{a['cache']:,}", f"{a['kv']:,}", f"{a['stranded']:,}",
                      f"{b['cache']:,}", f"{b['kv']:,}", f"{b['stranded']:,}", f"{b['released']:,}")
    console.print(table)
    console.print(f"stranded KV (byte-steps): static {static.stranded_byte_steps:,}, "
                  f"elastic {elastic.stranded_byte_steps:,}; mean weight cache: static {static.mean_cache:,.0f} B, "
                  f"elastic {elastic.mean_cache:,.0f} B")
    console.print(f"reclaim through pressure tickets on the weight holder (opened/answered): "
                  f"static {static.tickets[0]}/{static.tickets[1]}, elastic {elastic.tickets[0]}/{elastic.tickets[1]}")
    console.print("outputs identical to the ungoverned run: " + ("[green]yes[/]" if identical else "[red]NO[/]"))
    if args.plot:
        try:
            plot(static, elastic, args.plot)
        except OSError as e:
            raise _Unusable(f"cannot write {args.plot}: {e.strerror or e}") from None
        console.print(f"plot written to {args.plot}")
    return 0 if identical else 1


def _scenarios() -> tuple[str, ...]:
    from refimpl.simulate import SCENARIOS

    return tuple(SCENARIOS)


def _simulate(args: argparse.Namespace, console: Console) -> int:
    from refimpl.simulate import run_all
    from refimpl.simulate_docs import format_value as _fmt

    if args.plots:
        _probe_dir(args.plots)
    scenarios = run_all(tuple(args.scenario) if args.scenario else None)
    for sc in scenarios:
        table = Table(title=sc.title, title_justify="left")
        for col, just in (("figure", "left"), ("simulated", "right"), ("upstream", "right"), ("ratio", "right"),
                          ("source", "left"), ("why it differs / what it means", "left")):
            table.add_column(col, justify=just, overflow="fold")
        for f in sc.figures:
            table.add_row(f.name, _fmt(f.value, f.unit), _fmt(f.upstream, f.unit),
                          "-" if f.ratio is None else f"{float(f.ratio):.3f}", f.source, f.note)
        console.print(table)
        for c in sc.conclusions:
            console.print(f"  - {c}", markup=False)
        console.print()
    if args.plots:
        from refimpl.simulate_plots import write_plots

        paths = write_plots(Path(args.plots), scenarios)
        console.print(f"plots written: {', '.join(str(p) for p in paths)}")
    if args.write_docs:
        from refimpl.simulate_docs import render_markdown
        from refimpl.simulate_plots import write_plots

        if args.scenario:
            console.print("[red]--write-docs renders every scenario; drop --scenario[/]")
            return 2
        (ROOT / "docs" / "harms.md").write_text(render_markdown(scenarios))
        write_plots(ROOT / "docs" / "figures", scenarios)
        console.print(f"wrote {ROOT / 'docs' / 'harms.md'} and {ROOT / 'docs' / 'figures'}")
    return 0


def _view(args: argparse.Namespace, console: Console) -> int:
    from refimpl.view import TraceError, write_timeline

    _probe_file(args.out)
    if not os.path.isfile(args.trace):
        raise _Unusable(f"cannot read {args.trace}: not a file")
    try:
        n = write_timeline(args.trace, args.out)
    except OSError as e:
        raise _Unusable(f"cannot read {args.trace} or write {args.out}: {e.strerror or e}") from None
    except TraceError as e:
        console.print(f"[red]{e}[/]", markup=False)
        return 1
    console.print(f"wrote {args.out} ({n} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
