"""The README's "Checking your own governor" example: what its settings cost, in CPU seconds of this process.

The README promises "seconds, not minutes" for its settings line (200 examples x 20 steps). That goal lives
here, not as a timed assertion in tests/test_own_governor.py (which checks what the run finds). Per seed of
the search (`--seeds`), two arms run in one process, back to back, as the tests run them (no example database):
(a) a correct governor (refimpl's manager behind `ManagerAdapter`, on the composed machine's ledger restriction):
    the whole run, every example;
(b) the tests' planted bug (a commit beyond its reservation): CPU s until the first failing step ("found"), the
    whole run with Hypothesis' shrink to the short script ("total"), the examples run before and after the
    failure was found, the final error's type (one failure: RefinementViolation; several: ExceptionGroup) and
    the script's length.
CPU time of this process is reported (wall time on a shared machine mostly measures the neighbours), and the
ratio b / a per seed.

Where the time went (2026-12-05, this 2-core machine under load, seeds 0-9, both settings lines run at the same
time): with the README's line as it was (`deadline=None` and Hypothesis' defaults), the planted bug was found in
0.03-2.7 CPU s, but the whole run took 22-195 CPU s (median 61 s; 11.9x a correct run), 500-4,900 examples after
the failure, and seed 5 ended in an ExceptionGroup. Shrinking is most of it, and Hypothesis' explain phase (on by
default) traced every line of every example run after the first failure (`sys.settrace` on Python 3.11): about 3x
each example's cost (seed 0: 24 CPU s with it, 7.8 s without, the same 736 examples), and it ran more examples
after the shrink. Seed 5's second failure was the machine's own (a rule drew from an empty list once every
authority was removed). The line now leaves the explain phase out (the failure's script is what explains it) and
reports one failure (`report_multiple_bugs=False`), and the machine draws from no empty list: found in 0.03-2.9
CPU s, the whole run 2.9-35 CPU s (median 6.6 s; 1.3x a correct run of 4.4-5.7 s), one RefinementViolation and a
script of 7-8 actions for every seed. The per-example cost left is mostly Hypothesis' own drawing (about 60% of a
profile), the machine's checked steps about 15%; seed 5 still shrinks through 3,000 examples. With
`report_multiple_bugs` left on, the same ten seeds took 1.9-19 CPU s (median 6.6 s): Hypothesis then keeps
searching after the first failure and may start its shrink from a smaller one, but a governor wrong in two places
reports both as one group. The figures of the last run: bench_own_governor.results.json.

    python benchmarks/bench_own_governor.py [--seeds 0-9] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from invariants._violation import InvariantViolation  # noqa: E402
from invariants.checked import CheckedMachine  # noqa: E402
from refimpl.verify.manager_adapter import ManagerAdapter  # noqa: E402
from tests.test_own_governor import BuggyGovernor, _run  # noqa: E402  (the snippet, read from the README)


@contextlib.contextmanager
def _watch() -> Iterator[dict[str, Any]]:
    """Counts the examples (machines built) and notes the CPU time and example of the first failing step."""
    seen: dict[str, Any] = {"examples": 0, "c0": time.process_time()}
    init, do = CheckedMachine.__init__, CheckedMachine._do

    def counted(self: CheckedMachine) -> None:
        init(self)
        seen["examples"] += 1

    def noted(self: CheckedMachine, action: Any) -> None:
        try:
            do(self, action)
        except InvariantViolation:
            seen.setdefault("found_s", time.process_time() - seen["c0"])
            seen.setdefault("found_at", seen["examples"])
            raise
    CheckedMachine.__init__, CheckedMachine._do = counted, noted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        CheckedMachine.__init__, CheckedMachine._do = init, do  # type: ignore[method-assign]


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def measure(seed: int) -> dict[str, Any]:
    _, err, correct = _run(ManagerAdapter, seed)
    assert err is None, err  # a correct governor passes, else the figure means nothing
    with _watch() as seen:
        _, err, total = _run(BuggyGovernor, seed)
    assert err is not None and "found_s" in seen, "the planted bug was not found"
    script = [s for s in "\n".join(getattr(err, "__notes__", [])).splitlines() if s.startswith("state.act(")]
    return {"seed": seed, "correct_s": round(correct, 2), "found_s": round(seen["found_s"], 2),
            "total_s": round(total, 2), "examples_to_found": seen["found_at"],
            "examples_after": seen["examples"] - seen["found_at"], "error": type(err).__name__,
            "script_actions": len(script), "bug_over_correct": round(total / correct, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=_seeds, default=_seeds("0-9"), help="e.g. 0-9 or 0,3,25")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cols = ("seed", "correct_s", "found_s", "total_s", "examples_to_found", "examples_after", "error",
            "script_actions", "bug_over_correct")
    print("  ".join(cols))
    rows = []
    for seed in args.seeds:
        rows.append(measure(seed))
        print("  ".join(str(rows[-1][c]) for c in cols), flush=True)
    summary = {k: [min(r[k] for r in rows), round(statistics.median(r[k] for r in rows), 2), max(r[k] for r in rows)]
               for k in ("correct_s", "found_s", "total_s", "bug_over_correct")}
    summary["errors"] = sorted({r["error"] for r in rows})
    for k, v in summary.items():
        print(f"{k}: {v}" if k == "errors" else f"{k}: min {v[0]}, median {v[1]}, max {v[2]}")
    if args.json:
        args.json.write_text(json.dumps({"cpu_s_per_seed": rows, "min_median_max": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
