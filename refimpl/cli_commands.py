"""The `ortmem` subcommands other than `verify`: spec, explore, trace, replay, demo, simulate, view, serve.

One function per subcommand, `(args, console) -> exit code`; `refimpl.cli` parses the arguments
and dispatches. Heavy imports (the governor, ORT, matplotlib) happen inside the command that
needs them, so `ortmem spec` stays fast and works without onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from invariants.drift import ROOT
from invariants.explore import render_counterexample
from refimpl.cli_paths import Unusable, probe_dir, probe_file
from spec.catalog import CATALOG, Status, entry, render_markdown
from spec.guards import guard

__all__ = ["spec", "explore", "trace", "replay", "demo", "simulate", "view", "serve", "scenario_names"]


def spec(args: argparse.Namespace, console: Console) -> int:
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


def explore(args: argparse.Namespace, console: Console) -> int:
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


def trace(args: argparse.Namespace, console: Console) -> int:
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
    probe_file(args.out)
    try:
        with open(args.out, "w") as f:
            if args.ledger:
                run_workload(ProcessMemoryManager(trace=JsonlSink(f), aging_bound=args.aging_bound), seed=args.seed,
                             operations=args.operations)
            elif getattr(args, "focused", None):  # a focused front end: its own revision, its own spec
                from refimpl.focused_workload import run_pool_workload, run_tx_workload
                from refimpl.manager import ProcessMemoryManager as Composed
                run = run_pool_workload if args.focused == "pool" else run_tx_workload
                run(Composed(trace=JsonlSink(f), aging_bound=args.aging_bound), seed=args.seed,
                    operations=args.operations)
            else:  # every part of the one manager: tickets, pressure, transactions, limits, device loss
                from refimpl.manager import ProcessMemoryManager as Composed
                from refimpl.manager_workload import run_manager_workload
                run_manager_workload(Composed(trace=JsonlSink(f), aging_bound=args.aging_bound), seed=args.seed,
                                     operations=args.operations)
    except OSError as e:
        raise Unusable(f"cannot write {args.out}: {e.strerror or e}") from None
    console.print(f"wrote {args.out}")
    return 0


def replay(args: argparse.Namespace, console: Console) -> int:
    from invariants.replay import replay

    from invariants.hierarchy_trace import REVISION, replay_hierarchy
    from invariants.manager_replay import replay_manager_lines
    from invariants.focused_trace import FOCUSED
    from invariants.manager_trace import MANAGER_REVISION
    from invariants.replay import bounded_lines

    try:
        with open(args.trace, "rb") as f:
            first = f.readline(4096)
            f.seek(0)
            # A composed trace (tickets, pressure, transactions, limits beside the ledger) or a focused one
            # (ortmem-pool/1, ortmem-tx/1) has at least one such event anywhere; one bounded pass finds out.
            marks = [r.encode() for r in (MANAGER_REVISION, *FOCUSED)]
            composed = REVISION.encode() not in first and any(any(x in raw for x in marks)
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


def serve(args: argparse.Namespace, console: Console) -> int:
    from refimpl.hierarchy.serve import run_serve

    if not 1 <= args.workers <= 8 or args.quota < 1:
        console.print("[red]--workers must be in 1..8 and --quota positive[/]")
        return 2
    return run_serve(args.workers, args.quota, args.seconds, args.interval,
                     lambda line: console.print(line, markup=False, soft_wrap=True))


def demo(args: argparse.Namespace, console: Console) -> int:
    from refimpl.demo import plot, run_demo

    if args.plot:
        probe_file(args.plot)
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
            raise Unusable(f"cannot write {args.plot}: {e.strerror or e}") from None
        console.print(f"plot written to {args.plot}")
    return 0 if identical else 1


def scenario_names() -> tuple[str, ...]:
    from refimpl.simulate import SCENARIOS

    return tuple(SCENARIOS)


def simulate(args: argparse.Namespace, console: Console) -> int:
    from refimpl.simulate import run_all
    from refimpl.simulate_docs import COLUMNS, cells

    if args.plots:
        probe_dir(args.plots)
    scenarios = run_all(tuple(args.scenario) if args.scenario else None)
    for sc in scenarios:
        table = Table(title=f"{sc.title}\n{sc.geometry}", title_justify="left")
        for col, right in COLUMNS:
            table.add_column(col, justify="right" if right else "left", overflow="fold")
        for f in sc.figures:
            table.add_row(*cells(f))
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


def view(args: argparse.Namespace, console: Console) -> int:
    from refimpl.view import TraceError, write_timeline

    probe_file(args.out)
    if not os.path.isfile(args.trace):
        raise Unusable(f"cannot read {args.trace}: not a file")
    try:
        n = write_timeline(args.trace, args.out)
    except OSError as e:
        raise Unusable(f"cannot read {args.trace} or write {args.out}: {e.strerror or e}") from None
    except TraceError as e:
        console.print(f"[red]{e}[/]", markup=False)
        return 1
    console.print(f"wrote {args.out} ({n} events)")
    return 0
