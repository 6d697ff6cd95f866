"""The `ortmem` subcommands other than `verify`: spec, explore, trace, replay, demo, simulate, view, serve.

One function per subcommand, `(args, console) -> exit code`; `refimpl.cli` parses the arguments
and dispatches. Heavy imports (the governor, ORT, matplotlib) happen inside the command that
needs them, so `ortmem spec` stays fast and works without onnxruntime. Reports go to `console`
(stdout), errors to stderr (`Unusable`, or `_error` for a failed check's one-line reason); every
command that reports takes `--json PATH`. The `--write-*` options regenerate files of the source
checkout and refuse to run from an installed copy (they would write into site-packages).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from invariants.drift import ROOT, in_checkout
from invariants.explore import render_counterexample
from refimpl.cli_paths import Unusable, probe_dir, probe_file, probe_json, write_json
from spec.catalog import CATALOG, Status, entry, render_markdown
from spec.guards import GuardSet as GuardSet_
from spec.guards import guard

__all__ = ["spec", "explore", "trace", "replay", "demo", "simulate", "view", "serve", "scenario_names",
           "LIMIT_FAILURES"]

#: Replay refusals for a resource bound of the checker, not for what the trace says: the trace was not judged,
#: so they exit 2 (unusable input), never 1 (a violation).
LIMIT_FAILURES = frozenset({"oversize", "too-many-sources"})


def _error(args: argparse.Namespace, message: str) -> None:
    print(f"ortmem {args.command}: {message}", file=sys.stderr)


def _checkout(option: str) -> Path:
    """The source checkout that `option` regenerates files in; an installed copy has none to write."""
    if not in_checkout(ROOT):
        raise Unusable(f"{option} regenerates files of a source checkout, and {ROOT} is an installed copy "
                       f"(no docs/ and tests/ beside the packages): run it from a clone of the repository")
    return ROOT


def _entry_json(e: Any) -> dict[str, Any]:
    out = {"id": e.id, "kind": e.kind, "title": e.title, "status": e.status.value, "statement": e.statement,
           "rationale": e.rationale, "evidence": list(e.evidence)}
    if e.status is Status.NOT_YET_IMPLEMENTED:
        return out | {"planned": e.planned}
    return out | {"scope": e.scope, "predicates": list(e.predicates), "tests": list(e.tests),
                  "guards": [{"name": g.name, "description": g.description, "harm": g.harm} for g in e.guards]}


def spec(args: argparse.Namespace, console: Console) -> int:
    probe_json(args)
    if args.write_docs:
        path = _checkout("--write-docs") / "docs" / "spec.md"
        path.write_text(render_markdown())
        console.print(f"wrote {path}")
        return 0
    if args.id:
        try:
            e = entry(args.id)
        except KeyError as err:
            raise Unusable(err.args[0]) from None
        if args.json:
            write_json(args.json, _entry_json(e))
        console.print(f"[bold]{e.id}[/] {e.title} ({e.kind}; {e.status.value})\n")
        console.print(e.statement + "\n", markup=False)
        console.print(Text.assemble(("Rationale.", "bold"), f" {e.rationale}\n"))
        console.print("[bold]Evidence.[/]")
        for x in e.evidence:
            console.print(f"  - {x}", markup=False)
        if e.status is Status.NOT_YET_IMPLEMENTED:
            console.print(Text.assemble("\n", ("Not yet implemented", "yellow"), f": planned in {e.planned}."))
            return 0
        if e.scope:
            console.print(Text.assemble("\n", ("Scope.", "bold"), f" {e.scope}"))
        console.print("\n[bold]Predicates.[/]")
        for p in e.predicates:
            console.print(f"  - {p}", markup=False)
        console.print("[bold]Guards.[/]")
        for g in e.guards:
            console.print(f"  - {g.name}: {g.description} (switched off: {g.harm})", markup=False)
        console.print("[bold]Tests.[/]")
        for t in e.tests:
            console.print(f"  - {t}", markup=False)
        return 0
    table = Table(title="ortmem catalog")
    for col in ("ID", "kind", "title", "status"):
        table.add_column(col)
    for e in CATALOG:
        table.add_row(e.id, e.kind, e.title, e.status.value)
    console.print(table)
    if args.json:
        write_json(args.json, {"catalog": [_entry_json(e) for e in CATALOG]})
    return 0


def explore(args: argparse.Namespace, console: Console) -> int:
    from invariants.explore import explore
    from invariants.ledger_scope import QUICK_SCOPE, golden_counterexample, golden_itf, ledger_model
    from spec.guards import GUARDS, GuardSet

    probe_json(args)
    if args.write_golden:
        out = _checkout("--write-golden") / "tests" / "golden"
        (out / "itf").mkdir(parents=True, exist_ok=True)
        for g in GUARDS:
            if g.model == "ledger":
                (out / f"{g.name}.txt").write_text(golden_counterexample(g))
                (out / "itf" / f"{g.name}.json").write_text(golden_itf(g))
                console.print(f"wrote {out / (g.name + '.txt')} and {out / 'itf' / (g.name + '.json')}")
        return 0
    from invariants.model_scopes import SCOPES
    if args.scope != "ledger" and args.scope not in SCOPES:
        raise Unusable(f"no scope {args.scope!r}; the scopes: ledger, {', '.join(SCOPES)}")
    ledger = [g.name for g in GUARDS if g.model == "ledger"]
    for name in args.guard or ():
        try:
            g = guard(name)
        except KeyError:
            raise Unusable(f"no guard {name!r}; the ledger scope's guards: {', '.join(ledger)}") from None
        if g.model != "ledger" and args.scope == "ledger":
            raise Unusable(f"guard {name!r} belongs to the {g.model} model, and `ortmem explore` explores the "
                           f"ledger scope, which never consults it (switching it off would change nothing); "
                           f"the ledger scope's guards: {', '.join(ledger)}")
    consulted: set[str] = set()
    guards = _Consulted(frozenset(args.guard or ()), consulted)
    model = (ledger_model(QUICK_SCOPE, guards, symmetry=args.symmetry) if args.scope == "ledger"
             else SCOPES[args.scope](guards))
    r = explore(model, max_depth=args.depth, max_states=args.max_states)
    unused = sorted(set(args.guard or ()) - consulted)
    if unused and not r.found:
        raise Unusable(f"the {args.scope} scope never consulted guard(s) {', '.join(unused)} in {r.states} states: "
                       "switching them off changed nothing, so 'no violation' would say nothing")
    console.print(f"{r.states} distinct states, depth {r.depth}, {r.transitions} transitions, "
                  f"{r.rejected} refused, {r.seconds:.2f} s, {r.states_per_second:,.0f} states/s, {r.coverage}",
                  soft_wrap=True)
    console.print(render_counterexample(r), markup=False, soft_wrap=True)
    if args.json:  # an ITF trace (Apalache, Quint): the counterexample's states; the run's figures in "#meta"
        from invariants.itf import itf_trace
        from refimpl.cli_report import explore_summary
        write_json(args.json, itf_trace(r.trace, r.counterexample,
                                        {"source": "ortmem explore", "scope": args.scope,
                                         "guards_off": list(args.guard or ()),
                                         **explore_summary(r)}))
    return 1 if r.found else 0


class _Consulted(GuardSet_):  # type: ignore[misc, valid-type]
    """A guard set that notes which guards the scope's steps asked about (so an unused one is caught)."""

    def __init__(self, off: frozenset[str], seen: set[str]) -> None:
        super().__init__(off)
        object.__setattr__(self, "_seen", seen)

    def on(self, name: str) -> bool:
        self._seen.add(name)
        return super().on(name)


