"""The `ortmem` command: verify, spec, explore, trace, replay, demo, simulate, view, serve.

Argument parsing and `verify`; the other subcommands are in `refimpl.cli_commands`, report
rendering in `refimpl.cli_report`, the path checks in `refimpl.cli_paths`. The work is in
`refimpl.verify` and `spec.catalog`. It fails fast: arguments are bounded by argparse and every
output path is probed before any work starts (issue #14, finding 6); a failure to write is one
line on stderr, never a traceback. Exit codes (`EXIT_*`, also in `--help`):
0 success, 1 a check failed, 2 usage error or unusable input / output path
(a trace beyond a resource limit of the replay included: it was not judged),
130 interrupted (Ctrl-C stops `verify` and its worker processes at once).
Errors go to stderr, reports to stdout; every reporting command takes
`--json PATH` (`-`: the JSON alone on stdout). Long commands show progress
(`refimpl.cli_progress`): live in a terminal, a plain line every 10 s in a log.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from rich.console import Console

from refimpl import cli_commands as C
from refimpl.cli_paths import Unusable, bounded, probe_dir, probe_json, probe_file, write, write_json
from refimpl.cli_progress import Reporter
from refimpl.cli_report import print_report, report_json, report_markdown
from refimpl.verify import CHECKER_NAMES, Search, verify

__all__ = ["main", "report_json", "report_markdown", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES = (f"exit codes: {EXIT_OK} success; {EXIT_FAILED} a check failed (violation, rejected trace, missed "
              f"negative control, drift); {EXIT_USAGE} usage error or an unusable input/output path (a trace "
              f"beyond a replay resource limit included: not judged); {EXIT_INTERRUPTED} interrupted (Ctrl-C)")
#: Measured wall-clock times of `verify` on 2 cores (the figures the --help text states; see the README).
QUICK_TIME, THOROUGH_TIME = "about 5 minutes", "about 20 minutes"
#: Where `verify` keeps the failures its campaigns find (Hypothesis' example database), unless told otherwise.
DEFAULT_DATABASE = ".hypothesis/ortmem-verify"


def _version() -> str:
    try:
        return metadata.version("ortmem")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"



def _verify(args: argparse.Namespace, console: Console) -> int:
    profile = "quick" if args.quick else "thorough"
    probe_json(args)
    if args.report:
        probe_dir(args.report)
    database = None if args.database == "none" else args.database
    if database is not None and not database.startswith(("redis://", "rediss://", "unix://")):
        probe_dir(database)
    search = Search(args.seed, database)
    console.print(f"ortmem verify: profile [bold]{profile}[/]"
                  + (f", checkers {', '.join(args.checker)}" if args.checker else "")
                  + (f", seed {args.seed}" if args.seed is not None else ", fixed seeds"))
    with Reporter(console) as progress:
        report = verify(profile, progress.phase, jobs=args.jobs,
                        checkers=tuple(args.checker) if args.checker else None, live=progress.live, search=search)
    print_report(report, console)
    if args.json:
        write_json(args.json, report_json(report))
        console.print(f"report written to {args.json}")
    if args.report:
        folder = Path(args.report)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise Unusable(f"cannot create {folder}: {e.strerror or e}") from None
        write(folder / "report.json", json.dumps(report_json(report), indent=2) + "\n")
        write(folder / "report.md", report_markdown(report))
        from refimpl.simulate_plots import write_plots

        plots = write_plots(folder)  # the simulate scenarios' plots, one PNG per scenario
        console.print(f"report folder written to {folder} (report.md, report.json, {len(plots)} scenario plots)")
    if args.strict and not report.all_verified:
        console.print("--strict: not every ID is verified")
        return EXIT_FAILED
    return EXIT_OK if report.ok else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ortmem", description="Memory governance for ONNX Runtime: "
                                     "executable specification and reference implementation.", epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"ortmem {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the catalog, the stateful campaign and every negative control",
                       epilog=EXIT_CODES)
    v.add_argument("--quick", action="store_true", help=f"the quick profile ({QUICK_TIME} on 2 cores; the "
                   f"thorough default: {THOROUGH_TIME})")
    _json(v, "the per-ID report")
    v.add_argument("--seed", type=bounded(0, 2**32 - 1), metavar="N",
                   help="search from seed N (each campaign and control its own, derived from N): a new N searches "
                        "new ground, the same N repeats the run (default: fixed seeds)")
    v.add_argument("--database", metavar="DIR|URL", default=DEFAULT_DATABASE,
                   help="where the campaigns keep the failures they find and replay them first next time: a "
                        "directory, a redis:// URL (the [redis] extra), or 'none' (default: %(default)s)")
    v.add_argument("--report", metavar="DIR", help="write a report folder: report.md (for reviewers) and report.json")
    v.add_argument("--strict", action="store_true",
                   help="also exit 1 unless every implemented ID is verified (default: only on a violation)")
    v.add_argument("--jobs", type=bounded(1, 64), metavar="N",
                   help="worker processes for campaigns, controls and the explorer, 1..64 (default: one per core)")
    v.add_argument("--checker", action="append", choices=list(CHECKER_NAMES), metavar="NAME",
                   help="run only this checker's phases (repeatable; the IDs it checks, same verdict rules; "
                        f"CrossHair is not run): {', '.join(CHECKER_NAMES)}")
    s = sub.add_parser("spec", help="list the catalog, or show one entry")
    s.add_argument("id", nargs="?", help="a catalog ID such as C1 or I8c")
    s.add_argument("--write-docs", action="store_true", help="regenerate docs/spec.md (in a checkout only)")
    _json(s, "the catalog (or the entry)")
    x = sub.add_parser("explore", help="bounded-exhaustive exploration of a spec scope (default: the ledger's)")
    x.add_argument("--scope", default="ledger", metavar="NAME",
                   help="the scope to explore: ledger (default) or one of invariants.model_scopes.SCOPES "
                        "(manager_arbitration, manager_parts, manager_views, transactions, ...)")
    x.add_argument("--depth", type=bounded(1), default=7,
                   help="maximum number of actions, >= 1 (default 7; a large one, such as 1000000, explores to "
                        "the fixpoint, reported \"complete\")")
    x.add_argument("--symmetry", action="store_true",
                   help="one state per orbit of interchangeable holders (ledger; manager_* scopes always)")
    x.add_argument("--max-states", type=bounded(1), default=1_000_000, help="state bound, >= 1")
    x.add_argument("--guard", action="append",
                   help="switch this ledger guard off (repeatable); a guard the ledger scope never consults is "
                        "a usage error")
    _json(x, "the exploration's result")
    x.add_argument("--write-golden", action="store_true", help="regenerate tests/golden/<guard>.txt")
    t = sub.add_parser("trace", help="write a JSONL trace of a seeded synthetic workload of the whole manager")
    t.add_argument("out", nargs="?", help="output file (JSONL)")
    t.add_argument("--write-schema", action="store_true", help="regenerate docs/trace-schema.json")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--operations", type=bounded(1), default=300, help="workload operations, >= 1")
    t.add_argument("--aging-bound", type=bounded(1, 2**63 - 1), default=4,
                   help="the manager's aging bound (rounds until a pending ticket is matured, I13); the trace's "
                        "configure event carries it to the replay")
    _json(t, "a summary of the trace written (events per kind and revision)")
    r = sub.add_parser("replay", help="check a JSONL trace against the spec (independent of refimpl)",
                       epilog=EXIT_CODES)
    r.add_argument("trace", help="the JSONL trace file")
    _json(r, "the verdict")
    d = sub.add_parser("demo", help="one governed generation: charge per holder per step, static split vs elastic")
    d.add_argument("--steps", type=bounded(1, 64), default=48, help="decode steps, 1..64 (max context 64)")
    d.add_argument("--plot", metavar="PATH", help="also write a PNG of both arms")
    _json(d, "both arms, step by step")
    m = sub.add_parser("simulate", help="the design's measured harms at the reference geometry, beside upstream")
    m.add_argument("--scenario", action="append", choices=sorted(C.scenario_names()), help="only this one (repeatable)")
    m.add_argument("--plots", metavar="DIR", help="also write one PNG per scenario into DIR")
    m.add_argument("--write-docs", action="store_true", help="regenerate docs/harms.md and docs/figures/ "
                   "(in a checkout only)")
    _json(m, "every figure")
    w = sub.add_parser("view", help="a self-contained HTML memory timeline of a JSONL trace")
    w.add_argument("trace", help="the JSONL trace file")
    w.add_argument("-o", "--out", help="output HTML file (default timeline.html, unless only --perfetto is given)")
    w.add_argument("--perfetto", metavar="OUT.json",
                   help="also write the timeline in the Chrome trace-event format (ui.perfetto.dev, chrome://tracing)")
    _json(w, "what was drawn")
    sv = sub.add_parser("serve", help="a serving coordinator and N worker processes (C10); Ctrl-C to stop")
    sv.add_argument("--workers", type=bounded(1, 8), default=2, help="worker processes (1..8)")
    sv.add_argument("--quota", type=int, default=64, metavar="MIB", help="serving quota in MiB (default 64)")
    sv.add_argument("--seconds", type=float, help="stop after this long (default: run until Ctrl-C)")
    sv.add_argument("--interval", type=float, default=0.5, help="seconds between rounds (default 0.5)")
    if sys.stdout is None:  # `ortmem spec >&-`: no stream to report on
        return _closed_stream()
    if sys.stderr is None:  # `2>&-`: errors have nowhere to go, which is no reason to fail the command
        sys.stderr = open(os.devnull, "w")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # logs and CI: wide enough for the per-ID table
    if getattr(args, "json", None) == "-":
        console = Console(quiet=True)  # stdout carries the JSON alone
    commands = {"verify": _verify, "spec": C.spec, "explore": C.explore, "trace": C.trace, "replay": C.replay,
                "demo": C.demo, "simulate": C.simulate, "view": C.view, "serve": C.serve}
    try:
        code = commands[args.command](args, console)
        sys.stdout.flush()  # `ortmem spec > /dev/full`: the write error surfaces here, not at exit
    except Unusable as e:
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


def _json(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", metavar="PATH", help=f"also write {what} as JSON to PATH ('-': only the JSON, "
                        "on stdout)")


def _closed_stream() -> int:
    """stdout was closed before we started: say so on stderr (if it is open), without a traceback."""
    try:
        os.write(2, b"ortmem: cannot write output: standard output is closed\n")
    except OSError:
        pass
    return EXIT_USAGE


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
