"""The README's "Checking your own governor" example: what its settings cost, in CPU seconds of this process.

The README promises "seconds, not minutes" for its settings line (200 examples x 20 steps). That goal lives
here, not as a timed assertion in tests/test_own_governor.py (which checks what the run finds). Two arms, run
in one process, the same seeded search as the tests:
(a) a correct governor (refimpl's manager behind `ManagerAdapter`, on the composed machine's ledger restriction): the whole run, every example;
(b) the tests' planted bug (a commit beyond its reservation): until the failure and its shrunk reproduction.
CPU time of this process is reported (wall time on a shared machine mostly measures the neighbours), and the
ratio b / a. Shrinking dominates b: on 2026-12-03 (load about 3) a clean run took 4.6 CPU s and the planted bug
14.5 CPU s to its shrunk reproduction (3.2x), on the ledger's own machine; on 2026-12-05 (load about 5.5), on the
composed machine's ledger restriction, 5.45 CPU s and 27.5 CPU s (5.0x, one round): still "seconds, not minutes"
as the README says.

    python benchmarks/bench_own_governor.py [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_own_governor import BuggyGovernor, _run  # noqa: E402  (the snippet, read from the README)
from refimpl.verify.manager_adapter import ManagerAdapter  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows: dict[str, list[float]] = {"correct": [], "planted bug": []}
    for _ in range(args.rounds):
        _, err, cpu = _run(ManagerAdapter)
        assert err is None, err  # a correct governor passes, else the figure means nothing
        rows["correct"].append(cpu)
        _, err, cpu = _run(BuggyGovernor)
        assert err is not None, "the planted bug was not found"
        rows["planted bug"].append(cpu)
    best = {k: min(v) for k, v in rows.items()}
    print(f"{'arm':<12} {'best CPU s':>10}  all rounds")
    for k, v in rows.items():
        print(f"{k:<12} {best[k]:>10.2f}  {', '.join(f'{x:.2f}' for x in v)}")
    ratio = best["planted bug"] / best["correct"]
    print(f"planted bug / correct run: {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"cpu_s": rows, "best_cpu_s": best, "bug_over_correct": ratio}, indent=1) + "\n")


if __name__ == "__main__":
    main()