def trace(args: argparse.Namespace, console: Console) -> int:
    from refimpl.manager import ProcessMemoryManager
    from refimpl.manager_workload import run_manager_workload
    from refimpl.tracing import JsonlSink
    from spec.errors import GovernorError

    probe_json(args)
    if args.write_schema:
        from invariants.hierarchy_trace import json_schema as hierarchy_schema
        from invariants.trace_schema import schema_text

        root = _checkout("--write-schema")
        path = root / "docs" / "trace-schema.json"
        path.write_text(schema_text())
        console.print(f"wrote {path}")
        path = root / "docs" / "trace-schema-hierarchy.json"
        path.write_text(json.dumps(hierarchy_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")
        return 0
    if not args.out:
        raise Unusable("name the output file")
    probe_file(args.out)
    try:
        with open(args.out, "w") as f:  # every part of the one manager, then settled
            run_manager_workload(ProcessMemoryManager(trace=JsonlSink(f), aging_bound=args.aging_bound),
                                 seed=args.seed, operations=args.operations)
    except OSError as e:
        raise Unusable(f"cannot write {args.out}: {e.strerror or e}") from None
    except GovernorError as e:  # an argument the manager refuses (argparse bounds most of them first)
        raise Unusable(f"{type(e).__name__}: {e}") from None
    console.print(f"wrote {args.out}")
    if args.json:
        write_json(args.json, _trace_summary(args))
    return 0


def _trace_summary(args: argparse.Namespace) -> dict[str, Any]:
    """What the trace just written holds: events per revision and per kind (our own file, read back)."""
    revisions: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    rejected = 0
    with open(args.out, "rb") as f:
        for raw in f:
            event = json.loads(raw)
            revisions[event.get("contract_revision", "?")] += 1
            kinds[event.get("kind", "?")] += 1
            rejected += (event.get("payload") or {}).get("outcome") == "rejected"
    return {"path": args.out, "events": sum(kinds.values()), "rejected": rejected, "seed": args.seed,
            "operations": args.operations, "aging_bound": args.aging_bound,
            "revisions": dict(sorted(revisions.items())), "kinds": dict(sorted(kinds.items()))}


def replay(args: argparse.Namespace, console: Console) -> int:
    from invariants.hierarchy_trace import REVISION, replay_hierarchy
    from invariants.manager_replay import replay

    probe_json(args)
    if os.path.isdir(args.trace):
        raise Unusable(f"cannot read {args.trace}: a directory, not a trace")
    try:
        with open(args.trace, "rb") as f:
            first = f.readline(4096)
            f.seek(0)
            if REVISION.encode() in first:  # a hierarchy trace (C10, I11)
                r = replay_hierarchy(iter(lambda: f.readline(1 << 17), b""))
            else:  # the manager's, ledger operations included
                r = replay(f)
    except OSError as e:
        raise Unusable(f"cannot read {args.trace}: {e.strerror or e}") from None
    if r.ok and r.events == 0:  # nothing was checked: an empty trace conforms to nothing
        r = attrs.evolve(r, ok=False, failure="no-events", message="no events: the trace is empty")
    limit = not r.ok and r.failure in LIMIT_FAILURES
    text = r.describe()
    if limit:
        text = text.replace("REJECTED", "NOT JUDGED", 1) + " (a resource bound of the replay, not a violation)"
    console.print(text, markup=False, style="green" if r.ok else "red", soft_wrap=True)
    if args.json:
        write_json(args.json, {"trace": args.trace, "ok": r.ok, "judged": not limit, "events": r.events,
                               "line": r.line, "failure": r.failure, "id": r.id, "message": r.message})
    return 0 if r.ok else 2 if limit else 1


def serve(args: argparse.Namespace, console: Console) -> int:
    from refimpl.hierarchy.serve import run_serve

    if not 1 <= args.workers <= 8 or args.quota < 1:
        raise Unusable("--workers must be in 1..8 and --quota positive")
    return run_serve(args.workers, args.quota, args.seconds, args.interval,
                     lambda line: console.print(line, markup=False, soft_wrap=True))


def demo(args: argparse.Namespace, console: Console) -> int:
    from refimpl.cli_progress import Reporter
    from refimpl.demo import plot, run_demo

    if args.plot:
        probe_file(args.plot)
    probe_json(args)
    with Reporter(console) as progress:
        static, elastic, identical = run_demo(steps=args.steps, progress=progress.phase)
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
    if args.json:
        write_json(args.json, {"steps": args.steps, "identical_to_ungoverned": identical,
                               "arms": {arm.name: {"steps": list(arm.steps), "stranded_byte_steps":
                                                   arm.stranded_byte_steps, "mean_cache": arm.mean_cache,
                                                   "tickets_opened": arm.tickets[0],
                                                   "tickets_answered": arm.tickets[1]}
                                        for arm in (static, elastic)}})
    return 0 if identical else 1


def scenario_names() -> tuple[str, ...]:
    from refimpl.simulate import SCENARIOS

    return tuple(SCENARIOS)


def simulate(args: argparse.Namespace, console: Console) -> int:
    from refimpl.cli_progress import Reporter
    from refimpl.simulate import SCENARIOS
    from refimpl.simulate_docs import COLUMNS, cells

    if args.plots:
        probe_dir(args.plots)
    probe_json(args)
    if args.write_docs:
        if args.scenario:
            raise Unusable("--write-docs renders every scenario; drop --scenario")
        _checkout("--write-docs")
    names = tuple(args.scenario) if args.scenario else tuple(SCENARIOS)
    done: list[Any] = []
    with Reporter(console) as progress:
        for i, name in enumerate(names):
            progress.phase("scenarios", i, len(names))
            progress.live(name, {"scenario": i + 1})
            done.append(SCENARIOS[name]())
            progress.live(name, {})
        progress.phase("scenarios", len(names), len(names))
    scenarios = tuple(done)
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

        (ROOT / "docs" / "harms.md").write_text(render_markdown(scenarios))
        write_plots(ROOT / "docs" / "figures", scenarios)
        console.print(f"wrote {ROOT / 'docs' / 'harms.md'} and {ROOT / 'docs' / 'figures'}")
    if args.json:
        write_json(args.json, {"scenarios": [
            {"key": sc.key, "title": sc.title, "geometry": sc.geometry, "conclusions": list(sc.conclusions),
             "figures": [{"name": f.name, "kind": f.kind.value, "value": _num(f.value), "design": _num(f.design),
                          "stated": f.stated, "unit": f.unit, "ratio": _num(f.ratio), "source": f.source,
                          "note": f.note} for f in sc.figures]}
            for sc in scenarios]})
    return 0


def _num(v: Any) -> Any:
    """A figure as JSON: ints stay exact, a Fraction becomes a float, None stays null."""
    return v if v is None or type(v) is int else float(v)


def view(args: argparse.Namespace, console: Console) -> int:
    from refimpl.view import TraceError, write_timeline
    from refimpl.view_perfetto import write_perfetto

    out = args.out if args.out or args.perfetto else "timeline.html"
    for path in (out, args.perfetto):
        if path:
            probe_file(path)
    probe_json(args)
    if not os.path.isfile(args.trace):
        raise Unusable(f"cannot read {args.trace}: not a file")
    try:
        n = write_timeline(args.trace, out) if out else None
        if args.perfetto:
            n = write_perfetto(args.trace, args.perfetto)
    except OSError as e:
        raise Unusable(f"cannot read {args.trace} or write {out or args.perfetto}: {e.strerror or e}") from None
    except TraceError as e:
        _error(args, f"{args.trace}: {e}")
        return 1
    for path in (out, args.perfetto):
        if path:
            console.print(f"wrote {path} ({n} events)")
    if args.json:
        write_json(args.json, {"trace": args.trace, "out": out, "perfetto": args.perfetto, "events": n})
    return 0
