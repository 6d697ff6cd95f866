"""The seeded crash-and-restart campaign of the hierarchy's real code (issue 23): nothing lost, nothing doubled.

    python benchmarks/hierarchy_crashes.py [crashes] [seed ...]     # default: 1000 crashes, seeds 0 1 2

Runs `refimpl.verify.hierarchy_crashes.crash_campaign` once per seed (the real coordinator and worker code,
its network simulated; refinement against the spec and every C10 / I11 predicate after every step; garbage
thrown at the coordinator between steps) and writes the figures to
benchmarks/hierarchy_crashes.results.json: coordinator crashes (between a journal write and its reply,
during a call before any journal write, between steps), units granted and returned, the most units ever
grantable or usable at once in every process's view combined against the serving quota, and the worst
shortfall of the free balance once every worker of a walk has exited. Any divergence raises.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import attrs

from refimpl.verify.hierarchy_crashes import crash_campaign


def main() -> None:
    crashes = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seeds = [int(s) for s in sys.argv[2:]] or [0, 1, 2]
    runs = []
    for seed in seeds:
        f = crash_campaign(seed, crashes)
        runs.append(attrs.asdict(f))
        print(f"seed {seed}: {f.crashes} crashes ({f.crashes_between_journal_and_reply} between journal and reply, "
              f"{f.crashes_before_journal} before the journal, {f.crashes_between_steps} between steps) in "
              f"{f.walks} walks, {f.steps} steps; {f.units_granted} units granted, {f.units_returned} returned; "
              f"max grantable + in use {f.max_combined_units} of {f.serving_quota}; units lost {f.max_units_lost}; "
              f"{f.workers_killed} workers killed, {f.replies_lost} replies lost, {f.hostile_inputs} hostile inputs, "
              f"{f.refusals} typed refusals; {f.seconds:.1f} s")
    out = Path(__file__).with_suffix(".results.json")
    out.write_text(json.dumps({"python": platform.python_version(), "crashes_per_seed": crashes, "runs": runs},
                              indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
