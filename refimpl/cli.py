"""The `ortmem` command: verify, spec, demo.

Rendering only: the work is in `refimpl.verify` and `spec.catalog`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from invariants.drift import ROOT
from refimpl.verify import PROFILES, Report, verify
from spec.catalog import CATALOG, Status, entry, render_markdown

__all__ = ["main", "report_json"]


def report_json(r: Report) -> dict[str, Any]:
    """The machine-readable report (fields of the issue's schema, plus more)."""
    return {
        "ok": r.ok,
        "profile": r.profile,
        "seconds": round(r.seconds, 3),
        "drift": list(r.drift),
        "campaigns": {
            name: {"examples": c.examples, "steps": c.steps, "accepted": c.accepted, "rejected": c.rejected,
                   "seconds": round(c.seconds, 3)}
            for name, c in r.campaigns.items()},
        "campaign_errors": r.campaign_errors,
        "ids": [
            {
                "id": i.id, "title": i.title, "status": i.status, "predicates": list(i.predicates),
                "tests": list(i.tests), "examples": i.examples, "checks": i.checks, "scope": i.scope,
                "planned": i.planned, "expected_negative_controls": i.expected_controls,
                "negative_controls": [
                    {"name": c.guard, "layer": c.layer.value, "found": c.found, "steps": c.steps,
                     "seconds": round(c.seconds, 3), "violated": c.violated,
                     "counterexample": list(c.counterexample), "message": c.message}
                    for c in i.negative_controls],
            }
            for i in r.ids
        ],
    }


def _verify(args: argparse.Namespace, console: Console) -> int:
    profile = "quick" if args.quick else "thorough"
    console.print(f"ortmem verify: profile [bold]{profile}[/]")
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        report = verify(profile, progress)
    _print_report(report, console)
    if args.json:
        Path(args.json).write_text(json.dumps(report_json(report), indent=2) + "\n")
        console.print(f"report written to {args.json}")
    return 0 if report.ok else 1


def _print_report(r: Report, console: Console) -> None:
    for p in r.drift:
        console.print(f"[red]drift:[/] {p}")
    for name, err in r.campaign_errors.items():
        console.print(f"[red]{name} campaign violation:[/] {err}")
    for name, c in r.campaigns.items():
        console.print(f"{name} campaign: {c.examples} examples, {c.steps} steps ({c.accepted} accepted, "
                      f"{sum(c.rejected.values())} rejected with typed errors) in {c.seconds:.1f} s")
    table = Table(title="ortmem verify: per-ID results")
    for col in ("ID", "title", "checks", "examples", "neg. controls", "status"):
        table.add_column(col)
    style = {"verified": "green", "partial": "red", "not yet implemented": "dim"}
    for i in r.ids:
        found = sum(c.found for c in i.negative_controls)
        controls = f"{found}/{i.expected_controls}" if i.expected_controls else "-"
        table.add_row(i.id, i.title, str(i.checks) if i.checks else "-", str(i.examples) if i.examples else "-",
                      controls, f"[{style[i.status]}]{i.status}[/]")
    console.print(table)
    for i in r.ids:
        for c in i.negative_controls:
            if not c.found:
                console.print(f"[red]negative control {c.guard} ({c.layer.value}) found nothing:[/] {c.message}")
    verdict = "[green]OK[/]" if r.ok else "[red]FAILED[/]"
    console.print(f"{verdict} in {r.seconds:.1f} s")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ortmem", description="Memory governance for ONNX Runtime: "
                                     "executable specification and reference implementation.")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the catalog, the stateful campaign and every negative control")
    v.add_argument("--quick", action="store_true", help="the quick profile (about a minute on 2 cores)")
    v.add_argument("--json", metavar="PATH", help="write the per-ID report as JSON")
    s = sub.add_parser("spec", help="list the catalog, or show one entry")
    s.add_argument("id", nargs="?", help="a catalog ID such as C1 or I8c")
    s.add_argument("--write-docs", action="store_true", help="regenerate docs/spec.md")
    d = sub.add_parser("demo", help="one governed generation: charge per holder per step, static split vs elastic")
    d.add_argument("--steps", type=int, default=48, help="decode steps (<= max context 64)")
    d.add_argument("--plot", metavar="PATH", help="also write a PNG of both arms")
    args = parser.parse_args(argv)
    console = Console()
    return {"verify": _verify, "spec": _spec, "demo": _demo}[args.command](args, console)


def _demo(args: argparse.Namespace, console: Console) -> int:
    from refimpl.demo import plot, run_demo

    if not 1 <= args.steps <= 64:
        console.print("[red]--steps must be in 1..64[/]")
        return 2
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
    console.print("outputs identical to the ungoverned run: " + ("[green]yes[/]" if identical else "[red]NO[/]"))
    if args.plot:
        plot(static, elastic, args.plot)
        console.print(f"plot written to {args.plot}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
